"""The sampler chain a GGUF sequence samples with, built from its SamplingParams in the order
llama.cpp's own server builds it."""

from __future__ import annotations

import llama_cpp as ll

from localserve.ground.sampling import SamplingParams


def sampler_chain(
    vocab: ll.llama_vocab_p, n_vocab: int, p: SamplingParams, prompt: list[int]
) -> ll.llama_sampler_p:
    """llama.cpp's sampler chain for one sequence's parameters: logit bias, penalties (fed the
    prompt), then greedy, or top-k, top-p, min-p, infill, temperature and the seeded draw."""
    chain = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
    if p.logit_bias:
        biases = (ll.llama_logit_bias * len(p.logit_bias))(
            *(ll.llama_logit_bias(token, bias) for token, bias in p.logit_bias)
        )
        ll.llama_sampler_chain_add(
            chain, ll.llama_sampler_init_logit_bias(n_vocab, len(biases), biases)
        )
    if p.has_penalties:
        ll.llama_sampler_chain_add(
            chain,
            ll.llama_sampler_init_penalties(
                n_vocab,
                p.penalty_last_n,
                p.repeat_penalty,
                p.frequency_penalty,
                p.presence_penalty,
            ),
        )
        # Penalties look back over the prompt too, as llama.cpp's own server does.
        for token in prompt[-p.penalty_last_n :]:
            ll.llama_sampler_accept(chain, token)
    if p.greedy and not p.infill:
        ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_greedy())
        return chain
    _add_filters(chain, p)
    if p.infill:
        ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_infill(vocab))
        if p.greedy:
            ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_greedy())
            return chain
    ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_temp(p.temperature))
    seed = ll.LLAMA_DEFAULT_SEED if p.seed is None else p.seed & 0xFFFFFFFF
    ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_dist(seed))
    return chain


def candidates_chain(p: SamplingParams) -> ll.llama_sampler_p:
    """The chain of a sequence that may draft while it samples, without its draw: the tokens
    its top-k, top-p and min-p keep, their logits scaled by its temperature. A drafted token is
    judged against these (draft_rule.py)."""
    chain = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
    _add_filters(chain, p)
    ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_temp(p.temperature))
    return chain


def _add_filters(chain: ll.llama_sampler_p, p: SamplingParams) -> None:
    if p.top_k > 0:
        ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_top_k(p.top_k))
    if p.top_p < 1.0:
        ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_top_p(p.top_p, 1))
    if p.min_p_or_default > 0.0:
        ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_min_p(p.min_p_or_default, 1))
