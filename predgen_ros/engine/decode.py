"""Predictive generation: one autoregressive step, or one Jacobi iteration.

Each function runs exactly one forward pass and appends only accepted tokens
to the cache, so a caller may stop between any two calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .lm import KVState


def greedy_next(state: KVState) -> int:
    return int(state.next_logits.argmax())


def ar_step(state: KVState) -> list[int]:
    """Feed the greedy next token; returns it."""
    token = greedy_next(state)
    state.append([token])
    return [token]


@dataclass
class JacobiResult:
    accepted: list[int]
    next_draft: list[int] = field(default_factory=list)


def jacobi_step(state: KVState, draft: list[int], stop_ids: frozenset[int]) -> JacobiResult:
    """One Jacobi iteration over the block [greedy next token ; draft].

    The pass replaces every guess by the argmax given the guesses before it.
    Guesses that equal their replacement are exact greedy tokens (all earlier
    ones were), so the output equals autoregressive greedy decoding; at least
    the first token is always accepted.  The replacements after the first
    mismatch are the next iteration's draft (the Jacobi update).
    """
    block = [greedy_next(state)] + draft
    logits = state.append(block)
    predictions = logits.argmax(axis=-1).tolist()  # predictions[j] is the token after block[j]
    accepted = 1
    while accepted < len(block) and block[accepted] == predictions[accepted - 1] and block[accepted] not in stop_ids:
        accepted += 1
    if accepted < len(block):
        state.crop(len(state.tokens) - (len(block) - accepted))
        state.next_logits = logits[accepted - 1]
    return JacobiResult(block[:accepted], predictions[accepted:])


def ngram_draft(context: list[int], length: int, max_ngram: int = 3) -> list[int]:
    """Guess the next tokens by copying what followed the latest earlier
    occurrence of the context's last n-gram (prompt lookup).  [] if none."""
    for n in range(max_ngram, 0, -1):
        if len(context) <= n:
            continue
        tail = context[-n:]
        for start in range(len(context) - n - 1, -1, -1):
            if context[start : start + n] == tail:
                return context[start + n : start + n + length]
    return []


def extend_step(state: KVState, decoder: str, block: int, draft: list[int], stop_ids: frozenset[int]) -> JacobiResult:
    """One decoding pass: the greedy next token (`ar`), or a Jacobi block of `block`
    tokens seeded by `draft` (without one, an n-gram draft from the tokens so far)."""
    if decoder != "jacobi":
        return JacobiResult(ar_step(state))
    draft = draft or ngram_draft(state.tokens, block - 1)
    return jacobi_step(state, draft[: block - 1], stop_ids)
