"""Each loaded model's chat template (formats/chat_template.py), compiled once, for
server/chat/plan.py to render a chat's prompt with: in a thread of the default pool, so two
chats may ask at once, and the lock makes it one compile."""

from __future__ import annotations

import threading
from weakref import WeakKeyDictionary

from jinja2 import TemplateError

from localserve.engine.worker_client.resident import ResidentModel
from localserve.formats.chat_template import ChatTemplate
from localserve.ground.errors import BadRequest

# Each loaded model's template, compiled at its first chat: a large template takes milliseconds
# to compile, and Ollama's chat renders again for each turn it drops. Weak keys: an unloaded
# model's goes with it.
_COMPILED: WeakKeyDictionary[ResidentModel, ChatTemplate] = WeakKeyDictionary()
_LOCK = threading.Lock()


def template_for(model: ResidentModel) -> ChatTemplate:
    """The model's own chat template, or the fallback for its architecture. One that does not
    compile refuses each chat with BadRequest; the model still loads, for what needs no
    template (completions, embeddings)."""
    with _LOCK:
        return _compiled(model)


def _compiled(model: ResidentModel) -> ChatTemplate:
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
