"""The desktop bundle, dist/localserve/ (installer/localserve.spec, built by
installer/build_bundle.py), runs as a user gets it: the frozen `localserve serve` answers from
the embedded model through an engine worker it starts as `localserve -m
localserve.engine.worker_process.main` (installer/frozen_main.py), after a load probe that ran
frozen too, and that falls back when a frozen worker dies of SIGILL; it serves the web page and
reads the catalog it ships; its `--help`, `doctor` and the tray's `--help` work; it leaves out the
test extra's heavy packages.

These tests run the folder as it was last built. `.ci/run` builds it before the suite, so where
CI is set a missing bundle fails them; elsewhere they are skipped with the command that builds
it. The daemon runs from a folder of its own, with its own models, config and state folders: no
verdict another daemon kept, no file of the checkout, can stand in for the bundle's.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

import openai
import pytest

from localserve.server import ui
from localserve_native import recipes
from tests.support import daemons, prerequisites
from tests.support.helpers import MODEL, REPO

PROGRAM = REPO / "dist" / "localserve" / "localserve"
BUILD = ".venv/bin/pip install -e '.[bundle]' && .venv/bin/python installer/build_bundle.py"
# A fresh state folder means the load probe runs before the first load, in workers of its own
# that load the embedded model too: more than a plain start, on 2 shared cores.
STARTUP_TIMEOUT_S = 2 * daemons.STARTUP_TIMEOUT_S
COMMAND_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def program() -> Path:
    if not PROGRAM.is_file():
        prerequisites.missing(f"no desktop bundle at {PROGRAM}; build it with: {BUILD}")
    return PROGRAM


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bundle-home")


def home_env(home: Path, **extra: str) -> dict[str, str]:
    """Our environment with models, config, data and state folders under `home`."""
    folders = {
        "LOCALSERVE_MODELS": "models",
        "XDG_CONFIG_HOME": "config",
        "XDG_DATA_HOME": "data",
        "XDG_STATE_HOME": "state",
    }
    return {**os.environ, **{var: str(home / name) for var, name in folders.items()}, **extra}


@pytest.fixture(scope="module")
def env(home: Path) -> dict[str, str]:
    return home_env(home)


@contextmanager
def frozen_serve(program: Path, home: Path, env: dict[str, str]) -> Iterator[tuple[str, Path]]:
    """The bundle's `serve` of the embedded model, healthy: (its URL, its log), stopped after."""
    port = daemons.free_port()
    url = f"http://{daemons.HOST}:{port}"
    log_path = home / "server.log"
    cmd = [str(program), "serve", "--model", MODEL, "--parallel", "1", "--ctx", "512"]
    cmd += ["--host", daemons.HOST, "--port", str(port)]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=home
        )
    try:
        daemons.wait_ready(
            proc, lambda: daemons.health(url) is not None, cmd, str(log_path), STARTUP_TIMEOUT_S
        )
    except daemons.NotReady as exc:
        pytest.fail(
            f"the frozen daemon {exc.reason}\ncommand: {' '.join(cmd)}\n"
            f"--- its log ({log_path}) ---\n{exc.log}",
            pytrace=False,
        )
    try:
        yield url, log_path
    finally:
        daemons.stop_daemon(proc)


@pytest.fixture(scope="module")
def frozen_daemon(program: Path, home: Path, env: dict[str, str]) -> Iterator[str]:
    with frozen_serve(program, home, env) as (url, _):
        yield url


def chat(url: str, model: str = MODEL) -> str | None:
    with openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0) as client:
        reply = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Say hi"}], max_tokens=8
        )
    assert reply.usage is not None and reply.usage.completion_tokens >= 1
    return reply.choices[0].message.content


def run(program: Path, *args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(program), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        timeout=COMMAND_TIMEOUT_S,
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def test_the_frozen_daemon_answers_from_the_embedded_model(frozen_daemon: str) -> None:
    assert chat(frozen_daemon)


def test_its_load_probe_decoded_in_a_frozen_worker_and_kept_the_verdict(
    frozen_daemon: str, home: Path
) -> None:
    kept = json.loads((home / "state" / "localserve" / "probe.json").read_text())
    # The key names llama-cpp-python's version, which the bundle reads from its metadata.
    [(key, verdicts)] = kept["builds"].items()
    assert key.startswith(f"llama-cpp-python {metadata.version('llama-cpp-python')};")
    assert "decoded" in verdicts["cpu"]["reason"]


def test_it_serves_the_web_page_and_every_file_of_it(frozen_daemon: str) -> None:
    shipped = REPO / "localserve" / "server" / "ui"
    status, headers, body = daemons.raw_request(f"{frozen_daemon}/ui")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert body == (shipped / "index.html").read_bytes()
    for name, kind in ui.FILES.items():
        status, headers, body = daemons.raw_request(f"{frozen_daemon}/ui/{name}")
        assert status == 200, name
        assert headers["Content-Type"].startswith(kind), name
        assert body == (shipped / name).read_bytes(), name


def test_it_reads_the_catalog_it_ships(frozen_daemon: str) -> None:
    # A catalog name not pulled: only the shipped catalog knows it is one.
    with pytest.raises(openai.NotFoundError, match="in the catalog but not pulled"):
        chat(frozen_daemon, "llama3.2:1b")


def test_its_probe_falls_back_when_a_frozen_worker_dies_of_sigill(
    program: Path, tmp_path: Path
) -> None:
    # As llama.cpp's AMX kernels die on some Xeons. A frozen worker is the bundle's own program:
    # its SIGILL must reach the daemon as one, for the probe to name it and load without them.
    env = home_env(tmp_path, LOCALSERVE_TEST_FAULT="sigill-with-extra-bufts")
    with frozen_serve(program, tmp_path, env) as (url, log):
        assert chat(url), "the model loads without the extra buffer types"
        assert "failed with llama.cpp's extra buffer types" in log.read_text()
    kept = json.loads((tmp_path / "state" / "localserve" / "probe.json").read_text())
    [cpu] = [build["cpu"] for build in kept["builds"].values()]
    assert cpu["use_extra_bufts"] is False and "SIGILL" in cpu["reason"]


def test_its_help_lists_the_commands_and_the_build_recipes(
    program: Path, env: dict[str, str], home: Path
) -> None:
    assert "serve" in run(program, "--help", env=env, cwd=home).stdout
    backends = run(program, "native", "build", "--help", env=env, cwd=home).stdout
    for name in recipes.recipes():
        assert f"  {name} " in backends, name


def test_doctor_in_the_bundle_sees_its_llama_cpp_build(
    program: Path, env: dict[str, str], home: Path
) -> None:
    # llama.cpp is asked in a child, `localserve -m localserve_native.build_info`, as the
    # daemon asks it for its devices.
    report = json.loads(run(program, "doctor", "--json", env=env, cwd=home).stdout)
    assert report["llama_cpp"]["version"] == metadata.version("llama-cpp-python")
    assert "CPU" in report["llama_cpp"]["backends"]


def test_the_tray_program_runs_the_tray_not_the_cli(
    program: Path, env: dict[str, str], home: Path
) -> None:
    tray = program.with_name("localserve-tray")
    assert "--no-start" in run(tray, "--help", env=env, cwd=home).stdout


def test_it_holds_none_of_the_test_extras_native_packages(program: Path) -> None:
    inside = program.parent / "_internal"
    for package in ("torch", "onnxruntime_genai", "pydantic_core", "hf_xet"):
        assert not (inside / package).exists(), package
