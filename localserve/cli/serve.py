"""`localserve serve`: the daemon, in the foreground, logging to the terminal.

The only command that imports the engine, and only once it runs: client commands stay light.
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from localserve.cli import log_format
from localserve.cli.output import OK
from localserve.ground import settings as config

log = logging.getLogger(__name__)


class Signalled(SystemExit):
    """A stopping signal that came before the event loop took the signals over (while models
    load) or one it leaves alone (SIGHUP). A SystemExit, so that asyncio lets it through any
    task it lands in and the daemon's own cleanup runs as the loop winds down."""

    def __init__(self, name: str) -> None:
        super().__init__(0)
        self.name = name


# -- serve's arguments: one flag per setting, from the settings' own table -----------------------
def add_serve_arguments(serve: argparse.ArgumentParser) -> None:
    """Flags left at None fall back to the environment, the config file, then the default."""
    serve.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME|PATH",
        help="a model to load at start (repeatable); default: smollm2",
    )
    serve.add_argument(
        "--no-default-model",
        action="store_true",
        help="start with no model loaded; each loads on its first request",
    )
    switches = {config.flag(name) for name in config.SWITCHES}
    for flag, env, default, text in config.describe():
        help = f"{text} (env {env}; default {default})"
        if flag in switches:
            serve.add_argument(flag, action="store_const", const=True, help=help)
        else:
            serve.add_argument(flag, metavar="VALUE", help=help)
    serve.add_argument("--verbose", "-v", action="store_true", help="log debug detail")


def add_parser(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser(
        "serve",
        help="run the daemon in the foreground",
        description="Run the daemon in the foreground, logging to the terminal.",
    )
    add_serve_arguments(serve)
    serve.set_defaults(handler=serve_command)


def serve_command(args: argparse.Namespace) -> int:
    settings = config.load(vars(args))
    # Imported here: only the daemon needs the engine.
    from localserve.server.daemon import run

    log_format.configure(
        logging.DEBUG if args.verbose else logging.INFO, json_lines=settings.log_format == "json"
    )
    if settings.models_dir:
        # The store reads its folder from the environment, as Ollama's does from OLLAMA_MODELS.
        os.environ["LOCALSERVE_MODELS"] = settings.models_dir
    models = args.model or ([] if args.no_default_model else ["smollm2"])
    _log_fatal_signals()
    # The daemon's last line in its log says why it stopped: a daemon that went quiet with no
    # word (issue #13) cannot be told from one that crashed.
    try:
        with _stop_signals_raise():
            reason = run(settings, models)
    except KeyboardInterrupt:  # Windows' Ctrl-C, or one before the loop took SIGINT over
        reason = "SIGINT"
    except Signalled as exc:
        reason = exc.name
    except SystemExit:  # the daemon's own refusal, worded already, follows on stderr
        log.error("localserve stopped: it could not start; the reason follows")
        raise
    except BaseException as exc:
        log.exception("localserve stopped: an error: %s", exc)
        raise
    log.info("localserve stopped: %s", reason)
    return OK


def _log_fatal_signals() -> None:
    """A native crash (SIGSEGV, SIGILL, SIGFPE, SIGBUS, SIGABRT inside the engine) kills the
    process before any Python code could log it; faulthandler writes the signal's name and
    every thread's traceback into the log from the signal handler itself."""
    handlers = logging.getLogger().handlers
    streams = [h.stream for h in handlers if isinstance(h, logging.StreamHandler)]
    try:
        faulthandler.enable(file=streams[0] if streams else sys.stderr, all_threads=True)
    except (AttributeError, OSError, RuntimeError, ValueError):
        pass  # no file descriptor behind the log (pythonw): nowhere to write


@contextmanager
def _stop_signals_raise() -> Iterator[None]:
    """Until the event loop installs its own handlers, SIGTERM (and always SIGHUP) raise
    Signalled instead of ending the process with no word in the log."""

    def raise_signalled(signum: int, _frame: object) -> None:
        raise Signalled(signal.Signals(signum).name)

    wanted = [signal.SIGTERM, *([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])]
    previous: dict[signal.Signals, Any] = {}
    for sig in wanted:
        try:
            previous[sig] = signal.signal(sig, raise_signalled)
        except (OSError, ValueError):  # not the main thread, or not on this platform
            pass
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
