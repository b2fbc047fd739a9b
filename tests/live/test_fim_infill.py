"""llama.cpp's /infill through a live daemon, as llama.vscode and llama.vim call it: the prompt
it builds for a model with FIM tokens (the repo header, the extra files, then the FIM part), its
answer and its stream in llama.cpp's completion shape, the fields it takes and refuses, a client
that leaves mid-fill; and the rules under it without a model: a prompt cut to the window around
the cursor, `n_indent` and `t_max_predict_ms`.

The model with FIM tokens is the copy of SmolLM2 in fim_support.py; the tokens the daemon
should send are computed with llama.cpp's own vocabulary.
"""

from __future__ import annotations

import http.client
import json
import time
from urllib.parse import urlsplit

import requests

from localserve.server.chat.fim import assemble
from localserve.server.llamacpp.infill_rules import LineRules
from tests.support.daemons import resident
from tests.support.fim_support import (  # noqa: F401  (fixtures)
    FIM_MODEL,
    PLAIN_MODEL,
    PREFIX,
    SUFFIX,
    Vocab,
    fim_copy,
    fim_url,
    vocab,
)
from tests.support.live import CLIENT_TIMEOUT_S

# -- llama.cpp's /infill -------------------------------------------------------------------------


def infill_prompt(
    vocab: Vocab,
    prefix: str,
    suffix: str,
    prompt: str = "",
    files: tuple[tuple[str, str], ...] = (),
) -> list[int]:
    """llama.cpp's infill prompt for the copy: the repo header, the files, then the FIM part."""
    pre, suf, mid = vocab.fim
    extra = [vocab.rep, *vocab.tokens("myproject\n")]
    for name, text in files:
        extra += [vocab.sep, *vocab.tokens(name + "\n"), *vocab.tokens(text)]
    extra += [vocab.sep, *vocab.tokens("filename\n")]
    return [
        *vocab.bos,
        *extra,
        pre,
        *vocab.tokens(prefix),
        *vocab.tokens(prompt),
        suf,
        *vocab.tokens(suffix),
        mid,
    ]


def test_infill_answers_in_llama_cpp_completion_shape(fim_url: str, vocab: Vocab) -> None:
    files = (("util.py", "def sub(a, b):\n    return a - b\n"),)
    r = requests.post(
        f"{fim_url}/infill",
        timeout=CLIENT_TIMEOUT_S,
        json={
            "input_prefix": PREFIX,
            "input_suffix": SUFFIX,
            "prompt": "return",
            "input_extra": [{"filename": n, "text": t} for n, t in files],
            "n_predict": 6,
            "temperature": 0,
            "cache_prompt": True,
        },
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["stop"] is True and isinstance(body["content"], str)
    assert body["model"] == FIM_MODEL
    assert body["tokens_evaluated"] == len(infill_prompt(vocab, PREFIX, SUFFIX, "return", files))
    assert 1 <= body["tokens_predicted"] <= 6
    assert body["stop_type"] in ("eos", "limit") and body["truncated"] is False
    assert body["timings"]["predicted_n"] == body["tokens_predicted"]


def test_infill_streams_events_that_end_with_a_stop(fim_url: str) -> None:
    request = {"input_prefix": PREFIX, "input_suffix": SUFFIX, "n_predict": 6, "temperature": 0}
    whole = requests.post(f"{fim_url}/infill", json=request, timeout=CLIENT_TIMEOUT_S).json()
    with requests.post(
        f"{fim_url}/infill", json={**request, "stream": True}, stream=True, timeout=CLIENT_TIMEOUT_S
    ) as r:
        assert r.headers["Content-Type"].startswith("text/event-stream")
        events = [json.loads(line[len(b"data: ") :]) for line in r.iter_lines() if line]
    assert [e["stop"] for e in events] == [False] * (len(events) - 1) + [True]
    assert "".join(e["content"] for e in events) == whole["content"]
    assert events[-1]["tokens_predicted"] == whole["tokens_predicted"]


def test_infill_with_n_predict_zero_only_prefills(fim_url: str) -> None:
    r = requests.post(
        f"{fim_url}/infill",
        timeout=CLIENT_TIMEOUT_S,
        json={"input_prefix": PREFIX, "input_suffix": SUFFIX, "n_predict": 0, "samplers": []},
    )
    body = r.json()
    assert r.status_code == 200 and body["content"] == "" and body["tokens_predicted"] == 0


def test_infill_takes_llama_vscodes_samplers(fim_url: str) -> None:
    r = requests.post(
        f"{fim_url}/infill",
        timeout=CLIENT_TIMEOUT_S,
        json={
            "input_prefix": PREFIX,
            "input_suffix": SUFFIX,
            "n_predict": 4,
            "top_k": 40,
            "top_p": 0.99,
            "samplers": ["top_k", "top_p", "infill"],
            "seed": 1,
            "n_indent": 4,
            "t_max_prompt_ms": 500,
            "t_max_predict_ms": 1000,
        },
    )
    assert r.status_code == 200, r.text


def test_infill_refuses_a_field_it_does_not_honour(fim_url: str) -> None:
    r = requests.post(
        f"{fim_url}/infill",
        timeout=CLIENT_TIMEOUT_S,
        json={"input_prefix": PREFIX, "input_suffix": SUFFIX, "n_probs": 5},
    )
    assert r.status_code == 400 and r.json()["error"]["param"] == "n_probs"


def test_infill_for_a_model_without_fim_tokens_is_a_400(daemon_url: str) -> None:
    r = requests.post(
        f"{daemon_url}/infill",
        timeout=CLIENT_TIMEOUT_S,
        json={"model": PLAIN_MODEL, "input_prefix": PREFIX, "input_suffix": SUFFIX},
    )
    assert r.status_code == 400 and "fill in the middle" in r.json()["error"]["message"]


def test_a_client_leaving_an_infill_stream_frees_its_slot(fim_url: str) -> None:
    """A fill that would run to the end of its context, abandoned after its first event."""
    parts = urlsplit(fim_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=CLIENT_TIMEOUT_S)
    conn.request(
        "POST",
        "/infill",
        json.dumps(
            {
                "input_prefix": PREFIX,
                "input_suffix": SUFFIX,
                "stream": True,
                "ignore_eos": True,
            }
        ),
        {"Content-Type": "application/json"},
    )
    response = conn.getresponse()
    assert response.readline().startswith(b"data: ")
    assert busy(fim_url) == (1, 1)
    conn.close()
    deadline = time.monotonic() + 10
    while busy(fim_url) != (0, 0):
        assert time.monotonic() < deadline, "the abandoned fill still holds its slot"
        time.sleep(0.05)


def busy(url: str) -> tuple[int, int]:
    """The model's sequences running in a slot, and the requests holding it."""
    entry = resident(url)[FIM_MODEL]["localserve"]
    return entry["running"], entry["in_flight"]


# -- the rules, without a model ------------------------------------------------------------------


def test_a_prompt_too_long_for_the_window_keeps_the_code_nearest_the_cursor() -> None:
    prefix, suffix = list(range(100, 200)), list(range(200, 300))
    cut = assemble([1], [9] * 50, (2, 3, 4), prefix, suffix, [], window=80)
    assert cut.truncated and len(cut.tokens) == 40
    assert cut.tokens[:2] == [1, 2] and cut.tokens[-1] == 4, "BOS, PRE first; MID last"
    fill = cut.tokens[2:-1]
    cursor = fill.index(3)
    assert (
        fill[:cursor] == prefix[-(cursor):]
        and fill[cursor + 1 :] == suffix[: len(fill) - cursor - 1]
    )
    whole = assemble([], [], (2, 3, 4), [5], [6], [7], window=80)
    assert whole.tokens == [2, 5, 7, 3, 6, 4] and not whole.truncated


def test_n_indent_cuts_the_first_line_indented_less() -> None:
    rules = LineRules(n_indent=4, t_max_predict_ms=-1)
    assert rules.feed("return a + b\n    x = 1\n", 0.0) == ("return a + b\n    x = 1\n", False)
    assert rules.feed("  ", 0.0) == ("  ", False)
    assert rules.feed("y = 2\n", 0.0) == ("", True)
    assert rules.text == "return a + b\n    x = 1\n  "


def test_t_max_predict_ms_ends_the_fill_at_the_next_newline_once_late() -> None:
    rules = LineRules(n_indent=0, t_max_predict_ms=100)
    assert rules.feed("a\n", 0.05) == ("a\n", False)
    assert rules.feed("b", 0.2) == ("b", False)
    assert rules.feed("\n", 0.2) == ("\n", True)
