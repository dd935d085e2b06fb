"""Sentence boundary detection shared by every policy.

Every policy commits "the first sentence" with this one detector, so latency and
quality comparisons never hinge on different cut points.  A boundary is only
reported once the character after the terminal punctuation is known (or the
reply ended), because "3." may still become "3.14".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ABBREVIATIONS = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "vs",
        "etc",
        "e.g",
        "i.e",
        "a.m",
        "p.m",
        "u.s",
        "u.k",
        "no",
        "fig",
        "approx",
        "inc",
        "ltd",
        "co",
        "dept",
        "est",
    ]
)
_TERMINALS = ".!?"
_CLOSERS = "\"')]\u201d\u2019"
_LIST_MARKER = re.compile(r"(?:^|\n)\s*(?:\d{1,3}|[a-zA-Z])[.)]$")
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z.]*)$")


@dataclass(frozen=True)
class SentenceRules:
    min_chars: int = 20  # as LiveKit's sentence tokenizer: "Sure!" alone is too short a first chunk
    fallback_chars: int = 160  # replies without punctuation are cut at a word boundary
    max_tokens: int = 64  # hard cap on the decoding spent before a first sentence


def _is_abbreviation(text_before_dot: str) -> bool:
    match = _WORD_BEFORE.search(text_before_dot)
    if not match:
        return False
    word = match.group(1).lower().rstrip(".")
    return word in ABBREVIATIONS or (len(word) == 1 and word.isalpha())


def _boundary_after(text: str, i: int) -> int | None:
    """If a sentence may end at terminal text[i], return the index just past it.

    Returns None when text[i] is not an end (decimal, abbreviation, list marker)
    or when the following character is not known yet.
    """
    end = i + 1
    while end < len(text) and (text[end] in _TERMINALS or text[end] in _CLOSERS):
        end += 1
    if end >= len(text):
        return None  # we cannot tell yet: "3." may be "3.14", "U." may be "U.S."
    if not text[end].isspace():
        return None  # "3.14", "e.g.x", "U.S"
    if text[i] == ".":
        head = text[:i]
        if _is_abbreviation(head) or _LIST_MARKER.search(text[: i + 1]):
            return None
    return end


def sentence_end(text: str, rules: SentenceRules, finished: bool = False) -> int | None:
    """Index just past the first complete sentence of `text`, or None.

    `finished` means no more text will come (end of reply): then whatever is left
    is a sentence.
    """
    start = len(text) - len(text.lstrip())
    # Only ends within fallback_chars count: the answer for a longer text then
    # equals the answer for the first prefix that had one, so every policy cuts
    # the same sentence however far it happened to decode.
    for i in range(start, min(len(text), start + rules.fallback_chars)):
        ch = text[i]
        if ch == "\n" and i > start and len(text[start:i].strip()) >= rules.min_chars:
            return i
        if ch not in _TERMINALS:
            continue
        end = _boundary_after(text, i)
        if end is not None and len(text[start:end].strip()) >= rules.min_chars:
            return end
    if len(text) - start >= rules.fallback_chars:
        cut = text.rfind(" ", start, start + rules.fallback_chars)
        return cut if cut > start else start + rules.fallback_chars
    if finished and text.strip():
        return len(text)
    return None


def split_first_sentence(text: str, rules: SentenceRules, finished: bool = False) -> tuple[str, str] | None:
    """(first sentence stripped, remaining text) or None if not complete yet."""
    end = sentence_end(text, rules, finished)
    if end is None:
        return None
    return text[:end].strip(), text[end:]
