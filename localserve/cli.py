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
    serve.add_argument("--verbose", "-v", action="store_true")
    return parser


def _serve(args: argparse.Namespace) -> int:
    # Imported here: only the daemon needs the engine; client commands stay light.
    from localserve.engine.manager import EngineOptions
    from localserve.server.daemon import run

    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    options = EngineOptions(
        n_slots=args.parallel,
        n_ctx_slot=args.ctx,
        n_threads=args.threads,
        step_tokens=args.step_tokens,
        max_waiting=args.max_queue,
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
