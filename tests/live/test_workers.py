"""Engines in worker processes: a native crash costs the requests in flight and a restart,
never the daemon, and never the models of another device. Real models, real daemons, the
official openai client.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.cli_support import localserve
from tests.support.daemons import get_json, poll, reserved, resident
from tests.support.residency_support import GEMMA, SMOL, gemma_path, openai_client  # noqa: F401

LONG = "Write a very long story about a lighthouse keeper and the sea, in many chapters."


def worker_pid(url: str, device: str = "cpu") -> int:
    return int(
        poll(
            f"a running {device} worker",
            lambda: get_json(f"{url}/health")["devices"][device]["pid"],
            30,
        )
    )


def stream_until_it_ends(
    client: openai.OpenAI, model: str, started: threading.Event, outcome: dict[str, Any]
) -> None:
    """Stream a long answer; record how it ended and when."""
    try:
        stream = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": LONG}],
            max_tokens=400,
            temperature=0,
            stream=True,
        )
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                started.set()
        outcome["ended"] = "complete"
    except openai.APIError as exc:
        outcome["ended"] = str(exc)
    outcome["at"] = time.monotonic()


def streams(
    client: openai.OpenAI, models: list[str]
) -> tuple[list[threading.Thread], list[threading.Event], list[dict[str, Any]]]:
    threads, events, outcomes = [], [], []
    for model in models:
        started, outcome = threading.Event(), {}
        t = threading.Thread(target=stream_until_it_ends, args=(client, model, started, outcome))
        t.start()
        threads.append(t), events.append(started), outcomes.append(outcome)
    return threads, events, outcomes


def chat(client: openai.OpenAI, model: str) -> str:
    answer = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Say hi."}],
        max_tokens=4,
        temperature=0,
    )
    return answer.choices[0].message.content or ""


def serve_both(gemma: str) -> list[str]:
    return ["--model", SMOL, "--model", gemma, "--parallel", "4", "--ctx", "1024"]


def test_killing_the_worker_ends_every_stream_with_the_cause_and_the_next_request_restarts_it(
    daemon_factory, gemma_path: str
) -> None:
    _, url = daemon_factory(serve_both(gemma_path))
    client = openai_client(url)
    threads, started, outcomes = streams(client, [SMOL, GEMMA] * 4)
    for event in started:
        assert event.wait(120), "every stream was answering before the kill"
    os.kill(worker_pid(url), signal.SIGKILL)
    killed = time.monotonic()
    for t in threads:
        t.join(30)
    for outcome in outcomes:
        assert "the cpu engine stopped: signal SIGKILL" in outcome["ended"]
        assert outcome["at"] - killed < 1.0, "each stream ends within a second of the kill"
    assert resident(url) == {} and reserved(url) == {}, "nothing stays loaded or reserved"
    assert chat(client, SMOL), "the next request restarts the worker and is answered"
    assert get_json(f"{url}/health")["devices"]["cpu"]["restarts"] == 1


def test_a_worker_that_aborts_inside_a_step_fails_its_requests_and_restarts(daemon_factory) -> None:
    _, url = daemon_factory(
        ["--model", SMOL, "--parallel", "2", "--ctx", "512"],
        env={"LOCALSERVE_TEST_FAULT": "abort-at-step:40"},
    )
    client = openai_client(url)
    with pytest.raises(openai.APIError, match=r"the cpu engine stopped: signal SIGABRT \(abort\)"):
        for _ in client.chat.completions.create(
            model=SMOL,
            messages=[{"role": "user", "content": LONG}],
            max_tokens=100,
            temperature=0,
            stream=True,
        ):
            pass
    assert chat(client, SMOL), "a short request after the restart stays under the abort"


def test_models_on_another_device_keep_serving_while_the_first_restarts(
    daemon_factory, gemma_path: str
) -> None:
    two_devices = {"LOCALSERVE_TEST_DEVICES": "cpu1", "LOCALSERVE_TEST_PLACE": f"{GEMMA}=cpu1"}
    _, url = daemon_factory(serve_both(gemma_path), env=two_devices)
    assert resident(url)[GEMMA]["localserve"]["device"] == "cpu1"
    client = openai_client(url)
    threads, started, outcomes = streams(client, [SMOL, GEMMA])
    for event in started:
        assert event.wait(120)
    os.kill(worker_pid(url, "cpu"), signal.SIGKILL)
    for t in threads:
        t.join(300)
    assert "the cpu engine stopped" in outcomes[0]["ended"]
    assert outcomes[1]["ended"] == "complete", "the other device's stream never noticed"
    assert GEMMA in resident(url)


def test_a_worker_that_dies_twice_at_the_same_point_marks_its_device_failed(daemon_factory) -> None:
    _, url = daemon_factory(
        ["--no-default-model", "--parallel", "2", "--ctx", "512"],
        env={"LOCALSERVE_TEST_FAULT": "abort-at-step:3"},
    )
    client = openai_client(url)
    for _ in range(2):
        with pytest.raises(openai.APIError, match="the cpu engine stopped"):
            chat(client, SMOL)
    device = poll("the failed device", lambda: get_json(f"{url}/health")["devices"]["cpu"], 10)
    assert device["state"] == "failed" and "twice at the same point" in device["reason"]
    with pytest.raises(openai.APIStatusError, match="not restarting it again") as refused:
        chat(client, SMOL)
    assert refused.value.status_code == 503
    status = localserve("status", env={**os.environ, "LOCALSERVE_HOST": url})
    assert "cpu engine: failed: signal SIGABRT (abort), twice at the same point" in status.stdout


def test_the_probe_falls_back_when_the_first_configuration_dies(daemon_factory, tmp_path) -> None:
    state = tmp_path / "state"
    env = {"XDG_STATE_HOME": str(state), "LOCALSERVE_TEST_FAULT": "sigill-with-extra-bufts"}
    proc, url = daemon_factory(["--model", SMOL, "--parallel", "2", "--ctx", "512"], env=env)
    assert chat(openai_client(url), SMOL), "models load without the extra buffer types"
    verdicts = json.loads((state / "localserve" / "probe.json").read_text())
    (cpu,) = [build["cpu"] for build in verdicts["builds"].values()]
    assert cpu["use_extra_bufts"] is False and "SIGILL" in cpu["reason"]
    assert "failed with llama.cpp's extra buffer types" in Path(proc.log_path).read_text()


def test_the_probe_records_each_configurations_kernels_and_cost(daemon_factory, tmp_path) -> None:
    state = tmp_path / "state"
    env = {"XDG_STATE_HOME": str(state), "LOCALSERVE_TEST_FAULT": "sigill-with-extra-bufts"}
    _, url = daemon_factory(["--model", SMOL, "--parallel", "2", "--ctx", "512"], env=env)
    assert chat(openai_client(url), SMOL)
    verdicts = json.loads((state / "localserve" / "probe.json").read_text())
    (cpu,) = [build["cpu"] for build in verdicts["builds"].values()]
    died, survived = cpu["trials"]
    assert died["extra_bufts"] and "SIGILL" in died["failure"] and died["ms_per_token"] is None
    assert not survived["extra_bufts"] and survived["failure"] is None
    assert "cpu_mapped" in survived["weights"] and 0 < survived["ms_per_token"] < 1000
    shown = localserve("doctor", env={**os.environ, "XDG_STATE_HOME": str(state)})
    assert "without them: weights in cpu_mapped; " in shown.stdout, shown.stdout


def test_a_probe_that_hangs_is_a_failure_never_a_verdict_of_success(
    daemon_factory, tmp_path
) -> None:
    state = tmp_path / "state"
    env = {
        "XDG_STATE_HOME": str(state),
        "LOCALSERVE_TEST_FAULT": "hang-with-extra-bufts",
        "LOCALSERVE_PROBE_TIMEOUT": "20",
    }
    proc, url = daemon_factory(["--model", SMOL, "--parallel", "2", "--ctx", "512"], env=env)
    assert chat(openai_client(url), SMOL), "models load without the extra buffer types"
    verdicts = json.loads((state / "localserve" / "probe.json").read_text())
    (cpu,) = [build["cpu"] for build in verdicts["builds"].values()]
    assert cpu["use_extra_bufts"] is False and "the decode hung" in cpu["reason"]
