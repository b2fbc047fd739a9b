"""Running the daemon: load the requested models, then serve until told to stop."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from contextlib import ExitStack
from pathlib import Path

from aiohttp import web

from localserve.engine.residency.devices import find_devices
from localserve.engine.residency.manager import ModelManager
from localserve.engine.residency.pools import device_pools, summary
from localserve.engine.worker_client.supervisor import WorkerLoader
from localserve.ground import upstreams
from localserve.ground.errors import EngineError
from localserve.ground.settings import Settings, config_path
from localserve.server.admin.api import SHUTDOWN
from localserve.server.app import build_app
from localserve.server.batches import routes as batches
from localserve.server.http.connections import CONNECTIONS
from localserve.server.http.front import listen
from localserve.server.http.guard import is_loopback, operator_token
from localserve.store.library import Library
from localserve.store.names import BadName, parse_name

log = logging.getLogger(__name__)


async def serve(settings: Settings, models: list[str]) -> str:
    """Serve until told to stop; returns what told it: a signal's name, or a shutdown asked
    over HTTP (the caller logs it as the daemon's last word)."""
    host, port = settings.host, settings.port
    if not is_loopback(host) and not settings.api_key and not settings.no_auth:
        raise SystemExit(
            f"localserve: refusing to serve on {host} with no API key: anyone who can reach this "
            "address could use and change it. Set one (--api-key KEY, LOCALSERVE_API_KEY, or "
            "api_key in config.toml), or pass --no-auth to serve it open on purpose"
        )
    try:
        remote = upstreams.read(config_path())
    except upstreams.UpstreamConfigError as exc:
        raise SystemExit(f"localserve: {exc}") from exc
    for alias in settings.alias or {}:  # listed under it, so it must be a name Ollama takes
        try:
            parse_name(alias)
        except BadName as exc:
            raise SystemExit(f"localserve: --alias {alias}: {exc}") from exc
    manager = daemon_manager(settings)
    app = build_app(manager, remote)
    for up in remote:
        served = ", ".join(up.models) if up.models is not None else "all it lists"
        key = f", key from ${up.key_env}" if up.key_env else ""
        log.info("upstream %s at %s: %s%s", up.name, up.url, served, key)
        if up.key_env and up.key() is None:
            log.warning(
                "upstream %s: $%s is not set: its requests go without a key", up.name, up.key_env
            )
    stop = asyncio.Event()
    app[SHUTDOWN] = stop
    # Cancelling a handler when its client disconnects is what frees the slot within a step.
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
    await runner.setup()
    assert runner.server is not None  # set by setup()
    stack = ExitStack()
    try:
        for name in models:
            try:
                # Models named at start stay until evicted, as a user who named them expects.
                await manager.preload(name, keep_alive_s=None, allow_path=True)
            except EngineError as exc:
                raise SystemExit(f"localserve: cannot serve '{name}': {exc}") from exc
        missing = [n for n in models if manager.get(n) is None and manager.get(_stem(n)) is None]
        if missing:
            log.warning(
                "the memory budget does not hold every --model at once: %s were evicted to "
                "make room and will load again on their next request",
                ", ".join(missing),
            )
        # Not aiohttp's TCPSite: each connection goes through the front's table (front.py).
        listener = await listen(runner.server, app[CONNECTIONS], host, port)
        stack.callback(listener.close)
        stack.enter_context(operator_token(app, port))
        # Batches post their lines to this address, with the token just written.
        await batches.start(app, settings.url)
        # What start-up made (modules, templates, the models' tables) lives as long as the
        # daemon: out of the collector's reach, a full collection walks only what requests
        # made since. Under bench_abuse's bodies attack one took 0.16 s, and 0.02 s so.
        gc.freeze()
        log.info("localserve listening on http://%s:%d", host, port)
        print(f"localserve listening on http://{host}:{port}", flush=True)
        loop = asyncio.get_running_loop()
        signalled: list[str] = []

        def stop_on(sig: signal.Signals) -> None:
            signalled.append(sig.name)
            stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop_on, sig)
            except NotImplementedError:
                # Windows event loops take no signal handlers; there Ctrl-C arrives as
                # KeyboardInterrupt, which the CLI catches, and the finally below still runs.
                pass
        await stop.wait()
        # POST /api/admin/shutdown sets the same event, without a signal.
        reason = signalled[0] if signalled else "shutdown requested over HTTP"
        # Logged now too: should freeing the models hang, the log still says who asked.
        log.info("localserve stopping: %s", reason)
    finally:
        await batches.stop(app)
        stack.close()
        await runner.cleanup()
        manager.close()
    return reason


def daemon_manager(settings: Settings) -> ModelManager:
    """The daemon's manager (made on its event loop): the store's library, and models run in
    one engine worker process per device."""
    pools = device_pools(find_devices(), settings.memory_budget)
    log.info("memory pools: %s", summary(pools))
    loader = WorkerLoader(settings, tuple(p.device for p in pools))
    return ModelManager(settings, loader, Library(settings.models_dir), pools)


def _stem(name_or_path: str) -> str:
    return Path(name_or_path).stem


def run(settings: Settings, models: list[str]) -> str:
    """Serve until stopped; returns why it stopped (see `serve`)."""
    return asyncio.run(serve(settings, models))
