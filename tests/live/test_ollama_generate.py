"""POST /api/generate through the official `ollama` client against a live daemon with SmolLM2."""

from __future__ import annotations

import ollama
import pytest

from tests.support.daemons import post_json
from tests.support.helpers import copy_prompt
from tests.support.ollama_support import GREEDY, MODEL, ollama_client  # noqa: F401  (fixture)

DURATIONS = ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration")


def test_generate_without_streaming_returns_the_answer_and_its_final_figures(
    ollama_client: ollama.Client,
) -> None:
    r = ollama_client.generate(
        model=MODEL, prompt="Say hello.", options={**GREEDY, "num_predict": 8}
    )
    assert r.done and r.response
    assert r.done_reason in ("stop", "length")
    assert r.prompt_eval_count > 0 and 0 < r.eval_count <= 8
    # Durations are integers in nanoseconds: the whole request took well over a microsecond.
    assert all(isinstance(r[k], int) for k in DURATIONS)
    assert r.total_duration > 1_000 and r.total_duration >= r.eval_duration


def test_generate_streams_pieces_then_one_final_object(ollama_client: ollama.Client) -> None:
    parts = list(
        ollama_client.generate(
            model=MODEL, prompt="Say hello.", stream=True, options={**GREEDY, "num_predict": 8}
        )
    )
    *pieces, final = parts
    assert pieces and all(not p.done and p.response for p in pieces)
    assert final.done and final.response == "" and final.eval_count == len(pieces)
    whole = ollama_client.generate(
        model=MODEL, prompt="Say hello.", options={**GREEDY, "num_predict": 8}
    )
    assert "".join(p.response for p in pieces) == whole.response


def test_num_predict_caps_the_answer_with_done_reason_length(ollama_client: ollama.Client) -> None:
    r = ollama_client.generate(
        model=MODEL, prompt=copy_prompt("apple"), raw=True, options={**GREEDY, "num_predict": 3}
    )
    assert r.eval_count == 3 and r.done_reason == "length"


def test_a_stop_string_ends_the_answer_before_it(ollama_client: ollama.Client) -> None:
    r = ollama_client.generate(
        model=MODEL,
        prompt=copy_prompt("apple"),
        raw=True,
        options={**GREEDY, "num_predict": 16, "stop": [","]},
    )
    assert r.done_reason == "stop" and "," not in r.response and "apple" in r.response


def test_raw_skips_the_chat_template(ollama_client: ollama.Client) -> None:
    raw = ollama_client.generate(model=MODEL, prompt="Hello", raw=True, options={"num_predict": 1})
    templated = ollama_client.generate(model=MODEL, prompt="Hello", options={"num_predict": 1})
    assert raw.prompt_eval_count < templated.prompt_eval_count
    assert raw.context is None and templated.context


def test_system_goes_into_the_prompt(ollama_client: ollama.Client) -> None:
    plain = ollama_client.generate(model=MODEL, prompt="Hi", options={"num_predict": 1})
    system = ollama_client.generate(
        model=MODEL, prompt="Hi", system="You answer in French.", options={"num_predict": 1}
    )
    assert system.prompt_eval_count != plain.prompt_eval_count


def test_a_template_renders_system_and_prompt(ollama_client: ollama.Client) -> None:
    template = "{{ if .System }}{{ .System }} {{ end }}{{ .Prompt }}"
    opts = {**GREEDY, "num_predict": 3}
    with_template = ollama_client.generate(
        model=MODEL, prompt=copy_prompt("river"), template=template, options=opts
    )
    raw = ollama_client.generate(model=MODEL, prompt=copy_prompt("river"), raw=True, options=opts)
    assert with_template.prompt_eval_count == raw.prompt_eval_count
    assert with_template.response == raw.response


def test_context_from_an_answer_continues_the_conversation(ollama_client: ollama.Client) -> None:
    opts = {**GREEDY, "num_predict": 4}
    first = ollama_client.generate(model=MODEL, prompt="My name is Ada.", options=opts)
    second = ollama_client.generate(
        model=MODEL, prompt="What is my name?", context=first.context, options=opts
    )
    assert second.prompt_eval_count > len(first.context)


def test_a_seed_makes_sampling_reproducible(ollama_client: ollama.Client) -> None:
    opts = {"temperature": 1.0, "seed": 1234, "num_predict": 12}
    a = ollama_client.generate(model=MODEL, prompt="Tell me a story.", options=opts)
    b = ollama_client.generate(model=MODEL, prompt="Tell me a story.", options=opts)
    assert a.response == b.response


def test_num_ctx_up_to_a_slot_is_honoured(ollama_client: ollama.Client) -> None:
    r = ollama_client.generate(
        model=MODEL, prompt="Hi", options={"num_ctx": 1024, "num_predict": 2}
    )
    assert r.done and r.eval_count == 2


def test_a_prompt_beyond_num_ctx_is_truncated_and_answered(ollama_client: ollama.Client) -> None:
    long = copy_prompt("tiger", times=60)  # ~120 tokens
    opts = {**GREEDY, "num_ctx": 64}
    r = ollama_client.generate(model=MODEL, prompt=long, raw=True, options=opts)
    # Half the window for the prompt, the rest for the answer, as the face documents.
    assert r.prompt_eval_count <= 32
    assert r.prompt_eval_count + r.eval_count <= 64 and r.done_reason == "length"


def test_an_unknown_model_raises_response_error_404(ollama_client: ollama.Client) -> None:
    with pytest.raises(ollama.ResponseError) as err:
        ollama_client.generate(model="no-such-model", prompt="Hi")
    assert err.value.status_code == 404 and "no-such-model" in err.value.error


def test_an_unknown_model_raises_404_when_streaming_too(ollama_client: ollama.Client) -> None:
    with pytest.raises(ollama.ResponseError) as err:
        list(ollama_client.generate(model="no-such-model", prompt="Hi", stream=True))
    assert err.value.status_code == 404


def test_a_format_that_is_neither_json_nor_a_schema_is_a_400(daemon_url: str) -> None:
    # The ollama client refuses such a format itself: sent raw, as another client might.
    status, body = post_json(
        f"{daemon_url}/api/generate",
        {"model": MODEL, "prompt": "Hi", "format": "yaml", "stream": False},
    )
    assert status == 400 and "format" in body["error"]
