"""A missing prerequisite fails a test in CI and skips it elsewhere
(tests/support/prerequisites.py)."""

from __future__ import annotations

import pytest

from tests.support.prerequisites import require


def test_in_ci_a_missing_prerequisite_fails_the_test_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="needs chromium"):
        require(None, "needs chromium")


def test_outside_ci_a_missing_prerequisite_skips_the_test_saying_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="needs chromium"):
        require("", "needs chromium")


def test_a_present_prerequisite_lets_the_test_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    require("/usr/bin/chromium", "needs chromium")
