"""A test copy of SmolLM2 whose chat template takes tools (Hermes-style, as Qwen's) and opens a
<think> block when asked (`enable_thinking`), served by its own daemon for the whole session.

No small tool-tuned or reasoning GGUF ships on PyPI; the gguf package rewrites the metadata of
the embedded model, and its weights stay byte for byte. Import the fixtures into a test module
(`from tools_support import tools_client, tools_daemon, tools_ollama`).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import ollama
import openai
import pytest

from tests.support.gguf_copy import copy_with
from tests.support.live import CLIENT_TIMEOUT_S, running_daemon

TOOLS_MODEL = "smollm2-tools"


@pytest.fixture(scope="session")
def tools_daemon(tmp_path_factory) -> Iterator[tuple[subprocess.Popen, str]]:
    template = (Path(__file__).parent / "templates" / "hermes_tools.jinja").read_text()
    copy = copy_with(
        tmp_path_factory.mktemp("tools") / f"{TOOLS_MODEL}.gguf",
        {"tokenizer.chat_template": template},
    )
    with running_daemon(["--model", str(copy), "--parallel", "4", "--ctx", "2048"]) as served:
        yield served


@pytest.fixture(scope="session")
def tools_client(tools_daemon) -> Iterator[openai.OpenAI]:
    c = openai.OpenAI(
        base_url=f"{tools_daemon[1]}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0
    )
    yield c
    c.close()


@pytest.fixture(scope="session")
def tools_ollama(tools_daemon) -> Iterator[ollama.Client]:
    c = ollama.Client(host=tools_daemon[1], timeout=CLIENT_TIMEOUT_S)
    yield c
    c._client.close()


# A tool's parameters with a keyword llguidance does not implement (`propertyNames`, as some of
# Claude Code's tools have sent): compiled leniently, it goes unenforced.
NAMES_BY_PATTERN = {
    "type": "object",
    "properties": {
        "labels": {
            "type": "object",
            "propertyNames": {"pattern": "^[a-z]+$"},
            "additionalProperties": {"type": "string"},
        }
    },
}
