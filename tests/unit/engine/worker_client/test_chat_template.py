"""Chat templates come from untrusted GGUF files: they render in a sandbox."""

import pytest

from localserve.engine.worker_client.chat_template import ChatTemplate
from localserve.ground.errors import BadRequest

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
