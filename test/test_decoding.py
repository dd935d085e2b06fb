"""Jacobi decoding is lossless: it produces the autoregressive greedy tokens."""

import random

from predgen_ros.engine.decode import ar_step, jacobi_step, ngram_draft
from predgen_ros.engine.lm import KVState


def greedy_reference(lm, prompt, n):
    state = KVState(lm)
    state.append(prompt)
    for _ in range(n):
        ar_step(state)
    return state.tokens[len(prompt) :]


def test_jacobi_equals_autoregressive(tiny_lm):
    rng = random.Random(3)
    for question in ["Tell me about Paris", "Write a poem about robots", "hi"]:
        prompt = tiny_lm.prompt_ids(question)
        expected = greedy_reference(tiny_lm, prompt, 40)
        state = KVState(tiny_lm)
        state.append(prompt)
        draft, iterations = [], 0
        while len(state.tokens) - len(prompt) < 40:
            if rng.random() < 0.3:  # sometimes a draft that is partly right
                done = len(state.tokens) - len(prompt)
                draft = expected[done + 1 : done + 1 + rng.randint(1, 7)] + [rng.randrange(1000)]
            result = jacobi_step(state, draft[:7], stop_ids=frozenset())
            draft = result.next_draft
            iterations += 1
        assert state.tokens[len(prompt) :][:40] == expected
        assert iterations < 40  # good drafts settle several tokens per iteration


def test_ngram_draft_copies_what_followed_the_last_ngram():
    assert ngram_draft([5, 6, 7, 8, 9, 5, 6], 3) == [7, 8, 9]
    assert ngram_draft([1, 2, 3], 3) == []
