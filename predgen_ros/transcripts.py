"""Transcript text as words: how the engine and the ASR compare what was said."""

from __future__ import annotations

import re
from difflib import SequenceMatcher

_NOT_WORD = re.compile(r"[^\w\s]")


def words(text: str) -> str:
    """Case and punctuation dropped: an ASR writes neither the way the model does."""
    return " ".join(_NOT_WORD.sub("", text.lower()).split())


def same_words(a: str, b: str) -> bool:
    return words(a) == words(b)


def words_after(hypothesis: str, heard_before: str) -> list[str]:
    """The words of `hypothesis`, a recognizer's reading of the end (or all) of audio it
    had read before as `heard_before`, then of more, that come after that earlier part.
    Aligned word by word, not counted: the second reading may spell it a little
    differently ("Draft a professional email" once heard as "to professional email").  With
    no word in common, all are new: a word said twice is better than a word lost."""
    said, before = hypothesis.split(), heard_before.split()
    norm = lambda tokens: [words(t) for t in tokens]  # noqa: E731
    blocks = [b for b in SequenceMatcher(None, norm(before), norm(said), autojunk=False).get_matching_blocks() if b.size]
    if blocks:
        last = blocks[-1]
        said = said[last.b + last.size + (len(before) - last.a - last.size) :]  # and `before`'s unmatched end
    return [token for token in said if words(token)]  # Whisper writes "." for a noise
