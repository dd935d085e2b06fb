"""`predgen-ros stress --ear spoken` (`make soak`): a day of spoken turns through the real ear.

The three nodes as processes with the defaults (Whisper, the echo canceller, the pause
policy); the only overrides put the microphone on `audio/user` and the loudspeaker's
sound on `tts/reference`.  The user (eval/graph/soak_plan.py) speaks into one seeded
room (eval/hearing/echo_mic.py), where the robot's own replies come back into the
microphone by their play stamps; the user waits for the robot to fall silent, pauses,
and speaks the next request, sometimes barging in or acknowledging over a reply.  The
audio-path faults (eval/graph/soak_faults.py) come once each, spread over the soak.

Per turn: the request's answer (a latency report for speech that ended after the
request's words), a barge-in's answer and whether the reply paused or stopped for it,
whether an acknowledgement stopped the reply; then the robot silent and the ear settled
(eval/barge_in/interruptions.py's Recorder proves it, and stops a robot that talks on).
A request with no answer within `answer_timeout_s` is unanswered; a turn after which the
robot never falls silent is stuck; a node that exits by itself is a crash (respawned).
The files and the verdict on drift and memory: eval/graph/soak_records.py; the last
line printed is
  soak: turns=N requests=N answered=N barge_ins=H/B crashes=N stuck=N faults=OK/F ...
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ...nodes.bringup import Graph
from ..barge_in.interruption_bag import first_voiced_s, last_voiced_s
from ..barge_in.interruptions import CHUNK_S, EVAL_STOPS, NODES, REACTION_S, AudioFeed, Recorder
from ..hearing.echo_mic import RoomMicrophone, probe_speech
from .soak_faults import DURING_REPLY, FAULTS, LINE_WAIT_S
from .soak_plan import ACKNOWLEDGEMENT, BARGE_IN, SoakTurn, UserVoice, plan_soak
from .soak_records import CsvLog, RequestRow, ResourceSampler, drift, memory_growth, plot, verdicts

OVERRIDES = {"asr.input": "topic", "tts.sink": "topic"}  # the microphone and the loudspeaker, as the room needs them
MAX_CRASHES = 5  # a node that keeps dying ends the soak


@dataclass
class SoakSettings:
    params_file: Path
    out: Path
    turns: int = 1000
    seed: int = 0
    room_seed: int = 1
    answer_timeout_s: float = 30.0
    restart_timeout_s: float = 180.0


@dataclass
class SoakResult:
    turns: int = 0
    requests: int = 0
    answered: int = 0
    barge_ins: int = 0  # spoken over a reply
    barge_ins_honoured: int = 0  # the reply paused or stopped, and the barge-in was answered
    acknowledgements: int = 0  # spoken over a reply
    acknowledgement_stops: int = 0  # ... that stopped it
    robot_stopped_by_soak: int = 0  # turns after which the robot talked on until the soak stopped it
    crashes: int = 0
    stuck: int = 0
    faults: dict[str, str] = field(default_factory=dict)
    drift: dict = field(default_factory=dict)
    memory_growth_mb: dict[str, float] = field(default_factory=dict)
    verdicts: dict[str, bool] = field(default_factory=dict)  # soak_records.verdicts: memory and drift

    @property
    def passed(self) -> bool:
        every_request = self.answered == self.requests and self.barge_ins_honoured == self.barge_ins
        return every_request and not self.crashes and not self.stuck and all(v == "ok" for v in self.faults.values())

    def line(self) -> str:
        first, last = (self.drift.get(k, {}) for k in list(self.drift)[:2]) if self.drift else ({}, {})
        fmt = lambda v, spec: "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)  # noqa: E731
        faults_ok = sum(v == "ok" for v in self.faults.values())
        return (
            f"soak: turns={self.turns} requests={self.requests} answered={self.answered} "
            f"barge_ins={self.barge_ins_honoured}/{self.barge_ins} crashes={self.crashes} stuck={self.stuck} "
            f"faults={faults_ok}/{len(self.faults)} first_audio_p50={fmt(first.get('first_audio_s_p50'), '.3f')}"
            f"->{fmt(last.get('first_audio_s_p50'), '.3f')} wer={fmt(first.get('wer'), '.3f')}->{fmt(last.get('wer'), '.3f')} "
            f"max_node_growth_mb={max((v for k, v in self.memory_growth_mb.items() if k in NODES), default=0.0):.1f} "
            + " ".join(f"{name}={'yes' if ok else 'NO'}" for name, ok in self.verdicts.items())
        )


class SpokenSoak:
    def __init__(self, settings: SoakSettings, graph: Graph, rec: Recorder, feed: AudioFeed, log_path: Path):
        self.settings, self.graph, self.rec, self.feed, self.log_path = settings, graph, rec, feed, log_path
        self.voice = UserVoice()
        self.result = SoakResult()
        self.rows: list[RequestRow] = []
        self.resources: list[dict] = []
        self.quiet_at = time.time()

    # ---------------------------------------------------------------- the run
    def run(self, plan: list[SoakTurn], progress=None) -> SoakResult:
        out, sampler = self.settings.out, ResourceSampler()
        requests_csv, resources_csv = CsvLog(out / "requests.csv"), CsvLog(out / "resources.csv")
        try:
            for turn in plan:
                if not self._respawn_crashed():
                    break
                rows = self._turn(turn)
                self.result.turns += 1
                for row in rows:
                    self.rows.append(row)
                    requests_csv.write(asdict(row))
                pids = {node: proc.pid for node, proc in self.graph.procs.items()} | {"soak": os.getpid()}
                self.resources.append({"turn": turn.number, "t": round(time.time(), 3)} | sampler.sample(pids))
                resources_csv.write(self.resources[-1])
                if progress:
                    progress(turn, rows)
        finally:
            requests_csv.close()
            resources_csv.close()
        self.result.drift = drift(self.rows, self.result.turns)
        self.result.memory_growth_mb = memory_growth(self.resources, self.result.turns)
        self.result.verdicts = verdicts(self.result.drift, self.result.memory_growth_mb, NODES)
        plot(self.resources, self.rows, {t.number: t.fault for t in plan if t.fault}, out / "soak.png")
        (out / "soak.json").write_text(json.dumps(asdict(self.result) | {"passed": self.result.passed}, indent=2) + "\n")
        return self.result

    def _turn(self, turn: SoakTurn) -> list[RequestRow]:
        if turn.fault and turn.fault not in DURING_REPLY:
            self._fault(turn)
        self.rec.spin_for(max(0.0, self.quiet_at + turn.pause_s - time.time()))
        report, true_end = self._say(turn.request, turn.rate)
        rows = [RequestRow.of(turn.number, "request", turn.request, report, true_end)]
        if report is not None and (turn.event or turn.fault in DURING_REPLY):
            self.rec.wait_for(lambda: self.rec.is_speaking, 5.0)
            self.rec.spin_for(max(0.0, float(report["t_first_audio"]) + turn.after_s - time.time()))
            if turn.fault in DURING_REPLY:
                self._fault(turn)
            elif self.rec.is_speaking and turn.kind == BARGE_IN:
                rows.append(self._barge_in(turn))
            elif self.rec.is_speaking and turn.kind == ACKNOWLEDGEMENT:
                self._acknowledge(turn)
        for row in rows:
            self.result.requests += 1
            self.result.answered += row.answered
        self.settle()
        return rows

    def _say(self, text: str, rate: float) -> tuple[dict | None, float]:
        """Speak `text`; its answer (None when none came in time) and its true end of speech."""
        clip, before = self.voice.say(text, rate), len(self.rec.reports)
        true_end = self.feed.play(clip) + last_voiced_s(clip)
        return self._answer(before, true_end), true_end

    def _answer(self, before: int, true_end: float) -> dict | None:
        """The first latency report since report `before` with a reply to speech that ended
        at `true_end` or after (an early final's answer inside the words is not it)."""
        find = (
            lambda: next(  # noqa: E731
                (
                    r
                    for r in self.rec.reports[before:]
                    if float(r["t_end_of_speech"]) >= true_end - REACTION_S and r["first_sentence"]
                ),
                None,
            )
        )
        self.rec.wait_for(lambda: find() is not None, self.settings.answer_timeout_s)
        return find()

    def _barge_in(self, turn: SoakTurn) -> RequestRow:
        """Another request over the reply: honoured when the reply paused or stopped for it
        and it was answered.  One whose words came as the reply ended by itself was no
        barge-in: only its answer counts."""
        voice, speaking, before = len(self.rec.voice), len(self.rec.speaking), len(self.rec.reports)
        clip = self.voice.say(turn.event, turn.rate)
        began = self.feed.play(clip)
        onset, true_end = began + first_voiced_s(clip), began + last_voiced_s(clip)
        report = self._answer(before, true_end)
        silenced = any(what in ("pause", "stop") for t, what in self.rec.voice[voice:] if t >= onset - CHUNK_S)
        ended = [t for t, on in self.rec.speaking[speaking:] if not on]
        if silenced or not ended or ended[0] - onset >= REACTION_S:
            self.result.barge_ins += 1
            self.result.barge_ins_honoured += silenced and report is not None
        return RequestRow.of(turn.number, "barge_in", turn.event, report, true_end)

    def _acknowledge(self, turn: SoakTurn) -> None:
        voice = len(self.rec.voice)
        clip = self.voice.say(turn.event, turn.rate)
        onset = self.feed.play(clip) + first_voiced_s(clip)
        self.rec.wait_for(lambda: not self.rec.is_speaking, self.settings.answer_timeout_s)
        self.result.acknowledgements += 1
        self.result.acknowledgement_stops += any(what == "stop" for t, what in self.rec.voice[voice:] if t >= onset - CHUNK_S)

    def settle(self) -> None:
        """Until the robot is silent and nothing is on its way; a robot that talks on is stopped
        (counted), one that never falls silent is a stuck turn."""
        stops = self.rec.wait_quiet()
        self.result.robot_stopped_by_soak += stops > 0
        self.result.stuck += stops > EVAL_STOPS
        fell_silent = [t for t, speaking in self.rec.speaking if not speaking]
        self.quiet_at = fell_silent[-1] if fell_silent else time.time()  # the user's pause began there

    # ---------------------------------------------------------------- faults
    def _fault(self, turn: SoakTurn) -> None:
        outcome = FAULTS[turn.fault](self)
        self.result.faults[turn.fault] = outcome
        print(f"soak: fault {turn.fault} before turn {turn.number}: {outcome}", file=sys.stderr, flush=True)

    def restart(self, node: str) -> str:
        """Kill `node` as a crash would, respawn it, and wait until the graph hears through it
        again and the new node has said so in its log."""
        mark = self.log_mark()
        self.graph.kill(node)
        self.rec.health.pop(node, None)
        self.graph.launch(node)
        try:
            self.rec.wait_active([node], self.settings.restart_timeout_s)
        except Exception as err:  # noqa: BLE001  GraphError or a lifecycle service that never answered: reported, the soak goes on
            return f"{node} did not come back: {err}"
        hearing = lambda: node != "asr_node" or self.rec.value(node, "state") in ("listening", "muted")  # noqa: E731
        if not self.rec.wait_for(lambda: node in self.rec.health and hearing(), self.settings.restart_timeout_s):
            return f"{node} came back but never reported that it hears"
        return self.said_since(mark, node, ("ready (active)",), LINE_WAIT_S)

    def _respawn_crashed(self) -> bool:
        """A node that exited by itself is respawned and counted; False once too many have."""
        exited = self.graph.exited()
        if exited is None:
            return True
        self.result.crashes += 1
        print(f"soak: {exited[0]} exited with code {exited[1]}; respawning it", file=sys.stderr, flush=True)
        if self.result.crashes > MAX_CRASHES:
            return False
        return self.restart(exited[0]) == "ok" or self.result.crashes < MAX_CRASHES

    # ---------------------------------------------------------------- the graph's log
    def log_mark(self) -> int:
        return self.log_path.stat().st_size

    def said_since(self, mark: int, node: str, lines: tuple[str, ...], timeout: float) -> str:
        """ "ok" once `node` has logged a line with each of `lines` after `mark`, else which it did not."""

        def missing() -> list[str]:
            with open(self.log_path, encoding="utf-8", errors="replace") as log:
                log.seek(mark)
                said = [line for line in log if line.startswith(f"[{node}]")]
            return [want for want in lines if not any(want in line for line in said)]

        self.rec.wait_for(lambda: not missing(), timeout)
        return "ok" if not missing() else f"{node} did not say: {', '.join(repr(m) for m in missing())}"


def run_spoken_soak(settings: SoakSettings, progress=None) -> SoakResult:
    import rclpy

    from ...audio.recognition.text_asr import load_questions, robot_conversation_file

    settings.out.mkdir(parents=True, exist_ok=True)
    requests = [q.text for q in load_questions(robot_conversation_file())]
    plan = plan_soak(requests, settings.turns, list(FAULTS), settings.seed)
    (settings.out / "plan.jsonl").write_text("".join(json.dumps(asdict(t)) + "\n" for t in plan))
    room = RoomMicrophone(probe_speech())
    room.enter_room(settings.room_seed)
    log_path = settings.out / "graph.log"
    rclpy.init()
    try:
        with open(log_path, "w") as log, Graph(settings.params_file, OVERRIDES, nodes=NODES, log=log) as graph:
            rec = Recorder(room)
            rec.wait_active(NODES)
            feed = AudioFeed(rec.node, room)
            try:
                rec.ready_to_speak(feed)
                return SpokenSoak(settings, graph, rec, feed, log_path).run(plan, progress)
            finally:
                feed.close()
                rec.close()
    finally:
        rclpy.try_shutdown()
