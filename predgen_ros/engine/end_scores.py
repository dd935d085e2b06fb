"""The model's probability that the user's message ends after the words heard.

Read off passes the session runs anyway (the verification pass over a prompt,
or a pass of the anticipation guess), so it costs no pass of its own.  Each
partial's probability goes out once, when it is known (the `llm` and `fused`
endpoint policies of asr_node use it).
"""

from __future__ import annotations

from ..transcripts import words


class EndScores:
    """One turn's probabilities by the words of the user text, and the latest
    partial that still waits for its own."""

    def __init__(self):
        self._scores: dict[str, float] = {}  # user text (as `words`) -> P(the message ends after it)
        self._unscored: str | None = None

    def heard(self, partial: str | None) -> None:
        """The latest partial (None: the end of turn is decided, no more estimates)."""
        self._unscored = partial

    def note(self, user_text: str, probability: float) -> None:
        self._scores[words(user_text)] = probability

    def known(self) -> bool:
        """Whether the latest partial's probability is known and not yet taken."""
        return self._unscored is not None and words(self._unscored) in self._scores

    def take(self) -> tuple[str, float]:
        """(the latest partial, its probability), once; call when `known()`."""
        heard, self._unscored = self._unscored, None
        return heard, self._scores[words(heard)]
