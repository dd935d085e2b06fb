"""The hearing chain's every decision on synthesized barge-ins over the robot's echo, printed in
full: run it under two commits (a git worktree of each on PYTHONPATH) and diff the outputs, to
show a change to the ear's code changes nothing it decides.

Per seeded room (eval/hearing/echo_mic.py) a Piper reply plays from the loudspeaker and a Piper
request comes in over it; the microphone's 20 ms chunks and the reference go through the ear as
asr_node builds it (the canceller, the guarded detector, the streaming recognizer with a stand-in
that keeps what it reads; no ROS, no Whisper, so nothing varies from run to run).  Printed: each
voice change with where the ear dates its start, each event, and per room the guarded detector's
counters and a hash of every byte the recognizer read.  Runs on the layout before 64e7803
(audio/ and eval/ flat) and after it.

    git worktree add ../old OLD_COMMIT
    PYTHONPATH=../old .venv/bin/python scripts/hearing_same.py > old.txt
    .venv/bin/python scripts/hearing_same.py > new.txt && diff old.txt new.txt
"""

from __future__ import annotations

import argparse
import hashlib

import numpy as np

from predgen_ros.audio.ear import EarSettings, build_ear
from predgen_ros.audio.pcm import SAMPLE_RATE, to_pcm16k

try:  # the layout by role (64e7803 on)
    from predgen_ros.audio.echo.canceller import FRAME
    from predgen_ros.audio.speech.tts import PiperSynthesizer
    from predgen_ros.eval.hearing.echo_mic import RoomMicrophone
except ImportError:  # the flat layout before it
    from predgen_ros.audio.echo import FRAME
    from predgen_ros.audio.tts import PiperSynthesizer
    from predgen_ros.eval.echo_mic import RoomMicrophone

CHUNK = SAMPLE_RATE // 50
REPLY = (
    "Sure. CRISPR is a gene editing tool that lets scientists cut DNA at precise places. It is used in medicine,"
    " to study and treat diseases, and in farming, to grow crops that resist drought and pests. It is cheap and fast."
)
REQUESTS = ("What is the difference between weather and climate?", "Wait, how do plants make their food?")
# (room seed, the request's start in s): after the canceller's first LEARNING_S of the reply, over the rest
TRIALS = ((0, 4.5), (1, 5.2), (2, 6.1), (3, 7.0))
REPLY_AT_S = 0.5


class Reading:
    """A recognizer stand-in: keeps the audio it reads, and has a word once it has read 0.25 s."""

    def __init__(self):
        self.read, self.opened = bytearray(), 0

    def start(self) -> None:
        self.opened += 1

    def accept(self, pcm: bytes) -> str:
        self.read += pcm
        return "word" if len(self.read) > SAMPLE_RATE // 2 else ""

    def finish(self) -> str:
        return "word"


def hear(request: np.ndarray, reply: np.ndarray, probe: np.ndarray, seed: int, request_at_s: float) -> list[str]:
    room = RoomMicrophone(probe)
    room.enter_room(seed)
    room.start(0.0)
    reading = Reading()
    ear = build_ear(EarSettings(recognizer="pocketsphinx"), recognizer=reading)
    total = int((request_at_s + len(request) / SAMPLE_RATE + 2.0) * SAMPLE_RATE)
    user = np.zeros(total + CHUNK)
    heard = room.user_clip(request)
    start = int(request_at_s * SAMPLE_RATE)
    user[start : start + len(heard)] = heard[: len(user) - start]
    lines = []
    for at in range(0, total, CHUNK):
        t = at / SAMPLE_RATE
        offset = at - int(REPLY_AT_S * SAMPLE_RATE)
        reference = np.zeros(CHUNK, dtype=np.int16)
        if 0 <= offset < len(reply):
            part = reply[offset : offset + CHUNK]
            reference[: len(part)] = part
            room.robot_played(part, SAMPLE_RATE, t - 0.03)
        for k in range(0, CHUNK, FRAME):
            ear.echo.played(t + k / SAMPLE_RATE, reference[k : k + FRAME].tobytes())
        mic = room.next_chunk(user[at : at + CHUNK]).tobytes()
        if hasattr(ear, "feed"):
            events, over_echo = ear.feed(mic, t), ear.over_echo
        else:  # before 79556c9: the canceller's chunk, then the recognizer
            events = ear.asr.feed(ear.hear(mic, t))
            over_echo = ear.guarded_vad.echo_present
        for what, stamp in ear.asr.voice_changes():
            lines.append(
                f"room {seed} {t:.2f} s: voice {what} {stamp:.3f}, began {ear.voice_began(stamp):.3f}, over the echo {over_echo}"
            )
        lines += [f"room {seed} {t:.2f} s: {e.kind} {e.text!r}, speech end {e.t_speech_end}" for e in events]
    g = ear.guarded_vad
    digest = hashlib.sha1(bytes(reading.read)).hexdigest()[:12]
    lines.append(
        f"room {seed}: held {g.held_frames}, suppressed {g.suppressed_frames}, faint {g.faint_frames}, tail {g.tail_frames};"
        f" {reading.opened} utterances read, {len(reading.read)} bytes, sha1 {digest}"
    )
    return lines


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    synth = PiperSynthesizer(reproducible=True)

    def say(text: str) -> np.ndarray:
        speech = synth.synthesize(text)
        return np.frombuffer(to_pcm16k(speech.samples, speech.sample_rate), dtype=np.int16)

    reply, probe = say(REPLY), say("Sure, I can help with that. The kitchen light is on now.")
    for request in REQUESTS:
        print(f"# {request}")
        for seed, at_s in TRIALS:
            print("\n".join(hear(say(request), reply, probe, seed, at_s)))


if __name__ == "__main__":
    main()
