"""Where WebRTC's canceller lets the robot's own voice through, keep it from the voice detector.

AEC3 takes the robot's voice 20–35 dB down while it speaks, but in a reverberant room
it stops suppressing soon after the reference falls silent, while the room still rings
(RT60 0.6 s: the tail is 20 dB down only after 0.2 s), and a sentence's first
milliseconds can pass too.  There its output is nearly the microphone's own level, and
the microphone holds nothing louder than the robot's echo: a voice detector takes that
for the user (the self-pauses of docs/results/echo.md).

`EchoLeakGate` predicts the echo's level at the microphone from the reference: the
reference's power, held at its peak and decaying no faster than a reverberant room's
tail (`DECAY_DB` per 10 ms frame), times the echo's gain from loudspeaker to
microphone (learned while the robot speaks).  A frame is a leak, and the voice
detector's copy of it is digital silence, when the canceller took less than `LEAK_DB`
off it and the microphone is no more than `MARGIN_DB` above the predicted echo.  The
user's voice mostly is no leak: over the robot the canceller lowers the microphone by
more than `LEAK_DB` (the echo went); after the robot it is louder than the tail.  Where
the user speaks in a gap of the robot's voice it can be, so only the voice detector's
copy is gated: gating the recognizer's audio cost words (docs/results/echo.md).
"""

from __future__ import annotations

import math

import numpy as np

DECAY_DB = 0.75  # per 10 ms: a tail that falls 60 dB in 0.8 s, slower than the rooms a robot meets
LEAK_DB = 6.0  # the canceller took less than this off the frame
MARGIN_DB = 3.0  # and the microphone holds no more than the predicted echo and this
LEARN_RATE = 0.02  # of the echo's gain, per frame of loud reference (in dB: a few seconds of speech)
LOUD_REFERENCE = 200.0**2  # mean square (int16) of a reference frame the gain is learned from (about -44 dBFS)


def mean_square(frame: np.ndarray) -> float:
    return float(np.mean(frame.astype(np.float64) ** 2)) if len(frame) else 0.0


class EchoLeakGate:
    """Per 10 ms frame: `gate(mic, reference, out)` returns `out`, or silence where it is a leak."""

    def __init__(self, decay_db: float = DECAY_DB, leak_db: float = LEAK_DB, margin_db: float = MARGIN_DB):
        self._decay = 10 ** (-decay_db / 10)
        self._leak = 10 ** (-leak_db / 10)
        self._margin = 10 ** (margin_db / 10)
        self._held = 0.0  # the reference's power, held and decaying like the room's tail
        self._log_gain: float | None = None  # ln(microphone power / reference power) while the robot speaks
        self.silenced_frames = 0

    def predicted_echo(self) -> float | None:
        """The echo's power at the microphone now (None before the robot has spoken)."""
        return None if self._log_gain is None else math.exp(self._log_gain) * self._held

    def gate(self, mic: np.ndarray, reference: np.ndarray, out: np.ndarray) -> np.ndarray:
        heard, played, kept = mean_square(mic), mean_square(reference), mean_square(out)
        if played > LOUD_REFERENCE and played > 0.1 * self._held and heard > 0:  # the robot's voice, not its tail
            log_gain = math.log(heard / played)
            self._log_gain = log_gain if self._log_gain is None else self._log_gain + LEARN_RATE * (log_gain - self._log_gain)
        self._held = max(played, self._held * self._decay)
        echo = self.predicted_echo()
        if echo is not None and kept >= heard * self._leak and heard <= echo * self._margin and kept > 0:
            self.silenced_frames += 1
            return np.zeros_like(out)
        return out
