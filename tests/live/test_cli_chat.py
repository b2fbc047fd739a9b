"""The interactive chat of `localserve run NAME`, driven under a pseudo-terminal as a person
would: questions, streamed answers, slash commands, Ctrl-C and Ctrl-D."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from localserve.client import Client
from tests.support.cli_support import cli_env, default_sigint

PROMPT = ">>> "
TIMEOUT_S = 120


@pytest.fixture
def chat(tmp_path: Path, daemon_url: str) -> Iterator[pexpect.spawn]:
    """`localserve run smollm2` in a terminal, at its first prompt; answers of 60 tokens at most
    (SmolLM2 sometimes rambles to the end of its context)."""
    child = pexpect.spawn(
        sys.executable,
        ["-m", "localserve", "run", "smollm2", "--parameter", "num_predict=60"],
        env=cli_env(tmp_path, daemon_url),
        encoding="utf-8",
        timeout=TIMEOUT_S,
        dimensions=(50, 200),
        preexec_fn=default_sigint,
    )
    try:
        child.expect_exact(PROMPT)
        yield child
    finally:
        child.close(force=True)


def ask(chat: pexpect.spawn, question: str) -> str:
    """Send a line; return what was printed before the next prompt, the echo left out."""
    chat.sendline(question)
    chat.expect_exact(PROMPT)
    return chat.before.replace("\r\n", "\n").split(question, 1)[-1].strip()


def test_a_question_gets_an_answer_streamed_piece_by_piece(chat):
    chat.sendline("Write a short poem about the sea.")
    chat.expect_exact("sea.")  # the echo of the question
    pieces: list[str] = []
    while not "".join(pieces).endswith(PROMPT):
        pieces.append(chat.read_nonblocking(4096, timeout=TIMEOUT_S))
    answer = "".join(pieces)[: -len(PROMPT)].strip()
    assert answer, "an answer"
    assert len(pieces) > 2, f"the answer arrived in {len(pieces)} reads; tokens are not streamed"


def test_the_session_keeps_the_conversation_history(chat):
    ask(chat, "/set parameter temperature 0")
    ask(chat, "/set system Always answer in one short sentence.")
    ask(chat, "My name is Zorblax.")
    answer = ask(chat, "Repeat my name exactly.")
    assert "Zorblax" in answer


def test_set_parameter_sets_a_sampling_parameter_for_the_next_answers(chat):
    assert "Set parameter 'temperature' to '0'" in ask(chat, "/set parameter temperature 0")
    assert "temperature" in ask(chat, "/show parameters")
    ask(chat, "/set parameter num_predict 20")
    first = ask(chat, "Tell me about cats.")
    ask(chat, "/clear")
    second = ask(chat, "Tell me about cats.")
    assert first and first == second, "temperature 0 gives the same answer to the same question"


def test_an_unknown_parameter_lists_the_known_ones(chat):
    reply = ask(chat, "/set parameter warmth 3")
    assert "temperature" in reply and "top_k" in reply


def test_a_multi_line_message_goes_between_triple_quotes(chat):
    chat.sendline('"""')
    chat.expect_exact("... ")
    chat.sendline("Say yes")
    chat.expect_exact("... ")
    chat.sendline('in one word."""')
    chat.expect_exact(PROMPT)
    assert chat.before.split('word."""', 1)[-1].strip(), "an answer to the whole message"


def test_show_info_describes_the_model(chat):
    info = ask(chat, "/show info")
    for field in ("architecture", "parameters", "quantization", "context per slot", "device"):
        assert field in info


def test_ctrl_c_stops_the_answer_and_returns_to_the_prompt(chat, daemon_url):
    ask(chat, "/set parameter num_predict 900")
    chat.sendline("Write a very long story about a dragon who learns to bake bread.")
    chat.expect_exact("bread.")
    chat.expect(r"\w+ \w+")  # the answer has begun
    chat.sendintr()
    stopped = time.monotonic()
    chat.expect_exact(PROMPT, timeout=15)
    assert time.monotonic() - stopped < 15
    assert _in_flight(daemon_url) == 0, "the daemon stopped generating the abandoned answer"
    assert ask(chat, "/show system") == "No system message set.", "the chat goes on"


def test_ctrl_c_at_the_prompt_explains_how_to_leave(chat):
    chat.sendintr()
    chat.expect_exact("Use Ctrl + d or /bye to exit.")
    chat.expect_exact(PROMPT)


def test_bye_exits_with_success(chat):
    chat.sendline("/bye")
    chat.expect(pexpect.EOF)
    chat.close()
    assert chat.exitstatus == 0


def test_ctrl_d_exits_with_success(chat):
    chat.sendeof()
    chat.expect(pexpect.EOF)
    chat.close()
    assert chat.exitstatus == 0


def _in_flight(url: str, wait_s: float = 10.0) -> int:
    """smollm2's requests in flight, once the cancellation has had a moment to land."""
    deadline = time.monotonic() + wait_s
    while True:
        models = {m["name"]: m for m in Client(url).ps()}
        count = int(models["smollm2:latest"]["localserve"]["in_flight"])
        if count == 0 or time.monotonic() > deadline:
            return count
        time.sleep(0.2)
