"""The KV cache always equals a fresh encoding of the kept tokens; verifiers
accept exactly what their rule allows."""

import math
import random

import numpy as np
import pytest
import torch

from predgen_ros.engine.config import VerifierRule
from predgen_ros.engine.lm import KVState
from predgen_ros.engine.verify import accepted_length, copied_positions, reply_ngrams, verify_candidate

BACKENDS = ["tiny_lm", "llama_lm"]


def assert_cache_matches(state):
    """The cache holds what a fresh encoding of its tokens holds: on transformers every
    key and value, on llama.cpp (whose KV is not readable) the logits after the tokens
    and after one more."""
    fresh = state.lm.backend.new_cache()
    rows = fresh.extend(state.tokens)
    last = rows[-1].copy()
    if state.rule is not None and state.reply_start is not None and len(state.tokens) >= state.reply_start:
        reply = state.tokens[state.reply_start :]
        state.rule.mask(last[None], reply, len(reply))  # the next token is a reply token: under the rule
    assert len(state.cache) == len(fresh) == len(state.tokens)
    if hasattr(state.cache, "kv"):
        for layer, fresh_layer in zip(state.cache.kv.layers, fresh.kv.layers):
            torch.testing.assert_close(layer.keys, fresh_layer.keys, rtol=1e-9, atol=1e-9)
            torch.testing.assert_close(layer.values, fresh_layer.values, rtol=1e-9, atol=1e-9)
    else:
        probe = [state.tokens[0]]
        np.testing.assert_array_equal(state.cache.extend(probe), fresh.extend(probe))
        state.cache.crop(len(state.tokens))
    if state.next_logits is not None:
        np.testing.assert_allclose(state.next_logits, last, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cache_equals_fresh_encoding_after_crops_and_verification(backend, request):
    lm = request.getfixturevalue(backend)
    rng = random.Random(1)
    state = KVState(lm)
    prompt = lm.prompt_ids("What is the capital of France")
    state.append(prompt)
    for _ in range(12):
        words = rng.sample(["what", "is", "the", "capital", "of", "france", "and", "why", "is", "it", "so", "famous", "today"], 6)
        new_prompt = lm.prompt_ids(" ".join(words))
        candidate = [rng.randrange(len(lm.tokenizer)) for _ in range(rng.randint(0, 8))]
        rule = rng.choice([VerifierRule("exact"), VerifierRule("topk", k=3, max_gap=math.inf, exact_head=0)])
        kept = verify_candidate(state, new_prompt, candidate, rule)
        assert state.tokens == new_prompt + candidate[:kept]
        assert_cache_matches(state)
        state.crop(rng.randint(1, len(state.tokens)))
        assert_cache_matches(state)
        state.sync_prefix(new_prompt)
        state.append(new_prompt[len(state.tokens) :])
        assert_cache_matches(state)


def test_exact_verifier_accepts_only_argmax_prefix():
    logits = torch.tensor([[0.0, 5.0, 1.0], [3.0, 0.0, 1.0], [0.0, 1.0, 2.0]])
    assert accepted_length(logits.numpy(), [1, 0, 2], top_k=1) == 3
    assert accepted_length(logits.numpy(), [1, 2, 2], top_k=1) == 1
    assert accepted_length(logits.numpy(), [], top_k=1) == 0


def test_topk_never_accepts_a_token_outside_the_top_k():
    gen = torch.Generator().manual_seed(0)
    for _ in range(200):
        k = int(torch.randint(1, 6, (1,), generator=gen))
        logits = torch.randn(10, 50, generator=gen)
        candidate = torch.randint(0, 50, (10,), generator=gen).tolist()
        # plant top-k tokens in a random prefix so acceptance is not always 0
        depth = int(torch.randint(0, 11, (1,), generator=gen))
        for j in range(depth):
            candidate[j] = int(logits[j].topk(k).indices[int(torch.randint(0, k, (1,), generator=gen))])
        n = accepted_length(logits.numpy(), candidate, top_k=k)
        assert n >= depth
        for j in range(n):
            assert candidate[j] in logits[j].topk(k).indices.tolist()
        if n < len(candidate):
            assert candidate[n] not in logits[n].topk(k).indices.tolist()


@pytest.mark.parametrize(
    "verifier, setting",
    [("margin", {"margin": 0.3}), ("margin", {"margin": 2.0}), ("minp", {"min_p": 0.5}), ("minp", {"min_p": 0.1})],
)
def test_margin_and_floor_verifiers_never_accept_a_token_outside_their_rule(verifier, setting):
    rule = VerifierRule(verifier, **setting)
    gen = torch.Generator().manual_seed(1)
    for _ in range(200):
        logits = torch.randn(10, 50, generator=gen) * 2
        probs = logits.softmax(dim=-1)
        # candidates of near-top tokens (the 4 most likely), so the rule decides, not chance
        candidate = [int(row.topk(4).indices[int(torch.randint(0, 4, (1,), generator=gen))]) for row in logits]
        n = accepted_length(logits.numpy(), candidate, rule.rank_limit, rule.gap_limit)

        def allowed(j):
            if verifier == "margin":
                return (
                    float(logits[j].log_softmax(-1).max() - logits[j].log_softmax(-1)[candidate[j]]) <= setting["margin"] + 1e-6
                )
            return float(probs[j, candidate[j]]) >= setting["min_p"] * float(probs[j].max()) - 1e-6

        assert all(allowed(j) for j in range(n))
        if n < len(candidate):
            assert not allowed(n)


def test_an_exact_head_rejects_a_runner_up_opening_that_top_k_would_keep():
    logits = torch.tensor([[0.0, 5.0, 4.0], [3.0, 0.0, 2.0], [0.0, 1.0, 2.0]])
    runner_up_opening = [2, 2, 2]  # rank 2 at the start and after it
    assert accepted_length(logits.numpy(), runner_up_opening, top_k=2) == 3
    assert accepted_length(logits.numpy(), runner_up_opening, top_k=2, exact_head=1) == 0
    greedy_opening = [1, 2, 1]  # then runner-ups, which top-K accepts after the head
    assert accepted_length(logits.numpy(), greedy_opening, top_k=2, exact_head=1) == 3
    assert accepted_length(logits.numpy(), greedy_opening, top_k=2, exact_head=2) == 1


def test_a_runner_up_far_below_the_top_token_is_rejected_by_the_gap():
    logits = torch.tensor([[0.0, 5.0, 4.5], [3.0, 0.0, 0.5], [0.0, 1.0, 2.0]])
    candidate = [2, 2, 2]  # 0.5 nats below the top, then 2.5 nats below (still in the top 2)
    assert accepted_length(logits.numpy(), candidate, top_k=2) == 3
    assert accepted_length(logits.numpy(), candidate, top_k=2, max_gap=1.0) == 1
    assert accepted_length(logits.numpy(), candidate, top_k=2, max_gap=3.0) == 3
    assert accepted_length(logits.numpy(), candidate, top_k=1, max_gap=3.0) == 0  # exact stays exact


def test_a_runner_up_that_copies_an_earlier_reply_is_rejected():
    earlier = reply_ngrams([[7, 2, 2, 2, 9]], n=4)
    assert copied_positions([5, 2, 2, 2, 9, 1], earlier, n=4) == [False, True, True, True, True, False]
    logits = torch.tensor([[0.0, 5.0, 4.5]] * 6)  # token 1 the top, token 2 a close runner-up everywhere
    copy = [1, 2, 2, 2, 0, 1]
    history = reply_ngrams([[1, 2, 2, 2]])  # the reply's first four tokens are an earlier reply's
    assert accepted_length(logits.numpy(), copy, top_k=2) == 4  # token 0 is outside the top 2
    assert accepted_length(logits.numpy(), copy, top_k=2, history=history) == 1  # the copied runner-ups go; the top token stays
    assert accepted_length(logits[:4].numpy(), [1, 2, 1, 2], top_k=2, history=history) == 4  # no copy: runner-ups pass
