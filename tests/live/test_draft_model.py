"""Draft-model speculation on the real model, without a daemon: SmolLM2 drafts for itself (the
only pair of models here sharing a vocabulary), through the verify path prompt lookup's drafts
take. A greedy answer is the plain one up to the kernels' near-ties (tests/live/
test_speculative.py says why), and nearly every draft holds, since the draft is the model."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from localserve.backends.llama_cpp import LlamaCppBackend, LlamaCppOptions
from localserve.engine.batching.draft_model import DraftModel
from localserve.engine.batching.scheduler import Scheduler
from localserve.engine.batching.sequence import Sequence
from localserve.formats.chat_template import ChatTemplate
from localserve.ground.errors import LoadFailed
from localserve.ground.sampling import SamplingParams
from localserve.ground.step import StepPlan
from localserve.store.resolve import resolve
from tests.support import in_process
from tests.support.residency_support import gemma_file
from tests.support.speculative_support import (
    ANSWER_TOKENS,
    DRAFTS,
    EDIT,
    NEAR_TIE,
    Run,
    answer,
    drops_said,
    lead_drops,
    plain_with_margins,
    prompt_of,
)

pytestmark = pytest.mark.kernels


def options(**more: object) -> LlamaCppOptions:
    return in_process.options(n_slots=2, n_ctx_slot=512, **more)


@pytest.fixture(scope="module")
def backend() -> Iterator[LlamaCppBackend]:
    path = resolve("smollm2").path
    b = LlamaCppBackend("smollm2", path, options(draft_path=path))
    yield b
    b.close()


class Counted:
    """The draft's backend, recording where each chunk it ran started and its length."""

    def __init__(self, draft: LlamaCppBackend) -> None:
        self.draft = draft
        self.chunks: list[tuple[int, int]] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.draft, name)

    def step(self, plan: StepPlan) -> list[int]:
        self.chunks += [(c.start_pos, len(c.tokens)) for c in plan.chunks]
        return self.draft.step(plan)

    def ran_before(self, position: int) -> int:
        """Tokens run at positions before `position`: the catching up."""
        return sum(min(n, position - start) for start, n in self.chunks if start < position)


def scheduler(backend: LlamaCppBackend) -> tuple[Scheduler, Counted]:
    assert backend.draft is not None
    counted = Counted(backend.draft)
    s = Scheduler(backend, draft_tokens=DRAFTS, draft_model=DraftModel(counted, 512))  # type: ignore[arg-type]
    # On 2 cores a draft as large as its model never pays, so the cost model would run none;
    # the answers compared here must have been drafted.
    s.drafting.step_cost.record = lambda tokens, seconds: None  # type: ignore[method-assign]
    s.drafting.size_ratio = 0.0
    return s, counted


def test_a_model_drafting_for_itself_keeps_nearly_every_draft_and_the_plain_answer(
    backend: LlamaCppBackend,
) -> None:
    prompt = prompt_of(backend, EDIT)
    plain, margins = plain_with_margins(backend, prompt)
    assert_near_tie_bounds(backend, [(prompt, plain, margins)])
    s, _ = scheduler(backend)
    drafted = answer(s, prompt, DRAFTS)
    assert s.drafting.drafted > 0 and s.drafting.accepted >= 0.8 * s.drafting.drafted
    assert_plain_up_to_a_near_tie(drafted, plain, margins)


def test_the_draft_prefills_a_returning_conversation_only_past_what_it_holds(
    backend: LlamaCppBackend,
) -> None:
    s, counted = scheduler(backend)
    prompt = prompt_of(backend, EDIT)
    first = answer(s, prompt, DRAFTS)
    assert counted.ran_before(len(prompt)) == len(prompt), "the draft ran the whole prompt"
    counted.chunks.clear()
    said = b"".join(backend.token_piece(t) for t in first).decode(errors="replace")
    returning = chat(backend, [EDIT, said, "Now rename it back."])
    answer(s, returning, DRAFTS)
    caught_up = counted.ran_before(len(returning))
    assert caught_up <= len(returning) - len(prompt), (len(returning), caught_up)


def chat(backend: LlamaCppBackend, turns: list[str]) -> list[int]:
    """The prompt of a conversation whose turns alternate between the user and the model."""
    info = backend.info
    template = ChatTemplate(info.chat_template, info.bos_text, info.eos_text, info.architecture)
    roles = ["user", "assistant"] * len(turns)
    messages = [{"role": role, "content": text} for role, text in zip(roles, turns)]
    return backend.tokenize(template.render(messages, add_generation_prompt=True), False)


def test_a_sampled_answer_drafts_with_the_draft_model_and_keeps_some(
    backend: LlamaCppBackend,
) -> None:
    s, _ = scheduler(backend)
    seq = Sequence(prompt_of(backend, EDIT), SamplingParams(temperature=0.3), ANSWER_TOKENS)
    s.submit(seq)
    while seq.finish_reason is None:
        s.step()
    assert s.drafting.drafted > 0 and 0 < s.drafting.accepted <= s.drafting.drafted


def test_two_sequences_draft_together_and_each_keeps_its_own_answer(
    backend: LlamaCppBackend,
) -> None:
    prompts = [prompt_of(backend, EDIT), prompt_of(backend, EDIT.replace("count", "total"))]
    alone = [plain_with_margins(backend, p) for p in prompts]
    assert_near_tie_bounds(backend, [(p, *plain) for p, plain in zip(prompts, alone)])
    s, _ = scheduler(backend)
    seqs = [Sequence(p, SamplingParams(temperature=0), ANSWER_TOKENS) for p in prompts]
    for seq in seqs:
        s.submit(seq)
    while any(seq.finish_reason is None for seq in seqs):
        s.step()
    assert s.drafting.drafted > 0
    for seq, (plain, margins) in zip(seqs, alone):
        assert_plain_up_to_a_near_tie(seq.generated, plain, margins)


def assert_near_tie_bounds(backend: LlamaCppBackend, runs: list[Run]) -> None:
    """NEAR_TIE is more than a verify lowers a token's lead here (measured, and printed)."""
    drops = lead_drops(backend, runs)
    print(drops_said(f"{backend.info.name}, {len(runs)} sequence(s)", drops))
    assert max(drops) < NEAR_TIE, drops_said(backend.info.name, drops)


def assert_plain_up_to_a_near_tie(
    drafted: list[int], plain: list[int], margins: list[float]
) -> None:
    apart = next((i for i, (a, b) in enumerate(zip(plain, drafted)) if a != b), None)
    if apart is None:
        assert drafted == plain
    else:
        assert margins[apart] < NEAR_TIE, f"token {apart} left the plain answer by {margins[apart]}"


def test_a_draft_model_of_another_vocabulary_is_refused_naming_why() -> None:
    with pytest.raises(LoadFailed, match="cannot draft for 'smollm2'.*vocabulary"):
        LlamaCppBackend("smollm2", resolve("smollm2").path, options(draft_path=gemma_file()))
