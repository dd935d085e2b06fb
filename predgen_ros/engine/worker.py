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
from .session import Session
from .turn import TurnStats

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Event:
    kind: Heard  # PARTIAL, FINAL, VOICE, SPEECH_END, PLAYED or RESET
    text: str = ""  # speech_end: the utterance number ("" when the ASR gives none); voice: its kind
    t: float = 0.0  # speech_end: the end of the user's voiced audio; voice: its stamp

    def __post_init__(self):
        object.__setattr__(self, "kind", Heard(self.kind))  # a word of the vocabulary, or ValueError


class Mailbox:
    """Pending events, oldest first.  A partial replaces a partial posted right
    before it; finals, speech ends and resets are always kept, in order.  Past
    `capacity` events the oldest partials are dropped (and counted): a newer
    hypothesis or the final supersedes them."""

    def __init__(self, capacity: int = 64):
        self.capacity = capacity
        self.dropped = 0
        self.replaced = 0
        self._events: list[Event] = []
        self._closed = False
        self._ready = threading.Condition()

    def post(self, event: Event) -> None:
        with self._ready:
            if event.kind is Heard.PARTIAL and self._events and self._events[-1].kind is Heard.PARTIAL:
                self._events[-1] = event
                self.replaced += 1
            else:
                self._events.append(event)
            if len(self._events) > self.capacity:
                self._drop_oldest_partial()
            self._ready.notify()

    def _drop_oldest_partial(self) -> None:
        """The newest event is never dropped: it may be the only word of a new utterance."""
        oldest = next((i for i, e in enumerate(self._events[:-1]) if e.kind is Heard.PARTIAL), None)
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


# The Session's emissions, plus INTERRUPTED when a turn with a spoken reply ends before it is done.
Emit = Callable[[Emission, str, TurnStats], None]


class EngineWorker:
    """The thread that owns the Session: deliver events, then one step, repeat."""

    def __init__(self, session: Session, emit: Emit, endpoint_delay: float = 0.0, clock: Callable[[], float] = time.time):
        self.session = session
        self.emit = emit
        self.endpoint_delay = endpoint_delay
        self.clock = clock
        self.mailbox = Mailbox()
        self.errors = 0
        self.finals_not_taken = 0
        self._end_of_turn_at: float | None = None
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
            for event in self.mailbox.take(self._wait_time()):
                self._guarded(self._deliver, event)
            if self._end_of_turn_at is not None and self.clock() >= self._end_of_turn_at:
                self._end_of_turn_at = None
                self._guarded(lambda: self.session.end_of_turn(self.clock()))
            if self.session.has_work():
                self._guarded(self._step)
            self._busy = self.session.has_work() or self._end_of_turn_at is not None

    def _wait_time(self) -> float | None:
        if self.session.has_work():
            return 0.0
        if self._end_of_turn_at is not None:
            return max(0.0, self._end_of_turn_at - self.clock())
        return None

    def _deliver(self, event: Event) -> None:
        before = self.session.turn
        if event.kind is Heard.PARTIAL:
            self.session.partial(event.text, event.t)
            if self.session.turn.t_final is None:
                self._end_of_turn_at = None  # the user went on after an early final
        elif event.kind is Heard.FINAL:
            self._deliver_final(event)
        elif event.kind is Heard.VOICE:
            self.session.voice(event.text, event.t)
        elif event.kind is Heard.SPEECH_END:
            self.session.speech_end(event.text or None, event.t)
        elif event.kind is Heard.PLAYED:
            self.session.reply_heard(event.text)
        elif event.kind is Heard.RESET:
            self.session.reset()
            self._end_of_turn_at = None
        if self.session.turn is not before and before.t_commit is not None and not before.reply:
            self.emit(Emission.INTERRUPTED, "", before)

    def _deliver_final(self, event: Event) -> None:
        if self.session.final(event.text, event.t):
            self._end_of_turn_at = event.t + self.endpoint_delay
        else:
            self.finals_not_taken += 1  # a re-delivery of the utterance already finalized, or empty

    def _step(self) -> None:
        turn = self.session.turn
        for kind, text in self.session.step():
            self.emit(kind, text, turn)

    def _guarded(self, action, *args) -> None:
        """An error in one turn is logged with its context and the turn is dropped;
        the worker keeps serving the next one."""
        try:
            action(*args)
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
            self._end_of_turn_at = None
