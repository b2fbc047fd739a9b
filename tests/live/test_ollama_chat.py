"""POST /api/chat through the official `ollama` client against a live daemon with SmolLM2."""

from __future__ import annotations

import ollama
import pytest

from tests.support.ollama_support import GREEDY, MODEL, ollama_client  # noqa: F401  (fixture)

HELLO = [{"role": "user", "content": "Say hello."}]


def test_chat_without_streaming_returns_an_assistant_message(ollama_client: ollama.Client) -> None:
    r = ollama_client.chat(model=MODEL, messages=HELLO, options={**GREEDY, "num_predict": 8})
    assert r.done and r.message.role == "assistant" and r.message.content
    assert r.done_reason in ("stop", "length") and 0 < r.eval_count <= 8
    assert r.prompt_eval_count > 0 and r.total_duration > 0


def test_chat_streams_pieces_that_join_into_the_same_answer(ollama_client: ollama.Client) -> None:
    opts = {**GREEDY, "num_predict": 8}
    *pieces, final = ollama_client.chat(model=MODEL, messages=HELLO, stream=True, options=opts)
    assert pieces and all(not p.done and p.message.role == "assistant" for p in pieces)
    assert final.done and final.message.content == "" and final.done_reason
    whole = ollama_client.chat(model=MODEL, messages=HELLO, options=opts)
    assert "".join(p.message.content for p in pieces) == whole.message.content


def test_a_model_name_with_the_latest_tag_is_the_same_model(ollama_client: ollama.Client) -> None:
    r = ollama_client.chat(model=f"{MODEL}:latest", messages=HELLO, options={"num_predict": 1})
    assert r.done and r.model == f"{MODEL}:latest"


def test_old_turns_are_dropped_when_the_conversation_exceeds_num_ctx(
    ollama_client: ollama.Client,
) -> None:
    filler = "word " * 60
    history = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": filler},
        {"role": "assistant", "content": filler},
        {"role": "user", "content": "Say hello."},
    ]
    full = ollama_client.chat(model=MODEL, messages=history, options={"num_predict": 1})
    fitted = ollama_client.chat(
        model=MODEL, messages=history, options={"num_ctx": 100, "num_predict": 1}
    )
    assert full.prompt_eval_count > 100
    assert fitted.prompt_eval_count < 100 and fitted.done


def test_an_unknown_model_raises_response_error_404(ollama_client: ollama.Client) -> None:
    with pytest.raises(ollama.ResponseError) as err:
        ollama_client.chat(model="no-such-model", messages=HELLO)
    assert err.value.status_code == 404
