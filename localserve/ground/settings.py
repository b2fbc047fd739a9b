"""Every setting of the daemon and the CLI, with its one default: flags, then the environment,
then a config file, then the defaults written here.

The config file (ground/config_file.py reads it) is TOML in platformdirs' config dir
(`~/.config/localserve/config.toml` on Linux), or wherever `LOCALSERVE_CONFIG` points. Its keys
are the setting names below:

    port = 11434
    keep_alive = "10m"
    alias = { claude-sonnet-4-5 = "gemma3" }

Each setting is read from `--name-with-dashes`, `LOCALSERVE_NAME` (`LOCALSERVE_MODELS` for
models_dir, as Ollama has OLLAMA_MODELS) and the file's `name`. Values keep their parsed type
(seconds, bytes); `shown` writes one back as a user types it, for the README and `--help`.

Not pydantic-settings: its import costs the CLI 0.7 s a command, and it needs custom sources.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from localserve.ground.config_file import APP as APP
from localserve.ground.config_file import ConfigError as ConfigError
from localserve.ground.config_file import config_path as config_path
from localserve.ground.config_file import read_file
from localserve.ground.host_port import split_host_port
from localserve.ground.setting_kinds import (
    ALIASES,
    BUDGETS,
    CAPS,
    DRAFTS,
    DURATION,
    FLASH,
    FRACTION,
    KV_TYPES,
    LAYERS,
    LOG_FORMAT,
    NAMES_LIST,
    NUMBER,
    PATH,
    PATHS,
    PORT,
    SECONDS,
    SECRET,
    SIZE,
    SWITCH,
    TEXT,
    WHOLE,
    Kind,
)


def setting(
    default: Any, kind: Kind, help: str, *, unset: str = "", env: str = "", ollama: str = ""
) -> Any:
    """A field of Settings: its default, its kind, its help, what None means when that is
    its default (`unset`), and Ollama's variable for it, read when ours is not set."""
    meta = {"kind": kind, "help": help, "unset": unset, "env": env, "ollama": ollama}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Settings:
    """Every setting, at its default. The engine and the server are handed one of these."""

    host: str = setting("127.0.0.1", TEXT, "address to listen on; may carry a port, host:port")
    # Ollama's port: tools that speak Ollama find us where they already look.
    port: int = setting(11434, PORT, "port to listen on")
    models_dir: str | None = setting(
        None,
        PATH,
        "where pulled models are kept",
        unset="the user data folder",
        env="LOCALSERVE_MODELS",
    )
    keep_alive: float | None = setting(
        300.0,
        DURATION,
        "how long an idle model stays loaded: 5m, 30s, 0 (unload at once), "
        "-1 (for ever); a request's keep_alive overrides it",
    )
    memory_budget: dict[str, int] | None = setting(
        None,
        BUDGETS,
        "memory loaded models may take, per device: 12GiB (the CPU's) or cpu=12GiB,gpu0=7GiB",
        unset="each device's free memory less a headroom",
    )
    gpu_layers: int | None = setting(
        None,
        LAYERS,
        "layers of each model offloaded to a GPU: auto (as many as fit), 0 (CPU "
        "only) or a count; a request's num_gpu option overrides it",
        unset="auto",
    )
    parallel: int = setting(4, WHOLE, "slots per model: requests decoded together")
    ctx: int = setting(0, WHOLE, "context tokens per slot (0: each model's, fitted to memory)")
    threads: int = setting(0, WHOLE, "CPU threads for kernels (0: every core this process may use)")
    step_tokens: int = setting(512, WHOLE, "token budget of one batched step")
    max_queue: int = setting(64, WHOLE, "requests that may wait for a slot, per model")
    prompt_cache: int = setting(
        256 << 20,
        SIZE,
        "memory per model for conversations saved when their slot goes to "
        "another request, so they resume without prefilling again (0: off; at most the slots' "
        "KV size)",
    )
    speculative: int = setting(
        64,
        WHOLE,
        "draft tokens a request's step may verify, found by prompt lookup (its last "
        "tokens seen earlier in the prompt or answer), while the step has room (0: off; a "
        "request's speculative field or option overrides it)",
    )
    draft_model: dict[str, str] | None = setting(
        None,
        DRAFTS,
        "a smaller model of the same vocabulary that drafts a model's tokens instead of prompt "
        "lookup, as model=draft pairs; it loads, unloads and is reserved with the model",
        unset="none",
    )
    # Batches and bulk scripts must not starve, nor hold the editor's requests behind them.
    background_share: float = setting(
        0.25,
        FRACTION,
        "share of each model's slots that background requests (batches, priority "
        "background) keep while interactive ones wait; they yield the rest at the next step",
    )
    saved_conversations: int = setting(
        2 << 30,
        SIZE,
        "disk space under the state folder for conversations kept when their model is "
        "unloaded, so that they resume without prefilling when it loads again (0: off)",
    )
    # Codex sends no max_output_tokens to a local server: without a cap a small model may
    # write until its slot is full. Ollama's num_predict, per model as its Modelfiles set it.
    max_tokens: dict[str, int] | None = setting(
        None,
        CAPS,
        "tokens an answer may have when its request sets no cap: 1024, or per model "
        "as 1024,gemma3=256 (a request's own max_tokens or num_predict wins)",
        unset="none: up to the slot's context",
    )
    # Per model, as Ollama's OLLAMA_KV_CACHE_TYPE: q8_0 holds about twice the cells of f16.
    kv_cache_type: dict[str, str] | None = setting(
        None,
        KV_TYPES,
        "the KV cache's type: f16, q8_0 or q4_0, or per model as q8_0,gemma3=f16",
        unset="f16",
        ollama="OLLAMA_KV_CACHE_TYPE",
    )
    flash_attention: dict[str, str] | None = setting(
        None,
        FLASH,
        "llama.cpp's flash attention: auto, on or off, or per model as auto,gemma3=off",
        unset="auto",
        ollama="OLLAMA_FLASH_ATTENTION",
    )
    alias: dict[str, str] | None = setting(
        None,
        ALIASES,
        "more names a model answers to and is listed under, as `ollama cp` makes them, for "
        "agents that know only their vendor's names: claude-sonnet-4-5=gemma3",
        unset="none",
    )
    max_loaded_models: int = setting(0, WHOLE, "cap on resident models (0: no cap)")
    load_timeout: float = setting(120.0, SECONDS, "seconds a request waits for memory")
    probe_timeout: float = setting(
        120.0,
        SECONDS,
        "seconds the probe's throwaway worker has to load a model and decode a token "
        "before its configuration counts as failed",
    )
    no_native_build: bool = setting(
        False, SWITCH, "where llama.cpp's AMX kernels die, never build it without AMX (background)"
    )
    max_pass_over: float = setting(
        10.0,
        SECONDS,
        "seconds a request for a swapped-out model may be passed over before "
        "the models in its way stop taking new requests",
    )
    reload_interval: float = setting(
        10.0,
        SECONDS,
        "seconds after a model reloads for a request's options (num_ctx, num_gpu) before "
        "another may reload it; meanwhile requests run as it is loaded, and say so",
    )
    batch_delay_ms: float = setting(
        10.0, NUMBER, "ONNX models: milliseconds a new batch waits for more requests to join"
    )
    # OpenAI's Batch API (server/batches/): what /v1/files keeps, and for how long.
    batch_file_size: int = setting(100 << 20, SIZE, "largest file POST /v1/files takes")
    batch_lines: int = setting(50_000, WHOLE, "requests one batch's input file may hold")
    batch_files: int = setting(1000, WHOLE, "files /v1/files keeps, batches' outputs included")
    batch_file_ttl: float = setting(30 * 86400.0, DURATION, "how long /v1/files keeps a file")
    # Who may talk to the daemon (server/http/guard.py).
    allowed_hosts: tuple[str, ...] = setting(
        (),
        NAMES_LIST,
        "more Host names to answer to, comma-separated; localhost, *.localhost "
        "and this machine's addresses always are",
        unset="none",
    )
    origins: tuple[str, ...] = setting(
        (),
        NAMES_LIST,
        "more web origins whose pages may call the API, comma-separated, as "
        "OLLAMA_ORIGINS: https://app.example, https://*.example.com, or *; pages on localhost "
        "and editor webviews always may",
        unset="none",
    )
    api_key: str | None = setting(
        None,
        SECRET,
        "a key every request must send (Authorization: Bearer KEY, or X-Api-Key) "
        "but /health, /, /api/version and the web page (/ui and its files)",
        unset="none: on loopback any key or none is taken",
    )
    admin_key: str | None = setting(
        None,
        SECRET,
        "a second key, for pull, delete, import, scan, load, unload, pin and shutdown",
        unset="none",
    )
    no_auth: bool = setting(False, SWITCH, "serve beyond loopback with no key (refused otherwise)")
    import_roots: tuple[str, ...] = setting(
        (),
        PATHS,
        "folders /api/admin/import and /scan may read, besides the models folder",
        unset="none",
    )
    # Limits (server/http/limits.py).
    max_body: int = setting(
        16 << 20,
        SIZE,
        "largest request body of generation and embeddings (other endpoints take 1 MiB)",
    )
    body_timeout: float = setting(30.0, SECONDS, "seconds a request body may take to arrive")
    # Counted before the parse, whose time on the event loop grows with them (bounded_json.py).
    max_json_values: int = setting(1_000_000, WHOLE, "JSON arrays, objects and items in a body")
    # The work one request may ask for (server/http/bounds.py): far above what any client
    # sends, so that only a runaway or hostile one meets them.
    max_messages: int = setting(
        10_000, WHOLE, "messages of a conversation (items of a Responses input) one request sends"
    )
    max_message_parts: int = setting(
        1_000, WHOLE, "content parts (blocks) of one message, or of Anthropic's system"
    )
    max_embedding_inputs: int = setting(
        2048, WHOLE, "inputs one embeddings request sends (OpenAI's own cap)"
    )
    max_embedding_tokens: int = setting(
        300_000, WHOLE, "tokens of all inputs of one embeddings request (OpenAI's own cap)"
    )
    max_tools: int = setting(512, WHOLE, "tools one request offers")
    max_schema_bytes: int = setting(
        64 << 10, SIZE, "largest tool (its name, description and JSON Schema), or answer format"
    )
    compile_timeout: float = setting(
        5.0, SECONDS, "seconds a request's tools or answer format may take to compile (0: none)"
    )
    # Connections (server/http/connections.py): an idle one gives way to a new one.
    max_connections: int = setting(
        256,
        WHOLE,
        "open connections at most; the oldest idle one is closed for a new one, so only "
        "requests in flight fill them",
    )
    max_connections_per_address: int = setting(
        64,
        WHOLE,
        "open connections of one client address (IPv6: one /64) at most, but loopback's, "
        "which every local client shares; its oldest idle one gives way (0: no cap)",
    )
    operator_reserve: int = setting(
        8,
        WHOLE,
        "connections kept beyond max_connections for this user's CLI and tray (requests "
        "with the operator token), for when every other one has a request in flight",
    )
    header_timeout: float = setting(
        10.0,
        SECONDS,
        "seconds a request's head (request line and headers) may take to arrive, from its "
        "first byte or from the connection's opening; then 408 and closed (0: none)",
    )
    # Above the idle expiry of editors' and SDKs' pools (undici 4 s, httpx 5 s), so they
    # close first and never send a request down a connection just closed under them.
    idle_timeout: float = setting(
        15.0,
        SECONDS,
        "seconds a keep-alive connection may wait for its next request before it is "
        "closed (0: none)",
    )
    # A client that reads nothing of an answer holds its slot; the engine's too (connections.py).
    write_timeout: float = setting(
        30.0, SECONDS, "seconds an answer may sit unread before its connection is closed (0: none)"
    )
    # What the daemon tells about itself (server/http/metrics.py, server/http/request_log.py).
    no_metrics: bool = setting(False, SWITCH, "turn GET /metrics off")
    log_format: str = setting(
        "text",
        LOG_FORMAT,
        "the log's lines: text, or json (one object a line, a request's fields as an object)",
    )
    log_prompts: bool = setting(False, SWITCH, "put each request's prompt in its log line")
    # Upstreams (config.toml's [upstreams.*], docs/upstreams.md; server/upstream/).
    upstream_connect_timeout: float = setting(
        5.0, SECONDS, "seconds to connect to an upstream before the attempt counts as failed"
    )
    upstream_first_byte_timeout: float = setting(
        300.0, SECONDS, "seconds an upstream may take to answer, and between streamed chunks"
    )
    upstream_probe_interval: float = setting(
        30.0, SECONDS, "seconds between probes of each upstream (GET /v1/models)"
    )
    upstream_failures: int = setting(
        3, WHOLE, "failures in a row after which an upstream is down: requests get a 503"
    )
    upstream_retry: float = setting(
        30.0, SECONDS, "seconds an upstream stays down before it is tried again"
    )

    @property
    def url(self) -> str:
        # A wildcard listen address is not one a client can connect to.
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        host = "[::1]" if host == "::" else (f"[{host}]" if ":" in host else host)
        return f"http://{host}:{self.port}"


NAMES: tuple[str, ...] = tuple(f.name for f in fields(Settings))
# The environment variable of each setting, as users of OLLAMA_HOST / OLLAMA_MODELS expect.
ENV: dict[str, str] = {
    f.name: f.metadata["env"] or f"{APP.upper()}_{f.name.upper()}" for f in fields(Settings)
}
_KINDS: dict[str, Kind] = {f.name: f.metadata["kind"] for f in fields(Settings)}
# Ollama's names, read where ours is not set: a user's OLLAMA_KV_CACHE_TYPE carries over.
OLLAMA_ENV = {f.name: f.metadata["ollama"] for f in fields(Settings) if f.metadata["ollama"]}
SWITCHES: frozenset[str] = frozenset(f.name for f in fields(Settings) if _KINDS[f.name] is SWITCH)


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def shown(name: str, value: Any) -> str:
    """A value as a user would type it; None is what the setting's help says it means."""
    if value is None or value == ():
        unset = next(f.metadata["unset"] for f in fields(Settings) if f.name == name)
        return unset or "none"
    return _KINDS[name].show(value)


def describe() -> list[tuple[str, str, str, str]]:
    """(flag, environment variable, default, help) of every setting, for `--help` and docs."""
    return [
        (flag(f.name), ENV[f.name], shown(f.name, f.default), f.metadata["help"])
        for f in fields(Settings)
    ]


OPERATOR_HEADER = "X-Localserve-Operator"


def load(
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] = os.environ,
    path: Path | None = None,
) -> Settings:
    """The settings in force: a flag given (not None) wins, then the environment, then the file."""
    path = path if path is not None else config_path(env)
    ollama = {k: var for k, var in OLLAMA_ENV.items() if env.get(var) and not env.get(ENV[k])}
    named = {**ENV, **ollama}
    levels: list[tuple[Mapping[str, Any], Callable[[str], str]]] = [
        (read_file(path, ENV), lambda key: str(path)),
        ({k: env[var] for k, var in named.items() if env.get(var)}, lambda key: f"${named[key]}"),
        ({k: v for k, v in (flags or {}).items() if k in ENV and v is not None}, flag),
    ]
    values: dict[str, Any] = {}
    for given, where in levels:
        raw = dict(given)
        split_host_port(raw)
        for key, value in raw.items():
            values[key] = _convert(key, value, where(key))
    return Settings(**values)


def _convert(key: str, raw: Any, source: str) -> Any:
    kind = _KINDS[key]
    try:
        return kind.parse(raw)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{source}: {key} must be {kind.noun}, not {raw!r}") from None
