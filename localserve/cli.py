"""The `localserve` command. `serve` runs the daemon in this process; other commands are clients."""

from __future__ import annotations

import argparse
import logging
import os
import sys

DEFAULT_HOST = "127.0.0.1"
# Ollama's port: tools that speak Ollama find us where they already look.
DEFAULT_PORT = 11434


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="localserve", description="A local LLM server with hot-swapped models."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the daemon in the foreground")
    serve.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME|PATH",
        help="a model to load at start (repeatable); default: smollm2",
    )
    serve.add_argument("--host", default=os.environ.get("LOCALSERVE_HOST", DEFAULT_HOST))
    serve.add_argument(
        "--port", type=int, default=int(os.environ.get("LOCALSERVE_PORT", DEFAULT_PORT))
    )
    serve.add_argument(
        "--parallel", type=int, default=4, help="slots per model: requests decoded together"
    )
    serve.add_argument("--ctx", type=int, default=4096, help="context tokens per slot")
    serve.add_argument(
        "--threads", type=int, default=0, help="CPU threads for kernels (0: all cores)"
    )
    serve.add_argument(
        "--step-tokens", type=int, default=512, help="token budget of one batched step"
    )
    serve.add_argument(
        "--max-queue", type=int, default=64, help="requests that may wait for a slot per model"
    )
    serve.add_argument(
        "--memory-budget",
        default=os.environ.get("LOCALSERVE_MEMORY_BUDGET"),
        metavar="SIZE",
        help="memory models may use, e.g. 4GiB (default: available RAM less 1 GiB)",
    )
    serve.add_argument(
        "--max-loaded-models", type=int, default=0, help="cap on resident models (0: no cap)"
    )
    serve.add_argument(
        "--keep-alive",
        default=os.environ.get("LOCALSERVE_KEEP_ALIVE", "5m"),
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
    serve.add_argument("--verbose", "-v", action="store_true")
    return parser


def _serve(args: argparse.Namespace) -> int:
    # Imported here: only the daemon needs the engine; client commands stay light.
    from localserve.engine.errors import BadRequest
    from localserve.engine.keep_alive import parse_keep_alive
    from localserve.engine.manager import EngineOptions
    from localserve.engine.pools import parse_size
    from localserve.server.daemon import run

    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        budget = parse_size(args.memory_budget) if args.memory_budget else None
        keep_alive = parse_keep_alive(args.keep_alive, "--keep-alive")
    except (ValueError, BadRequest) as exc:
        print(f"localserve: {exc}", file=sys.stderr)
        return 2
    options = EngineOptions(
        n_slots=args.parallel,
        n_ctx_slot=args.ctx,
        n_threads=args.threads,
        step_tokens=args.step_tokens,
        max_waiting=args.max_queue,
        memory_budget=budget,
        max_loaded_models=args.max_loaded_models,
        keep_alive_s=keep_alive,
        max_pass_over_s=args.max_pass_over,
        load_timeout_s=args.load_timeout,
    )
    try:
        run(args.host, args.port, args.model or ["smollm2"], options)
    except KeyboardInterrupt:
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
