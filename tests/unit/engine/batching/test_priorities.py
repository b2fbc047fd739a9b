"""Priority classes in the batcher, specified with a fake backend (pure logic: no kernels)."""

from __future__ import annotations

import pytest

from localserve.engine.batching.embedding import EmbeddingJob
from localserve.engine.batching.priorities import BACKGROUND_PREFILL_TOKENS, guaranteed_slots
from localserve.engine.batching.scheduler import Scheduler
from localserve.engine.batching.sequence import Sequence
from localserve.ground.errors import QueueFull
from localserve.ground.sampling import Grammar, SamplingParams
from tests.support.fakes import TOKEN, FakeBackend

INTERACTIVE = SamplingParams(temperature=0)
BACKGROUND = SamplingParams(temperature=0, background=True)


def seq(params: SamplingParams, n_prompt: int = 4, max_new: int = 50) -> Sequence:
    return Sequence(list(range(1, n_prompt + 1)), params, max_new)


def busy_with_background(n_slots: int, share: float = 0.25) -> tuple[Scheduler, list[Sequence]]:
    sched = Scheduler(FakeBackend(n_slots=n_slots, n_ctx=256), background_share=share)
    flood = [seq(BACKGROUND) for _ in range(n_slots)]
    for s in flood:
        sched.submit(s)
    sched.step()
    sched.step()
    return sched, flood


def test_a_free_slot_goes_to_an_interactive_request_before_older_background_ones() -> None:
    sched = Scheduler(FakeBackend(n_slots=1, n_ctx=256), background_share=0)
    first, later_background, interactive = (
        seq(BACKGROUND, max_new=1),
        seq(BACKGROUND),
        seq(INTERACTIVE),
    )
    for s in (first, later_background, interactive):
        sched.submit(s)
    sched.step()  # `first` runs its one token and frees the slot
    sched.step()
    assert [s.params.background for s in sched.running] == [False]


def test_an_interactive_request_preempts_a_background_sequence_at_the_next_step() -> None:
    sched, flood = busy_with_background(4)
    interactive = seq(INTERACTIVE)
    sched.submit(interactive)
    sched.step()
    assert interactive.slot is not None and interactive.generated == [TOKEN]
    assert sched.preemptions == 1
    assert sum(s.slot is None for s in flood) == 1


def test_background_work_keeps_its_guaranteed_share_of_slots() -> None:
    sched, flood = busy_with_background(4, share=0.5)
    for _ in range(4):
        sched.submit(seq(INTERACTIVE))
    sched.step()
    assert sum(s.slot is not None for s in flood) == 2
    assert sched.preemptions == 2


def test_a_preempted_sequence_resumes_from_its_cells_without_losing_a_token() -> None:
    sched, flood = busy_with_background(1, share=0)
    victim = flood[0]
    before = list(victim.generated)
    interactive = seq(INTERACTIVE, max_new=2)
    sched.submit(interactive)
    sched.step()
    sched.step()  # the interactive request ends and gives the slot back
    sched.step()  # the victim resumes: its context is its prompt and what it generated
    assert victim.slot is not None
    assert victim.context == victim.prompt + before
    assert victim.generated[: len(before)] == before
    resumed = sched.backend.plans[-1].chunks[0]
    assert (
        resumed.tokens == [before[-1]] and resumed.start_pos == len(victim.prompt) + len(before) - 1
    )
    sched.step()
    assert victim.position == len(victim.prompt) + len(victim.generated) - 1


def test_a_sequence_with_a_grammar_is_never_preempted() -> None:
    sched = Scheduler(FakeBackend(n_slots=1, n_ctx=256), background_share=0)
    constrained = seq(
        SamplingParams(
            temperature=0, background=True, grammar=Grammar("lark", "start: /x+/", "tools")
        )
    )
    sched.submit(constrained)
    sched.step()
    sched.submit(seq(INTERACTIVE))
    sched.step()
    assert constrained.slot is not None and sched.preemptions == 0


def test_a_background_flood_does_not_fill_the_queue_for_interactive_requests() -> None:
    sched = Scheduler(FakeBackend(n_slots=1, n_ctx=256), max_waiting=2)
    for _ in range(2):
        sched.submit(seq(BACKGROUND))
    with pytest.raises(QueueFull):
        sched.submit(seq(BACKGROUND))
    sched.submit(seq(INTERACTIVE))


@pytest.mark.parametrize(
    ("share", "slots", "kept"), [(0.25, 4, 1), (0.5, 4, 2), (0.25, 1, 0), (0, 8, 0)]
)
def test_the_guaranteed_share_is_rounded_down_to_whole_slots(share, slots, kept) -> None:
    assert guaranteed_slots(share, slots) == kept


def test_background_prompts_wait_while_an_interactive_prompt_prefills() -> None:
    sched = Scheduler(FakeBackend(n_slots=2, n_ctx=256))
    background, interactive = seq(BACKGROUND, n_prompt=20), seq(INTERACTIVE, n_prompt=20)
    sched.submit(background)
    sched.submit(interactive)
    sched.step()
    assert [c.slot for c in sched.backend.plans[-1].chunks] == [interactive.slot]
    sched.step()
    assert background.slot in [c.slot for c in sched.backend.plans[-1].chunks]


def test_a_background_prompt_prefills_in_small_chunks_while_others_decode() -> None:
    sched = Scheduler(FakeBackend(n_slots=2, n_ctx=256))
    sched.submit(seq(INTERACTIVE))
    sched.step()
    background = seq(BACKGROUND, n_prompt=40)
    sched.submit(background)
    sched.step()
    chunk = next(c for c in sched.backend.plans[-1].chunks if c.slot == background.slot)
    assert len(chunk.tokens) == BACKGROUND_PREFILL_TOKENS


def test_background_embeddings_take_no_turn_while_an_interactive_answer_runs() -> None:
    sched = Scheduler(FakeBackend(n_slots=2, n_ctx=256))
    sched.submit(seq(INTERACTIVE, max_new=3))
    sched.submit_embedding(EmbeddingJob([[1, 2, 3]], background=True))
    kinds = []
    for _ in range(4):
        sched.step()
        kinds.append(sched.backend.calls[-1][0])
    assert kinds == ["generate", "generate", "generate", "embed"]


def test_background_sequences_sit_out_the_step_in_which_an_interactive_prompt_prefills() -> None:
    sched, flood = busy_with_background(2, share=0.5)
    interactive = seq(INTERACTIVE)
    sched.submit(interactive)
    sched.step()  # preempts one; the interactive prompt prefills alone
    assert [c.slot for c in sched.backend.plans[-1].chunks] == [interactive.slot]
    sched.step()
    assert len(sched.backend.plans[-1].chunks) == 2  # the one left decodes again, beside it
