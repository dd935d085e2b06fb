"""Verifiers: keep the longest still-valid prefix of a candidate reply.

Both run ONE forward pass over [new prompt suffix ; whole candidate]: the
logits at the candidate positions are the model's predictions for each
candidate token under the new prompt.
"""
from __future__ import annotations

import torch

from .lm import KVState


def accepted_length(logits: torch.Tensor, candidate: list[int], top_k: int) -> int:
    """How many leading candidate tokens pass: logits[j] predicts candidate[j].

    top_k == 1 is the exact verifier (token == argmax, lossless); top_k > 1
    accepts while the token is among the K most likely.
    """
    if not candidate:
        return 0
    target = torch.tensor(candidate, device=logits.device)
    if top_k == 1:
        ok = logits.argmax(dim=-1) == target
    else:
        ok = (logits.topk(top_k, dim=-1).indices == target.unsqueeze(-1)).any(dim=-1)
    rejected = (~ok).nonzero()
    return int(rejected[0, 0]) if len(rejected) else len(candidate)


def verify_candidate(state: KVState, prompt: list[int], candidate: list[int], top_k: int) -> int:
    """Re-condition `candidate` on `prompt` in one pass; keep the accepted prefix.

    Afterwards the cache holds exactly prompt + candidate[:k] and
    `state.next_logits` predicts the token after them.  Returns k.
    """
    keep = state.sync_prefix(prompt)
    suffix = prompt[keep:]
    logits = state.append(suffix + candidate)
    first = len(suffix) - 1  # row predicting candidate[0]
    k = accepted_length(logits[first : first + len(candidate)], candidate, top_k)
    if k < len(candidate):
        state.crop(len(prompt) + k)
        state.next_logits = logits[first + k]
    return k
