"""`localserve run NAME [PROMPT]`: daemon up, model pulled and loaded, then one answer or a chat."""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Any

from localserve.cli import output, parameters
from localserve.cli.answer import stream_answer
from localserve.cli.chat import ChatSession
from localserve.cli.common import Failure, address_options, connect
from localserve.cli.cutoff import Daemon
from localserve.cli.output import FAILED, OK, UNREACHABLE, USAGE, spinner
from localserve.cli.progress import show_pull
from localserve.cli.wrap import answer_writer
from localserve.client import JSON, ApiError, Client, DaemonUnreachable, StreamCutOff
from localserve.ground import settings as config
from localserve.launcher import DaemonDidNotStart, is_local, log_path, start, wait_healthy


def add_parser(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser(
        "run",
        parents=[address_options()],
        help="chat with a model, or ask it once",
        description="Answer PROMPT once, or chat. Starts the daemon if none is running, pulls "
        "the model if it is missing, and loads it. A prompt piped on stdin is answered once.",
    )
    run.add_argument("model", metavar="NAME", help="a model name (e.g. smollm2) or GGUF path")
    run.add_argument("prompt", nargs="*", metavar="PROMPT", help="answer this once and exit")
    run.add_argument(
        "--verbose", action="store_true", help="print timings: TTFT, prompt and generation rates"
    )
    run.add_argument(
        "--parameter",
        "-p",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a sampling parameter, as /set parameter takes it (repeatable): temperature=0, "
        "num_predict=100, top_k, top_p, min_p, repeat_penalty, seed, stop",
    )
    run.add_argument(
        "--keepalive",
        "--keep-alive",
        dest="keepalive",
        metavar="DURATION",
        help="how long the model stays loaded after this session (e.g. 10m, 0, -1)",
    )
    run.set_defaults(handler=run_command)


def ensure_daemon(client: Client, settings: config.Settings) -> subprocess.Popen[bytes] | None:
    """Return once a daemon answers at the configured address, starting one if need be: the
    process started (whose exit status tells how it died, should it die), else None."""
    try:
        client.health()
        return None
    except DaemonUnreachable:
        if not is_local(settings.host):
            raise
    log = log_path()
    with spinner(f"Starting localserve at {settings.url} (log: {log})"):
        process = start(settings, log)
        wait_healthy(client, process, log)
    output.note(
        f"localserve is now running in the background at {settings.url} "
        f"(log: {log}); `localserve shutdown` stops it"
    )
    return process


def run_command(args: argparse.Namespace) -> int:
    settings, client = connect(args)
    options = sampling_options(args.parameter)
    try:
        daemon = Daemon(client, ensure_daemon(client, settings))
    except DaemonDidNotStart as exc:
        raise Failure(str(exc), UNREACHABLE) from exc
    try:
        ensure_model(client, args.model, args.keepalive)
    except (DaemonUnreachable, StreamCutOff) as exc:
        # It answered a moment ago: it died pulling or loading the model (a native crash in
        # the engine, most likely).
        daemon.report(exc)
        return FAILED

    prompt = " ".join(args.prompt)
    if not sys.stdin.isatty():
        piped = sys.stdin.read()
        # As Ollama does: `cat notes.txt | localserve run m "summarize"` asks about the text.
        prompt = f"{prompt}\n\n{piped}" if prompt and piped.strip() else (prompt or piped)
        if not prompt.strip():
            return OK
    if prompt:
        return one_shot(daemon, args, prompt, options)
    return ChatSession(client, args.model, args.keepalive, args.verbose, options, daemon).loop()


def sampling_options(given: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for item in given:
        name, sep, value = item.partition("=")
        try:
            if not sep:
                raise parameters.BadParameter(f"--parameter takes NAME=VALUE, not '{item}'")
            field, parsed = parameters.parse(name.strip(), [value.strip()])
        except parameters.BadParameter as exc:
            raise Failure(str(exc), USAGE) from exc
        if field == "stop" and "stop" in options:
            parsed = [*options["stop"], *parsed]
        options[field] = parsed
    return options


def ensure_model(client: Client, name: str, keep_alive: str | None) -> JSON:
    """Pull the model if the daemon does not have it, then load it: the load's answer, which
    describes the model loaded (the one an alias stands for, under its own name)."""
    try:
        client.show(name)
    except ApiError as exc:
        if exc.status != 404:
            raise
        if not exc.route_missing:  # a daemon without the store API: the load will tell
            pull(client, name)
    with spinner(f"Loading {name}"):
        return client.load(name, keep_alive)


def pull(client: Client, name: str) -> None:
    try:
        show_pull(client.pull(name))
    except ApiError as exc:
        if exc.status == 404:
            raise
        raise Failure(f"download of '{name}' failed: {exc.message}", FAILED) from exc


def one_shot(daemon: Daemon, args: argparse.Namespace, prompt: str, options: dict[str, Any]) -> int:
    body: dict[str, Any] = {
        "model": args.model,
        "messages": [{"role": "user", "content": prompt}],
        **options,
    }
    if args.keepalive is not None:
        body["keep_alive"] = args.keepalive
    try:
        _, timings = stream_answer(daemon.client, body, answer_writer())
    except StreamCutOff as exc:
        # No closing newline for a pipe (the answer did not end) and no timings: a partial
        # answer must not look like a whole one. A terminal still gets the line ended.
        if sys.stdout.isatty():
            sys.stdout.write("\n")
            sys.stdout.flush()
        daemon.report(exc)
        return FAILED
    sys.stdout.write("\n")
    sys.stdout.flush()
    if args.verbose:
        for line in timings.lines():
            output.stderr.print(line, highlight=False)
    return OK
