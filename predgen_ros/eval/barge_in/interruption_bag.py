"""`predgen-ros make-interruption-bag`: speech and noise over the robot, as a bag.

Each trial is a short robot request (robot_questions), then, while the robot
answers, one event: an acknowledgement spoken by Piper ("Mm-hmm.", "Okay."), a
non-speech burst (white noise, a cough-like burst, a door-like click), or a
real barge-in (another request).  The robot's reply starts when the graph says
so, not at a recorded time, so the bag holds each trial's two clips and how long
after the robot starts speaking the event comes (seeded); eval/barge_in/interruptions.py
plays them against the live graph.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ...audio.pcm import SAMPLE_RATE, to_pcm16k
from ...audio.speech.tts import PiperSynthesizer
from ..bag_replay.bags import BagError, BagMessage, read_bag, write_bag
from ..bag_replay.make_bag import VOICED

ROBOT_QUESTIONS = Path(__file__).resolve().parents[1] / "data" / "robot_questions" / "questions.txt"
KINDS = ("backchannel", "burst", "barge_in")
ACKNOWLEDGEMENTS = ("Mm-hmm.", "Uh-huh.", "Okay.", "Yeah.", "Right.", "I see.", "Mhm.")
BURSTS = ("noise", "cough", "click")
EVENT_AFTER_S = (0.6, 1.6)  # when the event starts, after the robot's first audio (drawn uniformly)
TOPICS = {
    "eval/trial": "std_msgs/msg/String",  # JSON: the Trial
    "eval/question_audio": "std_msgs/msg/Int16MultiArray",  # the request, 16 kHz
    "eval/event_audio": "std_msgs/msg/Int16MultiArray",  # what comes over the robot, 16 kHz
}


@dataclass(frozen=True)
class Trial:
    number: int
    kind: str  # backchannel, burst or barge_in
    question: str
    event: str  # the acknowledgement or request spoken, or the burst's name
    after_s: float  # the event starts this long after the robot's first audio
    onset_s: float = 0.0  # the event's first voiced sample, s into its clip


def plan_trials(questions: list[str], per_kind: int, seed: int) -> list[Trial]:
    """`per_kind` trials of each kind, interleaved, seeded."""
    rng = random.Random(seed)
    kinds = [kind for _ in range(per_kind) for kind in KINDS]
    trials = []
    for number, kind in enumerate(kinds):
        question = rng.choice(questions)
        others = [q for q in questions if q != question]
        event = rng.choice({"backchannel": ACKNOWLEDGEMENTS, "burst": BURSTS, "barge_in": others}[kind])
        trials.append(Trial(number, kind, question, event, round(rng.uniform(*EVENT_AFTER_S), 3)))
    return trials


def burst(name: str, rng: np.random.Generator) -> np.ndarray:
    """A non-speech sound, 16 kHz int16: 0.4 s of white noise, a cough-like double burst
    of low-passed noise with a fast decay, or a 30 ms click."""
    if name == "noise":
        sound = rng.standard_normal(int(0.4 * SAMPLE_RATE)) * 2500
    elif name == "cough":
        n = int(0.25 * SAMPLE_RATE)
        hit = np.convolve(rng.standard_normal(n), np.ones(8) / 8, "same") * np.exp(-np.linspace(0, 6, n)) * 9000
        sound = np.concatenate([hit, np.zeros(int(0.08 * SAMPLE_RATE)), 0.6 * hit])
    elif name == "click":
        n = int(0.03 * SAMPLE_RATE)
        sound = rng.standard_normal(n) * np.exp(-np.linspace(0, 12, n)) * 12000
    else:
        raise ValueError(f"unknown burst {name!r} (one of {', '.join(BURSTS)})")
    return np.clip(sound, -32767, 32767).astype(np.int16)


def first_voiced_s(pcm: np.ndarray) -> float:
    loud = np.flatnonzero(np.abs(pcm.astype(np.int32)) > VOICED)
    return float(loud[0]) / SAMPLE_RATE if len(loud) else 0.0


def last_voiced_s(pcm: np.ndarray) -> float:
    loud = np.flatnonzero(np.abs(pcm.astype(np.int32)) > VOICED)
    return float(loud[-1] + 1) / SAMPLE_RATE if len(loud) else 0.0


def make_interruption_bag(out: Path, questions: list[str], per_kind: int, seed: int, progress=None) -> list[Trial]:
    from rclpy.serialization import serialize_message
    from std_msgs.msg import String

    from ...nodes.messages import audio_chunk

    synth = PiperSynthesizer(reproducible=True)
    rng = np.random.default_rng(seed)

    def speech(text: str) -> np.ndarray:
        spoken = synth.synthesize(text)
        return np.frombuffer(to_pcm16k(spoken.samples, spoken.sample_rate), dtype=np.int16)

    messages, trials = [], []
    for trial in plan_trials(questions, per_kind, seed):
        event = burst(trial.event, rng) if trial.kind == "burst" else speech(trial.event)
        trial = Trial(**{**asdict(trial), "onset_s": round(first_voiced_s(event), 4)})
        t_ns = trial.number * 1_000_000_000  # bag order only: the replay times the trial by the graph
        for offset, (topic, msg) in enumerate(
            [
                ("eval/trial", String(data=json.dumps(asdict(trial)))),
                ("eval/question_audio", audio_chunk(speech(trial.question), SAMPLE_RATE)),
                ("eval/event_audio", audio_chunk(event, SAMPLE_RATE)),
            ]
        ):
            messages.append(BagMessage(topic, TOPICS[topic], t_ns + offset, serialize_message(msg)))
        trials.append(trial)
        if progress:
            progress()
    write_bag(out, messages)
    return trials


def read_interruption_bag(path: Path, limit: int | None = None) -> list[tuple[Trial, np.ndarray, np.ndarray]]:
    """Each trial with its question's and its event's audio."""
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import Int16MultiArray, String

    messages = read_bag(path, list(TOPICS))
    trials = [Trial(**json.loads(deserialize_message(m.raw, String).data)) for m in messages if m.topic == "eval/trial"]

    def clips(topic: str) -> list[np.ndarray]:
        return [
            np.asarray(deserialize_message(m.raw, Int16MultiArray).data, dtype=np.int16) for m in messages if m.topic == topic
        ]

    questions, events = clips("eval/question_audio"), clips("eval/event_audio")
    if not trials or not (len(trials) == len(questions) == len(events)):
        raise BagError(f"{path}: no interruption trials: make it with `predgen-ros make-interruption-bag`")
    return list(zip(trials, questions, events))[:limit]
