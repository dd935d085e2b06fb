"""Which transcript events are news: the ordering rules that sit ahead of Session.

ROS 2 topics are not ordered with each other, and an ASR may send again, so a
turn's events do not come as one clean sequence:

- a partial of an utterance can arrive after that utterance's final (a late
  copy): dropped, when its words start the final's within LATE_COPY_WINDOW_S;
- a final can arrive twice (a re-delivery): dropped when it has the same
  utterance number as the turn's final, or, from an ASR without numbers, the
  same words within LATE_COPY_WINDOW_S with no partial heard in between;
- an endpoint that ends an utterance at a short pause can be early: the ASR
  alone decides that the user went on after it, and says so on asr/voice
  ("resumed", before that speech's words); a partial or final after it that adds
  words to the final reopens the turn.  Without that word a partial after the final
  is a new turn, however soon (an ASR with no voice events never continues one);
- the end of speech (`asr/speech_end`, with the utterance number) usually comes
  just before its final, but may trail it: it pairs with the final it is at
  most SPEECH_END_MAX_LAG_S older than, whichever arrives first.

Everything else is news.  One component owns these rules so that Session only
hears what is news, and the worker only forwards what arrives.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ..transcripts import words

# A copy of the finalized utterance arrives within this many seconds of its final
# (DDS delivers the topics of one publisher milliseconds apart); the user cannot
# end an utterance and say a new one that quickly.
LATE_COPY_WINDOW_S = 1.0
# An end of speech belongs to a final that arrives at most this long after it
# (the ASR's endpoint silence plus its decoding); an older stamp is stale.
SPEECH_END_MAX_LAG_S = 5.0


class Utterance(Enum):
    """Where the turn's utterance stands."""

    HEARING = "hearing"  # no final yet: every non-empty partial is news
    FINALIZED = "finalized"  # its final came: copies of it are dropped, added words reopen it


class Arrival(Enum):
    NEWS = "news"  # take it
    EMPTY = "empty"  # no words: nothing to take
    COPY = "copy"  # a late or re-delivered copy of the finalized utterance: drop it
    CONTINUES = "continues"  # more words after an early final, the ASR said "resumed": the turn listens again


@dataclass
class _Final:
    text: str
    t: float
    utterance: str | None
    t_speech_end: float | None


class TranscriptOrder:
    """The ordering state of one turn's utterance, and an end of speech awaiting its final."""

    def __init__(self):
        self._pending_speech_end: tuple[str | None, float] | None = None  # (utterance, stamp) before its final
        self.new_turn()

    def new_turn(self) -> None:
        """A new utterance (a pending end of speech stays: its final may be next)."""
        self.state = Utterance.HEARING
        self._final: _Final | None = None
        self._heard_since_final = False
        self._resumed = False  # the ASR said the user went on after the final
        self._resumed_at: float | None = None  # the stamp of that "resumed": the voice came back then

    def voice(self, kind: str, stamp: float | None = None) -> None:
        """An asr/voice event: "resumed" (the speech that follows continues the finalized
        utterance) arms a reopening; "start" (a new utterance) and "confirmed" (the final
        stands) disarm it, and so does a final whose speech ended after the voice came back
        (`stamp`): it holds the words that went on.  It may come just before the final it
        continues, on another topic: it waits for it."""
        if kind in ("resumed", "start", "confirmed"):
            self._resumed = kind == "resumed"
            self._resumed_at = stamp if self._resumed else None

    @property
    def awaiting_continuation(self) -> bool:
        """The ASR said the user went on after the final, and neither the words that went
        on nor its "confirmed" came yet: the final is not the end of the turn for now."""
        return self._resumed

    def partial(self, text: str, t: float) -> Arrival:
        """What a partial (its words normalized) is, arriving at `t`."""
        final = self._final
        if not text:
            return Arrival.EMPTY
        if self.state is Utterance.HEARING:
            return Arrival.NEWS
        if t - final.t <= LATE_COPY_WINDOW_S and text.split() == final.text.split()[: len(text.split())]:
            return Arrival.COPY
        if self._extends_final(text):
            self.new_turn()
            return Arrival.CONTINUES
        self._heard_since_final = True
        return Arrival.NEWS

    def final(self, text: str, t: float, utterance: str | None, t_speech_end: float | None) -> Arrival:
        """What a final is; news finalizes the utterance.  Without `utterance` and
        `t_speech_end`, a pending end of speech of this final supplies them."""
        if utterance is None and t_speech_end is None:
            utterance, t_speech_end = self._take_speech_end(t)
        if not text:
            return Arrival.EMPTY
        if self.state is Utterance.FINALIZED and self._redelivers(text, t, utterance):
            return Arrival.COPY
        continues = self.state is Utterance.FINALIZED and self._extends_final(text)  # with no partial before it
        self.state = Utterance.FINALIZED
        self._final = _Final(text, t, utterance, t_speech_end)
        self._heard_since_final = False
        if continues:
            self._resumed, self._resumed_at = False, None  # these are the words that went on
        self._settle_resumption(t_speech_end)
        return Arrival.CONTINUES if continues else Arrival.NEWS

    @property
    def last_partial_unfinalized(self) -> bool:
        """No final has covered the last partial taken (if any): an empty final stands
        for it.  After the utterance's final, until new words come, it has nothing to
        stand for (it once answered the finished utterance again)."""
        return self.state is Utterance.HEARING or self._heard_since_final

    @property
    def utterance(self) -> str | None:
        return self._final.utterance if self._final else None

    @property
    def t_speech_end(self) -> float | None:
        return self._final.t_speech_end if self._final else None

    def speech_end(self, utterance: str | None, stamp: float) -> bool:
        """An end of speech: True when it belongs to the final already taken (it
        trailed it), else it waits for the next final."""
        final = self._final
        if final is not None and final.t_speech_end is None and _ends_speech_of(stamp, final.t):
            final.t_speech_end = stamp
            final.utterance = final.utterance or utterance
            self._settle_resumption(stamp)
            return True
        self._pending_speech_end = (utterance, stamp)
        return False

    def _extends_final(self, text: str) -> bool:
        """After "resumed": words that begin with the final's and add to them."""
        return self._resumed and words(text).startswith(words(self._final.text) + " ")

    def _settle_resumption(self, t_speech_end: float | None) -> None:
        """A final whose speech ended after the voice came back holds what was said then."""
        if self._resumed_at is not None and t_speech_end is not None and t_speech_end > self._resumed_at:
            self._resumed, self._resumed_at = False, None

    def _take_speech_end(self, t_final: float) -> tuple[str | None, float | None]:
        """The pending end of speech, consumed by this final whether it is news or a
        re-delivery; a stamp too old is of an utterance whose final never came."""
        pending, self._pending_speech_end = self._pending_speech_end, None
        return pending if pending and _ends_speech_of(pending[1], t_final) else (None, None)

    def _redelivers(self, text: str, t: float, utterance: str | None) -> bool:
        final = self._final
        if utterance is not None and final.utterance is not None:
            return utterance == final.utterance
        return text == final.text and not self._heard_since_final and t - final.t <= LATE_COPY_WINDOW_S


def _ends_speech_of(stamp: float, t_final: float) -> bool:
    return 0.0 <= t_final - stamp <= SPEECH_END_MAX_LAG_S
