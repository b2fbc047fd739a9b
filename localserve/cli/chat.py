"""The interactive chat of `localserve run`: streamed answers, history, and slash commands.

Plain `input()` (with readline where there is one) and plain writes: the chat must behave the
same in any terminal, under tmux and under a test's pseudo-terminal.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from localserve.cli import output, parameters
from localserve.cli.answer import stream_answer
from localserve.cli.cutoff import Daemon
from localserve.cli.output import FAILED, OK, UNREACHABLE
from localserve.cli.parameters import PARAMETERS
from localserve.cli.wrap import answer_writer
from localserve.client import (
    ApiError,
    Client,
    ClientError,
    DaemonUnreachable,
    StreamCutOff,
    bare_name,
)

try:  # line editing and history where the platform has it
    import readline  # noqa: F401
except ImportError:  # pragma: no cover - Windows
    pass
try:
    import termios
except ImportError:  # pragma: no cover - Windows
    termios = None  # type: ignore[assignment]

PROMPT = ">>> "
CONTINUATION = "... "
FENCE = '"""'

HELP = """Available commands:
  /set parameter NAME VALUE   set a sampling parameter (/set parameter, alone, lists them)
  /set system TEXT            set the system message
  /set verbose | quiet        show or hide timings after each answer
  /show info                  details of the model
  /show parameters | system   what this session has set
  /clear                      forget the conversation
  /bye                        exit (or Ctrl-D)
  /?                          this help

Use \"\"\" to begin and end a multi-line message. Ctrl-C stops an answer."""


class ChatSession:
    def __init__(
        self,
        client: Client,
        model: str,
        keep_alive: str | None,
        verbose: bool,
        options: dict[str, Any] | None = None,
        daemon: Daemon | None = None,
    ) -> None:
        self.client = client
        self.daemon = daemon or Daemon(client)
        self.model = model
        self.keep_alive = keep_alive
        self.verbose = verbose
        self.system: str | None = None
        self.history: list[dict[str, str]] = []
        self.options: dict[str, Any] = dict(options or {})

    def loop(self) -> int:
        print('Send a message (/? for help, """ for several lines, Ctrl-D or /bye to exit)')
        while True:
            try:
                text = self.read()
            except EOFError:
                print()
                return OK
            except KeyboardInterrupt:
                print("\nUse Ctrl + d or /bye to exit.")
                continue
            if not text.strip():
                continue
            if text.startswith("/"):
                if not self.command(text.strip()):
                    return OK
                continue
            code = self.ask(text)
            if code is not None:
                return code

    def read(self) -> str:
        line = input(PROMPT)
        if not line.lstrip().startswith(FENCE):
            return line
        first = line.lstrip()[len(FENCE) :]
        if first.rstrip().endswith(FENCE):  # """all on one line"""
            return first.rstrip()[: -len(FENCE)]
        lines = [first] if first else []
        while True:
            line = input(CONTINUATION)
            if line.rstrip().endswith(FENCE):
                lines.append(line.rstrip()[: -len(FENCE)])
                return "\n".join(lines)
            lines.append(line)

    def ask(self, text: str) -> int | None:
        """Stream one answer; an exit code when the session cannot go on, else None."""
        messages = [{"role": "system", "content": self.system}] if self.system else []
        messages += [*self.history, {"role": "user", "content": text}]
        body: dict[str, Any] = {"model": self.model, "messages": messages, **self.options}
        if self.keep_alive is not None:
            body["keep_alive"] = self.keep_alive
        try:
            with _typing_hidden():
                answer, timings = stream_answer(self.client, body, answer_writer())
        except KeyboardInterrupt:
            # The interrupted turn is forgotten: the next question starts from the last answer.
            print()
            return None
        except (StreamCutOff, DaemonUnreachable) as exc:
            # Forgotten too; the chat goes on only while the daemon still answers.
            print()
            if self.daemon.report(exc):
                return None
            return FAILED if isinstance(exc, StreamCutOff) else UNREACHABLE
        except ClientError as exc:
            print()
            output.error(exc.message if isinstance(exc, ApiError) else str(exc))
            return None
        self.history += [
            {"role": "user", "content": text},
            {"role": "assistant", "content": answer},
        ]
        print("\n")
        if self.verbose:
            print("\n".join(timings.lines()) + "\n")
        return None

    # -- slash commands ------------------------------------------------------------------------

    def command(self, line: str) -> bool:
        """Run one slash command; False means the session ends."""
        words = line.split()
        head = words[0].lower()
        if head in ("/bye", "/exit"):
            return False
        if head in ("/?", "/help"):
            print(HELP)
        elif head == "/clear":
            self.history.clear()
            print("Cleared session context.")
        elif head == "/set" and len(words) > 1:
            self._set(words[1].lower(), line)
        elif head == "/show" and len(words) > 1:
            self._show(words[1].lower())
        else:
            print(f"Unknown command '{line}'. Type /? for help.")
        return True

    def _set(self, what: str, line: str) -> None:
        rest = line.split(None, 2)[2] if len(line.split(None, 2)) > 2 else ""
        if what == "system":
            self.system = rest.strip().strip('"') or None
            print("Set system message." if self.system else "Cleared system message.")
        elif what == "parameter":
            self._set_parameter(rest.split())
        elif what in ("verbose", "quiet"):
            self.verbose = what == "verbose"
            print(f"Set '{what}' mode.")
        else:
            print(f"Unknown setting '{what}'. Type /? for help.")

    def _set_parameter(self, words: list[str]) -> None:
        if len(words) < 2 or words[0] not in PARAMETERS:
            print("Usage: /set parameter NAME VALUE, where NAME is one of:")
            print("  " + ", ".join(PARAMETERS))
            return
        try:
            field, value = parameters.parse(words[0], words[1:])
        except parameters.BadParameter as exc:
            print(f"{exc}.")
            return
        self.options[field] = value
        print(f"Set parameter '{words[0]}' to '{' '.join(words[1:])}'")

    def _show(self, what: str) -> None:
        if what == "info":
            self._show_info()
        elif what == "parameters":
            if not self.options:
                print("No parameters set: the model's defaults apply.")
            for field, value in self.options.items():
                print(f"{field:<20}{value}")
        elif what == "system":
            print(self.system or "No system message set.")
        else:
            print(f"Unknown '/show {what}'. Try /show info, /show parameters, /show system.")

    def _show_info(self) -> None:
        try:
            loaded = self.client.ps()
        except ClientError as exc:
            output.error(str(exc))
            return
        wanted = bare_name(self.model)
        for model in loaded:
            if bare_name(str(model.get("name", ""))) != wanted:
                continue
            details = model.get("details") or {}
            ours = model.get("localserve") or {}
            rows = [
                ("model", wanted),
                ("architecture", details.get("family")),
                ("parameters", details.get("parameter_size")),
                ("quantization", details.get("quantization_level")),
                ("format", details.get("format")),
                ("context per slot", ours.get("context_per_slot")),
                ("slots", ours.get("slots")),
                ("device", ours.get("device")),
                ("memory", output.size(model.get("size"))),
            ]
            print("  Model")
            for label, value in rows:
                print(f"    {label:<20}{value if value is not None else '-'}")
            return
        print(f"'{wanted}' is not loaded right now; it loads again with the next message.")


@contextmanager
def _typing_hidden() -> Iterator[None]:
    """While an answer streams, what the user types ahead is not echoed into it; it waits
    for the next prompt. Ctrl-C still interrupts (only ECHO is turned off)."""
    if termios is None or not sys.stdin.isatty():
        yield
        return
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    quiet = list(saved)
    quiet[3] &= ~termios.ECHO
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)
