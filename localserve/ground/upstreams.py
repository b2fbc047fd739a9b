"""Upstreams: OpenAI-compatible servers (vLLM, SGLang, Ray Serve LLM, llama.cpp's server) whose
models the daemon lists beside its own and forwards to.

They live in config.toml beside the settings, one table each:

    [upstreams.gpubox]
    url = "http://gpubox:8000/v1"    # the base URL an OpenAI client would take
    key_env = "GPUBOX_KEY"           # optional: the variable holding its API key
    models = ["Qwen/Qwen2.5-7B-Instruct"]   # optional: without it, all its /v1/models lists

Here on the ground floor, so that the daemon reads them and the CLI (`localserve upstream add`)
writes them with one parser. The key itself is never written anywhere: only the name of the
variable that holds it, read by the daemon from its own environment.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

TABLE = "upstreams"
# A name a TOML bare key and a model suffix (`model@name`) can both carry.
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KEYS = {"url", "key_env", "models"}


class UpstreamConfigError(ValueError):
    """An upstream's table that cannot be used; the message names the file and the upstream."""


@dataclass(frozen=True)
class UpstreamConfig:
    name: str
    # The base URL, without a trailing slash: paths such as /chat/completions are added to it.
    url: str
    key_env: str | None = None
    # None: every model its /v1/models lists.
    models: tuple[str, ...] | None = None

    def key(self, env: Mapping[str, str] = os.environ) -> str | None:
        """The API key, from the daemon's environment (never from the file)."""
        return env.get(self.key_env) or None if self.key_env else None


def normalize_url(url: str) -> str:
    """The base URL as OpenAI clients take it: http(s), a host, and /v1 when no path is given
    (vLLM, SGLang and Ray Serve all serve under /v1)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http:// or https:// URL with a host")
    if parts.query or parts.fragment or parts.username or parts.password:
        # A key in the URL would be logged with it: keys go in key_env.
        raise ValueError(f"{url!r}: no user, password, query or fragment (keys go in key_env)")
    path = parts.path.rstrip("/") or "/v1"
    return f"{parts.scheme}://{parts.netloc}{path}"


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"{name!r} is not an upstream name (letters, digits, - and _)")
    return name


def parse(table: Any, where: str = "config.toml") -> tuple[UpstreamConfig, ...]:
    """The `[upstreams.*]` tables of a parsed config file."""
    if table is None:
        return ()
    if not isinstance(table, dict):
        raise UpstreamConfigError(f"{where}: '{TABLE}' must be a table of upstreams")
    out = []
    for name, spec in table.items():
        out.append(_one(name, spec, f"{where}: upstream '{name}'"))
    return tuple(out)


def _one(name: str, spec: Any, where: str) -> UpstreamConfig:
    if not isinstance(spec, dict):
        raise UpstreamConfigError(f"{where} must be a table with a url")
    unknown = sorted(set(spec) - _KEYS)
    if unknown:
        raise UpstreamConfigError(
            f"{where}: unknown key {', '.join(unknown)} (known: {', '.join(sorted(_KEYS))})"
        )
    try:
        check_name(name)
        if not isinstance(spec.get("url"), str):
            raise ValueError("'url' is required, a string")
        url = normalize_url(spec["url"])
        key_env = spec.get("key_env")
        if key_env is not None and (not isinstance(key_env, str) or not _ENV.match(key_env)):
            raise ValueError(f"key_env {key_env!r} is not an environment variable's name")
        models = spec.get("models")
        if models is not None:
            if not isinstance(models, list) or not all(
                isinstance(m, str) and m.strip() for m in models
            ):
                raise ValueError("'models' must be a list of model names")
            models = tuple(m.strip() for m in models)
    except ValueError as exc:
        raise UpstreamConfigError(f"{where}: {exc}") from None
    return UpstreamConfig(name, url, key_env, models)


def read(path: Path) -> tuple[UpstreamConfig, ...]:
    """The upstreams of the config file at `path` (none when it does not exist)."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        return ()
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UpstreamConfigError(f"cannot read the config file {path}: {exc}") from exc
    return parse(data.get(TABLE), str(path))


# -- writing: `localserve upstream add / remove` ---------------------------------------------------
# By text, not by re-serializing the file: a user's comments and layout elsewhere stay as they are.


def _header(line: str) -> str | None:
    """The table a `[...]` header line opens, or None for any other line."""
    stripped = line.strip()
    if stripped.startswith("[") and not stripped.startswith("[["):
        return stripped.strip("[]").strip()
    return None


def _without(text: str, name: str) -> tuple[str, bool]:
    """The file's text less the table of upstream `name`; whether it had one."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    skipping = found = False
    for line in lines:
        header = _header(line)
        if header is not None:
            skipping = header in (f"{TABLE}.{name}", f'{TABLE}."{name}"')
            found = found or skipping
        if not skipping:
            out.append(line)
    return "".join(out), found


def render(config: UpstreamConfig) -> str:
    """The table of one upstream, in TOML (JSON's string escapes are TOML's)."""
    lines = [f"[{TABLE}.{config.name}]", f"url = {json.dumps(config.url)}"]
    if config.key_env:
        lines.append(f"key_env = {json.dumps(config.key_env)}")
    if config.models is not None:
        lines.append(f"models = [{', '.join(json.dumps(m) for m in config.models)}]")
    return "\n".join(lines) + "\n"


def add(path: Path, config: UpstreamConfig) -> bool:
    """Write `config` into the file (replacing an upstream of its name); whether it replaced one.
    The result is parsed before it is written, so a file is never left unreadable."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    rest, found = _without(text, config.name)
    if rest and not rest.endswith("\n"):
        rest += "\n"
    new = rest + ("\n" if rest.strip() else "") + render(config)
    parse(tomllib.loads(new).get(TABLE), str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(new, encoding="utf-8")
    return found


def remove(path: Path, name: str) -> bool:
    """Take upstream `name` out of the file; whether it was there."""
    if not path.exists():
        return False
    rest, found = _without(path.read_text(encoding="utf-8"), name)
    if found:
        path.write_text(rest, encoding="utf-8")
    return found
