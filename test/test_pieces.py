"""How a reply's first sentence is cut for synthesis (audio/speech/pieces.py)."""

from __future__ import annotations

import pytest

from predgen_ros.audio.speech.pieces import opening_ahead, opening_pieces


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


SENTENCES = [
    "In my response, I made several assumptions that may not hold.",
    "To create a museum dedicated solely to Salvador Dali's works, a budget is needed.",
    "I'm here to help with any kind of tech or tech-related inquiries.",
    "Yes, there is. Here's a Python implementation",
    "I'd be happy to help with that.",
    "Sure: the kitchen is down the hall, on the left.",
]


@pytest.mark.parametrize("sentence", SENTENCES)
def test_a_beginning_gives_the_opening_of_the_sentence_it_grows_into_or_none(sentence):
    """Of a sentence still being decoded, an opening is offered only once it is the one the
    whole sentence will be cut at, however the sentence goes on."""
    words = sentence.split()
    offered = [opening_ahead(" ".join(words[:n]), finished=False) for n in range(1, len(words))]
    opening = opening_pieces(sentence)[0]
    assert all(o in (None, opening) for o in offered)
    if len(opening_pieces(sentence)) > 1:  # a sentence with a rest: its opening is offered before its end
        assert opening in offered
        assert offered[offered.index(opening) :] == [opening] * (len(offered) - offered.index(opening))
    assert opening_ahead(sentence, finished=True) == opening


def test_a_short_beginning_offers_nothing_a_whole_sentence_its_opening():
    assert opening_ahead("I'd be happy to help", finished=False) is None
    assert opening_ahead("I'd be happy to help.", finished=True) == "I'd be happy to help."
