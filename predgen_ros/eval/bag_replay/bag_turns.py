"""A bag's recorded ASR stream as the turn events asr_node's turn owner sends (turn/events).

make_bag writes what the ear heard in the order asr_node handed it on: per chunk the closed
utterances' end of speech and final, then the voice's changes, then the open utterance's
partials.  Read in that order, the recording numbers itself: nothing is judged again.  A
bag with asr/voice followed the end-of-turn contract, so each of its finals is an early end
that its `confirmed` or `resumed` settles; a bag without (made before it) ends each turn
at its final.  Everything in a bag is the user's: there was no robot to speak over.
"""

from __future__ import annotations

from ...turn_events import TurnEvent, TurnEventWriter


class BagTurns:
    """One replay's conversion, fed the bag's asr/* messages in order."""

    def __init__(self, voiced: bool):
        self.voiced = voiced  # the bag has asr/voice
        self._writer = TurnEventWriter()
        self._speech_end: float | None = None  # the end of speech just before its final

    def voice(self, kind: str, t: float) -> list[TurnEvent]:
        return self._writer.voice(kind, t)

    def partial(self, text: str, t: float) -> list[TurnEvent]:
        text = " ".join(text.split())
        return self._writer.words(text, t) if text else []

    def speech_end(self, t: float) -> None:
        self._speech_end = t

    def final(self, text: str, t: float) -> list[TurnEvent]:
        """`t`: when it is sent (the end of speech, when none came before it)."""
        t_end, self._speech_end = self._speech_end if self._speech_end is not None else t, None
        text = " ".join(text.split())
        return self._writer.final(text, t_end, may_continue=self.voiced, handed_on=bool(text))
