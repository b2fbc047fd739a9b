"""The config file that settings.py reads below flags and the environment: TOML in platformdirs'
config dir (`~/.config/localserve/config.toml` on Linux), or wherever `LOCALSERVE_CONFIG`
points. Apart from the settings' declarations so that the one settings home stays one
readable module."""

from __future__ import annotations

import os
import sys
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import platformdirs

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

APP = "localserve"
CONFIG_ENV = "LOCALSERVE_CONFIG"
UPSTREAMS = "upstreams"


class ConfigError(ValueError):
    """A setting with a value that cannot be used; the message names where it came from."""


def config_path(env: Mapping[str, str] = os.environ) -> Path:
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV]).expanduser()
    return Path(platformdirs.user_config_dir(APP, appauthor=False)) / "config.toml"


def read_file(path: Path, known: Collection[str]) -> dict[str, Any]:
    """The file's settings (none when there is no file); a key not in `known` is an error."""
    try:
        with open(path, "rb") as f:
            data: dict[str, Any] = tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read the config file {path}: {exc}") from exc
    data.pop(UPSTREAMS, None)  # the upstreams' tables: ground/upstreams.py reads them
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ConfigError(
            f"config file {path}: unknown setting {', '.join(unknown)} (known: {', '.join(known)})"
        )
    return data
