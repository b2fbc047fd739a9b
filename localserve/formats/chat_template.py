"""Chat prompts from a model's own `tokenizer.chat_template`, rendered in a sandbox.

A GGUF's template is untrusted input: llama-cpp-python's CVE-2024-34359 was a template that
escaped an unsandboxed Jinja2 environment. Ours renders in a sandbox that lets a template
append to a list it built (Kimi K2's templates collect call ids so) and change nothing else.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

from jinja2 import TemplateError, nodes
from jinja2.ext import Extension
from jinja2.parser import Parser
from jinja2.sandbox import SandboxedEnvironment, modifies_known_mutable

from localserve.ground.errors import BadRequest

log = logging.getLogger(__name__)

# Used when a model carries no template: ChatML is what most small instruct models were
# tuned on, and its markers are plain text to a model that does not know them. Gemma's own
# turn markers are in every Gemma vocabulary, so a Gemma without a template gets those.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
GEMMA_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else 'user' %}"
    "{{ '<start_of_turn>' + role + '\\n' + message['content'] + '<end_of_turn>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)


def fallback_template(architecture: str) -> str:
    return GEMMA_TEMPLATE if architecture.startswith("gemma") else CHATML_TEMPLATE


class _Generation(Extension):
    """Hugging Face's `{% generation %}` block, which marks the assistant's text for training
    masks: here it renders its body as it is."""

    tags = {"generation"}

    def parse(self, parser: Parser) -> list[nodes.Node]:
        next(parser.stream)
        return list(parser.parse_statements(("name:endgeneration",), drop_needle=True))


class _Sandbox(SandboxedEnvironment):
    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if not super().is_safe_attribute(obj, attr, value):
            return False
        return (isinstance(obj, list) and attr == "append") or not modifies_known_mutable(obj, attr)


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _tojson(value: Any, indent: int | None = None, **_: Any) -> str:
    # Hugging Face templates expect non-ASCII text kept as is.
    return json.dumps(value, ensure_ascii=False, indent=indent)


class ChatTemplate:
    """Renders a message list into the prompt text the model was tuned on. Raises
    TemplateError for a source that does not compile."""

    def __init__(
        self, source: str | None, bos_text: str, eos_text: str, architecture: str = ""
    ) -> None:
        self.is_fallback = not source
        if not source:
            source = fallback_template(architecture)
            kind = "Gemma" if source is GEMMA_TEMPLATE else "ChatML"
            log.info("model has no chat template; using the %s fallback", kind)
        self.source = source
        env = _Sandbox(
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=["jinja2.ext.loopcontrols", _Generation],
        )
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
        self._template = env.from_string(source)
        self._bos = bos_text
        self._eos = eos_text

    def render(
        self,
        messages: list[dict[str, Any]],
        add_generation_prompt: bool = True,
        **variables: Any,
    ) -> str:
        """`variables` are the other names Hugging Face templates read: `tools` (a list of
        {"type": "function", "function": {...}}), `enable_thinking`."""
        try:
            return self.render_raw(messages, add_generation_prompt, **variables)
        except TemplateError as exc:
            raise BadRequest(
                f"the model's chat template rejected the messages: {exc}", "messages"
            ) from exc

    def render_raw(
        self, messages: list[dict[str, Any]], add_generation_prompt: bool, **variables: Any
    ) -> str:
        """`render`, its TemplateError (and any error the template's code raised) left as is."""
        return self._template.render(
            messages=messages,
            add_generation_prompt=add_generation_prompt,
            bos_token=self._bos,
            eos_token=self._eos,
            **variables,
        )
