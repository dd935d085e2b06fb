"""The microphone of a robot whose loudspeaker it hears: the robot's own voice mixed in.

For `eval-interruptions --robot-in-mic`: tts_node publishes what the loudspeaker plays
(`tts/reference`, stamped when it handed each chunk to the sound card); each chunk is
convolved with the loudspeaker-to-microphone impulse response of a simulated room
(eval/hearing/echo_room.py: the loudspeaker 0.3 m away, the user 1–2 m away, RT60 0.3–0.6 s)
and added to the microphone's stream at the time it was played, with its reverberant tail.  The user's clips go through the same room from
where the user stands, and noise comes in at about 25 dB below the user's speech.  The
gain is set once per room so that the robot's voice peaks at -6 dBFS: louder than the
user, never clipped (a clipped echo is beyond any canceller; `clipped` counts samples).

The loudspeaker is a sound card: a queue that plays the chunks it is handed back to back,
each `OUTPUT_LATENCY_S` after it was handed over or as soon as the chunk before it has
played, whichever is later.  An earlier model placed each chunk when it reached the
evaluation over DDS, and snapped it onto the last one's end when within 0.1 s, also after
the card had run dry: the robot's voice then moved against tts/reference by the network's
jitter and by up to 0.1 s after each late sentence, which no card attached to the robot
does, and the canceller leaked at every such jump (docs/results/echo.md).  A chunk whose
message reaches the evaluation after the microphone has passed its play time loses only
its overdue samples; the rest of it and of the reply stay on their stamps (placing it at
"now" once shifted the rest of the reply behind its reference).  Not modelled: the drift
between the card's clock and the microphone's.
"""

from __future__ import annotations

import threading

import numpy as np

from ...audio.pcm import SAMPLE_RATE, to_pcm16k
from .echo_room import EchoPaths, echo_paths
from .far_field import RoomSettings

ROBOT_PEAK = 0.5 * 32767  # -6 dBFS
SNR_DB = 25.0
OUTPUT_LATENCY_S = 0.03  # the sound card's buffer: a chunk plays this long after it is handed over, at the earliest
PROBE = "Sure, I can help with that. The kitchen light is on now."


class RoomMicrophone:
    """Mixes the robot's voice and the user's into one room's microphone, by wall time."""

    def __init__(self, probe_pcm16k: np.ndarray):
        self._probe = probe_pcm16k.astype(np.float64)
        self._lock = threading.Lock()
        self._echo = np.zeros(0)  # pending echo from stream index `_base` on
        self._base = 0  # stream index of the next sample to hand out
        self._t0: float | None = None  # wall time of stream index 0
        self._robot_next: int | None = None  # stream index where the loudspeaker's queue runs dry
        self.paths: EchoPaths | None = None
        self.gain = 1.0
        self.noise_rms = 0.0
        self.clipped = 0
        self.late_chunks = 0  # robot audio that came after its time was handed out (its overdue part dropped)
        self._rng = np.random.default_rng(0)

    def enter_room(self, seed: int) -> None:
        """A new seeded room: its two paths, the gain and the noise level."""
        rng = np.random.default_rng(seed)
        paths = echo_paths(rng, RoomSettings(seed=seed))
        echo = np.convolve(self._probe, paths.robot)
        heard = np.convolve(self._probe, paths.user)
        voiced = np.abs(heard) > 0.05 * np.max(np.abs(heard))
        with self._lock:
            self.paths, self._rng = paths, rng
            self.gain = ROBOT_PEAK / float(np.max(np.abs(echo)))
            self.noise_rms = float(np.sqrt(np.mean(heard[voiced] ** 2))) / 10 ** (SNR_DB / 20)

    def start(self, t0: float) -> None:
        self._t0 = t0

    def robot_played(self, samples: np.ndarray, rate: int, t_wall: float) -> None:
        """A chunk handed to the sound card at `t_wall`: its echo, from when the card plays it on."""
        if self.paths is None or self._t0 is None:
            return
        samples_16k = np.frombuffer(to_pcm16k(samples.astype(np.int16), rate), dtype=np.int16)
        echo = np.convolve(samples_16k, self.paths.robot)
        with self._lock:
            at = int(round((t_wall + OUTPUT_LATENCY_S - self._t0) * SAMPLE_RATE))
            if self._robot_next is not None:
                at = max(at, self._robot_next)  # the chunks before it play first
            self._robot_next = at + len(samples_16k)
            overdue = self._base - at
            if overdue > 0:  # its message reached the evaluation after the microphone passed its time
                self.late_chunks += 1
                echo, at = echo[overdue:], self._base  # the card played it on time: only the overdue part is missing
            self._add(echo, at - self._base)

    def user_clip(self, pcm16k: np.ndarray) -> np.ndarray:
        """The user's clip as the microphone hears it from where they stand (not yet scaled)."""
        return np.convolve(pcm16k.astype(np.float64), self.paths.user)[: len(pcm16k) + SAMPLE_RATE // 2]

    def next_chunk(self, user: np.ndarray) -> np.ndarray:
        """The microphone's next `len(user)` samples: the user's (room-filtered) audio, the
        robot's echo due now, noise; int16 after the room's gain."""
        n = len(user)
        with self._lock:
            self._add(np.zeros(0), n)  # make room
            echo, self._echo = self._echo[:n], self._echo[n:]
            self._base += n
            noise = self._rng.standard_normal(n) * self.noise_rms
        mixed = (user + echo + noise) * self.gain
        self.clipped += int(np.sum(np.abs(mixed) > 32767))
        return np.clip(np.round(mixed), -32768, 32767).astype(np.int16)

    def _add(self, signal: np.ndarray, at: int) -> None:
        end = max(at + len(signal), len(self._echo))
        if end > len(self._echo):
            self._echo = np.concatenate([self._echo, np.zeros(end - len(self._echo))])
        self._echo[at : at + len(signal)] += signal


def probe_speech() -> np.ndarray:
    """Piper's voice saying PROBE at 16 kHz: each room's gain and noise level come from it."""
    from ...audio.speech.tts import PiperSynthesizer

    speech = PiperSynthesizer(reproducible=True).synthesize(PROBE)
    return np.frombuffer(to_pcm16k(speech.samples, speech.sample_rate), dtype=np.int16)
