"""The user's turns as one ordered stream (`turn/events`), written by asr_node's turn owner.

Each event names the utterance it belongs to by a number the writer gives it when it first
hands on its words, and the writer's stream (a restarted asr_node numbers afresh).  The kinds, in the order they can come for one utterance:

  opened       it is the user's turn (its first words follow); stamp: when the voice began
  text         its words so far (they may rewrite the ones before); stamp: when heard
  ended        its final words: the turn is over; stamp: the end of the user's voiced audio
  ended_early  the same, at a short pause: the user may still go on (an eager end of turn)
  reopened     the user went on after `ended_early`: the words to come extend it (same number)
  confirmed    `ended_early`'s words stand: the voice that came back made no word, or none came

so `ended_early` is always followed by `confirmed`, or by `reopened` and then the utterance's
`text` and `ended`/`ended_early` again, or `confirmed` when that voice made no word.  Whether
the user went on is decided once, by the ear (audio/recognition/asr.py `StreamingAsr.voice_changes`); the
writer only numbers what it decided, and listeners follow the numbers.

On the wire an event is a std_msgs/String holding one JSON object with exactly the fields of
`TurnEvent` (`encode`, `decode`): one topic keeps the order that four topics could not.
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import asdict, dataclass, fields
from enum import StrEnum


class TurnKind(StrEnum):
    OPENED = "opened"
    TEXT = "text"
    ENDED = "ended"
    ENDED_EARLY = "ended_early"
    REOPENED = "reopened"
    CONFIRMED = "confirmed"


ENDINGS = (TurnKind.ENDED, TurnKind.ENDED_EARLY)


class TurnEventError(ValueError):
    """A turn/events message that does not follow the schema (one line: what and how to fix it)."""


@dataclass(frozen=True)
class TurnEvent:
    kind: TurnKind
    utterance: int  # 1, 2, ... in the order the writer first handed each on
    stream: str = ""  # the writer's: the numbers of another stream are another count
    text: str = ""  # text and the endings: the utterance's words
    stamp: float = 0.0  # seconds since the epoch (see the kinds above)


_FIELDS = {f.name for f in fields(TurnEvent)}


def encode(event: TurnEvent) -> str:
    return json.dumps({**asdict(event), "kind": event.kind.value}, separators=(",", ":"))


def decode(data: str) -> TurnEvent:
    """The event a turn/events message holds; TurnEventError names what is wrong."""
    try:
        fields_ = json.loads(data)
    except json.JSONDecodeError as err:
        raise TurnEventError(f"not JSON ({err.msg}): send one object with {sorted(_FIELDS)}") from None
    if not isinstance(fields_, dict) or set(fields_) != _FIELDS:
        got = sorted(fields_) if isinstance(fields_, dict) else type(fields_).__name__
        raise TurnEventError(f"fields {got}: a turn event has exactly {sorted(_FIELDS)}")
    kind, utterance, stream, text, stamp = (fields_[k] for k in ("kind", "utterance", "stream", "text", "stamp"))
    if kind not in TurnKind.__members__.values():
        raise TurnEventError(f"kind {kind!r}: one of {', '.join(TurnKind)}")
    if not isinstance(utterance, int) or isinstance(utterance, bool) or utterance < 1:
        raise TurnEventError(f"utterance {utterance!r}: a whole number from 1")
    if not isinstance(stream, str) or not isinstance(text, str):
        raise TurnEventError(f"stream {stream!r}, text {text!r}: both strings")
    if not isinstance(stamp, (int, float)) or isinstance(stamp, bool) or not math.isfinite(stamp):
        raise TurnEventError(f"stamp {stamp!r}: seconds since the epoch, a finite number")
    return TurnEvent(TurnKind(kind), utterance, stream, text, float(stamp))


class TurnEventWriter:
    """Numbers the turn owner's rulings into turn events (asr_node's source thread).

    `voice` takes the ear's voice changes, `words` the partials handed on, `final` every
    final (`handed_on` False: not a turn, but its "confirmed" is about it, not the turn before)."""

    def __init__(self, stream: str | None = None):
        self.stream = stream if stream is not None else uuid.uuid4().hex[:12]
        self._numbered = 0
        self._open: int | None = None  # the utterance whose words are being handed on
        self._onset: float | None = None  # when the latest utterance's voice began (None: no voice events)
        self._early: int | None = None  # the turn ended early, awaiting its confirmed or reopened

    def voice(self, what: str, t: float) -> list[TurnEvent]:
        if what == "start":  # a new utterance (a final still owed may come before its words)
            self._onset = t
        elif what == "resumed" and self._early is not None:
            self._open = self._early
            return [self._event(TurnKind.REOPENED, self._early, stamp=t)]
        elif what == "confirmed" and self._early is not None:
            confirmed, self._early = self._early, None
            if self._open == confirmed:  # the voice that went on made no word
                self._open = None
            return [self._event(TurnKind.CONFIRMED, confirmed, stamp=t)]
        return []

    def words(self, text: str, t: float) -> list[TurnEvent]:
        return [*self._opening(t), self._event(TurnKind.TEXT, self._open, text, t)]

    def final(self, text: str, t_speech_end: float, may_continue: bool, handed_on: bool) -> list[TurnEvent]:
        if not handed_on:
            self._open = self._early = None
            return []
        events = self._opening(t_speech_end)
        ended, self._open = self._open, None
        self._early = ended if may_continue else None
        kind = TurnKind.ENDED_EARLY if may_continue else TurnKind.ENDED
        return [*events, self._event(kind, ended, text, t_speech_end)]

    def _opening(self, t: float) -> list[TurnEvent]:
        """OPENED for an utterance whose words are handed on for the first time."""
        if self._open is not None:
            return []
        self._numbered += 1
        self._open = self._numbered
        return [self._event(TurnKind.OPENED, self._open, stamp=self._onset if self._onset is not None else t)]

    def _event(self, kind: TurnKind, utterance: int, text: str = "", stamp: float = 0.0) -> TurnEvent:
        return TurnEvent(kind, utterance, self.stream, text, stamp)
