"""A test whose prerequisite (a Debian package, a built wheel, the desktop bundle) is missing:
in CI, where .ci/run installs every one of them, that is a failure naming what is missing, so
that a broken install step cannot hide behind a skip; elsewhere the test is skipped, saying why.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def missing(reason: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI: .ci/run installs it before the tests)", pytrace=False)
    pytest.skip(reason)


def require(present: object, reason: str) -> None:
    if not present:
        missing(reason)
