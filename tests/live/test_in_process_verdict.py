"""The tests and benchmarks that run llama.cpp in their own process load as the daemon's probe
says (tests/support/in_process.py): on a host whose AMX kernels die of SIGILL, without extra
buffer types. This host's verdict is forced here, so that any host shows it."""

from __future__ import annotations

from pathlib import Path

import pytest

from localserve.backends.llama_cpp import LlamaCppBackend
from localserve.ground.sampling import SamplingParams
from localserve.ground.step import StepChunk, StepPlan
from localserve.store.resolve import resolve
from localserve_native import verdicts
from tests.support import in_process

pytestmark = pytest.mark.kernels  # the monkeypatched state folder stays in the child, too


def test_under_a_sigill_verdict_an_in_process_backend_loads_without_extra_buffer_types(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    in_process.force_sigill_verdict()
    options = in_process.options(n_slots=1, n_ctx_slot=256)
    assert options.use_extra_bufts is False
    backend = LlamaCppBackend("smollm2", resolve("smollm2").path, options)
    try:
        prompt = backend.tokenize("The sky is", True)
        backend.seq_start(0, SamplingParams(temperature=0.0), prompt)
        assert len(backend.step(StepPlan([StepChunk(0, prompt, 0, True)]))) == 1
    finally:
        backend.close()


def test_with_no_verdict_yet_the_probe_runs_and_keeps_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    in_process.extra_bufts.cache_clear()
    options = in_process.options(n_slots=1, n_ctx_slot=256)
    kept = verdicts.read(verdicts.build_key())["cpu"]
    assert kept.use_extra_bufts is options.use_extra_bufts
