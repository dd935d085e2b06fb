"""Anticipation: speculate on how the user's sentence ends, not only on what was heard.

Short utterances put the words that decide the answer at the end, when little
time is left.  While the user speaks, the model continues the user's own text
inside the user's message (greedily, to the end of the sentence), and the reply
is speculated for that anticipated question.  Further words that follow the
guess cost nothing; at the final the candidate is verified against the real
prompt like any other, so with the exact verifier the reply stays the model's
own answer to the question asked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..transcripts import words

_SENTENCE_END = re.compile(r"[.?!][\"')\]]*$")


def ends_sentence(text: str) -> bool:
    """Whether `text` ends a sentence (., ? or !, maybe before a closing quote)."""
    return bool(_SENTENCE_END.search(text.strip()))


def on_track(anticipated: str, heard: str) -> bool:
    """Whether the words heard so far are a beginning of the anticipated text."""
    return words(anticipated).startswith(words(heard))


@dataclass
class Guess:
    """A continuation of the user's text being decoded, one token a pass."""

    heard: str  # the partial it continues
    open_ids: list[int]  # the prompt up to the user's last word, the message still open
    tokens: list[int] = field(default_factory=list)

    @property
    def ids(self) -> list[int]:
        return self.open_ids + self.tokens

    def text(self, decode) -> str:
        """The anticipated user text: what was heard plus the continuation."""
        return " ".join((self.heard + decode(self.tokens)).split())


@dataclass
class Anticipation:
    """One turn's speculation on how the user's sentence ends."""

    max_tokens: int  # a guess ends after this many tokens at the latest
    guess: Guess | None = None  # the continuation of the user's text being decoded
    anticipated: str = ""  # the anticipated user text the target answers ("": none)
    held: list[int] | None = None  # the candidate reply, kept aside while the cache guesses

    def follows(self, heard: str, decode) -> bool:
        """Whether the words heard begin the anticipated text, or the guess decoded so far."""
        if self.anticipated and on_track(self.anticipated, heard):
            return True
        return self.guess is not None and on_track(self.guess.text(decode), heard)

    def take(self, token: int, decode, end_ids: set[int]) -> str | None:
        """The guess's greedy next token; the anticipated text once the guess ends (at
        an end of the user's message in `end_ids`, a sentence's end or `max_tokens`)."""
        guess = self.guess
        if token not in end_ids:
            guess.tokens.append(token)
            if not ends_sentence(decode(guess.tokens)) and len(guess.tokens) < self.max_tokens:
                return None
        self.guess = None
        return guess.text(decode)
