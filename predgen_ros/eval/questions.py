"""Timed transcript events of a simulated user, for the virtual-clock benchmark."""

from __future__ import annotations

from dataclasses import dataclass

from ..audio.text_asr import Question, QuestionError, load_questions, text_partials
from ..events import Heard

__all__ = ["Question", "QuestionError", "TimedEvent", "load_questions", "speak"]


@dataclass(frozen=True)
class TimedEvent:
    t: float
    kind: Heard  # PARTIAL, FINAL or END_OF_TURN
    text: str = ""


def speak(text: str, chars_per_second: float = 10.0, endpoint_delay: float = 0.0) -> tuple[list[TimedEvent], float]:
    """Timed events for `text` spoken at `chars_per_second` from t=0, and t_end.

    A partial whenever the visible transcript changes; the final at t_end (the
    last character); the end of turn `endpoint_delay` seconds later.
    """
    partials, t_end = text_partials(text, chars_per_second)
    events = [TimedEvent(t, Heard.PARTIAL, said) for t, said in partials]
    events.append(TimedEvent(t_end, Heard.FINAL, text))
    events.append(TimedEvent(t_end + endpoint_delay, Heard.END_OF_TURN))
    return events, t_end
