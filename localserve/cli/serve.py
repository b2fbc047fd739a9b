"""`localserve serve`: the daemon, in the foreground, logging to the terminal.

The only command that imports the engine, and only once it runs: client commands stay light.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from localserve import config
from localserve.cli.output import OK, USAGE


# -- serve's arguments: every serve flag is added here, in this one function -------------------
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
    serve.add_argument("--host", help="address to listen on (env LOCALSERVE_HOST)")
    serve.add_argument("--port", type=int, help="port to listen on (env LOCALSERVE_PORT)")
    serve.add_argument(
        "--models-dir", metavar="DIR", help="where pulled models are kept (env LOCALSERVE_MODELS)"
    )
    serve.add_argument(
        "--parallel", type=int, help="slots per model: requests decoded together (default 4)"
    )
    serve.add_argument("--ctx", type=int, help="context tokens per slot (default 4096)")
    serve.add_argument("--threads", type=int, help="CPU threads for kernels (0: all cores)")
    serve.add_argument(
        "--step-tokens", type=int, default=512, help="token budget of one batched step"
    )
    serve.add_argument(
        "--max-queue", type=int, default=64, help="requests that may wait for a slot per model"
    )
    serve.add_argument(
        "--memory-budget",
        metavar="SIZE",
        help="memory models may use, e.g. 4GiB (default: available RAM less 1 GiB)",
    )
    serve.add_argument(
        "--prompt-cache",
        metavar="SIZE",
        default="256MiB",
        help="memory per model for conversations saved when their slot goes to another "
        "request, so they resume without prefilling again (0: off; at most the slots' KV size)",
    )
    serve.add_argument(
        "--max-loaded-models", type=int, help="cap on resident models (0: no cap)"
    )
    serve.add_argument(
        "--keep-alive",
        help="how long an idle model stays loaded: 5m, 30s, 0 (unload at once), -1 (for ever)",
    )
    serve.add_argument(
        "--load-timeout", type=float, default=120.0, help="seconds a request waits for memory"
    )
    serve.add_argument(
        "--max-pass-over",
        type=float,
        default=10.0,
        help="seconds a request for a swapped-out model may be passed over before the models "
        "in its way stop taking new requests",
    )
    serve.add_argument(
        "--batch-delay-ms",
        type=float,
        default=10.0,
        help="ONNX models: how long a new batch waits for more requests to join it",
    )
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
    from localserve.engine.errors import BadRequest
    from localserve.engine.keep_alive import parse_keep_alive
    from localserve.engine.options import EngineOptions
    from localserve.engine.pools import parse_size
    from localserve.server.daemon import run

    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        budget = parse_size(settings.memory_budget) if settings.memory_budget else None
        prompt_cache = parse_size(args.prompt_cache)
        keep_alive = parse_keep_alive(settings.keep_alive, "--keep-alive")
    except (ValueError, BadRequest) as exc:
        print(f"localserve: {exc}", file=sys.stderr)
        return USAGE
    if settings.models_dir:
        # The store reads its folder from the environment, as Ollama's does from OLLAMA_MODELS.
        os.environ["LOCALSERVE_MODELS"] = settings.models_dir
    options = EngineOptions(
        n_slots=settings.parallel,
        n_ctx_slot=settings.ctx,
        n_threads=settings.threads,
        step_tokens=args.step_tokens,
        max_waiting=args.max_queue,
        prompt_cache_bytes=prompt_cache,
        memory_budget=budget,
        max_loaded_models=settings.max_loaded_models,
        keep_alive_s=keep_alive,
        max_pass_over_s=args.max_pass_over,
        load_timeout_s=args.load_timeout,
        batch_delay_ms=args.batch_delay_ms,
        models_dir=settings.models_dir,
    )
    models = args.model or ([] if args.no_default_model else ["smollm2"])
    try:
        run(settings.host, settings.port, models, options)
    except KeyboardInterrupt:
        pass
    return OK
