"""min_p, the presence and frequency penalties and seed on an ONNX model: honoured where our own
rows sample (backends/onnx_sampling.py), refused with a 400 naming the field where
onnxruntime-genai's static Engine runs the model and would sample without it.

Two daemons serve the ONNX SmolLM2 of tests/support/onnx_model.py: one as it is served by
default on the CPU (our own rows), one with LOCALSERVE_ONNX_STATIC=1 (the Engine, as any model
our rows cannot run is served). Every test states what the field does to the answer.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import ollama
import openai
import pytest

from tests.support.helpers import copy_prompt
from tests.support.live import CLIENT_TIMEOUT_S, running_daemon
from tests.support.onnx_model import MODEL_NAME, ensure_model

ARGS = ["--parallel", "4", "--ctx", "512"]
STORY = "Once upon a time, in a small village by the sea,"
# Greedy SmolLM2 continues this by repeating "apple, " for all of a short answer.
APPLES = copy_prompt("apple")
# ... and this by copying its sentence again and again.
CAT = "The cat sat on the mat. The cat sat on the mat. The cat"
N = 16


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{url}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0
    )


@pytest.fixture(scope="module")
def rows() -> Iterator[openai.OpenAI]:
    with running_daemon(["--model", str(ensure_model()), *ARGS]) as (_, url):
        client = _client(url)
        yield client
        client.close()


@pytest.fixture(scope="module")
def static() -> Iterator[tuple[subprocess.Popen, str]]:
    env = {"LOCALSERVE_ONNX_STATIC": "1"}
    with running_daemon(["--model", str(ensure_model()), *ARGS], env=env) as served:
        yield served


@pytest.fixture(scope="module")
def static_client(static) -> Iterator[openai.OpenAI]:
    client = _client(static[1])
    yield client
    client.close()


def complete(client: openai.OpenAI, prompt: str = STORY, **fields) -> str:
    """The text of a completion; llama.cpp's fields (min_p, top_k) go in the body."""
    body = {key: fields.pop(key) for key in ("min_p", "top_k") if key in fields}
    answer = client.completions.create(
        model=MODEL_NAME, prompt=prompt, max_tokens=N, extra_body=body, **fields
    )
    return answer.choices[0].text


# -- our own rows: honoured ------------------------------------------------------------------


def test_a_frequency_penalty_breaks_the_repeats_greedy_decoding_copies(rows) -> None:
    greedy = complete(rows, APPLES, temperature=0)
    penalized = complete(rows, APPLES, temperature=0, frequency_penalty=2.0)
    assert greedy.count("apple") >= 4, greedy
    assert penalized.count("apple") < greedy.count("apple"), penalized


def test_a_presence_penalty_breaks_the_repeats_greedy_decoding_copies(rows) -> None:
    greedy = complete(rows, CAT, temperature=0)
    penalized = complete(rows, CAT, temperature=0, presence_penalty=1.0)
    assert greedy.count("the mat") >= 2, greedy
    assert penalized.count("the mat") < greedy.count("the mat"), penalized


def test_min_p_of_one_keeps_only_the_likeliest_token_so_hot_sampling_answers_as_greedy(
    rows,
) -> None:
    greedy = complete(rows, temperature=0)
    hot = {"temperature": 2.0, "top_p": 1.0, "top_k": 0}
    unfiltered = {complete(rows, seed=s, min_p=0.0, **hot) for s in range(3)}
    assert greedy not in unfiltered, "sampling at temperature 2 should stray from greedy"
    assert {complete(rows, seed=s, min_p=1.0, **hot) for s in range(3)} == {greedy}


def test_the_same_seed_gives_the_same_sampled_answer(rows) -> None:
    first, again = (complete(rows, temperature=1.0, top_k=0, seed=11) for _ in range(2))
    assert first == again


def test_different_seeds_give_different_sampled_answers(rows) -> None:
    answers = {complete(rows, temperature=1.0, top_k=0, seed=s) for s in range(4)}
    assert len(answers) > 1, answers


# -- onnxruntime-genai's static Engine: refused --------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [("min_p", 0.1), ("presence_penalty", 1.0), ("frequency_penalty", 1.0), ("seed", 7)],
)
def test_a_field_the_static_engine_samples_without_is_a_400_naming_it(
    static_client, field, value
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        complete(static_client, temperature=0.8, **{field: value})
    assert caught.value.body["param"] == field, caught.value.body
    assert "does not support" in caught.value.message


def test_the_static_engine_refuses_on_the_ollama_face_too(static) -> None:
    client = ollama.Client(host=static[1], timeout=CLIENT_TIMEOUT_S)
    with pytest.raises(ollama.ResponseError) as caught:
        client.generate(model=MODEL_NAME, prompt=STORY, options={"min_p": 0.2, "num_predict": 4})
    assert caught.value.status_code == 400 and "'min_p'" in caught.value.error


def test_the_servers_own_min_p_default_still_samples_on_the_static_engine(static_client) -> None:
    assert complete(static_client, temperature=0.8)


def test_a_seed_with_greedy_decoding_changes_nothing_so_the_static_engine_takes_it(
    static_client,
) -> None:
    assert complete(static_client, temperature=0, seed=7) == complete(static_client, temperature=0)
