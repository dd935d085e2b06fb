"""Timed transcript events of a simulated user, for the virtual-clock benchmark."""

from __future__ import annotations

from dataclasses import dataclass

from ...audio.recognition.text_asr import Question, QuestionError, load_questions, text_partials
from ...events import Heard
from ...turn_events import TurnEvent, TurnEventWriter

__all__ = ["Question", "QuestionError", "TimedEvent", "load_questions", "speak", "whole_turn"]


@dataclass(frozen=True)
class TimedEvent:
    t: float
    kind: Heard  # TURN or END_OF_TURN
    turn: TurnEvent | None = None  # TURN: the user's turn event


def speak(text: str, chars_per_second: float = 10.0, endpoint_delay: float = 0.0) -> tuple[list[TimedEvent], float]:
    """Timed events for `text` spoken at `chars_per_second` from t=0, and t_end.

    The words whenever the visible transcript changes; the ending at t_end (the
    last character); the end of turn `endpoint_delay` seconds later.
    """
    partials, t_end = text_partials(text, chars_per_second)
    writer = TurnEventWriter()
    events = [TimedEvent(t, Heard.TURN, e) for t, said in partials for e in writer.words(said, t)]
    events += [TimedEvent(t_end, Heard.TURN, e) for e in writer.final(text, t_end, may_continue=False, handed_on=True)]
    events.append(TimedEvent(t_end + endpoint_delay, Heard.END_OF_TURN))
    return events, t_end


def whole_turn(session, text: str, t: float = 0.0) -> None:
    """`text` heard at once as a whole turn, and the turn ended: the session may answer."""
    for event in TurnEventWriter().final(text, t, may_continue=False, handed_on=True):
        session.hear(event, t)
    session.end_of_turn(t)
