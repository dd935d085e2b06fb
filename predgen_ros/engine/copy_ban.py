"""The decoding rule on top of greedy: a reply does not copy runs of earlier replies.

A small model that reads its own earlier replies in the prompt copies them: in a
spoken conversation of short requests SmolLM2-135M answered every question with
its first reply (docs/results/conversations.md).  The rule: the next reply token is the
most likely one, unless it would complete a run of `n` tokens that already occurs
in an earlier reply kept in the prompt, or earlier in the reply itself (a reply
that loops on one phrase becomes history that invites the next loop); then it is
the most likely token that would not.  Nor may a reply begin with the first
`opening` tokens an earlier reply began with: under the run ban alone 38 of 40
answers opened "I'm sorry" and changed the fourth token ("I'm sorry pasta is
gone."), which copies no 4-token run.

The rule acts on the logits (KVState.append sets the banned tokens to -inf in
every row that predicts a reply token), so baseline's decoding, the verifiers and
the Jacobi check all see the same choice: the exact verifier compares each
candidate token with the rule's choice, and stays lossless against it.
"""

from __future__ import annotations

import numpy as np


class CopyBan:
    """Which tokens may not follow a reply prefix: those that would complete a run of
    `n` tokens (0: none) found in `sources` (the earlier replies' token ids) or in the
    prefix, and those that would make the first `opening` tokens (0: none) the opening
    of one of `openings`."""

    def __init__(self, sources: list[list[int]], n: int, openings: list[list[int]] = (), opening: int = 0):
        if n == 1 or n < 0 or opening < 0:
            raise ValueError(f"a copy ban needs runs of at least 2 tokens (0: none) and an opening >= 0, got {n}, {opening}")
        self.n = n
        self._next: dict[tuple[int, ...], set[int]] = {}
        for ids in sources:
            for i in range(len(ids) - n + 1):
                self._next.setdefault(tuple(ids[i : i + n - 1]), set()).add(ids[i + n - 1])
        # A reply's first `opening` tokens may not be those an earlier reply began with.
        self.opening = opening
        self._opens: dict[tuple[int, ...], set[int]] = {}
        for ids in openings if opening else ():
            if len(ids) >= opening:
                self._opens.setdefault(tuple(ids[: opening - 1]), set()).add(ids[opening - 1])

    def banned(self, reply: list[int]) -> set[int]:
        """Tokens that may not come next after the reply's tokens so far."""
        if len(reply) == self.opening - 1:
            return self._opens.get(tuple(reply), set()) | self._runs(reply)
        return self._runs(reply)

    def _runs(self, reply: list[int]) -> set[int]:
        if not self.n or len(reply) < self.n - 1:
            return set()
        head = reply[len(reply) - self.n + 1 :]
        own = {reply[i + self.n - 1] for i in range(len(reply) - self.n + 1) if reply[i : i + self.n - 1] == head}
        return self._next.get(tuple(head), set()) | own

    def _applies(self, position: int) -> bool:
        """Whether the rule can ban anything at reply index `position`."""
        return (self.n and position >= self.n - 1) or (self.opening and position == self.opening - 1)

    def mask(self, logits: np.ndarray, reply: list[int], first_row_predicts: int) -> None:
        """Set banned tokens to -inf in place.  Row j of `logits` predicts the token at
        index `first_row_predicts + j` of `reply` (negative: a prompt position, untouched);
        `reply` holds every reply token the rows were computed from."""
        for j in range(len(logits)):
            position = first_row_predicts + j
            if self._applies(position) and (banned := self.banned(reply[:position])):
                logits[j, list(banned)] = -np.inf


def reply_rule(replies: list[list[int]], user: list[int] | None, n: int, opening: int) -> CopyBan | None:
    """The rule for a reply after earlier `replies` (token ids, in the prompt): no run of
    `n` tokens of them, of itself, or of the `user`'s words (None: those may be copied),
    and no opening of `opening` tokens that one of them began with; None when both are 0."""
    if not (n or opening):
        return None
    return CopyBan(replies + ([user] if user is not None else []), n, replies, opening)
