"""Whisper as a streaming recognizer that never blocks the audio loop.

One call costs 0.1–0.4 s on a robot's CPU, so transcriptions run on a thread of
their own, beside the 20 ms audio loop, the voice detector and the endpoint rule
(audio/recognition/asr.py), which only hand audio over and read what is ready:

- Partials: the utterance's audio is transcribed again whenever `step_s` of new
  audio has arrived and the thread is free.  What is published is the
  LocalAgreement-2 prefix (the words the last two transcriptions agree on), so a
  word heard half-spoken is not speculated on; docs/results/asr-whisper.md
  measures the revisions with and without it.
- The voice's end (`voice_ended`, a pause of VOICE_GAP_S): the whole utterance is
  transcribed at once and published whole, without waiting for agreement: the LLM
  speculates on it and judges whether the turn is complete during the endpoint wait.
- The final (`close`): the utterance's last transcription if it covered all its
  audio (usually the one at the voice's end), otherwise one more.  Closed
  utterances go first; a final is never dropped, only late (`final` returns None
  until it is ready).
- Behind real time: the cadence widens to `LOAD_FACTOR` times the last call's
  duration, so the recognizer's lag stays bounded and leaves the LLM its core.
- Over LONG_S of audio: the oldest part, cut at its quietest 0.2 s, is committed
  (transcribed once, its words kept) and the rest is transcribed with the
  committed words as Whisper's prompt, so no utterance outgrows the 30 s window
  and no call grows with the utterance.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ...os_threads import name_thread
from ...transcripts import same_words
from ..pcm import SAMPLE_RATE
from .whisper import WhisperTranscriber

STEP_S = 0.3  # new audio that asks for a new partial
LOAD_FACTOR = 2.0  # the next partial waits for this many times the last call's duration of new audio
# Uncommitted audio beyond LONG_S is cut (at its quietest point inside CUT_RANGE_S) and
# committed: every call then reads at most ~12 s, so it costs ~0.2 s, and the
# transcription at the voice's end is ready within the endpoint's wait.
LONG_S = 12.0
CUT_RANGE_S = (4.0, 10.0)
QUIET_WINDOW_S = 0.2
PROMPT_CHARS = 200  # the committed words Whisper reads as its prompt
BYTES_PER_S = 2 * SAMPLE_RATE
log = logging.getLogger(__name__)
VOICE_MARGIN_S = 0.1  # audio after the last voiced frame that a final still reads


@dataclass
class _Utterance:
    audio: bytearray = field(default_factory=bytearray)
    committed: list[str] = field(default_factory=list)  # texts of the cut and transcribed parts
    committed_bytes: int = 0  # audio covered by `committed`
    transcribed_bytes: int = 0  # audio covered by the newest transcription
    hypotheses: list[str] = field(default_factory=list)  # the newest transcriptions, whole utterance
    published: str = ""  # what accept() reports
    wants_all: bool = False  # the voice ended: transcribe everything now
    silent: bool = False  # the voice paused: no partials of the silence
    closed: bool = False
    final: str | None = None

    def text(self, tail: str) -> str:
        return " ".join(" ".join([*self.committed, tail]).split())


def agreed_prefix(older: str, newer: str) -> str:
    """The words of `newer` that `older` starts with too (LocalAgreement-2)."""
    old, new = older.split(), newer.split()
    n = 0
    while n < min(len(old), len(new)) and same_words(old[n], new[n]):
        n += 1
    return " ".join(new[:n])


class WhisperStreamingRecognizer:
    """The background recognizer audio/asr.StreamingAsr drives (see the module's text)."""

    def __init__(self, transcriber: WhisperTranscriber, step_s: float = STEP_S, agreement: bool = True):
        """`agreement` False: publish every transcription whole (to measure what LocalAgreement-2 buys)."""
        self.transcriber = transcriber
        self.step_s = step_s
        self.agreement = agreement
        self.lags: deque[float] = deque(maxlen=1000)  # s from an audio's arrival to its words
        self.calls: deque[float] = deque(maxlen=1000)  # s per transcription
        self.failures = 0
        self._utterances: deque[_Utterance] = deque()
        self._arrival: list[tuple[int, float]] = []  # (open utterance's bytes, wall time they had arrived)
        self._condition = threading.Condition()
        self._stopping = False
        self._cadence_s = step_s
        self._busy = False  # a transcription is running
        self._thread = threading.Thread(target=self._run, name="whisper", daemon=True)
        self._thread.start()

    # ------------------------------------------------- the audio loop's side
    def start(self) -> None:
        with self._condition:
            self._utterances.append(_Utterance())
            self._arrival = []

    def accept(self, pcm: bytes) -> str:
        with self._condition:
            utterance = self._utterances[-1]
            utterance.audio += pcm
            self._arrival.append((len(utterance.audio), time.monotonic()))
            self._condition.notify_all()
            return utterance.published

    def voice_ended(self) -> None:
        """The voice paused: transcribe the utterance whole now."""
        with self._condition:
            if self._utterances and not self._utterances[-1].closed:
                self._utterances[-1].wants_all = self._utterances[-1].silent = True
                self._condition.notify_all()

    def voice_resumed(self) -> None:
        with self._condition:
            if self._utterances:
                self._utterances[-1].silent = False

    def close(self, silent_tail_s: float = 0.0) -> None:
        """The utterance is over; its last `silent_tail_s` were silence (not transcribed
        again: the transcription at the voice's end is the final when it covered the rest)."""
        with self._condition:
            if not self._utterances:
                return
            utterance = self._utterances[-1]
            silence = int(max(0.0, silent_tail_s - VOICE_MARGIN_S) * SAMPLE_RATE) * 2
            del utterance.audio[max(utterance.transcribed_bytes, len(utterance.audio) - silence) :]
            utterance.closed = True
            self._condition.notify_all()

    def final(self, timeout: float = 0.0) -> str | None:
        """The oldest closed utterance's final, once transcribed (removed then); None
        while it is not ready after `timeout` s."""
        with self._condition:
            ready = self._condition.wait_for(
                lambda: not self._utterances or not self._utterances[0].closed or self._utterances[0].final is not None,
                timeout,
            )
            if not ready or not self._utterances or not self._utterances[0].closed:
                return None
            return self._utterances.popleft().final

    def stop(self) -> None:
        with self._condition:
            self._stopping = True
            self._condition.notify_all()
        self._thread.join(5.0)

    @property
    def cadence_s(self) -> float:
        """The new audio that asks for the next partial now (s)."""
        return self._cadence_s

    def idle(self, timeout: float | None = None) -> bool:
        """Wait until the thread has nothing left to do (offline tools and tests)."""
        with self._condition:
            return self._condition.wait_for(lambda: not self._busy and self._next_job() is None, timeout)

    # ---------------------------------------------------- the thread's side
    def _run(self) -> None:
        name_thread()
        while True:
            with self._condition:
                self._condition.wait_for(lambda: self._stopping or self._next_job() is not None)
                if self._stopping:
                    return
                utterance, upto, whole = self._next_job()
                if whole:
                    utterance.wants_all = False
                self._busy = True
                pcm = bytes(utterance.audio[utterance.committed_bytes : upto])
                prompt = " ".join(utterance.committed)[-PROMPT_CHARS:]
                arrived = self._arrival_time(upto) if utterance is self._utterances[-1] else None
            try:
                head, text, cut, took = self._transcribe(pcm, prompt, utterance)
            finally:
                with self._condition:
                    self._busy = False
                    self._condition.notify_all()
            with self._condition:
                self.calls.append(took)
                self._cadence_s = max(self.step_s, LOAD_FACTOR * took)
                if cut is not None:
                    utterance.committed.append(head)
                    utterance.committed_bytes += cut
                self._take(utterance, upto, whole, utterance.text(text))
                if arrived is not None:
                    self.lags.append(time.monotonic() - arrived)
                self._condition.notify_all()

    def _transcribe(self, pcm: bytes, prompt: str, utterance: _Utterance) -> tuple[str, str, int | None, float]:
        """(committed head's text, the rest's text, the cut, seconds taken).  A failed
        call hears nothing and is logged: the thread, and every later final, live on."""
        cut = _quietest_cut(pcm) if len(pcm) > LONG_S * BYTES_PER_S else None
        started = time.monotonic()
        head = text = ""
        try:
            if cut is not None:
                head = self.transcriber.transcribe(pcm[:cut], prompt).text
                prompt = " ".join([*utterance.committed, head])[-PROMPT_CHARS:]
            text = self.transcriber.transcribe(pcm[cut or 0 :], prompt).text
        except (RuntimeError, ValueError) as err:  # CTranslate2 raises these
            self.failures += 1
            log.error("whisper: a transcription of %.1f s failed: %s", len(pcm) / BYTES_PER_S, err)
        return head, text, cut, time.monotonic() - started

    def _next_job(self) -> tuple[_Utterance, int, bool] | None:
        """(utterance, audio bytes to transcribe, whether whole) of what is most urgent.
        A closed utterance whose last transcription heard all its audio takes that as its final."""
        for utterance in self._utterances:
            if utterance.closed and utterance.final is None:
                if utterance.transcribed_bytes < len(utterance.audio):
                    return utterance, len(utterance.audio), True
                utterance.final = utterance.hypotheses[-1] if utterance.hypotheses else ""
                self._condition.notify_all()
        if not self._utterances or self._utterances[-1].closed:
            return None
        utterance = self._utterances[-1]
        new = len(utterance.audio) - utterance.transcribed_bytes
        if utterance.wants_all and new > 0:
            return utterance, len(utterance.audio), True
        if not utterance.silent and new >= self._cadence_s * BYTES_PER_S:
            return utterance, len(utterance.audio), False
        return None

    def _take(self, utterance: _Utterance, upto: int, whole: bool, text: str) -> None:
        utterance.transcribed_bytes = upto
        utterance.hypotheses = [*utterance.hypotheses[-1:], text]
        if utterance.closed and upto >= len(utterance.audio):
            utterance.final = text
        elif whole or not self.agreement:
            utterance.published = text  # all the audio up to the pause: the endpoint's words
        elif len(utterance.hypotheses) == 2:
            agreed = agreed_prefix(*utterance.hypotheses)
            if len(agreed.split()) >= len(utterance.published.split()) or not same_words(
                agreed, " ".join(utterance.published.split()[: len(agreed.split())])
            ):
                utterance.published = agreed

    def _arrival_time(self, upto: int) -> float | None:
        """When the audio up to byte `upto` of the open utterance arrived."""
        for size, t in self._arrival:
            if size >= upto:
                return t
        return None


def _quietest_cut(pcm: bytes) -> int:
    """A byte offset at the middle of the quietest QUIET_WINDOW_S inside CUT_RANGE_S."""
    samples = np.frombuffer(pcm, dtype=np.int16).astype(np.float32)
    window = int(QUIET_WINDOW_S * SAMPLE_RATE)
    low, high = (int(s * SAMPLE_RATE) for s in CUT_RANGE_S)
    energy = np.convolve(samples[low:high] ** 2, np.ones(window), mode="valid")
    return 2 * (low + int(np.argmin(energy)) + window // 2)
