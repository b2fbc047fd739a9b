"""The operator token file: a new file only this user can read, never written through what was
left at its path, and gone when the daemon stops."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from aiohttp import web

from localserve.server.http import guard
from localserve.server.http.guard import GUARD, Guard, operator_token

PORT = 11434


@pytest.fixture
def token_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "state" / f"operator-{PORT}.token"
    monkeypatch.setattr(guard, "operator_token_path", lambda port: path)
    return path


@pytest.fixture
def app() -> web.Application:
    app = web.Application()
    app[GUARD] = Guard(True, (), (), None, None)
    return app


def test_the_token_is_a_file_only_its_user_can_read(token_path: Path, app) -> None:
    with operator_token(app, PORT):
        assert stat.S_IMODE(token_path.lstat().st_mode) == 0o600
        assert token_path.read_text() == app[GUARD].operator


def test_a_link_planted_at_the_path_is_not_written_through(
    token_path: Path, tmp_path: Path, app
) -> None:
    target = tmp_path / "precious"
    target.write_text("the user's own file")
    token_path.parent.mkdir()
    token_path.symlink_to(target)
    with operator_token(app, PORT):
        assert not token_path.is_symlink()
        assert token_path.read_text() == app[GUARD].operator
    assert target.read_text() == "the user's own file"


def test_a_stale_token_is_replaced_by_a_fresh_one(token_path: Path, app) -> None:
    token_path.parent.mkdir()
    token_path.write_text("stale")
    with operator_token(app, PORT):
        assert token_path.read_text() == app[GUARD].operator != "stale"


def test_the_token_is_removed_when_the_daemon_stops(token_path: Path, app) -> None:
    with operator_token(app, PORT):
        pass
    assert not token_path.exists()
