"""Verifiers: keep the longest still-valid prefix of a candidate reply.

Both run ONE forward pass over [new prompt suffix ; whole candidate]: the
logits at the candidate positions are the model's predictions for each
candidate token under the new prompt.
"""

from __future__ import annotations

import math

import numpy as np

from .config import VerifierRule
from .lm import KVState

COPY_NGRAM = 4  # tokens: a run this long that also occurs in an earlier reply copies it


def reply_ngrams(replies: list[list[int]], n: int = COPY_NGRAM) -> frozenset[tuple[int, ...]]:
    """Every run of n tokens in the earlier replies of the conversation."""
    return frozenset(tuple(ids[i : i + n]) for ids in replies for i in range(len(ids) - n + 1))


def copied_positions(candidate: list[int], ngrams: frozenset[tuple[int, ...]], n: int = COPY_NGRAM) -> list[bool]:
    """Per candidate token: whether it lies in a run of n tokens found in `ngrams`."""
    copied = [False] * len(candidate)
    for start in range(len(candidate) - n + 1):
        if tuple(candidate[start : start + n]) in ngrams:
            copied[start : start + n] = [True] * n
    return copied


def accepted_length(
    logits: np.ndarray,
    candidate: list[int],
    top_k: int | None,
    max_gap: float = math.inf,
    exact_head: int = 0,
    history: frozenset[tuple[int, ...]] = frozenset(),
) -> int:
    """How many leading candidate tokens pass: logits[j] predicts candidate[j].

    top_k == 1 is the exact verifier (token == argmax, lossless).  Otherwise a
    runner-up is accepted too: a token among the K most likely (any rank when
    top_k is None: the margin and min-p verifiers), within `max_gap`
    nats of the most likely token's log-probability, past the first
    `exact_head` tokens, and not part of a copy of an earlier reply (`history`:
    its n-grams).  Rank alone is not enough (docs/design.md#how-it-works): a guess
    made from the user's first words (and the history) stays in the top K under
    the complete question while far less likely than the model's own answer;
    and a runner-up that starts a copy of an earlier reply is the way into a
    loop: once the copy is in the history, the model's own top choice under the
    next question is the same copy.
    """
    if not candidate:
        return 0
    target = np.asarray(candidate)
    chosen = logits[np.arange(len(candidate)), target]
    ok = logits.argmax(axis=-1) == target
    if top_k is None or top_k > 1:
        runner_up = np.ones_like(ok)
        if top_k is not None:
            runner_up &= (logits > chosen[:, None]).sum(axis=-1) < top_k  # its rank is within the top K
        if math.isfinite(max_gap):
            runner_up &= logits.max(axis=-1) - chosen <= max_gap  # = the log-prob gap
        runner_up[:exact_head] = False
        if history:
            runner_up &= ~np.asarray(copied_positions(candidate, history))
        ok |= runner_up
    rejected = np.flatnonzero(~ok)
    return int(rejected[0]) if len(rejected) else len(candidate)


def verify_candidate(
    state: KVState,
    prompt: list[int],
    candidate: list[int],
    rule: VerifierRule,
    history: frozenset[tuple[int, ...]] = frozenset(),
) -> int:
    """Re-condition `candidate` on `prompt` in one pass; keep the prefix `rule` accepts.

    Afterwards the cache holds exactly prompt + candidate[:k] and
    `state.next_logits` predicts the token after them.  Returns k.
    """
    keep = state.sync_prefix(prompt)
    suffix = prompt[keep:]
    before = state.next_logits
    logits = state.append(suffix + candidate)
    if not suffix:  # the cache held the prompt already: its last logits predict candidate[0]
        logits = np.concatenate([np.asarray(before)[None], logits])
    first = max(len(suffix) - 1, 0)  # row predicting candidate[0]
    rows = logits[first : first + len(candidate)]
    k = accepted_length(rows, candidate, rule.rank_limit, rule.gap_limit, rule.exact_head, history)
    if k < len(candidate):
        state.crop(len(prompt) + k)
        state.next_logits = logits[first + k]
    return k
