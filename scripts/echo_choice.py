"""Which echo canceller: the robot's voice and a user's barge-in at one microphone, offline.

Piper speaks a robot reply from a loudspeaker 0.3 m from the microphone and, in half
of the trials, a user barges in from 1–2 m after 3 s, in seeded simulated rooms
(eval/echo_room.py, RT60 0.3–0.6 s, noise ~25 dB SNR).  Each canceller gets the
microphone's audio and what the loudspeaker played, in 10 or 20 ms frames, the
reference `--delay-ms` ahead of its echo (the sink's buffer, unknown to asr_node).
Reported per canceller: the robot's level at the microphone (dBFS) and how often the
WebRTC voice detector fires on the robot's voice alone, the detector's share during
the user's words, and Whisper tiny.en's WER on the user's words.

    .venv/bin/python scripts/echo_choice.py --rooms 8 --delay-ms 0,60
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from predgen_ros.audio.asr import make_vad
from predgen_ros.audio.echo import FRAME, EchoCanceller
from predgen_ros.audio.pcm import SAMPLE_RATE, to_pcm16k
from predgen_ros.audio.tts import PiperSynthesizer
from predgen_ros.audio.whisper import WhisperTranscriber
from predgen_ros.eval.asr_quality import reference_words, word_errors
from predgen_ros.eval.echo_room import echo_paths

REPLY = (
    "Sure. I set a timer for ten minutes, and I will tell you when it is done. "
    "In the meantime, the oven should be preheated to two hundred degrees."
)
BARGE_INS = (
    "Wait, what time does the store close?",
    "Stop, turn on the kitchen light please.",
    "Actually, how long should the pasta cook?",
    "Hold on, where did I leave my phone?",
)
BARGE_IN_AT_S = 3.0
SNR_DB = 25.0
MIC_PEAK = 16000  # -6 dBFS


class Speex:
    """Speex's canceller (libspeexdsp through the speexdsp-aec wheel), 20 ms frames, 200 ms tail."""

    def __init__(self):
        try:
            from speexdsp_aec import SpeexAec
        except ImportError:
            raise SystemExit("--cancellers speex needs `pip install speexdsp-aec` and libspeexdsp1 (apt)") from None

        self._aec = SpeexAec(SAMPLE_RATE, frame_ms=20, filter_tail_ms=200)

    def run(self, mic: np.ndarray, ref: np.ndarray) -> np.ndarray:
        return np.frombuffer(self._aec.process(mic, ref), dtype=np.int16)


class Webrtc:
    def __init__(self):
        self._aec = EchoCanceller()

    def run(self, mic: np.ndarray, ref: np.ndarray) -> np.ndarray:
        self._aec.played(0.0, ref.tobytes())
        out = bytearray()
        for start in range(0, len(mic), 2 * FRAME):  # 20 ms chunks, as asr_node reads them
            out += self._aec.process(mic[start : start + 2 * FRAME].tobytes(), start / SAMPLE_RATE).audio
        return np.frombuffer(bytes(out), dtype=np.int16)


class Nothing:
    def run(self, mic: np.ndarray, ref: np.ndarray) -> np.ndarray:
        return mic


CANCELLERS = {"none": Nothing, "webrtc": Webrtc, "speex": Speex}


def dbfs(x: np.ndarray) -> float:
    return float(10 * np.log10(np.mean(x.astype(np.float64) ** 2) / 32768.0**2 + 1e-12))


def vad_share(vad, pcm: np.ndarray) -> float:
    size = vad.frame_bytes // 2
    frames = [pcm[i : i + size] for i in range(0, len(pcm) - size + 1, size)]
    return sum(vad.is_speech(f.tobytes()) for f in frames) / max(1, len(frames))


def trial_audio(synth, rng, paths, barge_in: str | None, delay_s: float):
    """(microphone, reference, robot-only span, user span) for one trial."""
    reply = synth.synthesize(REPLY)
    robot = np.frombuffer(to_pcm16k(reply.samples, reply.sample_rate), dtype=np.int16).astype(np.float64)
    n = len(robot) + SAMPLE_RATE
    delay = int(delay_s * SAMPLE_RATE)
    mic = np.zeros(n)
    echo = np.convolve(robot, paths.robot)[: n - delay]
    mic[delay : delay + len(echo)] += echo
    user_span = None
    if barge_in:
        said = synth.synthesize(barge_in)
        user = np.frombuffer(to_pcm16k(said.samples, said.sample_rate), dtype=np.int16).astype(np.float64)
        at = int(BARGE_IN_AT_S * SAMPLE_RATE)
        heard = np.convolve(user, paths.user)[: n - at]
        mic[at : at + len(heard)] += heard
        user_span = (at, min(n, at + len(user) + SAMPLE_RATE // 2))
    voiced = np.abs(echo) > 300
    mic += rng.standard_normal(n) * np.sqrt(np.mean(echo[voiced] ** 2) / 10 ** (SNR_DB / 10))
    mic = np.round(mic * MIC_PEAK / np.max(np.abs(mic))).astype(np.int16)  # the microphone's gain: no clipping
    reference = np.zeros(n, dtype=np.int16)
    reference[: len(robot)] = robot.astype(np.int16)
    robot_only = (delay + SAMPLE_RATE // 2, (user_span[0] if user_span else delay + len(robot)))  # after 0.5 s to converge
    return mic, reference, robot_only, user_span


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rooms", type=int, default=8)
    ap.add_argument("--delay-ms", default="0,60", help="comma-separated reference-to-echo delays")
    ap.add_argument("--cancellers", default="none,webrtc,speex")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="write the summary as JSON here")
    args = ap.parse_args()
    synth = PiperSynthesizer(reproducible=True)
    whisper = WhisperTranscriber()
    vad = make_vad("webrtc", 2)
    rows = []
    for delay_ms in [int(d) for d in args.delay_ms.split(",")]:
        for name in args.cancellers.split(","):
            level, robot_vad, user_vad, errors, words, cpu = [], [], [], 0, 0, 0.0
            rng = np.random.default_rng(args.seed)
            for trial in range(args.rooms):
                paths = echo_paths(rng)
                barge_in = BARGE_INS[trial % len(BARGE_INS)] if trial % 2 else None
                mic, reference, robot_only, user_span = trial_audio(synth, rng, paths, barge_in, delay_ms / 1000)
                started = time.process_time()
                clean = CANCELLERS[name]().run(mic, reference)
                cpu += time.process_time() - started
                part = clean[robot_only[0] : robot_only[1]]
                level.append(dbfs(part))
                robot_vad.append(vad_share(vad, part))
                if user_span:
                    said = clean[user_span[0] : user_span[1]]
                    user_vad.append(vad_share(vad, said))
                    truth = reference_words(barge_in)
                    errors += word_errors(truth, reference_words(whisper.transcribe(said.tobytes()).text))
                    words += len(truth)
            rows.append(
                {
                    "canceller": name,
                    "delay_ms": delay_ms,
                    "robot_level_dbfs": round(float(np.median(level)), 1),
                    "vad_on_robot_only": round(float(np.mean(robot_vad)), 3),
                    "vad_on_user": round(float(np.mean(user_vad)), 3),
                    "user_wer": round(errors / max(1, words), 3),
                    "cpu_s_per_audio_s": round(cpu / (args.rooms * len(mic) / SAMPLE_RATE), 4),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rooms": args.rooms, "seed": args.seed, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
