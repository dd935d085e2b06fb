"""What predgen_ros carries in the fields of standard messages, written and read in one place.

asr/speech_end       std_msgs/Header      stamp: end of the user's voiced audio; frame_id: the utterance number
tts/first_audio      std_msgs/Header      stamp: the reply's first chunk reached the sink; frame_id: its sentence,
                                          after "cached:" when its opening came from the audio cache
asr/voice            std_msgs/Header      frame_id: start (an utterance opens), resumed (one opens that continues the
                                          last final: the user went on after an early endpoint; its words extend that
                                          final), end (its voice fell silent), more (voice again), confirmed (the
                                          last final's words are the turn's: no voice came back in time, or the
                                          voice that did made no word); every final is followed by confirmed, or
                                          by resumed and then a final that extends it or confirmed; stamp: when
                                          (for end: the last voiced audio; for confirmed: the end of the wait)
turn/decision        std_msgs/Header      stamp: when asr_node's turn owner decided; frame_id: pause, resume or stop,
                                          then a space and the words that decided it ("" for the voice alone)
tts/interruption     std_msgs/Header      stamp: the robot's voice fell silent or went on; frame_id: pause, resume or stop
audio/user, tts/audio std_msgs/Int16MultiArray  mono int16 samples; layout.dim[0].label: the rate, "mono_16000hz"
tts/reference        std_msgs/Int16MultiArray  what the loudspeaker plays, as tts/audio, and layout.dim[1].label
                                          "played_at_ns:<n>": when its first sample starts to play (audio/echo/canceller.py)
turn/end_probability diagnostic_msgs/KeyValue   key: the partial; value: P(the user is done after it)
turn/events          std_msgs/String      the user's turns in order, one JSON TurnEvent each (turn_events.py: opened,
                                          text, ended, ended_early, reopened, confirmed, with the utterance's number)
predgen/candidate    std_msgs/String      a speculative first sentence, to synthesize ahead and not to play; ending in
                                          "…": its beginning while it is still being decoded (its opening is worth
                                          synthesizing once the words after it make it certain)
"""

from __future__ import annotations

import re

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import KeyValue
from std_msgs.msg import Header, Int16MultiArray, MultiArrayDimension, String

from ..turn_events import TurnEvent, decode, encode

_RATE_LABEL = re.compile(r"mono_(\d+)hz")


def speech_end(stamp: Time, utterance: int | None = None) -> Header:
    """asr/speech_end, with the number of the final it comes before (for recordings)."""
    return Header(stamp=stamp, frame_id="" if utterance is None else str(utterance))


_CACHED = "cached:"


def first_audio(stamp: Time, sentence: str, cached: bool = False) -> Header:
    return Header(stamp=stamp, frame_id=(_CACHED if cached else "") + sentence)


def first_audio_cached(msg: Header) -> bool:
    return msg.frame_id.startswith(_CACHED)


def voice_event(stamp: Time, what: str) -> Header:
    return Header(stamp=stamp, frame_id=what)


def voice_kind(msg: Header) -> str:
    """An asr/voice's kind; "" (a sender that only marks onsets) is a start."""
    return msg.frame_id.strip() or "start"


def turn_decision(stamp: Time, what: str, heard: str = "") -> Header:
    return Header(stamp=stamp, frame_id=f"{what} {heard}".strip())


def decision_of(msg: Header) -> tuple[str, str]:
    """A turn/decision's (what the voice does, the words that decided it)."""
    what, _, heard = msg.frame_id.strip().partition(" ")
    return what, heard


def sentence_of(msg: Header) -> str:
    """The sentence a tts/first_audio reports."""
    return msg.frame_id.removeprefix(_CACHED)


def turn_event(event: TurnEvent) -> String:
    return String(data=encode(event))


def turn_event_of(msg: String) -> TurnEvent:
    """A turn/events message's event; TurnEventError (one line) when it breaks the schema."""
    return decode(msg.data)


def audio_chunk(samples: np.ndarray, sample_rate: int) -> Int16MultiArray:
    msg = Int16MultiArray(data=samples.astype(np.int16).tolist())
    msg.layout.dim = [MultiArrayDimension(label=f"mono_{sample_rate}hz", size=len(samples), stride=len(samples))]
    return msg


_PLAYED_AT = "played_at_ns:"


def reference_chunk(samples: np.ndarray, sample_rate: int, played_at_s: float) -> Int16MultiArray:
    msg = audio_chunk(samples, sample_rate)
    msg.layout.dim.append(MultiArrayDimension(label=f"{_PLAYED_AT}{int(played_at_s * 1e9)}"))
    return msg


def played_at(msg: Int16MultiArray) -> float | None:
    """When a tts/reference chunk started to play (s); None when it does not say."""
    if len(msg.layout.dim) < 2 or not msg.layout.dim[1].label.startswith(_PLAYED_AT):
        return None
    try:
        return int(msg.layout.dim[1].label.removeprefix(_PLAYED_AT)) / 1e9
    except ValueError:
        return None


def audio_rate(msg: Int16MultiArray) -> int | None:
    """The sample rate an audio chunk's label gives; None without a label or with another kind of label."""
    if not msg.layout.dim:
        return None
    match = _RATE_LABEL.fullmatch(msg.layout.dim[0].label)
    return int(match.group(1)) if match else None


def end_probability(partial: str, probability: float) -> KeyValue:
    return KeyValue(key=partial, value=f"{probability:.6g}")


_UNFINISHED = "…"


def candidate(text: str, finished: bool = True) -> String:
    """predgen/candidate: a speculative first sentence, or its beginning (`finished` False)."""
    return String(data=text if finished else text + _UNFINISHED)


def candidate_of(msg: String) -> tuple[str, bool]:
    """A predgen/candidate's (text, whether it is a whole sentence)."""
    text = msg.data.strip()
    return text.removesuffix(_UNFINISHED), not text.endswith(_UNFINISHED)
