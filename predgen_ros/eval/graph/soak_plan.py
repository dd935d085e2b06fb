"""What the spoken soak's user says, and when: a seeded plan of turns, and their audio.

The user is Piper's one bundled voice (joe) at three speaking rates, cycling through the
robot conversation's 40 requests with a pause of its own before each.  One turn in
`EVENT_SHARE` carries a barge-in (another request over the reply) and as many an
acknowledgement ("Mm-hmm."); the audio-path faults (eval/graph/soak_faults.py) come before
evenly spaced turns, each once.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from ...audio.pcm import to_pcm16k
from ..barge_in.interruption_bag import ACKNOWLEDGEMENTS, EVENT_AFTER_S

SPEAKING_RATES = (0.9, 1.0, 1.15)  # Piper's length_scale: brisk, its own pace, slow
PAUSE_S = (0.3, 2.0)  # the user's pause after the robot fell silent (drawn uniformly)
EVENT_SHARE = 0.1  # of the turns, each: a barge-in, an acknowledgement
PLAIN, BARGE_IN, ACKNOWLEDGEMENT = "plain", "barge_in", "acknowledgement"


@dataclass(frozen=True)
class SoakTurn:
    number: int  # 1, 2, ...
    request: str
    rate: float  # the speaking rate of this turn's words (SPEAKING_RATES)
    pause_s: float
    kind: str = PLAIN
    event: str = ""  # the barge-in's request or the acknowledgement
    after_s: float = 0.0  # the event begins this long after the reply's first audio
    fault: str = ""  # a fault of soak_faults.FAULTS before (or, tts_restart, during) this turn


def plan_soak(requests: list[str], turns: int, faults: list[str], seed: int = 0) -> list[SoakTurn]:
    """`turns` turns through `requests` in order, the faults before turns spaced evenly."""
    rng = random.Random(seed)
    at = {round(turns * (k + 1) / (len(faults) + 1)): fault for k, fault in enumerate(faults)}
    plan = []
    for number in range(1, turns + 1):
        request = requests[(number - 1) % len(requests)]
        draw = rng.random()
        kind = BARGE_IN if draw < EVENT_SHARE else ACKNOWLEDGEMENT if draw < 2 * EVENT_SHARE else PLAIN
        event = ""
        if kind == BARGE_IN:
            event = rng.choice([r for r in requests if r != request])
        elif kind == ACKNOWLEDGEMENT:
            event = rng.choice(ACKNOWLEDGEMENTS)
        plan.append(
            SoakTurn(
                number,
                request,
                rng.choice(SPEAKING_RATES),
                round(rng.uniform(*PAUSE_S), 3),
                kind,
                event,
                round(rng.uniform(*EVENT_AFTER_S), 3) if event else 0.0,
                at.get(number, ""),
            )
        )
    return plan


class UserVoice:
    """Piper saying each (text, rate) once, 16 kHz int16; later asks come from memory."""

    def __init__(self):
        from ...audio.speech.tts import PiperSynthesizer

        self._synth = PiperSynthesizer(reproducible=True)
        self._clips: dict[tuple[str, float], np.ndarray] = {}

    def say(self, text: str, rate: float) -> np.ndarray:
        from piper import SynthesisConfig

        key = (text, rate)
        if key not in self._clips:
            chunks = self._synth.voice.synthesize(text, SynthesisConfig(length_scale=rate))
            samples = np.concatenate([chunk.audio_int16_array for chunk in chunks])
            self._clips[key] = np.frombuffer(to_pcm16k(samples, self._synth.sample_rate), dtype=np.int16)
        return self._clips[key]

    def close(self) -> None:
        self._synth.clear()
