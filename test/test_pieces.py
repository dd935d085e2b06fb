"""How a reply's first sentence is cut for synthesis (audio/pieces.py)."""

from __future__ import annotations

import pytest

from predgen_ros.audio.pieces import opening_pieces


@pytest.mark.parametrize(
    ("sentence", "pieces"),
    [
        # a clause mark within the first words is the seam
        (
            "In my response, I made several assumptions that may not hold.",
            ["In my response,", "I made several assumptions that may not hold."],
        ),
        # no clause mark that soon: after the first six words
        (
            "To create a museum dedicated solely to Salvador Dali's works, a budget is needed.",
            ["To create a museum dedicated solely", "to Salvador Dali's works, a budget is needed."],
        ),
        # a one-word clause ("Yes,") is no opening, and a tail under three words is no rest
        ("Yes, there is. Here's a Python implementation", ["Yes, there is. Here's a Python implementation"]),
        ("The car in the last space is purple.", ["The car in the last space is purple."]),
        ("The answer is 15.", ["The answer is 15."]),
    ],
)
def test_a_first_sentence_is_cut_after_its_first_clause_or_words(sentence, pieces):
    assert opening_pieces(sentence) == pieces
    assert " ".join(pieces) == sentence  # nothing lost, nothing said twice


def test_first_words_zero_keeps_sentences_whole():
    assert opening_pieces("In my response, I made several assumptions that may not hold.", 0) == [
        "In my response, I made several assumptions that may not hold."
    ]
