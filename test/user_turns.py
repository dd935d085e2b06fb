"""The engine tests' user: words, endings and voice turned into the turn owner's events
(turn_events.py) and heard by a session, as predgen_node's worker hands them on."""

from __future__ import annotations

from weakref import WeakKeyDictionary

from predgen_ros.turn_events import TurnEvent, TurnEventWriter

_USERS: WeakKeyDictionary = WeakKeyDictionary()


class User:
    def __init__(self, session):
        self.session = session
        self.writer = TurnEventWriter("test-user")
        self.sent: list[TurnEvent] = []

    def partial(self, text: str, t: float) -> bool:
        """Whether the session took the words."""
        return self._hear(self.writer.words(" ".join(text.split()), t) if text.split() else [], t)

    def final(self, text: str, t: float, early: bool = False, t_speech_end: float | None = None) -> bool:
        """Whether the session took the ending; `early`: at a short pause, the user may go on."""
        stamp = t if t_speech_end is None else t_speech_end
        return self._hear(self.writer.final(text, stamp, may_continue=early, handed_on=bool(text.split())), t)

    def voice(self, kind: str, t: float = 0.0) -> bool:
        """The ear's voice change ("start", "resumed", "confirmed", ...)."""
        return self._hear(self.writer.voice(kind, t), t)

    def again(self, t: float) -> bool:
        """The last event sent once more (a re-delivery)."""
        return self.session.hear(self.sent[-1], t)

    def _hear(self, events: list[TurnEvent], t: float) -> bool:
        self.sent += events
        taken = [self.session.hear(event, t) for event in events]
        return bool(taken) and taken[-1]


def user_of(session) -> User:
    """The session's one user (its numbering goes on across a test's calls)."""
    if session not in _USERS:
        _USERS[session] = User(session)
    return _USERS[session]
