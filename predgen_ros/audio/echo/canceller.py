"""The robot's own voice taken out of the microphone's audio (acoustic echo cancellation).

Two cancellers hear the same microphone and reference.  The voice detector gets WebRTC's
audio processing module (AEC3 with noise suppression and a high-pass filter) as the
`livekit` wheel ships it: its suppressor leaves too little of the robot to pass for a
user.  The recognizer gets Speex's linear filter (audio/echo/linear_echo.py): the suppressor
would take the user's first words over the robot with the echo (scripts/echo_choice.py
compares them; docs/results/echo.md).

Alignment: tts_node publishes each chunk it plays on `tts/reference`, stamped with
the time the chunk starts to play.  `ReferenceTimeline` places those samples on the
clock's time line; the microphone's audio is read against the reference that played
at the same time (the chunk's capture time), and what remains (the loudspeaker's and
the sound card's buffers, sound's flight) is left to AEC3's delay estimator, and to
Speex's filter, which models the first `linear_echo.TAIL_S` after the reference.  Where
no reference arrived (the robot is silent, or a chunk was lost) the reference is
silence: a lost chunk lets that chunk's echo through, nothing worse.  A chunk that
arrives after the microphone's audio of its time was processed is too late to help
and is dropped (`late_chunks` counts them); `late_s` adds up the robot's sound that came
too late, whole chunks and the opening of chunks that came partly late (their echo
reaches the microphone uncancelled).  Where AEC3 lets the robot's voice through, the
voice detector's copy of the frame is silent (audio/echo/echo_leak.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ...cpu_meter import METER
from ..pcm import SAMPLE_RATE, AsrError
from .echo_leak import EchoLeakGate
from .linear_echo import LinearEchoFilter

ECHO_CANCELLERS = ("webrtc", "none")
FRAME = SAMPLE_RATE // 100  # WebRTC's processing frame: 10 ms
HISTORY_S = 5.0  # reference kept before the newest microphone audio
# AEC3 needs a few seconds of the robot's voice to learn the echo path; before that its residue
# passes for a voice (docs/results/echo.md), so the first seconds a robot ever speaks are not
# interruptible (audio/echo/double_talk.py)
LEARNING_S = 3.0
CONTIGUOUS_S = 0.02  # a chunk stamped this close to the previous one's end follows it (a lost one leaves a gap)
SILENCE_PEAK = 64  # a reference chunk no louder than this is silence (int16)
ECHO_TAIL_S = 0.5  # the room's reverberation and the canceller's own lag after the robot falls silent


class ReferenceTimeline:
    """What the loudspeaker played, by time: 16 kHz int16 samples from `start_s` on."""

    def __init__(self):
        self.start_s: float | None = None
        self._samples = np.zeros(0, dtype=np.int16)
        self.read_until_s: float | None = None  # the microphone has been processed up to here
        self.sound_until_s: float | None = None  # the end of the last chunk that was not silence
        self._next_s: float | None = None  # where the last chunk ended: the next one follows it
        self.late_chunks = 0
        self.late_s = 0.0  # sound (not silence) that came after the microphone's audio of its time was read

    def played(self, t_s: float, pcm: bytes) -> None:
        """`pcm` (16 kHz int16) started to play at `t_s` on the node's clock."""
        samples = np.frombuffer(pcm, dtype=np.int16)
        if self._next_s is not None and abs(t_s - self._next_s) <= CONTIGUOUS_S:
            t_s = self._next_s  # the loudspeaker plays a reply's chunks back to back: stamps only jitter
        self._next_s = end_s = t_s + len(samples) / SAMPLE_RATE
        sound = len(samples) and int(np.max(np.abs(samples.astype(np.int32)))) > SILENCE_PEAK
        if sound:
            self.sound_until_s = max(end_s, self.sound_until_s or end_s)
            if self.read_until_s is not None and t_s < self.read_until_s:
                self.late_s += min(end_s, self.read_until_s) - t_s
        if self.read_until_s is not None and end_s <= self.read_until_s:
            self.late_chunks += 1
            return
        if self.start_s is None:
            self.start_s = t_s
        at = int(round((t_s - self.start_s) * SAMPLE_RATE))
        if at < 0:  # older than the kept history
            samples, at = samples[-at:], 0
        end = at + len(samples)
        if end > len(self._samples):
            self._samples = np.concatenate([self._samples, np.zeros(end - len(self._samples), dtype=np.int16)])
        self._samples[at:end] = samples  # a re-sent chunk overwrites, never doubles

    def sounding(self, t_s: float, tail_s: float) -> bool:
        """Whether the loudspeaker played sound within `tail_s` before `t_s` (or plays it now)."""
        return self.sound_until_s is not None and t_s <= self.sound_until_s + tail_s

    def read(self, t_s: float, n: int) -> np.ndarray:
        """The `n` samples that played from `t_s` on (silence where nothing played)."""
        self.read_until_s = t_s + n / SAMPLE_RATE
        out = np.zeros(n, dtype=np.int16)
        if self.start_s is None:
            return out
        at = int(round((t_s - self.start_s) * SAMPLE_RATE))
        lo, hi = max(at, 0), min(at + n, len(self._samples))
        if hi > lo:
            out[lo - at : hi - at] = self._samples[lo:hi]
        self._forget_before(at - int(HISTORY_S * SAMPLE_RATE))
        return out

    def _forget_before(self, index: int) -> None:
        if index > 0:
            self._samples = self._samples[index:]
            self.start_s += index / SAMPLE_RATE


class StreamClock:
    """When each chunk of a microphone stream was captured, on the wall clock.

    Chunks arrive with jitter, and the canceller needs the microphone's time line to be
    as steady as its sample clock: a reference that moved by a few milliseconds from
    chunk to chunk would look like an echo path that never stays the same.  So the
    capture times lie on one line through the stream's samples, placed at the earliest
    arrival seen (least delay; an earlier guess only reads the reference sooner, which
    keeps the echo after it), and moved on only when a chunk comes `jump_s` later than
    the line says (the source paused)."""

    def __init__(self, jump_s: float = 0.05):
        self.jump_s = jump_s
        self._anchor: float | None = None  # wall time of the stream's sample 0
        self._samples = 0
        self.jumps = 0

    def captured(self, arrival_s: float, n: int) -> float:
        """The wall time of the first sample of `n` that arrived whole at `arrival_s`."""
        guess = arrival_s - n / SAMPLE_RATE - self._samples / SAMPLE_RATE
        if self._anchor is None or guess < self._anchor:
            self._anchor = guess
        elif guess - self._anchor > self.jump_s:
            self._anchor = guess
            self.jumps += 1
        start = self._anchor + self._samples / SAMPLE_RATE
        self._samples += n
        return start


class EchoedChunk(NamedTuple):
    """The echo front-end's output for one microphone chunk: what the rest of the ear
    reads, and all it reads of the canceller.  Two versions of the same stretch of time:
    `audio`, for the recognizer: the microphone less the echo Speex's linear filter
    predicts, which keeps the words a user says over the robot (AEC3's suppressor takes
    the first ones out); `for_voice`, for the voice detector: AEC3's suppressed output with
    its leaks silenced, where the robot's residue is too faint to pass for a user
    (docs/results/echo.md).  `echo_present`: the robot played within ECHO_TAIL_S of the
    chunk's capture, so its voice may be in it; `learning`: the canceller has not learned
    the room yet (no voice can be told from its residue over the echo)."""

    audio: bytes
    for_voice: bytes
    echo_present: bool = False
    learning: bool = False


class EchoCanceller:
    """`process(mic, t_s)` returns the microphone's audio without the robot's voice: WebRTC
    AEC3's for the voice detector, Speex's linear filter's for the recognizer."""

    def __init__(self, stream_delay_ms: int = 0):
        try:
            from livekit.rtc import AudioFrame, AudioProcessingModule
        except ImportError:
            raise AsrError("asr.echo_cancel: webrtc needs the livekit package (run `make venv`), or set it to none") from None
        self._frame = AudioFrame
        self._apm = AudioProcessingModule(echo_cancellation=True, noise_suppression=True, high_pass_filter=True)
        self._delay_ms = stream_delay_ms
        self.linear = LinearEchoFilter(FRAME)
        self.reference = ReferenceTimeline()
        self.clock = StreamClock()  # the microphone's capture times
        self.reference_heard_s = 0.0  # the robot's voice the canceller has learned from so far
        self.leaks = EchoLeakGate()  # what AEC3 lets through of the robot's voice, kept from the voice detector
        self._pending = b""  # microphone audio short of a 10 ms frame
        # each 10 ms frame's two inputs, (microphone, reference) as paired here: how the graph's
        # timing lined them up is read from them afterwards (audio/heard_audio.py, scripts/canceller_lag.py)
        self.tap: Callable[[np.ndarray, np.ndarray], None] | None = None

    def played(self, t_s: float, pcm: bytes) -> None:
        self.reference.played(t_s, pcm)

    @property
    def learning(self) -> bool:
        """AEC3 is still learning the room: its first LEARNING_S of the robot's voice."""
        return self.reference_heard_s < LEARNING_S

    def process(self, mic: bytes, t_s: float) -> EchoedChunk:
        """`mic`: 16 kHz int16 captured from `t_s` on (the reference's clock); returns the
        cleaned audio, whole 10 ms frames only (a remainder waits for the next call).
        Every call's frames are timed from its `t_s` (the remainder just before it): a time
        line carried on from an odd-sized chunk instead missed each later jump of the
        stream clock, and once the microphone sent 0.6 s in one chunk, read the reference
        0.58 s off for the rest of the run (docs/results/stress.md)."""
        audio = self._pending + mic
        first_t = t_s - len(self._pending) / 2 / SAMPLE_RATE
        whole = len(audio) // (2 * FRAME) * 2 * FRAME
        self._pending = audio[whole:]
        out, for_voice = bytearray(), bytearray()
        for start in range(0, whole, 2 * FRAME):
            frame_t = first_t + start / 2 / SAMPLE_RATE
            reference = self.reference.read(frame_t, FRAME)
            if np.max(np.abs(reference.astype(np.int32))) > SILENCE_PEAK:
                self.reference_heard_s += FRAME / SAMPLE_RATE
            with METER.stage("aec3"):
                far = self._frame(reference.tobytes(), SAMPLE_RATE, 1, FRAME)
                self._apm.process_reverse_stream(far)
                near = self._frame(audio[start : start + 2 * FRAME], SAMPLE_RATE, 1, FRAME)
                self._apm.set_stream_delay_ms(self._delay_ms)
                self._apm.process_stream(near)
            mic_frame = np.frombuffer(audio[start : start + 2 * FRAME], dtype=np.int16)
            if self.tap is not None:
                self.tap(mic_frame, reference)
            cleaned = np.frombuffer(near.data.tobytes(), dtype=np.int16)
            with METER.stage("linear echo"):
                out += self.linear.process(mic_frame, reference).tobytes()
            with METER.stage("echo leak gate"):
                for_voice += self.leaks.gate(mic_frame, reference, cleaned).tobytes()
        return EchoedChunk(bytes(out), bytes(for_voice), self.reference.sounding(t_s, ECHO_TAIL_S), self.learning)
