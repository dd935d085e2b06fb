"""The robot's voice without ROS: replies played sentence by sentence through a sink.

States (`PlayerState`):

  IDLE        no reply open; a foreseen sentence's opening may be synthesized ahead
  PLAYING     a reply open, its chunks handed to the sink at real time
  PAUSED      a reply open, held where it paused until `resume` or `stop`
  DISCARDING  a reply stopped (a barge-in, a failed sink): what is still said of it is
              dropped until its end ("")

The player decides nothing about the user: `pause`, `resume` and `stop` are the turn
decision's commands (turn_taking.py), applied within one chunk.  It reports through
`PlayerEvents`: when the voice starts and ends, the first audio of each reply, each
pause, resume and stop with the time the audio fell silent or went on, what the user
heard of a reply cut off, and each chunk as it starts to play (the echo canceller's
reference).  `abandon` ends a reply whose sender went away; what arrives of it later is
stale and dropped until `user_spoke`.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from ...os_threads import name_thread
from ...turn_taking import heard_text
from .tts import Speech

MAX_QUEUED = 256  # sentences; a sane bound, never reached by a real reply
PAUSED_WAIT_S = 0.1  # a paused voice looks again this often (a resume or a stop also wakes it at once)


class PlayerState(StrEnum):
    IDLE = "idle"
    PLAYING = "playing"
    PAUSED = "paused"
    DISCARDING = "discarding"


def _ignore(*_args) -> None:
    pass


@dataclass
class PlayerEvents:
    speaking: Callable[[bool], None] = _ignore
    first_audio: Callable[[float, str, bool], None] = _ignore  # (time, sentence, its opening came from the cache)
    interruption: Callable[[float, str], None] = _ignore  # (time, "pause" | "resume" | "stop")
    played: Callable[[str], None] = _ignore  # what the user heard of a reply cut off
    reference: Callable[[np.ndarray, int, float], None] = _ignore  # (chunk, rate, when it starts to play)
    dropped: Callable[[str], None] = _ignore  # a log line: a sentence dropped, and why
    failed: Callable[[Exception], None] = _ignore  # a synthesis or the sink failed; its reply is lost


class ReplyPlayer:
    """`synth`: PiperSynthesizer-like (synthesize, pieces, cached, sample_rate);
    `sink`: audio/speech/sinks.py; commands may come from any thread, `run` plays on its own."""

    def __init__(
        self,
        synth,
        sink,
        events: PlayerEvents | None = None,
        chunk_ms: int = 20,
        realtime: bool = True,
        clock: Callable[[], float] = time.time,
    ):
        self.synth, self.sink = synth, sink
        self.events = events or PlayerEvents()
        self.chunk = max(1, int(synth.sample_rate * chunk_ms / 1000))
        self.realtime = realtime
        self.clock = clock
        self.state = PlayerState.IDLE
        self.replies = self.sentences = self.barge_ins = self.pauses = self.resumes = 0
        self.paused_waits = 0  # the voice's waits for a resume, each up to PAUSED_WAIT_S (what a test reads)
        self.stale_dropped = 0
        self.synthesized_s = 0.0  # speech synthesized for the pieces it began to say (the work a withdrawn reply cost)
        self.underruns = 0  # chunks of a synthesized piece handed over after the one before had played out
        self._queue: deque[str] = deque()
        self._foreseen: str | None = None  # the opening to synthesize ahead
        self._ready = threading.Condition()
        self._wake = threading.Event()  # a stop or a shutdown cuts a wait short
        self._stopping = threading.Event()
        self._stop_asked = False
        self._pause_asked = False
        self._stale = False
        self._played: list[tuple[str, float]] = []  # this reply's pieces so far: (text, share played)
        self._play_until = 0.0  # when the audio handed to a self-paced schedule ends
        self._in_piece = False  # handing a piece's chunks to the sink (else waiting for the next piece)
        self._voice_until = 0.0  # when the last piece's audio ends
        # a pause or stop that came between pieces: the voice fell silent here, not when it is applied
        self._silent_since: float | None = None
        # a first sentence's rest
        self._ahead = ThreadPoolExecutor(1, thread_name_prefix="tts-ahead", initializer=name_thread, initargs=("tts-ahead",))

    # ------------------------------------------------------------ commands
    def say(self, sentence: str) -> None:
        """The next sentence of the reply; "" ends it."""
        with self._ready:
            if self._stale:
                self.stale_dropped += 1
                return
            if len(self._queue) >= MAX_QUEUED:
                self.events.dropped(f"more than {MAX_QUEUED} sentences queued; dropping the oldest")
                self._queue.popleft()
            self._queue.append(sentence.strip())
            self._ready.notify_all()

    def foresee(self, sentence: str, finished: bool = True) -> None:
        """A first sentence likely to be said, or its beginning while it is still being
        decoded (`finished` False): its opening is synthesized while idle (latest wins)."""
        with self._ready:
            self._foreseen = self.synth.opening_ahead(sentence.strip(), finished) or None
            self._ready.notify_all()

    def pause(self) -> None:
        with self._ready:
            if self.state is PlayerState.PLAYING:
                self._pause_asked = True
                self._note_silence()

    def resume(self) -> None:
        with self._ready:
            self._pause_asked = False
            self._silent_since = None
            self._ready.notify_all()

    def stop(self) -> None:
        """A barge-in: the reply playing stops within a chunk and the rest of it is dropped."""
        with self._ready:
            if self.state in (PlayerState.PLAYING, PlayerState.PAUSED):
                self._stop_asked = True
                self._note_silence()
                self._wake.set()
                self._ready.notify_all()

    def _note_silence(self) -> None:
        """Between pieces (the next sentence not yet synthesized) the voice is already silent:
        the pause or stop, applied at the next piece's first chunk, is stamped where it fell silent."""
        if not self._in_piece and self._silent_since is None:
            self._silent_since = self._voice_until

    def _silenced_at(self) -> float:
        """When the voice falls silent for the pause or stop being applied now."""
        noted, self._silent_since = self._silent_since, None
        return noted if noted is not None else max(self.clock(), self._play_until)

    def abandon(self) -> None:
        """The reply's sender went away: end it now; what it sends later is stale."""
        with self._ready:
            self._stale = True
            self._queue.clear()
            self._queue.append("")  # the player thread ends the reply open
            self._ready.notify_all()

    def user_spoke(self) -> None:
        """What the sender says next answers the user: no longer stale."""
        with self._ready:
            self._stale = False

    def shutdown(self) -> None:
        """`run` closes the reply open (a WAV file cut short still gets a valid header) and returns."""
        self._stopping.set()
        self._wake.set()
        with self._ready:
            self._queue.clear()
            self._foreseen = None
            self._ready.notify_all()

    @property
    def waiting_for_more(self) -> bool:
        """A reply is open and nothing of it is queued."""
        return self.state is not PlayerState.IDLE and not self._queue

    @property
    def stale(self) -> bool:
        return self._stale

    # ------------------------------------------------------------ the loop
    def run(self) -> None:
        """Play until `shutdown`; a failing sentence loses its reply, not the player."""
        name_thread()
        while not self._stopping.is_set():
            self.step()
        if self.state is not PlayerState.IDLE:
            self._close_reply()
        self._ahead.shutdown(wait=True)

    def step(self, wait_s: float = 0.2) -> None:
        item, foreseen = self._next(wait_s)
        try:
            if item is None and foreseen and not self.synth.cached(foreseen):
                self.synth.synthesize(foreseen)
            elif item == "":
                self._end_reply()
            elif item is not None:
                self._speak(item)
        except Exception as err:  # noqa: BLE001 (a failed synthesis or sink: this reply is lost, the player serves on)
            if not self._stopping.is_set():
                self._fail_reply(err)

    def _next(self, wait_s: float) -> tuple[str | None, str | None]:
        with self._ready:
            if not self._queue and self._foreseen is None:
                self._ready.wait(wait_s)
            if self._queue:
                return self._queue.popleft(), None
            foreseen, self._foreseen = self._foreseen, None
            return None, foreseen

    def _speak(self, sentence: str) -> None:
        if self.state is PlayerState.DISCARDING or not sentence:
            return
        first = self.state is PlayerState.IDLE
        pieces = self.synth.pieces(sentence) if first else [sentence]
        cached = self.synth.cached(pieces[0])
        opening = self.synth.synthesize(pieces[0])
        rest = self._ahead.submit(self.synth.synthesize, pieces[1]) if len(pieces) > 1 else None
        self.synthesized_s += opening.seconds
        if not self._play(opening, pieces[0], sentence, cached):
            return
        if rest is not None:
            self.synthesized_s += rest.result().seconds
            if not self._play(rest.result(), pieces[1], sentence):
                return
        self.sentences += 1

    def _play(self, speech: Speech, piece: str, sentence: str, cached: bool = False) -> bool:
        """Hand `speech` to the sink chunk by chunk, holding while paused; False once stopped."""
        self._in_piece = True
        try:
            return self._hand_over(speech, piece, sentence, cached)
        finally:
            self._in_piece = False
            self._voice_until = max(self.clock(), self._play_until)

    def _hand_over(self, speech: Speech, piece: str, sentence: str, cached: bool) -> bool:
        first = self.state is PlayerState.IDLE
        if first:
            self._begin_reply()
        total = len(speech.samples)
        for start in range(0, total, self.chunk):
            self._hold_while_paused()
            if self._stop_asked or self._stopping.is_set():
                if not self._stopping.is_set():
                    self._interrupt((piece, start / max(1, total)))
                return False
            now = self.clock()
            if first:
                self.events.first_audio(now, sentence, cached)
                first = False
            chunk = speech.samples[start : start + self.chunk]
            # stamped with when it plays: for a self-paced schedule its place in it (back to back
            # with the chunk before, or now after an underrun), for a device that blocks while
            # playing the hand-over
            starts = now if self.sink.paced else max(now, self._play_until)
            if start and not self.sink.paced and self.realtime and now > self._play_until:
                self.underruns += 1  # the piece's chunk before this one has played out: a gap in the voice
            self.events.reference(chunk, speech.sample_rate, starts)
            self.sink.play(chunk)
            self._pace(starts, len(chunk) / speech.sample_rate)
        self._played.append((piece, 1.0))
        return True

    def _hold_while_paused(self) -> None:
        with self._ready:
            if not self._pause_asked:
                return
            self.state = PlayerState.PAUSED
            self.pauses += 1
            self.events.interruption(self._silenced_at(), "pause")
            while self._pause_asked and not self._stop_asked and not self._stopping.is_set():
                self.paused_waits += 1
                self._ready.wait(PAUSED_WAIT_S)
            if self._stop_asked or self._stopping.is_set():
                return  # the stop is announced by _interrupt
            self.state = PlayerState.PLAYING
            self.resumes += 1
        self._play_until = self.clock()  # pacing starts again from now
        self.events.interruption(self._play_until, "resume")

    def _begin_reply(self) -> None:
        self.replies += 1
        self.state = PlayerState.PLAYING
        self._stop_asked = self._pause_asked = False
        self._silent_since = None
        self._wake.clear()
        self._played = []
        self._play_until = self.clock()
        self.events.speaking(True)
        self.sink.begin(f"reply_{self.replies:03d}", self.synth.sample_rate)

    def _pace(self, starts: float, seconds: float) -> None:
        """Real time for sinks that do not block while playing: one chunk stays buffered.
        The schedule goes on from where this chunk starts: after an underrun (the next
        sentence still being synthesized) that is now, not the old schedule's end, which
        once handed the chunks after it over in a burst, stamped over each other."""
        if self.sink.paced or not self.realtime:
            return
        self._play_until = starts + seconds
        ahead = self._play_until - self.clock() - seconds
        if ahead > 0:
            self._wake.wait(ahead)

    def _end_reply(self) -> None:
        if self.state is PlayerState.DISCARDING:
            self.state = PlayerState.IDLE
            return
        if self.state is PlayerState.IDLE:
            return
        if not self.sink.paced and self.realtime:
            self._wake.wait(max(0.0, self._play_until - self.clock()))  # the last chunk plays out
        self._close_reply()

    def _close_reply(self, then: PlayerState = PlayerState.IDLE) -> None:
        self.state = then
        self._stop_asked = self._pause_asked = False
        try:
            self.sink.end()
        finally:
            self.events.speaking(False)

    def _interrupt(self, cut: tuple[str, float]) -> None:
        self.barge_ins += 1
        with self._ready:
            silenced = self._silenced_at()
        self.events.interruption(silenced, "stop")
        self.events.played(heard_text([*self._played, cut]))
        self._close_reply(then=PlayerState.DISCARDING)

    def _fail_reply(self, err: Exception) -> None:
        """A failed synthesis or sink: the reply open is lost (the rest of it dropped)."""
        if self.state is not PlayerState.IDLE:
            try:
                self._close_reply(then=PlayerState.DISCARDING)
            except Exception:  # noqa: BLE001 (the sink is already broken; speaking went false)
                self.state = PlayerState.DISCARDING
        self.events.failed(err)
