"""Transcript text as words: how the engine and the ASR compare what was said."""

from __future__ import annotations

import re

_NOT_WORD = re.compile(r"[^\w\s]")


def words(text: str) -> str:
    """Case and punctuation dropped: an ASR writes neither the way the model does."""
    return " ".join(_NOT_WORD.sub("", text.lower()).split())


def same_words(a: str, b: str) -> bool:
    return words(a) == words(b)
