"""Where localserve keeps its files: models, logs, conversations saved on disk, and the
operator token, each under platformdirs' folder for this user (or where a setting says)."""

from __future__ import annotations

from pathlib import Path

import platformdirs

from localserve.ground.settings import APP, Settings


def default_models_dir() -> Path:
    """The models folder when `models_dir` is unset (the store's, and the tray's to open)."""
    return Path(platformdirs.user_data_dir(APP)) / "models"


def models_dir(settings: Settings) -> Path:
    return Path(settings.models_dir).expanduser() if settings.models_dir else default_models_dir()


def log_dir() -> Path:
    return Path(platformdirs.user_log_dir(APP, appauthor=False))


def saved_conversations_dir() -> Path:
    """Where conversations wait on disk while their model is not loaded."""
    return Path(platformdirs.user_state_dir(APP, appauthor=False)) / "conversations"


def operator_token_path(port: int) -> Path:
    """Where the daemon on `port` leaves its operator token: a file only this user can read, so
    the CLI (this user's) passes every check a web page or a remote client cannot."""
    return Path(platformdirs.user_state_dir(APP, appauthor=False)) / f"operator-{port}.token"
