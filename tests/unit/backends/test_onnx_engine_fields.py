"""What onnxruntime-genai's Engine cannot sample with (backends/onnx_genai.py `engine_lacks`): a
request that names such a field gets a 400 naming it, never an answer sampled without it."""

from __future__ import annotations

import pytest

from localserve.backends.onnx_genai import engine_lacks
from localserve.ground.sampling import SamplingParams

SAMPLED = SamplingParams(temperature=0.8)
GREEDY = SamplingParams(temperature=0)


def test_a_plain_sampled_request_asks_nothing_the_engine_lacks() -> None:
    assert engine_lacks(SAMPLED, per_turn_seed=False) is None


def test_the_servers_own_min_p_default_is_not_the_clients_and_is_not_refused() -> None:
    assert SAMPLED.min_p is None and SAMPLED.min_p_or_default > 0
    assert engine_lacks(SAMPLED, per_turn_seed=True) is None


@pytest.mark.parametrize(
    "field, value",
    [("min_p", 0.1), ("presence_penalty", 1.0), ("frequency_penalty", -0.5)],
)
def test_min_p_and_the_penalties_are_named_on_any_engine(field: str, value: float) -> None:
    params = SamplingParams(temperature=0.8, **{field: value})  # type: ignore[arg-type]
    assert engine_lacks(params, per_turn_seed=True) == field
    assert engine_lacks(params, per_turn_seed=False) == field


def test_penalties_change_greedy_answers_too_so_are_named_there() -> None:
    params = SamplingParams(temperature=0, frequency_penalty=1.0)
    assert engine_lacks(params, per_turn_seed=True) == "frequency_penalty"


def test_min_p_zero_asks_for_no_filter_and_is_honoured() -> None:
    assert engine_lacks(SamplingParams(temperature=0.8, min_p=0.0), per_turn_seed=False) is None


def test_a_seed_is_named_only_where_the_engine_takes_no_per_turn_seed() -> None:
    seeded = SamplingParams(temperature=0.8, seed=7)
    assert engine_lacks(seeded, per_turn_seed=False) == "seed"
    assert engine_lacks(seeded, per_turn_seed=True) is None


def test_a_seed_or_min_p_with_greedy_decoding_changes_nothing_and_is_honoured() -> None:
    params = SamplingParams(temperature=0, seed=7, min_p=0.3)
    assert engine_lacks(params, per_turn_seed=False) is None
    assert engine_lacks(GREEDY, per_turn_seed=False) is None
