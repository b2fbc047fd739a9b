"""Embeddings end to end: Ollama's /api/embed and /api/embeddings through the official `ollama`
client, OpenAI's /v1/embeddings through the official `openai` client, SmolLM2 on a live daemon.

SmolLM2 is generative: its GGUF names no pooling type, so its hidden states are mean-pooled.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import ollama
import openai
import pytest

from tests.support.ollama_support import GREEDY, MODEL, ollama_client  # noqa: F401  (fixture)

TEXTS = ["Why is the sky blue?", "The cat sat on the mat.", "hello", "Paris is in France."]
WIDTH = 576  # SmolLM2-135M's hidden size


def cosine(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_embed_returns_one_unit_vector_per_input(ollama_client: ollama.Client) -> None:
    r = ollama_client.embed(model=MODEL, input=TEXTS)
    assert len(r.embeddings) == len(TEXTS)
    assert all(len(e) == WIDTH for e in r.embeddings)
    assert np.allclose([np.linalg.norm(e) for e in r.embeddings], 1.0, atol=1e-5)
    assert r.prompt_eval_count > len(TEXTS) and r.total_duration > 0


def test_an_input_embeds_the_same_alone_as_among_others(ollama_client: ollama.Client) -> None:
    together = ollama_client.embed(model=MODEL, input=TEXTS).embeddings
    for text, vec in zip(TEXTS, together):
        (alone,) = ollama_client.embed(model=MODEL, input=text).embeddings
        assert cosine(alone, vec) > 0.9999, text


def test_concurrent_requests_get_the_vectors_each_would_get_alone(
    ollama_client: ollama.Client,
) -> None:
    expected = ollama_client.embed(model=MODEL, input=TEXTS).embeddings
    with ThreadPoolExecutor(8) as pool:
        results = list(
            pool.map(lambda i: ollama_client.embed(model=MODEL, input=TEXTS[i % 4]), range(16))
        )
    for i, r in enumerate(results):
        assert cosine(r.embeddings[0], expected[i % 4]) > 0.9999


def test_different_texts_get_different_vectors(ollama_client: ollama.Client) -> None:
    a, b = ollama_client.embed(model=MODEL, input=TEXTS[:2]).embeddings
    assert cosine(a, b) < 0.9999


def test_dimensions_shortens_the_vectors_at_unit_length(ollama_client: ollama.Client) -> None:
    full, short = (
        ollama_client.embed(model=MODEL, input="hello", dimensions=d).embeddings[0]
        for d in (None, 64)
    )
    assert len(short) == 64 and np.isclose(np.linalg.norm(short), 1.0, atol=1e-5)
    assert cosine(short, full[:64]) > 0.9999


def test_the_legacy_endpoint_returns_the_raw_pooled_vector(ollama_client: ollama.Client) -> None:
    raw = ollama_client.embeddings(model=MODEL, prompt="hello").embedding
    (unit,) = ollama_client.embed(model=MODEL, input="hello").embeddings
    assert len(raw) == WIDTH and not np.isclose(np.linalg.norm(raw), 1.0)
    assert np.allclose(np.asarray(raw) / np.linalg.norm(raw), unit, atol=1e-5)


def test_an_input_longer_than_the_context_is_truncated_by_default(
    ollama_client: ollama.Client,
) -> None:
    long = "word " * 200
    r = ollama_client.embed(model=MODEL, input=long, options={"num_ctx": 32})
    assert r.prompt_eval_count == 32 and len(r.embeddings[0]) == WIDTH


def test_truncate_false_refuses_an_input_longer_than_the_context(
    ollama_client: ollama.Client,
) -> None:
    with pytest.raises(ollama.ResponseError) as err:
        ollama_client.embed(
            model=MODEL, input="word " * 200, truncate=False, options={"num_ctx": 32}
        )
    assert err.value.status_code == 400


def test_embed_of_an_unknown_model_raises_404(ollama_client: ollama.Client) -> None:
    with pytest.raises(ollama.ResponseError) as err:
        ollama_client.embed(model="no-such-model", input="hello")
    assert err.value.status_code == 404


def test_generation_is_unchanged_after_embedding(ollama_client: ollama.Client) -> None:
    ask = {"model": MODEL, "prompt": "Name a color.", "options": {**GREEDY, "num_predict": 8}}
    before = ollama_client.generate(**ask).response
    ollama_client.embed(model=MODEL, input=TEXTS)
    assert ollama_client.generate(**ask).response == before


# -- OpenAI ----------------------------------------------------------------------------------


def test_openai_embeddings_match_ollama_embed(client: openai.OpenAI, ollama_client) -> None:
    r = client.embeddings.create(model=MODEL, input=TEXTS)  # the client asks for base64
    assert [d.index for d in r.data] == list(range(len(TEXTS)))
    expected = ollama_client.embed(model=MODEL, input=TEXTS).embeddings
    for d, e in zip(r.data, expected):
        assert np.allclose(d.embedding, e, atol=1e-5)
    assert r.usage.prompt_tokens == r.usage.total_tokens > len(TEXTS)


def test_openai_embeddings_as_floats(client: openai.OpenAI) -> None:
    r = client.embeddings.create(model=MODEL, input="hello", encoding_format="float")
    assert len(r.data[0].embedding) == WIDTH
    assert np.isclose(np.linalg.norm(r.data[0].embedding), 1.0, atol=1e-5)


def test_openai_embeddings_take_token_ids(client: openai.OpenAI) -> None:
    by_text = client.embeddings.create(model=MODEL, input="hello").data[0].embedding
    # "hello" is the single token 28120 in SmolLM2's vocabulary.
    tokens = client.embeddings.create(model=MODEL, input=[[28120]]).data[0].embedding
    assert len(tokens) == WIDTH and cosine(tokens, by_text) > 0.99


def test_openai_embeddings_refuse_an_input_longer_than_the_context(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.embeddings.create(model=MODEL, input="word " * 2000)
    assert err.value.body["param"] == "input"
