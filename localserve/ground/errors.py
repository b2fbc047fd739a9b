"""Typed engine errors. Each API face maps them to its own wire format in one place."""

from __future__ import annotations


class EngineError(Exception):
    """Base of every error the engine raises on purpose."""


class BadRequest(EngineError):
    """The request itself is wrong: a bad parameter, a bad message list."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class ModelNotFound(EngineError):
    """No model of that name is loaded or known."""

    def __init__(self, name: str, hint: str = "") -> None:
        super().__init__(f"model '{name}' not found" + (f"; {hint}" if hint else ""))
        self.name = name


class ContextOverflow(BadRequest):
    """The prompt does not fit a slot's context window."""

    def __init__(
        self, prompt_tokens: int, context: int, param: str = "prompt", at_least: bool = False
    ) -> None:
        # `at_least`: a count known without tokenizing (ground/token_floor.py), a lower bound.
        count = f"at least {prompt_tokens}" if at_least else str(prompt_tokens)
        super().__init__(
            f"the prompt has {count} tokens, but this model's context per slot is "
            f"{context} tokens; shorten the prompt or start the server with a larger --ctx",
            param=param,
        )
        self.prompt_tokens = prompt_tokens
        self.context = context


class QueueFull(EngineError):
    """The waiting queue is at its bound; the client should retry later."""

    def __init__(self, model: str, limit: int) -> None:
        super().__init__(
            f"model '{model}' is busy: {limit} requests are already waiting for a slot; retry later"
        )


class DoesNotFit(EngineError):
    """A model cannot be loaded within the memory budget, even with every other model gone."""


class ModelBusy(EngineError):
    """A model could not be made resident in time: the models in its way stayed busy."""


class LoadFailed(EngineError):
    """A model file could not be loaded."""


class EngineStopped(EngineError):
    """A device's engine worker died (a native fault, the OOM killer): what ran on it is gone."""

    def __init__(self, device: str, cause: str) -> None:
        super().__init__(f"the {device} engine stopped: {cause}")
        self.device = device
        self.cause = cause


class UpstreamUnavailable(EngineError):
    """An upstream server (server/upstream/) that cannot answer now: refused, timed out, cut
    off, or its breaker open. A 503 that names it, in each face's shape."""

    def __init__(self, name: str, url: str, why: str) -> None:
        super().__init__(f"upstream '{name}' ({url}) is unavailable: {why}")
        self.upstream = name
