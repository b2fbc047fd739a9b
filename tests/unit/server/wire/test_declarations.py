"""Each wire body is declared once: /openapi.json's schema and the face's validation are the
same declaration (server/wire/), so each bound the document states is the one the face holds."""

from __future__ import annotations

from typing import Any

import pytest

from localserve.ground.errors import BadRequest
from localserve.server.anthropic.request import read_request
from localserve.server.ollama import generate
from localserve.server.openai import completions
from localserve.server.openapi.document import DOCUMENT
from localserve.server.responses import request as responses
from localserve.server.wire import ollama, openai
from localserve.server.wire.bodies import DECLARED
from localserve.server.wire.declare import Body


def _bounded(body: Body) -> list[tuple[str, str, float, float]]:
    """(field, type, minimum, maximum) of each declared field with a numeric range."""
    out = []
    for key, field in body.fields.items():
        kinds = field.schema.get("type")
        kind = next((k for k in (kinds or []) if k in ("integer", "number")), None)
        if kind and "minimum" in field.schema and field.read is not None:
            out.append((key, kind, field.schema["minimum"], field.schema["maximum"]))
    return out


def _cases() -> list[Any]:
    bodies = [*DECLARED, ollama.OPTIONS]
    return [pytest.param(b, *f, id=f"{b.name}.{f[0]}") for b in bodies for f in _bounded(b)]


def test_the_document_shows_each_declared_body_as_its_declaration_says() -> None:
    schemas = DOCUMENT["components"]["schemas"]
    for body in DECLARED:
        assert schemas[body.name] == body.schema()


def test_the_faces_read_their_bodies_with_the_declarations_the_document_shows() -> None:
    assert completions.wire is openai and generate.wire is ollama
    names = {b.name for b in DECLARED}
    assert {openai.CHAT_COMPLETION.name, openai.COMPLETION.name} <= names
    assert {ollama.GENERATE.name, ollama.CHAT.name} <= names


@pytest.mark.parametrize(("body", "key", "kind", "lo", "hi"), _cases())
def test_each_declared_bound_is_the_one_the_face_holds(
    body: Body, key: str, kind: str, lo: float, hi: float
) -> None:
    step = 1 if kind == "integer" else 0.5
    body.fields[key].read({key: lo}, key)
    body.fields[key].read({key: hi}, key)
    for outside in (lo - step, hi + step):
        with pytest.raises(BadRequest) as refused:
            body.fields[key].read({key: outside}, key)
        assert refused.value.param == key


def test_of_two_fields_that_fill_one_parameter_the_first_given_wins() -> None:
    got = openai.COMPLETION.read({"model": "m", "prompt": "p", "max_tokens": 9})
    assert openai.COMPLETION.sampling(got).max_tokens == 9
    got = openai.COMPLETION.read(
        {"model": "m", "prompt": "p", "max_tokens": 9, "max_completion_tokens": 3}
    )
    assert openai.COMPLETION.sampling(got).max_tokens == 3


def test_ollama_options_read_in_our_terms() -> None:
    got = ollama.OPTIONS.read({"num_predict": -2, "seed": -1, "top_p": 0.5})
    params = ollama.OPTIONS.sampling(got)
    assert (params.max_tokens, params.seed, params.top_p, params.repeat_penalty) == (
        None,
        None,
        0.5,
        1.1,
    )


@pytest.mark.parametrize("body", [b for b in DECLARED if b.closed], ids=lambda b: b.name)
def test_a_closed_body_takes_every_field_its_document_lists_and_refuses_others(
    body: Body,
) -> None:
    minimal = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "input": "hi",
        "max_tokens": 5,
    }
    minimal = {k: v for k, v in minimal.items() if k in body.fields}
    for key in DOCUMENT["components"]["schemas"][body.name]["properties"]:
        body.read({key: None, **minimal})
    with pytest.raises(BadRequest, match="'unheard_of' is not supported here"):
        body.read({**minimal, "unheard_of": 1})


def test_anthropic_messages_take_speculative_and_priority_as_the_document_says() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
    req = read_request({**body, "speculative": 2, "priority": "background"})
    assert req.ask.params.draft_tokens == 2


def test_every_request_body_in_the_document_is_a_declaration() -> None:
    requests = {n for n in DOCUMENT["components"]["schemas"] if n.endswith("Request")}
    assert requests == {b.name for b in DECLARED}


def test_a_compaction_asked_to_stream_is_refused_naming_stream() -> None:
    body = {"model": "m", "input": "hi", "stream": True}
    with pytest.raises(BadRequest) as refused:
        responses.COMPACT.read(body)
    assert refused.value.param == "stream"
    assert responses.COMPACT.read({**body, "stream": False})["stream"] is False
