"""The user's voice over the robot's: while the robot's echo may be at the microphone, a
voice onset counts only once it is sustained.

After WebRTC's canceller the robot's voice is 20–35 dB lower, but its residue still makes
a voice detector fire on single frames now and then (most in reverberant rooms), and
each such frame would open an utterance and pause the robot.  A person's voice fires
it on most frames of a word.  So while the echo may be present (the robot played
something within audio/echo/canceller.py's `ECHO_TAIL_S`), a voiced frame counts only when at least `share` of
the last `window_s` of frames were voiced; otherwise the detector is left as it is.
The window was first set on scripts/echo_choice.py's rooms (0.3 s), and shortened to
0.2 s once the level rule below took the residue: in scripts/echo_onsets.py's rooms
(seed 1, not those eval-interruptions reports on) 0.2 s let no residue through and heard
barge-ins sooner, 0.15 s let it through (docs/results/echo.md).

WebRTC's detector judges a frame's spectrum, not its level: AEC3's residue at about
-70 dBFS, far below any voice in the room, made most of the self-pauses left in graph
runs (docs/results/echo.md, "the residue's level").  So while the echo may be present,
a frame counts as voiced only when it is `voice_over_noise_db` above the room's noise
as the canceller outputs it, learned while no echo is present (following the quietest
frames at once, rising at most NOISE_RISE_DB_PER_S).  The evaluation's user, 1–2 m
away, speaks 25 dB above the microphone's noise; a quieter voice in a noisier room loses
its faint syllables to the rule.  The frames are still shown to the detector, which
adapts to what it hears.

The same level rule ends a voice sooner in a reverberant room with no echo present: after
the last word the room's reverberation keeps WebRTC's detector voiced until it sinks into
the noise (0.26 s after the true end at the median, 1.5 m across the evaluation's rooms,
issue 65).  Once an utterance is open, a voiced frame under both `voice_over_noise_db`
above the noise and TAIL_BELOW_PEAK_DB under the utterance's loudest frame is the room's
tail, not the voice.  A voice that is itself near the noise (its loudest frame within
`voice_over_noise_db` + TAIL_BELOW_PEAK_DB of it) keeps every frame the detector calls voiced.

The onset rule guards only the opening of an utterance.  Once one is open
(`utterance_open`, told with each chunk), every frame the detector calls voiced counts: over
the echo AEC3 takes some of the user's frames out, and holding the rest as silence ended
a question at its second word ("How do you plan?", then "to make their food?" as
another utterance, neither a turn) in scripts/echo_turns.py's rooms.  And because a voice
over the echo is counted late (0.1-0.8 s after it began there), `voice_run_s` says how long
ago the detector first heard it, counted or not (the faint frames, residue by the level
rule, aside): asr_node reads the recognizer's audio back
that far and stamps the voice's start there, so `turn.min_speech_s` measures the user's voice,
not the rule's delay.

Where the canceller's suppressor is sure it hears only echo it outputs digital silence
(below -90 dBFS).  The voice detector is not shown those frames: it adapts its noise
model to what it hears, and after seconds of zeros the room's own noise, back when the
robot paused between sentences, looked like voice to it, sustained enough for the onset
rule (a graph run's recorded audio: 339 voiced frames passed over the echo, 41 without
the zeros; docs/results/echo.md).
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from ..pcm import SAMPLE_RATE
from .canceller import EchoedChunk

ONSET_WINDOW_S = 0.2
RUN_GAP_S = 0.2  # a voice's frames this close together are one run (voice_run_s)
ONSET_SHARE = 0.6
VOICE_OVER_NOISE_DB = 10.0
NOISE_RISE_DB_PER_S = 1.0  # the noise estimate's climb while the user speaks with no echo present
TAIL_BELOW_PEAK_DB = 20.0  # an open utterance's frames this far under its loudest can be the room's tail
SUPPRESSED_RMS = 2.0  # int16: a frame quieter than this (about -84 dBFS) is the suppressor's silence, not the room's


class EchoGuardedVad:
    """A voice detector (`frame_bytes`, `is_speech`, `voice_run_s`) that wants sustained
    voice while the echo may be present, and hears none over the echo while the canceller
    is learning: `take` gives it each chunk's EchoedChunk before the chunk's frames are judged."""

    def __init__(
        self,
        vad,
        window_s: float = ONSET_WINDOW_S,
        share: float = ONSET_SHARE,
        voice_over_noise_db: float = VOICE_OVER_NOISE_DB,
        tail_below_peak_db: float | None = TAIL_BELOW_PEAK_DB,
    ):
        """`tail_below_peak_db` None: every frame of an open utterance the detector calls
        voiced counts, with no echo present (the room's tail too)."""
        if not 0.0 < share <= 1.0:
            raise ValueError(f"asr.echo.onset_share: {share} is outside (0, 1]")
        if window_s <= 0:
            raise ValueError(f"asr.echo.onset_window_s: {window_s} must be above 0")
        if voice_over_noise_db < 0:
            raise ValueError(
                f"asr.echo.voice_over_noise_db: {voice_over_noise_db} is negative (0: any frame above the room's noise)"
            )
        self.vad = vad
        self.frame_bytes = vad.frame_bytes
        frame_s = vad.frame_bytes / 2 / SAMPLE_RATE
        self._over_noise = 10 ** (voice_over_noise_db / 10)
        self._tail_below_peak = None if tail_below_peak_db is None else 10 ** (-tail_below_peak_db / 10)
        self._peak = 0.0  # the open utterance's loudest voiced frame (mean square)
        self._noise_rise = 10 ** (NOISE_RISE_DB_PER_S * frame_s / 10)
        self._noise: float | None = None  # mean square of the canceller's output with no echo present: the room's noise
        frames = max(1, round(window_s * SAMPLE_RATE * 2 / vad.frame_bytes))
        self._recent: deque[bool] = deque(maxlen=frames)
        self._need = max(1, math.ceil(share * frames))
        self._echo_present = False  # the chunk being judged may hold the robot's voice
        self._utterance_open = False  # the owner heard a voice already: the onset rule has done its job
        self._canceller_learning = False  # the canceller has not learned the room yet: no voice over the echo
        self.held_frames = 0  # voiced frames not counted: they might have been the robot's echo
        self.suppressed_frames = 0  # frames of the canceller's digital silence, kept from the voice detector
        self.faint_frames = 0  # voiced frames over the echo too close to the room's noise to be a voice
        self.tail_frames = 0  # voiced frames of an open utterance taken for the room's reverberation
        self._heard = bytearray()  # the voice detector's copy of the audio still to be judged
        self._frame_s = frame_s
        self._frames = 0  # frames judged so far
        self._run = (0, -(10**9))  # (first, last) frame the detector found voiced in the latest run

    def take(self, chunk: EchoedChunk, utterance_open: bool) -> None:
        """The next chunk as the echo front-end made it, and whether the owner has an
        utterance open: `is_speech` judges its `for_voice` (the canceller's leaks silenced,
        audio/echo/echo_leak.py) in place of the frames it is given, which are the same samples
        in the same order."""
        self._heard += chunk.for_voice
        self._echo_present = chunk.echo_present
        self._canceller_learning = chunk.learning
        self._utterance_open = utterance_open

    def forget(self) -> None:
        """The audio given to `hear` will not be judged (the recognizer skipped it)."""
        self._heard.clear()

    @property
    def voice_run_s(self) -> float:
        """How long the detector has heard a voice loud enough to be one, counted or not (0
        when none now): over the echo a voice is counted late, and the recognizer should
        read back this far."""
        first, last = self._run
        if (self._frames - 1 - last) * self._frame_s > RUN_GAP_S:
            return 0.0
        return (self._frames - first) * self._frame_s

    def _is_tail(self, power: float) -> bool:
        """A voiced frame of an open utterance, with no echo present, quiet enough to be
        the room's reverberation after the voice (the frame's power counts toward the peak)."""
        if not self._utterance_open or self._tail_below_peak is None:
            return False
        self._peak = max(self._peak, power)
        return power < min(self._noise * self._over_noise, self._peak * self._tail_below_peak)

    def is_speech(self, frame: bytes) -> bool:
        self._frames += 1
        if not self._utterance_open:
            self._peak = 0.0
        if len(self._heard) >= len(frame):
            frame, self._heard[: len(frame)] = bytes(self._heard[: len(frame)]), b""
        samples = np.frombuffer(frame, dtype=np.int16).astype(np.float64)
        power = float(np.mean(samples**2)) if len(samples) else 0.0
        if power < SUPPRESSED_RMS**2:
            self._recent.append(False)
            self.suppressed_frames += 1
            return False
        voiced = self.vad.is_speech(frame)
        if not self._echo_present:
            self._noise = power if self._noise is None else min(power, self._noise * self._noise_rise)
            if voiced and self._is_tail(power):
                voiced = False
                self.tail_frames += 1
        elif voiced and self._noise is not None and power < self._noise * self._over_noise:
            voiced = False
            self.faint_frames += 1
        if voiced:  # a run is the voice's frames, the faint residue's aside
            now = self._frames - 1
            self._run = (self._run[0] if (now - self._run[1]) * self._frame_s <= RUN_GAP_S else now, now)
        self._recent.append(voiced)
        if not voiced or not self._echo_present:
            return voiced
        if not self._canceller_learning and (self._utterance_open or sum(self._recent) >= self._need):
            return True
        self.held_frames += 1
        return False
