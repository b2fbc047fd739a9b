"""Chat prompts from the model's own `tokenizer.chat_template`, rendered in a sandbox, where
the rest of a chat's prompt is written (server/chat/plan.py).

A GGUF's template is untrusted input: llama-cpp-python's CVE-2024-34359 was a template that
escaped an unsandboxed Jinja2 environment. Ours renders in an immutable sandbox.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any
from weakref import WeakKeyDictionary

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from localserve.engine.worker_client.resident import ResidentModel
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


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _tojson(value: Any, indent: int | None = None, **_: Any) -> str:
    # Hugging Face templates expect non-ASCII text kept as is.
    return json.dumps(value, ensure_ascii=False, indent=indent)


class ChatTemplate:
    """Renders a message list into the prompt text the model was tuned on."""

    def __init__(
        self, source: str | None, bos_text: str, eos_text: str, architecture: str = ""
    ) -> None:
        self.is_fallback = not source
        if not source:
            source = fallback_template(architecture)
            kind = "Gemma" if source is GEMMA_TEMPLATE else "ChatML"
            log.info("model has no chat template; using the %s fallback", kind)
        env = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
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
            return self._template.render(
                messages=messages,
                add_generation_prompt=add_generation_prompt,
                bos_token=self._bos,
                eos_token=self._eos,
                **variables,
            )
        except TemplateError as exc:
            raise BadRequest(
                f"the model's chat template rejected the messages: {exc}", "messages"
            ) from exc


# Each loaded model's template, compiled at its first chat: a large template takes milliseconds
# to compile, and Ollama's chat renders again for each turn it drops. Weak keys: an unloaded
# model's goes with it.
_COMPILED: WeakKeyDictionary[ResidentModel, ChatTemplate] = WeakKeyDictionary()


def template_for(model: ResidentModel) -> ChatTemplate:
    """The model's own chat template, or the fallback for its architecture. One that does not
    compile refuses each chat with BadRequest; the model still loads, for what needs no
    template (completions, embeddings)."""
    template = _COMPILED.get(model)
    if template is None:
        info = model.info
        try:
            template = ChatTemplate(
                info.chat_template, info.bos_text, info.eos_text, info.architecture
            )
        except TemplateError as exc:
            raise BadRequest(
                f"the chat template of '{model.name}' does not compile: {exc}", "model"
            ) from exc
        _COMPILED[model] = template
    return template
