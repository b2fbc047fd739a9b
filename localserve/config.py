"""Settings shared by the daemon and the CLI: flags, then environment, then a config file, then
defaults.

The config file is TOML in platformdirs' config dir (`~/.config/localserve/config.toml` on
Linux), or wherever `LOCALSERVE_CONFIG` points. Its keys are the setting names below:

    host = "127.0.0.1"
    port = 11434
    models_dir = "~/models"
    keep_alive = "10m"

This module imports nothing of the engine or the server: every client may use it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import platformdirs

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

APP = "localserve"
CONFIG_ENV = "LOCALSERVE_CONFIG"
# Ollama's port: tools that speak Ollama find us where they already look.
DEFAULT_PORT = 11434


class ConfigError(ValueError):
    """A setting with a value that cannot be used; the message names where it came from."""


@dataclass(frozen=True)
class Config:
    """Every setting a user may choose outside a command line. None: the daemon decides."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    models_dir: str | None = None
    keep_alive: str = "5m"
    memory_budget: str | None = None
    parallel: int = 4
    ctx: int = 4096
    threads: int = 0
    max_loaded_models: int = 0

    @property
    def url(self) -> str:
        # A wildcard listen address is not one a client can connect to.
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        host = "[::1]" if host == "::" else (f"[{host}]" if ":" in host else host)
        return f"http://{host}:{self.port}"


# The environment variable of each setting, as users of OLLAMA_HOST / OLLAMA_MODELS expect.
ENV: dict[str, str] = {f.name: f"{APP.upper()}_{f.name.upper()}" for f in fields(Config)}
ENV["models_dir"] = "LOCALSERVE_MODELS"


def config_path(env: Mapping[str, str] = os.environ) -> Path:
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV]).expanduser()
    return Path(platformdirs.user_config_dir(APP, appauthor=False)) / "config.toml"


def log_dir() -> Path:
    return Path(platformdirs.user_log_dir(APP, appauthor=False))


def load(
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] = os.environ,
    path: Path | None = None,
) -> Config:
    """The settings in force: a flag given (not None) wins, then the environment, then the file."""
    path = path if path is not None else config_path(env)
    levels = [
        (_read_file(path), f"{path}"),
        ({k: env[var] for k, var in ENV.items() if env.get(var)}, "environment"),
        ({k: v for k, v in (flags or {}).items() if k in ENV and v is not None}, "flags"),
    ]
    values: dict[str, Any] = {}
    for given, source in levels:
        level: dict[str, Any] = {}
        for key, raw in given.items():
            where = source if source != "environment" else f"${ENV[key]}"
            where = where if source != "flags" else f"--{key.replace('_', '-')}"
            level[key] = _convert(key, raw, where)
        _split_host_port(level)
        values.update(level)
    return Config(**values)


def _read_file(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read the config file {path}: {exc}") from exc
    unknown = sorted(set(data) - set(ENV))
    if unknown:
        raise ConfigError(
            f"config file {path}: unknown setting {', '.join(unknown)} "
            f"(known: {', '.join(ENV)})"
        )
    return data


_TYPES: dict[str, Callable[[Any], Any]] = {
    f.name: (int if f.type in ("int", int) else str) for f in fields(Config)
}


def _convert(key: str, raw: Any, source: str) -> Any:
    kind = _TYPES[key]
    if kind is int and isinstance(raw, bool):
        raise ConfigError(f"{source}: {key} must be a whole number, not {raw!r}")
    try:
        value = kind(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{source}: {key} must be a whole number, not {raw!r}") from None
    if key == "port" and not 0 < value < 65536:
        raise ConfigError(f"{source}: port must be between 1 and 65535, not {value}")
    if key == "models_dir":
        value = str(Path(value).expanduser())
    return value


def _split_host_port(values: dict[str, Any]) -> None:
    """`LOCALSERVE_HOST=0.0.0.0:8080` (as OLLAMA_HOST allows) sets both; a port given on its
    own at the same level wins over the one inside the host."""
    host = values.get("host")
    if not isinstance(host, str):
        return
    for scheme in ("http://", "https://"):
        if host.startswith(scheme):
            host = host[len(scheme):]
    host = host.rstrip("/")
    if host.startswith("["):  # [::1]:8080
        addr, _, rest = host[1:].partition("]")
        values["host"] = addr
        if rest.startswith(":") and rest[1:].isdigit():
            values.setdefault("port", int(rest[1:]))
        return
    if host.count(":") == 1:
        addr, _, port = host.partition(":")
        if port.isdigit():
            values["host"] = addr
            values.setdefault("port", int(port))
            return
    values["host"] = host
