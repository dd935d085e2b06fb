"""turn/events: the schema of the user's turn stream and the writer that numbers it (turn_events.py)."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from predgen_ros.turn_events import TurnEvent, TurnEventError, TurnEventWriter, TurnKind, decode, encode

events = st.builds(
    TurnEvent,
    st.sampled_from(list(TurnKind)),
    st.integers(1, 2**40),
    st.text(max_size=12),
    st.text(max_size=80),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
)


@given(events)
def test_every_event_survives_the_wire(event):
    assert decode(encode(event)) == event


def test_the_wire_format_is_one_json_object_with_exactly_the_events_fields():
    wire = json.loads(encode(TurnEvent(TurnKind.ENDED_EARLY, 3, "s1", "what is the capital", 12.5)))
    assert wire == {"kind": "ended_early", "utterance": 3, "stream": "s1", "text": "what is the capital", "stamp": 12.5}


GOOD = {"kind": "text", "utterance": 1, "stream": "s", "text": "hi", "stamp": 1.0}


@pytest.mark.parametrize(
    "data, named",
    [
        ("not json", "not JSON"),
        ("[1, 2]", "fields list"),
        (json.dumps({**GOOD, "extra": 1}), "exactly"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "stamp"}), "exactly"),
        (json.dumps({**GOOD, "kind": "partial"}), "kind 'partial'"),
        (json.dumps({**GOOD, "utterance": 0}), "utterance 0"),
        (json.dumps({**GOOD, "utterance": "1"}), "utterance '1'"),
        (json.dumps({**GOOD, "utterance": True}), "utterance True"),
        (json.dumps({**GOOD, "text": None}), "text None"),
        (json.dumps({**GOOD, "stamp": "now"}), "stamp 'now'"),
        ('{"kind": "text", "utterance": 1, "stream": "s", "text": "hi", "stamp": NaN}', "stamp nan"),
    ],
)
def test_a_message_off_the_schema_is_named_in_one_line(data, named):
    with pytest.raises(TurnEventError) as err:
        decode(data)
    assert named in str(err.value) and "\n" not in str(err.value)


def kinds(events):
    return [(e.kind.value, e.utterance, e.text) for e in events]


def test_an_eager_end_the_user_goes_on_after_keeps_its_number():
    user = TurnEventWriter("s")
    said = user.voice("start", 1.0) + user.words("what is", 1.2) + user.voice("end", 1.5)
    said += user.final("what is the capital", 1.9, may_continue=True, handed_on=True)
    said += user.voice("resumed", 2.3) + user.words("what is the capital of france", 2.6)
    said += user.final("what is the capital of france", 2.9, may_continue=True, handed_on=True) + user.voice("confirmed", 3.9)
    assert kinds(said) == [
        ("opened", 1, ""),
        ("text", 1, "what is"),
        ("ended_early", 1, "what is the capital"),
        ("reopened", 1, ""),
        ("text", 1, "what is the capital of france"),
        ("ended_early", 1, "what is the capital of france"),
        ("confirmed", 1, ""),
    ]
    assert said[0].stamp == 1.0 and said[2].stamp == 1.9  # opened at the voice's start, ended at the speech's end


def test_a_continuation_without_a_word_is_confirmed_and_the_next_words_are_a_new_utterance():
    user = TurnEventWriter("s")
    user.final("hello there", 1.0, may_continue=True, handed_on=True)
    said = user.voice("resumed", 1.4) + user.voice("confirmed", 2.0) + user.voice("start", 4.0) + user.words("bye", 4.2)
    assert kinds(said) == [("reopened", 1, ""), ("confirmed", 1, ""), ("opened", 2, ""), ("text", 2, "bye")]


def test_a_fixed_endpoint_ends_a_turn_for_good_and_its_confirmed_is_not_repeated():
    user = TurnEventWriter("s")
    said = user.words("hello", 0.5) + user.final("hello", 1.0, may_continue=False, handed_on=True) + user.voice("confirmed", 1.0)
    assert kinds(said) == [("opened", 1, ""), ("text", 1, "hello"), ("ended", 1, "hello")]


def test_an_utterance_that_is_no_turn_sends_nothing_and_its_confirmed_is_not_about_the_turn_before():
    user = TurnEventWriter("s")
    user.final("what is the capital", 1.0, may_continue=True, handed_on=True)
    assert user.final("mm hmm", 2.0, may_continue=True, handed_on=False) == []  # an acknowledgement over the robot
    assert user.voice("confirmed", 3.0) == [] and user.voice("resumed", 3.5) == []


def test_a_final_owed_from_before_a_new_voice_keeps_its_own_number():
    """Whisper may finish the last utterance after the next one's voice began."""
    user = TurnEventWriter("s")
    said = user.words("what time", 1.0) + user.voice("start", 2.0)
    said += user.final("what time is it", 1.5, may_continue=False, handed_on=True) + user.words("and", 2.3)
    assert kinds(said) == [
        ("opened", 1, ""),
        ("text", 1, "what time"),
        ("ended", 1, "what time is it"),
        ("opened", 2, ""),
        ("text", 2, "and"),
    ]
    assert said[-2].stamp == 2.0  # the new utterance opened when its voice began


def test_each_writer_is_a_stream_of_its_own():
    assert TurnEventWriter().stream != TurnEventWriter().stream
