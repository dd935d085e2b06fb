"""Runs a Session on a real clock in its own thread, fed by a latest-wins mailbox.

Transcript callbacks (ROS subscriptions) only post to the mailbox and return;
the worker takes everything posted between two forward passes, so a newer
partial replaces an older one that was never looked at and a burst of partials
costs one verification, not one per message.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..events import Emission, Heard
from ..os_threads import name_thread
from ..turn_events import ENDINGS, TurnEvent, TurnKind
from .backends.served import ServerError
from .config import SERVER_NOTICE
from .session import Session
from .turn import TurnStats

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Event:
    kind: Heard  # TURN, PLAYED or RESET
    turn: TurnEvent | None = None  # TURN: the user's turn event
    text: str = ""  # PLAYED: what the user heard of the reply they cut off
    t: float = 0.0  # TURN: when it arrived

    def __post_init__(self):
        object.__setattr__(self, "kind", Heard(self.kind))  # a word of the vocabulary, or ValueError

    @property
    def words(self) -> bool:
        """A hypothesis of an utterance's words, which the next one supersedes."""
        return self.turn is not None and self.turn.kind is TurnKind.TEXT


class Mailbox:
    """Pending events, oldest first.  The words of an utterance replace its words posted
    right before them; every other event is kept, in order.  Past `capacity` events the
    oldest words are dropped (and counted): newer words or the final supersede them."""

    def __init__(self, capacity: int = 64):
        self.capacity = capacity
        self.dropped = 0
        self.replaced = 0
        self._events: list[Event] = []
        self._closed = False
        self._ready = threading.Condition()

    def post(self, event: Event) -> None:
        with self._ready:
            if event.words and self._events and self._events[-1].words and _same_utterance(event, self._events[-1]):
                self._events[-1] = event
                self.replaced += 1
            else:
                self._events.append(event)
            if len(self._events) > self.capacity:
                self._drop_oldest_partial()
            self._ready.notify()

    def _drop_oldest_partial(self) -> None:
        """The newest event is never dropped: it may be the only word of a new utterance."""
        oldest = next((i for i, e in enumerate(self._events[:-1]) if e.words), None)
        if oldest is not None:
            del self._events[oldest]
            self.dropped += 1

    def take(self, timeout: float | None) -> list[Event]:
        """Everything pending; waits up to `timeout` s (None: forever) when empty."""
        with self._ready:
            if not self._events and not self._closed and (timeout is None or timeout > 0):
                self._ready.wait(timeout)
            events, self._events = self._events, []
            return events

    def __len__(self) -> int:
        with self._ready:
            return len(self._events)

    def close(self) -> None:
        with self._ready:
            self._closed = True
            self._ready.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed


def _same_utterance(a: Event, b: Event) -> bool:
    return (a.turn.stream, a.turn.utterance) == (b.turn.stream, b.turn.utterance)


# The Session's emissions, plus INTERRUPTED when a turn with a spoken reply ends before it is done.
Emit = Callable[[Emission, str, TurnStats], None]


class EngineWorker:
    """The thread that owns the Session: deliver events, then one step, repeat."""

    def __init__(self, session: Session, emit: Emit, clock: Callable[[], float] = time.time):
        self.session = session
        self.emit = emit
        self.clock = clock
        self.mailbox = Mailbox()
        self.errors = 0
        self.finals_not_taken = 0
        self._busy = False
        self._thread = threading.Thread(target=self._run, name="predgen-engine", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self.mailbox.close()
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def busy(self) -> bool:
        """Whether a turn is in progress (safe to ask from any thread)."""
        return self._busy

    def _run(self) -> None:
        name_thread()  # llama.cpp's passes run on it: the CPU budget reads it by name
        while not self.mailbox.closed:
            for event in self.mailbox.take(0.0 if self.session.has_work() else None):
                self._guarded(self._deliver, event)
            if self.session.has_work():
                self._guarded(self._step)
            self._busy = self.session.has_work()

    def _deliver(self, event: Event) -> None:
        before = self.session.turn
        if event.kind is Heard.TURN:
            self._deliver_turn(event)
        elif event.kind is Heard.PLAYED:
            self.session.reply_heard(event.text)
        elif event.kind is Heard.RESET:
            self.session.reset()
        if self.session.turn is not before and before.t_commit is not None and not before.reply:
            self.emit(Emission.INTERRUPTED, "", before)

    def _deliver_turn(self, event: Event) -> None:
        """An ending is the end of the turn: the robot may answer at once (after an early
        one too: it is withdrawn if the ear says `reopened`)."""
        taken = self.session.hear(event.turn, event.t)
        if event.turn.kind not in ENDINGS:
            return
        if taken:
            self.session.end_of_turn(self.clock())
        else:
            self.finals_not_taken += 1  # sent again, or stale

    def _step(self) -> None:
        turn = self.session.turn
        for kind, text in self.session.step():
            self.emit(kind, text, turn)

    def _guarded(self, action, *args) -> None:
        """An error in one turn is logged with its context and the turn is dropped;
        the worker keeps serving the next one."""
        try:
            action(*args)
        except ServerError as err:  # the served model failed and nothing stands behind it: no traceback
            self.errors += 1
            turn = self.session.turn
            log.error("%s; dropping the turn %r", err, turn.user_text or "(no final yet)")
            if turn.t_final is not None and turn.t_commit is None:  # the user waits for an answer: tell them
                self.emit(Emission.NOTICE, SERVER_NOTICE, turn)
            elif turn.t_commit is not None and not turn.reply:
                self.emit(Emission.INTERRUPTED, "", turn)
            self.session.abandon_turn()
        except Exception:
            self.errors += 1
            turn = self.session.turn
            log.exception(
                "engine error in turn %r (policy %s); dropping the turn",
                turn.user_text or "(no final yet)",
                self.session.config.policy,
            )
            if turn.t_commit is not None and not turn.reply:
                self.emit(Emission.INTERRUPTED, "", turn)
            self.session.abandon_turn()
