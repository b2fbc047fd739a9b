"""Per-request sampling parameters, validated once at the edge of the engine."""

from __future__ import annotations

from dataclasses import dataclass, field

# Compact JSON, with the spaces models write after ',' and ':': free whitespace would let a
# small model pad an answer with newlines until max_tokens. llguidance's JSON options.
JSON_STYLE = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
# min-p where a request names none: llama.cpp server's default. It is the server's choice, not
# the client's: a sampler without min-p (onnxruntime-genai's Engine) samples without it, where
# a min_p the client named is refused.
DEFAULT_MIN_P = 0.05


@dataclass(frozen=True)
class Grammar:
    """What a constrained answer must match; the worker compiles it (backends/guides.py).

    `kind` is "json_schema" (`text` is the schema as JSON: structured output) or "lark"
    (llguidance's Lark: tool calls); `field` is the request field an error about it names.
    A `strict` schema (response_format's `strict: true`) is refused where a keyword cannot be
    enforced; any other is compiled leniently, the keyword left unenforced and reported.
    `dropped` says what the grammar's writer left out itself (a text parameter's `pattern`).
    """

    kind: str
    text: str
    field: str
    strict: bool = False
    dropped: tuple[str, ...] = ()


@dataclass(frozen=True)
class SamplingParams:
    """What a request asks of the sampler and of the stopping rules.

    The backend turns this into its native sampler chain; temperature 0 means greedy.
    """

    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    min_p: float | None = None  # None: DEFAULT_MIN_P, where the sampler has min-p
    repeat_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    penalty_last_n: int = 64
    seed: int | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] = field(default_factory=tuple)
    ignore_eos: bool = False
    # llama.cpp's infill sampler after top-k/top-p/min-p (its /infill's "samplers" ask for it):
    # it ends a fill where ending is likelier than any text, and merges tokens sharing a prefix.
    infill: bool = False
    # Structured output and tool calls: the answer is one this grammar accepts.
    grammar: Grammar | None = None
    # OpenAI's logit_bias: (token id, bias added to its logit), ids checked against the vocabulary.
    logit_bias: tuple[tuple[int, float], ...] = ()
    # Draft tokens a step may verify for it (engine/batching/drafts.py); None: --speculative.
    draft_tokens: int | None = None
    # Its priority class: background work (batches, or a request that asks with `priority` or
    # X-Priority) yields its slots to interactive work (engine/batching/priorities.py).
    background: bool = False

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0

    @property
    def min_p_or_default(self) -> float:
        return DEFAULT_MIN_P if self.min_p is None else self.min_p

    @property
    def has_penalties(self) -> bool:
        return (
            self.repeat_penalty != 1.0
            or self.presence_penalty != 0.0
            or self.frequency_penalty != 0.0
        )

    @property
    def can_draft(self) -> bool:
        """A plain sequence drafts: no penalties, biases, grammar or infill sampler, whose state
        or choice a verify would have to replay. A greedy one's drafts are checked against its
        argmax, a sampled one's by speculative sampling's rule (backends/draft_rule.py). A seeded
        sampled one does not: whether a step drafts depends on measured step times, and a seed
        promises the same answer each time."""
        return (
            (self.greedy or self.seed is None)
            and not self.has_penalties
            and not self.infill
            and not self.logit_bias
            and self.grammar is None
        )

    def answer_cap(self, prompt_len: int, window: int) -> int:
        """The answer's cap: the request's (or the settings') max_tokens, never past the room
        the prompt leaves in `window`. A cap larger than the room is an upper bound, not a
        refusal: the answer ends "length", as llama.cpp's server, Ollama and LM Studio do."""
        room = window - prompt_len
        return max(1, room if self.max_tokens is None else min(self.max_tokens, room))
