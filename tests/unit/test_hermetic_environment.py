"""The suite is hermetic against the developer's own settings: whatever LOCALSERVE_ variables
the shell holds, the suite (and every daemon and CLI it starts, which inherit its environment)
sees only the ones conftest.py sets."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.hermetic import is_setting

ROOT = Path(__file__).parents[2]
# What conftest.py sets itself: the sandbox's store, and no background native build.
SET_BY_THE_SUITE = {"LOCALSERVE_MODELS", "LOCALSERVE_NO_NATIVE_BUILD"}


def test_the_suite_sees_no_localserve_setting_but_its_own() -> None:
    assert {name for name in os.environ if is_setting(name)} == SET_BY_THE_SUITE
    assert "localserve-tests-" in os.environ["LOCALSERVE_MODELS"]


def test_settings_in_the_shell_do_not_reach_the_suite() -> None:
    shell = {
        **os.environ,
        "LOCALSERVE_PORT": "1",
        "LOCALSERVE_API_KEY": "the-developers-key",
        "LOCALSERVE_CONFIG": "/nonexistent/config.toml",
        "LOCALSERVE_MODELS": "/the/developers/models",
        "localserve_host": "0.0.0.0",  # Windows matches names whatever their case
    }
    inner = test_the_suite_sees_no_localserve_setting_but_its_own.__name__
    here = f"{Path(__file__).relative_to(ROOT)}::{inner}"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", here],
        cwd=ROOT,
        env=shell,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_suites_own_knobs_are_no_settings() -> None:
    assert not is_setting("LOCALSERVE_TEST_CACHE")
    assert not is_setting("LOCALSERVE_SCREENSHOTS")
    assert is_setting("LOCALSERVE_PORT")
