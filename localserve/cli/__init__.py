"""The `localserve` command. `serve` runs the daemon in this process; `doctor` and `native` look
at this machine and its llama.cpp build in this process; every other command is a client of the
daemon's HTTP API through `localserve.client`, and never imports the engine."""

from __future__ import annotations

import argparse
import sys

from localserve import __version__
from localserve.cli import (
    batches,
    doctor,
    launch,
    loaded,
    models,
    native,
    run,
    serve,
    service,
    status,
    upstream,
)
from localserve.cli.common import Failure
from localserve.cli.output import (
    EXIT_CODES_HELP,
    FAILED,
    INTERRUPTED,
    NOT_FOUND,
    UNREACHABLE,
    USAGE,
    error,
)
from localserve.client import ApiError, DaemonUnreachable, StreamCutOff
from localserve.ground.settings import ConfigError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="localserve",
        description="A local LLM server with hot-swapped models. `localserve run smollm2` "
        "starts everything and opens a chat.",
        epilog=EXIT_CODES_HELP,
    )
    parser.add_argument("--version", action="version", version=f"localserve {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve.add_parser(sub)
    run.add_parser(sub)
    launch.add_parser(sub)
    models.add_parsers(sub)
    loaded.add_parsers(sub)
    status.add_parsers(sub)
    batches.add_parsers(sub)
    doctor.add_parser(sub)
    native.add_parsers(sub)
    service.add_parsers(sub)
    upstream.add_parsers(sub)
    return parser


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    to_agent: list[str] = []
    if argv[:1] == ["launch"] and "--" in argv:  # what follows `--` is the agent's, all of it
        argv, to_agent = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    args, extra = parser.parse_known_args(argv)
    if args.command == "launch":
        args.agent_args = to_agent
    # `run NAME -p temperature=0 PROMPT`: words of the prompt may follow the options, as in
    # Ollama; argparse stops filling a positional at the first option.
    if args.command == "run" and not any(word.startswith("-") for word in extra):
        args.prompt += extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        return int(args.handler(args))
    except ConfigError as exc:
        error(str(exc))
        return USAGE
    except DaemonUnreachable as exc:
        error(f"{exc}; start it with `localserve serve`, or `localserve run NAME`")
        return UNREACHABLE
    except ApiError as exc:
        if exc.route_missing:
            error(f"the daemon has no {exc.endpoint} endpoint; it is older than this CLI")
            return FAILED
        error(exc.message)
        return NOT_FOUND if exc.status == 404 else FAILED
    except StreamCutOff as exc:
        # A stream a command did not explain itself: still never a silent success.
        error(str(exc))
        return FAILED
    except Failure as exc:
        error(str(exc))
        return exc.code
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        # `localserve list | head -1`: the reader left; that is not an error.
        return 0
