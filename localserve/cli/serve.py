"""`localserve serve`: the daemon, in the foreground, logging to the terminal.

The only command that imports the engine, and only once it runs: client commands stay light.
"""

from __future__ import annotations

import argparse
import logging
import os

from localserve.ground import settings as config
from localserve.cli.output import OK


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
    for flag, env, default, text in config.describe():
        serve.add_argument(flag, metavar="VALUE", help=f"{text} (env {env}; default {default})")
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

    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if settings.models_dir:
        # The store reads its folder from the environment, as Ollama's does from OLLAMA_MODELS.
        os.environ["LOCALSERVE_MODELS"] = settings.models_dir
    models = args.model or ([] if args.no_default_model else ["smollm2"])
    try:
        run(settings, models)
    except KeyboardInterrupt:
        pass
    return OK
