"""Priority classes: interactive requests (chat, the CLI, the tray, FIM: the default) go before
background ones (batches, and requests that ask with `priority` or X-Priority).

A free slot goes to the oldest interactive request first, unless a returning conversation
waits whose cells are at hand (quick_first). When one waits and every slot is busy,
background sequences beyond their guaranteed share are preempted at the step boundary: their
cells stay in the slot, then go to the prompt cache when the slot is reused, and the sequence
resumes from there without losing a token (Sequence.preempt). The share (--background-share)
keeps background work progressing under a steady interactive load. Ollama, LM Studio and
llama.cpp's server serve first come, first served: a script's 500 prompts hold the editor's
completion behind them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from localserve.engine.batching.admission import AdmissionQueue
from localserve.engine.batching.sequence import Sequence
from localserve.engine.batching.slots import Slots


class Batch(Protocol):
    """What these rules read of a scheduler."""

    running: list[Sequence]
    waiting: AdmissionQueue[Sequence]
    guaranteed: int
    slots: Slots


# Prompt tokens a background sequence may prefill in a step while others decode: an interactive
# request that arrives mid-step waits for that step to end, and a 44-token background chunk
# made it ~0.1 s longer on 2 cores (bench_priority.py).
BACKGROUND_PREFILL_TOKENS = 16
# A request whose prompt needs at most this many tokens prefilled (the next turn of a chat whose
# cells a slot or the prompt cache holds) gets its first token in one step beside running
# streams (scheduler.PREFILL_TOKENS_WHILE_DECODING), where a new long prompt takes many.
QUICK_PREFILL_TOKENS = 128
# How often a request may be passed over for quick ones before it goes first anyway.
MAX_PASSED_OVER = 8
# How many of the oldest waiting requests are looked at for a quick one.
QUICK_SCAN = 16


def prefill_cap(seq: Sequence, budget: int, decoding: int) -> int:
    """The prompt tokens `seq` may prefill in this step."""
    if seq.params.background and decoding:
        return min(budget, BACKGROUND_PREFILL_TOKENS)
    return budget


def decoders(running: list[Sequence]) -> list[Sequence]:
    """The sequences that decode a token in this step. Background ones sit out a step in which
    an interactive prompt prefills: llama.cpp splits a step holding one token of some
    sequences and many of another into micro-batches of equal counts, so their tokens cost a
    whole extra pass over the weights before that prompt's first token."""
    done = [s for s in running if s.prefill_done]
    if any(not s.prefill_done and not s.params.background for s in running):
        return [s for s in done if not s.params.background]
    return done


def is_background(seq: Sequence) -> bool:
    return seq.params.background


def guaranteed_slots(share: float, n_slots: int) -> int:
    """The slots background work keeps while interactive work waits: the share, rounded down
    (with one slot, interactive work may take it, and background work resumes after)."""
    return int(share * n_slots)


def next_class(
    interactive_waiting: int, background_waiting: int, background_running: int, guaranteed: int
) -> bool | None:
    """Which class a free slot goes to: True for background, False for interactive, None when
    nothing waits."""
    if background_waiting and background_running < guaranteed:
        return True
    if interactive_waiting:
        return False
    return True if background_waiting else None


def next_waiting(batch: Batch) -> Sequence | None:
    """The waiting sequence a free slot goes to, out of the queue; None when none waits."""
    background = next_class(
        batch.waiting.count(background=False),
        batch.waiting.count(background=True),
        sum(s.params.background for s in batch.running),
        batch.guaranteed,
    )
    if background is None:
        return None
    if background:
        return batch.waiting.take(True)  # preempted sequences wait at the head: they go first
    return batch.waiting.take(False, quick_first(lambda p: batch.slots.at_hand(p, batch.running)))


def quick_first(at_hand: Callable[[list[int]], int]) -> Callable[[list[Sequence]], Sequence]:
    """Shortest job first, bounded: of the waiting requests (oldest first), the oldest that
    needs little prefill, unless an older one was passed over MAX_PASSED_OVER times already.

    With more conversations than slots, a returning one otherwise waits behind every new long
    prompt queued before it, although its own prefill is a step's work; first come, first
    served (Ollama, llama.cpp's server) makes its wait the sum of theirs. `at_hand` is how many
    leading tokens of a prompt need no prefill.
    """

    def quick(seq: Sequence) -> bool:
        # Once per request: comparing every waiting prompt with every slot and cache entry at
        # every admission took up to 0.3 s with 64 waiting prompts sharing a long prefix.
        if seq.quick is None:
            seq.quick = len(seq.context) - at_hand(seq.context) <= QUICK_PREFILL_TOKENS
        return seq.quick

    def first(waiting: list[Sequence]) -> Sequence:
        if waiting[0].passed_over >= MAX_PASSED_OVER:
            return waiting[0]
        chosen = next((s for s in waiting[:QUICK_SCAN] if quick(s)), waiting[0])
        for seq in waiting:
            if seq is chosen:
                break
            seq.passed_over += 1
        return chosen

    return first


def interactive(running: list[Sequence], waiting: AdmissionQueue[Sequence]) -> bool:
    """Whether interactive generations run or wait (background embeddings then yield)."""
    return any(not s.params.background for s in running) or bool(waiting.count(background=False))


def victims(
    running: list[Sequence], interactive_waiting: int, free_slots: int, guaranteed: int
) -> list[Sequence]:
    """The background sequences to preempt so that the waiting interactive ones start now.

    The cheapest to resume go first: those holding the fewest cells. A sequence with a grammar
    is never preempted: its grammar's state would have to be replayed over what it generated.
    """
    wanted = interactive_waiting - free_slots
    background = [s for s in running if s.params.background]
    room = len(background) - guaranteed
    if wanted <= 0 or room <= 0:
        return []
    movable = [s for s in background if s.params.grammar is None]
    movable.sort(key=lambda s: s.n_prefilled + len(s.generated))
    return movable[: min(wanted, room)]
