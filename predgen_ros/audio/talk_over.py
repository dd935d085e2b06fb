"""Someone speaking over the robot, told from Speex's linear filter's output.

AEC3's suppressor takes a user who starts mid-sentence out with the robot's echo until
the robot's next gap (docs/results/echo.md), so a voice detector on its output hears
them late.  Speex's linear filter (audio/linear_echo.py) keeps them: over the robot its
output holds the robot's residue, about 15–20 dB under the echo the reference predicts,
and the room's noise; a user 8–10 dB under the echo at the microphone stands well above
both.  A 10 ms frame whose linear output is `TALK_OVER_DB` above the room's noise plus
that residue (`RESIDUE_DB` under the predicted echo, audio/echo_leak.py) holds a sound
the reference cannot explain, and the voice detector judges the linear output there
instead of AEC3's (audio/echo.py); its onset rule (audio/double_talk.py) still wants
sustained voice.  Both figures were chosen offline on rooms no reported run uses
(scripts/echo_onsets.py --seed 1; docs/results/echo.md).
"""

from __future__ import annotations

import numpy as np

from .double_talk import NOISE_RISE_DB_PER_S
from .echo_leak import mean_square
from .pcm import SAMPLE_RATE

RESIDUE_DB = -15.0  # the robot's residue in the linear output, against the predicted echo (a little above its usual level)
TALK_OVER_DB = 12.0  # how far above noise plus residue a frame must stand


class TalkOverDetector:
    """Per 10 ms frame of the linear filter's output: `heard(...)` is True where
    something other than the robot's echo and the room's noise is in it."""

    def __init__(self, frame: int, residue_db: float = RESIDUE_DB, talk_over_db: float = TALK_OVER_DB):
        self._residue = 10 ** (residue_db / 10)
        self._over = 10 ** (talk_over_db / 10)
        self._noise_rise = 10 ** (NOISE_RISE_DB_PER_S * frame / SAMPLE_RATE / 10)
        self._noise: float | None = None  # the linear output's mean square with no echo present
        self.frames = 0  # frames heard as someone over the robot

    def heard(self, linear: np.ndarray, predicted_echo: float | None, echo_present: bool) -> bool:
        power = mean_square(linear)
        if not echo_present:  # the room's noise as the linear filter outputs it (no suppressor)
            self._noise = power if self._noise is None else min(power, self._noise * self._noise_rise)
            return False
        if self._noise is None or predicted_echo is None:
            return False
        if power > self._over * (self._noise + self._residue * predicted_echo):
            self.frames += 1
            return True
        return False
