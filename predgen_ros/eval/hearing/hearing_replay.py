"""A graph run's hearing again, offline: its recorded canceller inputs replayed through
asr_node's hearing, and each voice start it opens over the robot's echo scored against
the run's trials.

asr_node's `asr.record_dir` keeps what its echo canceller was given
(`canceller-inputs.wav`: the microphone and the reference as paired, audio/heard_audio.py).
Replayed through the canceller, the guarded voice detector and the endpoint (no
recognizer: a voice start needs no words), the graph's pauses at a voice start come back
at one constant offset (docs/results/echo.md), so a change to the hearing can be tried on
the run's own audio in a minute instead of a graph run.  The offset puts the run's events
(trials.json `onset_at`, wall time) on the recording's time line; a replayed start near an
event's onset is that event's (a barge-in's latency is the start less its onset), any
other is the robot pausing for its own voice.
"""

from __future__ import annotations

import json
import re
import wave
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...audio.ear import EarSettings, build_ear
from ...audio.echo.canceller import FRAME
from ...audio.pcm import SAMPLE_RATE

CHUNK = SAMPLE_RATE // 50  # asr_node's 20 ms microphone chunks
MATCH_S = 0.1  # a replayed voice start this close to a graph's pause (at the best offset) is the same decision
GRAPH_PAUSE = re.compile(r"\[(\d+\.\d+)\] \[asr_node\]: turn: pause \(voice start\)")
# a start this long before an event's onset (the recording's offset is known within a few
# ms) up to EVENT_AFTER_S after it is the event's: the longest clip of the bag lasts about 2 s
EVENT_BEFORE_S = 0.1
EVENT_AFTER_S = 2.0


def read_inputs(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(microphone, reference) of a canceller-inputs.wav, as float64 samples."""
    with wave.open(str(path), "rb") as wav:
        if wav.getnchannels() != 2 or wav.getframerate() != SAMPLE_RATE:
            raise SystemExit(f"{path}: not a canceller-inputs.wav (stereo, {SAMPLE_RATE} Hz)")
        pcm = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2").reshape(-1, 2)
    return pcm[:, 0].astype(np.float64), pcm[:, 1].astype(np.float64)


class _NoRecognizer:
    """Voice starts need no words."""

    def start(self) -> None: ...
    def accept(self, pcm: bytes) -> str:
        return ""

    def finish(self) -> str:
        return ""


SHIPPED = EarSettings()  # asr_node's defaults: the WebRTC canceller and its guarded detector


@dataclass
class VoiceSpan:
    """One utterance the replayed hearing opened (stream times, s)."""

    opened: float  # the chunk's end at which it opened (the owner pauses the robot here)
    began: float  # where its voice began, read back over the echo as asr_node dates it
    ended: float | None  # its voice's last end (asr/voice `end`): pauses inside count, as turn.min_speech_s times it
    over_echo: bool  # opened while the robot's echo may be at the microphone

    @property
    def voiced_s(self) -> float | None:
        return None if self.ended is None else self.ended - self.began


def replayed_voice(mic: np.ndarray, reference: np.ndarray, settings: EarSettings = SHIPPED) -> list[VoiceSpan]:
    """Every utterance asr_node's hearing (`settings`, with the canceller), given these
    inputs, opens, with its voice's span."""
    mic, reference = mic.astype(np.int16), reference.astype(np.int16)
    ear = build_ear(settings, recognizer=_NoRecognizer())
    canceller, asr = ear.echo, ear.asr
    spans: list[VoiceSpan] = []
    for at in range(0, len(mic) - CHUNK + 1, CHUNK):
        t = at / SAMPLE_RATE
        for k in range(0, CHUNK, FRAME):  # the reference as paired: each frame's own
            canceller.played(t + k / SAMPLE_RATE, reference[at + k : at + k + FRAME].tobytes())
        ear.feed(mic[at : at + CHUNK].tobytes(), t)
        for what, stamped in asr.voice_changes():
            if what in ("start", "resumed"):
                spans.append(VoiceSpan(t + CHUNK / SAMPLE_RATE, ear.voice_began(stamped), None, ear.over_echo))
            elif what == "end" and spans:
                spans[-1].ended = stamped
    return spans


def replayed_voice_starts(mic: np.ndarray, reference: np.ndarray, settings: EarSettings = SHIPPED) -> list[float]:
    """Stream times (s) at which asr_node's hearing, given these inputs, opens an
    utterance over the robot's echo (the owner pauses the robot there)."""
    return [span.opened for span in replayed_voice(mic, reference, settings) if span.over_echo]


def graph_pauses(log: Path) -> np.ndarray:
    """Wall times of the graph's pauses at a voice start (asr_node's log lines)."""
    return np.array([float(t) for t in GRAPH_PAUSE.findall(log.read_text())])


@dataclass
class Alignment:
    offset_s: float  # wall time = stream time + offset_s
    matched: int  # graph pauses with a replayed start within MATCH_S at that offset
    graph: int
    replayed: int
    spread_p90_s: float  # how far the matched pairs stray from one offset
    spread_max_s: float


def align(starts: list[float], graph: np.ndarray) -> Alignment | None:
    """The offset from the replay's time line to the graph's wall clock that matches
    most of the graph's pauses with replayed starts (None: nothing to match)."""
    if not len(graph) or not starts:
        return None
    replay = np.array(starts)
    gaps = lambda offset: np.min(np.abs(replay[None, :] + offset - graph[:, None]), axis=1)  # noqa: E731
    guesses = (graph[:, None] - replay[None, :]).ravel()  # every pairing's offset; the right one recurs
    offset = max(guesses, key=lambda o: int(np.sum(gaps(o) < MATCH_S)))
    matched = gaps(offset) < MATCH_S
    nearest = replay[np.argmin(np.abs(replay[None, :] + offset - graph[:, None]), axis=1)]
    differences = (graph - nearest)[matched]
    offset = float(np.median(differences))
    spread = np.abs(differences - offset)
    return Alignment(offset, int(matched.sum()), len(graph), len(replay), float(np.percentile(spread, 90)), float(spread.max()))


@dataclass
class Scored:
    """Replayed voice starts by what made them."""

    latency_s: dict[int, float] = field(default_factory=dict)  # barge-in trial -> its first start less its onset
    missed: list[int] = field(default_factory=list)  # barge-ins with no start
    paused_by: dict[str, int] = field(default_factory=dict)  # backchannel/burst -> trials it paused the robot in
    events: dict[str, int] = field(default_factory=dict)  # kind -> trials in the recording
    own: list[float] = field(default_factory=list)  # stream times of starts no event made: the robot's own voice

    def latencies(self) -> np.ndarray:
        return np.array(sorted(self.latency_s.values()))


def score(starts: list[float], offset_s: float, trials: list[dict], recorded_s: float) -> Scored:
    """Each start as an event's (within its window) or the robot's own (any other)."""
    out = Scored()
    taken = set()
    for trial in trials:
        onset_at = trial.get("onset_at")
        if onset_at is None:
            continue
        onset = onset_at - offset_s
        if not 0.0 <= onset <= recorded_s:
            continue
        kind = trial["kind"]
        out.events[kind] = out.events.get(kind, 0) + 1
        mine = [i for i, s in enumerate(starts) if onset - EVENT_BEFORE_S <= s <= onset + EVENT_AFTER_S]
        taken.update(mine)
        if kind == "barge_in":
            if mine:
                out.latency_s[trial["number"]] = starts[mine[0]] - onset
            else:
                out.missed.append(trial["number"])
        elif mine:
            out.paused_by[kind] = out.paused_by.get(kind, 0) + 1
    out.own = [s for i, s in enumerate(starts) if i not in taken]
    return out


def load_trials(run: Path) -> list[dict]:
    path = run / "trials.json"
    if not path.is_file():
        raise SystemExit(f"{run}: no trials.json (the folder eval-interruptions --out wrote)")
    trials = json.loads(path.read_text())
    if not any(t.get("onset_at") for t in trials):
        raise SystemExit(f"{path}: no trial has onset_at (runs before ac94dfa did not record it)")
    return trials
