"""`serve --draft-model`: a model served with its draft model, through the official clients.

The draft loads, unloads and is reserved with its model; a draft that cannot draft for it fails
the model's load with a clear error, and the daemon serves on.
"""

from __future__ import annotations

from dataclasses import replace

import openai
import pytest

from localserve.engine.worker_client.sizing import estimate_load
from localserve.ground.settings import Settings
from localserve.store.resolve import resolve
from tests.support.daemons import get_json
from tests.support.residency_support import (
    CTX,
    PARALLEL,
    SMOL,
    assert_complete,
    chat,
    gemma_file,
    openai_client,
    reserved_bytes,
    resident,
    serve_args,
)


def test_a_model_served_with_its_draft_answers_and_reserves_both(daemon_factory) -> None:
    extra = ("--draft-model", f"{SMOL}={SMOL}", "--speculative", "4")
    _, url = daemon_factory(serve_args(SMOL, extra=extra))
    client = openai_client(url)
    try:
        assert_complete(chat(client, SMOL))
    finally:
        client.close()
    paired = replace(resolve(SMOL), draft=resolve(SMOL))
    both = estimate_load(paired, Settings(parallel=PARALLEL, ctx=CTX)).total
    assert both > 1.9 * reserved_bytes(SMOL), "the draft, as large as its model, is reserved too"
    entry = resident(url)[SMOL]
    assert entry["size"] == both
    assert entry["localserve"]["draft_model"] == SMOL


def test_a_draft_of_another_vocabulary_fails_the_load_clearly_and_the_daemon_serves_on(
    daemon_factory,
) -> None:
    args = serve_args(extra=("--no-default-model", "--draft-model", f"{SMOL}={gemma_file()}"))
    _, url = daemon_factory(args)
    client = openai_client(url)
    try:
        with pytest.raises(openai.APIStatusError) as refused:
            chat(client, SMOL)
        assert "cannot draft for 'smollm2'" in refused.value.message
        assert "vocabulary" in refused.value.message
    finally:
        client.close()
    assert get_json(f"{url}/api/version")["version"], "the daemon serves on"
    assert SMOL not in resident(url)
