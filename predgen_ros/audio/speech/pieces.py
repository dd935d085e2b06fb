"""How a reply's first sentence is cut for synthesis: its opening words, then the rest.

Piper returns no audio before it has synthesized the whole text it was given, so
the robot starts speaking sooner when the first sentence's opening is synthesized
alone (tts.py, tts_node, and the benchmark's first audio).  A clause mark is the
natural seam; where none comes early, a word boundary is.
"""

from __future__ import annotations

import re

# A first sentence starts playing after its first clause, or its first FIRST_WORDS
# words where no clause mark (, ; :) comes that soon.  The rest keeps at least
# MIN_TAIL_WORDS words: a shorter tail is not worth a seam in the voice.
FIRST_WORDS = 6
MIN_TAIL_WORDS = 3
_WORD_GAP = re.compile(r"\s+")


def opening_pieces(sentence: str, first_words: int = FIRST_WORDS) -> list[str]:
    """`sentence` as [opening, rest] to synthesize one after the other, or [sentence]
    when it is too short to split or `first_words` is 0."""
    text = sentence.strip()
    gaps = list(_WORD_GAP.finditer(text))  # gaps[i] follows word i (0-based)
    if first_words <= 0:
        return [text]
    clause = (i for i in range(1, min(first_words, len(gaps))) if text[gaps[i].start() - 1] in ",;:")
    cut = next(clause, first_words - 1)
    if len(gaps) - cut < MIN_TAIL_WORDS:
        return [text]
    return [text[: gaps[cut].start()], text[gaps[cut].end() :]]


def opening_ahead(words: str, finished: bool, first_words: int = FIRST_WORDS) -> str | None:
    """The piece of a foreseen first sentence worth synthesizing ahead: the opening a commit of
    it plays first.  Of a sentence still being decoded (`finished` False) only once the words
    after the opening are enough for the cut to stand whatever words follow; None before."""
    pieces = opening_pieces(words, first_words)
    return pieces[0] if finished or len(pieces) > 1 else None
