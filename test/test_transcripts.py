"""Transcript text as words (transcripts.py): what a continuation adds to an early final."""

from __future__ import annotations

import pytest

from predgen_ros.transcripts import words_after


@pytest.mark.parametrize(
    ("hypothesis", "early", "new"),
    [
        ("What is the capital? A France?", "What is the capital?", ["A", "France?"]),
        ("What is the capital", "What is the capital?", []),  # the early part re-heard, nothing new yet
        ("Tell me a fun fact about octopuses.", "Tell me a fun fact", ["about", "octopuses."]),
        # the second reading spells the early part differently: aligned, not counted
        (
            "Draft a professional email. Ask about the style. Keep it short",
            "to professional email. Ask about the style.",
            ["Keep", "it", "short"],
        ),
        ("What is the capitol of France", "What is the capital", ["of", "France"]),  # its last word misheard
        ("the capital of France?", "What is the capital?", ["of", "France?"]),  # the end of its audio re-heard
        ("of France?", "What is the capital?", ["of", "France?"]),  # nothing in common: all new
    ],
)
def test_the_words_a_continuation_adds_come_after_the_early_finals(hypothesis, early, new):
    assert words_after(hypothesis, early) == new
