"""The encodings predgen_ros carries in standard message fields, written and read back."""

import numpy as np
import pytest
from std_msgs.msg import Int16MultiArray, String

from predgen_ros.nodes import messages
from predgen_ros.nodes.common import stamp
from predgen_ros.turn_events import TurnEvent, TurnEventError, TurnKind


def test_speech_end_carries_the_utterance_number_or_none():
    assert messages.speech_end(stamp(1.5), 7).frame_id == "7"
    assert messages.speech_end(stamp(1.5)).frame_id == ""


def test_a_turn_event_rides_in_a_string_and_a_bad_one_is_named():
    event = TurnEvent(TurnKind.REOPENED, 4, "s", "", 9.25)
    assert messages.turn_event_of(messages.turn_event(event)) == event
    with pytest.raises(TurnEventError, match="kind 'final'"):
        messages.turn_event_of(String(data='{"kind": "final", "utterance": 1, "stream": "", "text": "", "stamp": 0}'))


def test_first_audio_names_its_sentence():
    assert messages.sentence_of(messages.first_audio(stamp(2.0), "Paris is the capital.")) == "Paris is the capital."


def test_audio_chunks_carry_their_rate():
    samples = np.array([0, 1, -1, 32767], dtype=np.int16)
    chunk = messages.audio_chunk(samples, 22050)
    assert messages.audio_rate(chunk) == 22050 and list(chunk.data) == samples.tolist()
    assert messages.audio_rate(Int16MultiArray(data=[1, 2])) is None  # unlabelled


def test_end_probability_is_the_partial_and_its_probability():
    kv = messages.end_probability("what is the capital of france", 0.25)
    assert (kv.key, float(kv.value)) == ("what is the capital of france", 0.25)
