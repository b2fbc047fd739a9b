"""Chat templates come from untrusted GGUF files: they render in a sandbox. Each model's is
compiled once, at its first chat."""

from dataclasses import dataclass
from typing import cast

import pytest

from localserve.engine.worker_client.resident import ResidentModel
from localserve.formats.chat_template import ChatTemplate
from localserve.ground.errors import BadRequest
from localserve.server.chat.template import template_for

# The shape of CVE-2024-34359: a template that walks Python internals to reach os.popen.
ESCAPE = "{{ ''.__class__.__mro__[1].__subclasses__() }}"


def test_template_renders_messages_and_generation_prompt() -> None:
    t = ChatTemplate(None, "", "")
    text = t.render([{"role": "user", "content": "hi"}])
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_model_without_template_falls_back_to_chatml() -> None:
    assert ChatTemplate(None, "", "").is_fallback


def test_template_cannot_reach_python_internals() -> None:
    with pytest.raises(BadRequest, match="unsafe"):
        ChatTemplate(ESCAPE, "", "").render([{"role": "user", "content": "x"}])


def test_template_raise_exception_becomes_a_bad_request() -> None:
    t = ChatTemplate("{{ raise_exception('roles must alternate') }}", "", "")
    with pytest.raises(BadRequest, match="roles must alternate"):
        t.render([{"role": "user", "content": "x"}])


@dataclass(eq=False)
class Info:
    chat_template: str | None
    bos_text: str = ""
    eos_text: str = ""
    architecture: str = "llama"


@dataclass(eq=False)
class Model:
    """What template_for reads of a ResidentModel."""

    info: Info
    name: str = "m"


def test_each_model_compiles_its_template_once() -> None:
    a, b = Model(Info(None)), Model(Info("{{ messages[0]['content'] }}"))
    first = template_for(cast(ResidentModel, a))
    assert template_for(cast(ResidentModel, a)) is first and first.is_fallback
    assert template_for(cast(ResidentModel, b)).render([{"role": "user", "content": "x"}]) == "x"


def test_a_template_that_does_not_compile_refuses_the_chat_not_the_load() -> None:
    broken = cast(ResidentModel, Model(Info("{% if %}"), "broken"))
    with pytest.raises(BadRequest, match="chat template of 'broken' does not compile") as caught:
        template_for(broken)
    assert caught.value.param == "model"
