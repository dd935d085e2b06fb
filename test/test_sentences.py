import pytest

from predgen_ros.engine.sentences import SentenceRules, split_first_sentence

RULES = SentenceRules(min_chars=12, fallback_chars=80)


@pytest.mark.parametrize(
    "text, first",
    [
        ("Paris is the capital of France. It is big.", "Paris is the capital of France."),
        ("Pi is about 3.14 in most uses. Next one.", "Pi is about 3.14 in most uses."),
        ("Ask Dr. Smith about it today. Then go.", "Ask Dr. Smith about it today."),
        ("The U.S. economy grew a lot. Then it fell.", "The U.S. economy grew a lot."),
        ("Use tools, e.g. a hammer, to fix it! Okay.", "Use tools, e.g. a hammer, to fix it!"),
        ("1. Paris is the first stop on the list. 2. Rome.", "1. Paris is the first stop on the list."),
        ('He said "stop right there." Then he left.', 'He said "stop right there."'),
        ("Is it really that simple? Yes it is.", "Is it really that simple?"),
        ("Sure! Here is the email you asked for. Bye.", "Sure! Here is the email you asked for."),
        ("Here are three ideas for you\n- one\n- two", "Here are three ideas for you"),
    ],
)
def test_first_sentence(text, first):
    assert split_first_sentence(text, RULES)[0] == first


@pytest.mark.parametrize(
    "text",
    [
        "Pi is about 3.",  # may still become 3.14
        "I live in the U.",  # may still become U.S.
        "The capital of France is Paris.",  # the next character is unknown yet
        "Hi.",  # too short, and unfinished
        "Ask Dr. Smith about",
    ],
)
def test_incomplete(text):
    assert split_first_sentence(text, RULES) is None


def test_end_of_reply_closes_the_sentence():
    assert split_first_sentence("Hi there.", RULES, finished=True)[0] == "Hi there."


def test_fallback_cuts_unpunctuated_text_at_a_word():
    text = "word " * 30
    first, rest = split_first_sentence(text, RULES)
    assert len(first) <= RULES.fallback_chars and first.endswith(" word")  # cut after a whole word
    assert first + rest == text  # nothing lost or added at the cut


def test_the_answer_for_a_longer_text_equals_the_first_prefix_that_had_one():
    """Policies decode different lengths; the cut must not depend on that."""
    text = (
        "This answer rambles on without a stop for quite a long while and keeps going past the fallback "
        "length before it finally ends here. Then more."
    )
    first = next(split_first_sentence(text[:n], RULES) for n in range(1, len(text) + 1) if split_first_sentence(text[:n], RULES))
    assert split_first_sentence(text, RULES)[0] == split_first_sentence(text + " And more text. Yes.", RULES)[0]
    assert split_first_sentence(text, RULES)[0] == first[0]
