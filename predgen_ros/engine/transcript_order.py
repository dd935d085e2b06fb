"""Which turn events are news: the de-duplication ahead of Session.

The user's turns come as one ordered stream (turn_events.py), each event naming its
utterance, so nothing here judges words or times: whether the user went on after an early
end of turn is the ear's decision, sent as `reopened`.  What is left is what a sender may
send again (a replay, a re-delivery) or what no longer applies:

- an event of an utterance older than the newest one of its stream is stale;
- an utterance's words or ending after it ended are a copy, unless `reopened` came
  between: then they extend the turn (CONTINUES);
- `opened` twice, `reopened` of an utterance that did not end early, and `confirmed` of one
  that is not awaiting it are copies;
- text with no words is EMPTY.

A new stream (asr_node restarted) begins a new count.
"""

from __future__ import annotations

from enum import Enum

from ..turn_events import ENDINGS, TurnEvent, TurnKind


class Arrival(Enum):
    NEWS = "news"  # take it
    EMPTY = "empty"  # no words: nothing to take
    COPY = "copy"  # sent again, or stale: drop it
    CONTINUES = "continues"  # the first words after `reopened`: the turn listens again


class TranscriptOrder:
    """The newest utterance of the stream, and where it stands."""

    def __init__(self):
        self._restart(None)

    def _restart(self, stream: str | None) -> None:
        self._stream = stream
        self._newest = 0
        self._ended = False  # its ending came
        self._early = False  # ... ended_early, and neither confirmed nor followed by newer words yet
        self._reopened = False  # the user went on after it: its next words extend the turn

    @property
    def awaiting_continuation(self) -> bool:
        """The ear said the user went on after the early end of turn, and neither the words
        that went on nor its `confirmed` came yet: the turn is not over for now."""
        return self._reopened

    def take(self, event: TurnEvent) -> Arrival:
        if event.stream != self._stream:
            self._restart(event.stream)
        if event.utterance < self._newest:
            return Arrival.COPY
        fresh = event.utterance > self._newest
        if fresh:  # a new utterance: an older early end stands
            self._newest, self._ended, self._early, self._reopened = event.utterance, False, False, False
        kind = event.kind
        if kind is TurnKind.OPENED:
            return Arrival.NEWS if fresh else Arrival.COPY
        if kind is TurnKind.REOPENED:
            if not self._early or self._reopened:
                return Arrival.COPY
            self._reopened = True
            return Arrival.NEWS
        if kind is TurnKind.CONFIRMED:
            if not self._early:
                return Arrival.COPY
            self._early = self._reopened = False
            return Arrival.NEWS
        if not event.text.split():
            return Arrival.EMPTY
        if self._ended and not self._reopened:
            return Arrival.COPY
        continues = self._ended  # and reopened: the words that went on
        self._reopened = False
        self._ended = kind in ENDINGS
        self._early = kind is TurnKind.ENDED_EARLY
        return Arrival.CONTINUES if continues else Arrival.NEWS
