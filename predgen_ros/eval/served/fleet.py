"""`predgen-ros fleet`: robots sharing one inference server, on the real clock.

Each robot is a PredGen session of its own on an engine worker (as predgen_node runs
one), reading the served model through the served backend.  Its user speaks the robot
conversation's requests at `chars_per_second` in real time (the benchmark's partials); the
final comes `endpoint_s` after the last word, as asr_node's endpoint sends it; the robot's
first audio is its commit plus the synthesis of the first sentence's opening by its own
Piper voice.  The next request comes QUESTION_GAP_S after the reply is decoded.  Robots
start a little apart, as robots in a building do.

Per robot count: each answer's first audio after the end of speech, and each request's
time at the server.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from ...engine.backends.served import ServedBackend, ServerSettings
from ...engine.config import EngineConfig
from ...engine.lm import LanguageModel
from ...engine.session import Session
from ...engine.worker import EngineWorker, Event
from ...events import Emission
from ...turn_events import ENDINGS
from ..benchmark.questions import speak
from ..records import percentile

QUESTION_GAP_S = 2.0
STAGGER_S = 1.3  # robot i starts this many seconds after robot i - 1


@dataclass
class RobotRun:
    first_audio_s: list[float] = field(default_factory=list)
    first_sentences: list[str] = field(default_factory=list)
    request_s: list[float] = field(default_factory=list)
    sent_bytes: int = 0
    received_bytes: int = 0
    unanswered: int = 0


class Robot:
    """One robot's engine and voice; `converse` plays its user and times its answers."""

    def __init__(self, settings: ServerSettings, tokenizer, config: EngineConfig, voice):
        self.backend = ServedBackend(settings, tokenizer)
        self.session = Session(LanguageModel(self.backend, tokenizer), config, time.time)
        self.voice = voice
        self._commits: list[tuple[str, float]] = []
        self._done = threading.Event()
        self.worker = EngineWorker(self.session, self._on_emission)

    def _on_emission(self, kind: Emission, text: str, turn) -> None:
        if kind is Emission.COMMIT:
            pieces = self.voice.pieces(text) if text else []
            if pieces:
                self.voice.synthesize(pieces[0])  # the opening: what plays first
            self._commits.append((text, time.time()))
        elif kind in (Emission.DONE, Emission.NOTICE):
            self._done.set()

    def converse(self, requests: list[str], chars_per_second: float, endpoint_s: float, timeout_s: float) -> RobotRun:
        run = RobotRun()
        self.worker.start()
        try:
            for text in requests:
                events, t_end = speak(text, chars_per_second)
                start, commits = time.time() + QUESTION_GAP_S, len(self._commits)
                self._done.clear()
                for event in events:
                    if event.turn is None:
                        continue  # the end of turn: the worker ends the turn at the final
                    due = start + event.t + (endpoint_s if event.turn.kind in ENDINGS else 0.0)
                    time.sleep(max(0.0, due - time.time()))
                    self.worker.mailbox.post(Event("turn", event.turn, t=time.time()))
                if not self._done.wait(timeout_s) or len(self._commits) == commits:
                    run.unanswered += 1
                    continue
                sentence, at = self._commits[commits]
                run.first_audio_s.append(at - (start + t_end))
                run.first_sentences.append(sentence)
        finally:
            self.worker.stop()
        run.request_s = list(self.backend.log.seconds)
        run.sent_bytes, run.received_bytes = self.backend.transport.sent_bytes, self.backend.transport.received_bytes
        return run


def run_fleet(
    robots: int, settings: ServerSettings, tokenizer, config: EngineConfig, requests: list[str], chars_per_second: float = 10.0
) -> list[RobotRun]:
    """`robots` robots through `requests` at once against one server."""
    from ...audio.speech.tts import PiperSynthesizer

    fleet = [Robot(settings, tokenizer, config, PiperSynthesizer(threads=1)) for _ in range(robots)]
    runs: list[RobotRun | None] = [None] * robots

    def one(i: int) -> None:
        time.sleep(i * STAGGER_S)
        runs[i] = fleet[i].converse(requests, chars_per_second, endpoint_s=0.5, timeout_s=120.0)

    threads = [threading.Thread(target=one, args=(i,), name=f"robot-{i}") for i in range(robots)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [run for run in runs if run is not None]


def fleet_row(robots: int, runs: list[RobotRun]) -> dict:
    audio = [s for run in runs for s in run.first_audio_s]
    requests = [s for run in runs for s in run.request_s]
    return {
        "robots": robots,
        "answers": len(audio),
        "unanswered": sum(run.unanswered for run in runs),
        "first_audio_p50_s": percentile(audio, 0.5),
        "first_audio_p90_s": percentile(audio, 0.9),
        "request_p50_s": percentile(requests, 0.5),
        "request_p90_s": percentile(requests, 0.9),
        "requests": len(requests),
        "kb_per_answer_sent": sum(run.sent_bytes for run in runs) / 1024 / max(1, len(audio)),
        "kb_per_answer_received": sum(run.received_bytes for run in runs) / 1024 / max(1, len(audio)),
    }
