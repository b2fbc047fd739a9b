"""Fixtures for the Ollama-face tests: the official `ollama` client, unmodified.

Import the fixtures into a test module (`from ollama_support import ollama_client`); they point
at the suite's shared daemon (smollm2, 16 slots of 1024 tokens) from conftest.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import ollama
import pytest

from tests.support.live import CLIENT_TIMEOUT_S

MODEL = "smollm2"
# Greedy and without Ollama's default repeat penalty: answers are reproducible.
GREEDY = {"temperature": 0, "repeat_penalty": 1.0}


@pytest.fixture(scope="session")
def ollama_client(daemon_url: str) -> Iterator[ollama.Client]:
    client = ollama.Client(host=daemon_url, timeout=CLIENT_TIMEOUT_S)
    yield client
    client._client.close()
