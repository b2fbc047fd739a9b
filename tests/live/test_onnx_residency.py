"""ONNX and GGUF models in one daemon: served side by side, and evicted across formats.

Both formats reserve their estimate in the same CPU pool, so the LRU manager treats them alike:
with room for both, both stay resident; with room for one, each request for the other format
evicts the idle one.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tests.support.onnx_model import MODEL_NAME, ensure_model
from tests.support.residency_support import (
    SMOL,
    MiB,
    assert_complete,
    chat,
    load_counts,
    openai_client,
    reserved_bytes,
    resident,
    serve_args,
)


def test_one_daemon_serves_an_onnx_and_a_gguf_model_side_by_side(daemon_factory) -> None:
    folder = str(ensure_model())
    budget = reserved_bytes(SMOL) + reserved_bytes(folder) + 100 * MiB
    _, url = daemon_factory(serve_args(SMOL, folder, budget=budget))
    client = openai_client(url)
    try:
        with ThreadPoolExecutor(4) as pool:
            for response in pool.map(lambda m: chat(client, m), [SMOL, MODEL_NAME] * 2):
                assert_complete(response)
    finally:
        client.close()
    models = resident(url)
    assert set(models) == {SMOL, MODEL_NAME}
    assert models[MODEL_NAME]["details"]["format"] == "onnx"
    assert load_counts(url) == {SMOL: 1, MODEL_NAME: 1}


def test_lru_evicts_across_formats_within_a_budget_that_fits_one(daemon_factory) -> None:
    folder = str(ensure_model())
    sizes = [reserved_bytes(SMOL), reserved_bytes(folder)]
    budget = max(sizes) + 50 * MiB
    assert budget < sum(sizes), "the two models are too unequal to size a fits-one budget"
    _, url = daemon_factory(serve_args(SMOL, folder, budget=budget))
    client = openai_client(url)
    try:
        for model in (MODEL_NAME, SMOL, MODEL_NAME):
            assert_complete(chat(client, model))
            assert set(resident(url)) == {model}, f"after a {model} request"
    finally:
        client.close()
    counts = load_counts(url)
    assert counts[MODEL_NAME] >= 2 and counts[SMOL] >= 1, counts
