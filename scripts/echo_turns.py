"""What asr_node makes of speech over the robot, offline: the interruption bag's events through its hearing.

Per trial of a bag made by `predgen-ros make-interruption-bag`: a Piper reply from the
loudspeaker of a seeded room (eval/hearing/echo_mic.py, as `eval-interruptions --robot-in-mic`),
the trial's event said into it `after_s` after the reply began, and asr_node's hearing
chunk by chunk (audio/ear.py: the canceller, the guarded voice detector, the
streaming Whisper recognizer) with its turn owner (turn_taking.py), whose pause, resume
and stop the loudspeaker obeys.  No ROS, faster than real time, and Whisper as if it
were instant (the recognizer's lag through the graph is not here): minutes where a graph
run takes half an hour, to compare hearing rules before a graph run measures them.
Reported: per kind, the trials the robot stopped in (for barge-ins, with the words
handed on), and with --silent, the replies with nothing said over them that paused or
stopped themselves.  Tune on a bag of another seed than the one eval-interruptions
reports on.

    .venv/bin/predgen-ros make-interruption-bag --seed 7 --out tune-bag
    .venv/bin/python scripts/echo_turns.py --bag tune-bag --room-seed 7 --out turns.json

`--keep-heard DIR` saves each utterance as the recognizer read it, and the canceller's
two inputs (canceller-inputs.wav), as asr_node's `asr.record_dir` does, to compare with a
graph run's (`eval-interruptions --keep-heard`, scripts/heard_compare.py, canceller_lag.py).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from echo_onsets import MIC_CHUNK_S, REPLIES, TTS_CHUNK_S, Voice
from tqdm import tqdm

from predgen_ros.audio.ear import EarSettings, build_ear
from predgen_ros.audio.heard_audio import CancellerInputs, HeardAudio
from predgen_ros.audio.pcm import SAMPLE_RATE
from predgen_ros.audio.recognition.asr_events import AsrEvent, in_order
from predgen_ros.audio.recognition.recognizers import make_recognizer
from predgen_ros.eval.barge_in.interruption_bag import read_interruption_bag
from predgen_ros.eval.hearing.echo_mic import RoomMicrophone, probe_speech
from predgen_ros.turn_taking import TurnOwner, TurnRules
from predgen_ros.turn_taking import Voice as Decision

BEFORE_S = 1.0  # silence before the first reply (the room's noise is learned there)
WARM_UP_GAP_S = 1.0  # between the reply that warms the canceller up and the trial's
AFTER_S = 4.0  # heard after the event's clip, for its final and a resume


@dataclass
class Loudspeaker:
    """The trial's reply in TTS_CHUNK_S chunks, played as the turn owner says."""

    chunks: list[np.ndarray]
    start_s: float
    state: str = "waiting"  # playing, paused, stopped, done
    next_s: float = 0.0
    played: int = 0
    decisions: list = field(default_factory=list)

    def obey(self, decision: Decision, t: float, why: str) -> None:
        if decision is Decision.KEEP:
            return
        self.decisions.append((round(t, 3), decision.value, why))
        if decision is Decision.PAUSE and self.state == "playing":
            self.state = "paused"
        elif decision is Decision.RESUME and self.state == "paused":
            self.state = "playing"
        elif decision is Decision.STOP:
            self.state = "stopped"

    def due(self, t: float) -> list[tuple[float, np.ndarray]]:
        """The chunks handed to the sink by `t` (each at the time it starts to play)."""
        if self.state == "waiting" and t >= self.start_s:
            self.state, self.next_s = "playing", self.start_s
        if self.state == "paused":
            self.next_s = max(self.next_s, t)
        out = []
        while self.state == "playing" and self.played < len(self.chunks) and self.next_s <= t:
            out.append((self.next_s, self.chunks[self.played]))
            self.next_s += len(self.chunks[self.played]) / SAMPLE_RATE
            self.played += 1
        if self.state == "playing" and self.played == len(self.chunks) and t >= self.next_s:
            self.state = "done"
        return out

    @property
    def talking(self) -> bool:
        return self.state in ("playing", "paused")


def in_chunks(pcm: np.ndarray, seconds: float) -> list[np.ndarray]:
    step = int(seconds * SAMPLE_RATE)
    return [pcm[i : i + step] for i in range(0, len(pcm), step)]


def hear_trial(
    probe,
    room_seed: int,
    warm_up: np.ndarray,
    reply: np.ndarray,
    event: np.ndarray,
    after_s: float,
    recognizer,
    on_utterance=None,
    tap=None,
):
    """The reply (after one that warms the canceller up) with `event` said `after_s` into
    it; the owner's decisions (s from the event's clip) and the finals (text, handed on).
    `on_utterance`: StreamingAsr's, to keep what the recognizer read; `tap`: the canceller's,
    to keep its inputs (audio/heard_audio.py)."""
    room = RoomMicrophone(probe)
    room.enter_room(room_seed)
    room.start(0.0)
    # asr_node's hearing; the final is the recognizer's closing re-decode, as echo.md's runs had it
    ear = build_ear(EarSettings(final_from_partial=False), recognizer=recognizer, on_utterance=on_utterance)
    canceller, asr = ear.echo, ear.asr
    canceller.tap = tap
    owner = TurnOwner(TurnRules(), "pause", 1.0, clock=lambda: t)
    warm = [(BEFORE_S + i * TTS_CHUNK_S, c) for i, c in enumerate(in_chunks(warm_up, TTS_CHUNK_S))]
    speaker = Loudspeaker(in_chunks(reply, TTS_CHUNK_S), BEFORE_S + len(warm_up) / SAMPLE_RATE + WARM_UP_GAP_S)
    clip = room.user_clip(event)
    clip_at = speaker.start_s + after_s
    n = int(MIC_CHUNK_S * SAMPLE_RATE)
    finals, t = [], 0.0
    while t < clip_at + len(clip) / SAMPLE_RATE + AFTER_S:
        for at, chunk in [c for c in warm if t <= c[0] < t + MIC_CHUNK_S] + speaker.due(t + MIC_CHUNK_S):
            room.robot_played(chunk, SAMPLE_RATE, at)
            canceller.played(at, chunk.tobytes())
        if speaker.talking != owner.robot_talks:
            speaker.obey(owner.robot_speaking(speaker.talking), t - clip_at, "robot speaking")
        user = np.zeros(n)
        at = int(round((t - clip_at) * SAMPLE_RATE))
        lo, hi = max(at, 0), min(at + n, len(clip))
        if hi > lo:
            user[lo - at : hi - at] = clip[lo:hi]
        heard = ear.feed(room.next_chunk(user).tobytes(), t)
        t += MIC_CHUNK_S
        recognizer.idle()  # Whisper as if instant
        for event_heard in in_order(heard, asr.voice_changes()):  # as asr_node publishes them
            if not isinstance(event_heard, AsrEvent):
                what, at_s = event_heard
                if what in ("start", "resumed"):
                    at_s = ear.voice_began(at_s)
                speaker.obey(owner.voice(what, at_s).voice, t - clip_at, f"voice {what}")
            elif event_heard.kind == "partial":
                speaker.obey(owner.partial(event_heard.text).voice, t - clip_at, event_heard.text)
            else:
                ruling = owner.final(event_heard.text)
                speaker.obey(ruling.voice, t - clip_at, event_heard.text)
                finals.append((event_heard.text, ruling.hand_on))
        speaker.obey(owner.due(), t - clip_at, "resume_s")
    return speaker.decisions, finals


def summarize(rows: list[dict]) -> dict:
    summary = {}
    for kind in dict.fromkeys(r["kind"] for r in rows):
        mine = [r for r in rows if r["kind"] == kind]
        summary[kind] = {
            "trials": len(mine),
            "stopped": sum(r["stopped"] for r in mine),
            "paused": sum(r["paused"] for r in mine),
        }
    summary["barge_ins_not_stopped"] = [
        (r["number"], r["event"], r["finals"]) for r in rows if r["kind"] == "barge_in" and not r["stopped"]
    ]
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bag", required=True, help="a bag made by make-interruption-bag")
    ap.add_argument("--room-seed", type=int, default=7, help="rooms SEED*1000 + 0..7, a new one each trial")
    ap.add_argument("--silent", type=int, default=0, help="also N replies with nothing said over them")
    ap.add_argument("--out", default=None, help="write the trials and the summary as JSON here")
    ap.add_argument(
        "--keep-heard", type=Path, default=None, help="save each utterance as the recognizer read it here (NNNN.wav, heard.jsonl)"
    )
    args = ap.parse_args()
    heard = HeardAudio(args.keep_heard) if args.keep_heard else None
    inputs = CancellerInputs(args.keep_heard) if args.keep_heard else None
    voice, probe = Voice(), probe_speech()
    replies = [voice.reply(text, np.random.default_rng(args.room_seed)) for text in REPLIES]
    trials = read_interruption_bag(args.bag)
    silence = np.zeros(SAMPLE_RATE, dtype=np.int16)
    plan = [(t.number, t.kind, t.event, t.after_s, clip) for t, _, clip in trials]
    plan += [(1000 + i, "silence", "", trials[i % len(trials)][0].after_s, silence) for i in range(args.silent)]
    recognizer = make_recognizer("whisper")
    rows = []
    for i, (number, kind, event, after_s, clip) in enumerate(tqdm(plan, desc="echo_turns", unit="trial")):
        room_seed = args.room_seed * 1000 + i % 8
        saved = heard.count if heard else 0
        decisions, finals = hear_trial(
            probe, room_seed, replies[(i + 1) % 4], replies[i % 4], clip, after_s, recognizer,
            heard.utterance if heard else None, inputs.frame if inputs else None,
        )  # fmt: skip
        kinds = [d[1] for d in decisions]
        rows.append(
            {"number": number, "kind": kind, "event": event, "room": room_seed, "stopped": "stop" in kinds,
             "paused": "pause" in kinds, "decisions": decisions, "finals": finals,
             "heard": [f"{n:04d}.wav" for n in range(saved, heard.count if heard else 0)]}
        )  # fmt: skip
    if inputs:
        inputs.close()
    summary = summarize(rows)
    print(json.dumps(summary, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"summary": summary, "trials": rows}, f, indent=1)


if __name__ == "__main__":
    main()
