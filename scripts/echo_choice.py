"""Which echo canceller: the robot's voice and a user's barge-in at one microphone, offline.

Piper speaks a sentence, then a robot reply from a loudspeaker 0.3 m from the
microphone and, in half of the trials, a user barges in from 1–2 m 3 s into the reply,
in seeded simulated rooms (eval/hearing/echo_room.py, RT60 0.3–0.6 s, noise ~25 dB SNR); with
`--robot-stops-after-s` the reply ends that long into the barge-in, as a robot that
pauses for the user.  Each canceller gets the microphone's audio and what the
loudspeaker played, the reference `--delay-ms` ahead of its echo (the sink's buffer,
unknown to asr_node), and gives audio for the voice detector and for the recognizer:
none; webrtc (AEC3 for both); speex (Speex's linear filter for both); webrtc+speex
(asr_node's: AEC3 for the detector, Speex for the recognizer).  Reported per canceller:
the robot's level at the detector (dBFS) and how often the WebRTC voice detector fires
on the robot's voice alone, the detector's share during the user's words, and Whisper
tiny.en's WER on the user's words as the recognizer hears them.

    .venv/bin/python scripts/echo_choice.py --rooms 16 --delay-ms 0,60 --robot-stops-after-s 0.3
"""

from __future__ import annotations

import argparse
import functools
import json
import time

import numpy as np

from predgen_ros.audio.echo.canceller import FRAME, EchoCanceller
from predgen_ros.audio.echo.linear_echo import LinearEchoFilter
from predgen_ros.audio.pcm import SAMPLE_RATE, to_pcm16k
from predgen_ros.audio.recognition.vad import make_vad
from predgen_ros.audio.recognition.whisper import WhisperTranscriber
from predgen_ros.audio.speech.tts import PiperSynthesizer
from predgen_ros.eval.hearing.asr_quality import reference_words, word_errors
from predgen_ros.eval.hearing.echo_room import echo_paths

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
WARM_UP = "Hello there. I am the robot in your kitchen, and I can help you cook dinner tonight."
SNR_DB = 25.0
MIC_PEAK = 16000  # -6 dBFS


class Speex:
    """Speex's linear filter alone (audio/echo/linear_echo.py)."""

    def run(self, mic: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        linear = LinearEchoFilter(FRAME)
        whole = len(mic) // FRAME * FRAME
        out = np.concatenate([linear.process(mic[i : i + FRAME], ref[i : i + FRAME]) for i in range(0, whole, FRAME)])
        return out, out


class Webrtc:
    """asr_node's canceller: AEC3's output (leaks silenced) for the voice detector and, with
    `words_from_linear` False, for the recognizer too; else Speex's for the recognizer."""

    def __init__(self, words_from_linear: bool):
        self._words_from_linear = words_from_linear

    def run(self, mic: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        aec = EchoCanceller()
        aec.played(0.0, ref.tobytes())
        voice, words = bytearray(), bytearray()
        for start in range(0, len(mic), 2 * FRAME):  # 20 ms chunks, as asr_node reads them
            out = aec.process(mic[start : start + 2 * FRAME].tobytes(), start / SAMPLE_RATE)
            voice += out.for_voice
            words += out.audio if self._words_from_linear else out.for_voice
        return np.frombuffer(bytes(voice), dtype=np.int16), np.frombuffer(bytes(words), dtype=np.int16)


class Nothing:
    def run(self, mic: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return mic, mic


CANCELLERS = {
    "none": Nothing,
    "webrtc": lambda: Webrtc(words_from_linear=False),
    "speex": Speex,
    "webrtc+speex": lambda: Webrtc(words_from_linear=True),
}


@functools.cache  # the same sentence in every trial: Piper is reproducible, so synthesize it once
def speech(synth, text: str) -> np.ndarray:
    said = synth.synthesize(text)
    return np.frombuffer(to_pcm16k(said.samples, said.sample_rate), dtype=np.int16).astype(np.float64)


def dbfs(x: np.ndarray) -> float:
    return float(10 * np.log10(np.mean(x.astype(np.float64) ** 2) / 32768.0**2 + 1e-12))


def vad_share(vad, pcm: np.ndarray) -> float:
    size = vad.frame_bytes // 2
    frames = [pcm[i : i + size] for i in range(0, len(pcm) - size + 1, size)]
    return sum(vad.is_speech(f.tobytes()) for f in frames) / max(1, len(frames))


def trial_audio(synth, rng, paths, barge_in: str | None, delay_s: float, stops_after_s: float | None):
    """(microphone, reference, robot-only span, user span) for one trial: the robot says
    WARM_UP (the canceller has heard the room before), then REPLY, and stops `stops_after_s`
    into a barge-in (None: it talks on)."""
    reply = speech(synth, REPLY)
    robot = np.concatenate([speech(synth, WARM_UP), np.zeros(SAMPLE_RATE), reply])
    reply_at = len(robot) - len(reply)
    at = reply_at + int(BARGE_IN_AT_S * SAMPLE_RATE)
    if barge_in and stops_after_s is not None:
        robot = robot[: at + int(stops_after_s * SAMPLE_RATE)]
    user = speech(synth, barge_in) if barge_in else np.zeros(0)
    n = max(len(robot), at + len(user)) + SAMPLE_RATE
    delay = int(delay_s * SAMPLE_RATE)
    mic = np.zeros(n)
    echo = np.convolve(robot, paths.robot)[: n - delay]
    mic[delay : delay + len(echo)] += echo
    user_span = None
    if barge_in:
        heard = np.convolve(user, paths.user)[: n - at]
        mic[at : at + len(heard)] += heard
        user_span = (at, min(n, at + len(user) + SAMPLE_RATE // 2))
    voiced = np.abs(echo) > 300
    mic += rng.standard_normal(n) * np.sqrt(np.mean(echo[voiced] ** 2) / 10 ** (SNR_DB / 10))
    mic = np.round(mic * MIC_PEAK / np.max(np.abs(mic))).astype(np.int16)  # the microphone's gain: no clipping
    reference = np.zeros(n, dtype=np.int16)
    reference[: len(robot)] = robot.astype(np.int16)
    robot_only = (reply_at + delay + SAMPLE_RATE // 2, (user_span[0] if user_span else delay + len(robot)))
    return mic, reference, robot_only, user_span


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rooms", type=int, default=8)
    ap.add_argument("--delay-ms", default="0,60", help="comma-separated reference-to-echo delays")
    ap.add_argument("--cancellers", default=",".join(CANCELLERS))
    ap.add_argument(
        "--robot-stops-after-s",
        type=float,
        default=None,
        help="the robot's reply ends this long into a barge-in, as a pausing robot's does (default: it talks on)",
    )
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
                mic, reference, robot_only, user_span = trial_audio(
                    synth, rng, paths, barge_in, delay_ms / 1000, args.robot_stops_after_s
                )
                started = time.process_time()
                for_voice, for_words = CANCELLERS[name]().run(mic, reference)
                cpu += time.process_time() - started
                part = for_voice[robot_only[0] : robot_only[1]]
                level.append(dbfs(part))
                robot_vad.append(vad_share(vad, part))
                if user_span:
                    user_vad.append(vad_share(vad, for_voice[user_span[0] : user_span[1]]))
                    truth = reference_words(barge_in)
                    said = for_words[user_span[0] : user_span[1]].tobytes()
                    errors += word_errors(truth, reference_words(whisper.transcribe(said).text))
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
            settings = {"rooms": args.rooms, "seed": args.seed, "robot_stops_after_s": args.robot_stops_after_s}
            json.dump({**settings, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
