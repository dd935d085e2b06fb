"""The robot/workstation split on one machine, over real DDS, and what the robot does when the link fails.

`SplitGraph` runs asr_node and tts_node in the `robot` namespace and predgen_node
in `workstation` (nodes/two_hosts.py), on a domain of its own with discovery
across the veth only.  This process then joins `robot` and talks to the graph as
a robot-side program: real speech on `audio/user`, the robot's voice and
diagnostics observed on the robot.  A process that joined a namespace stays in
it, so `predgen-ros split faults` runs in a process of its own and prints what
happened as JSON (test/test_workstation.py asserts on it).

The faults, and what the robot does in each:

  link_down         the link goes down in the middle of a question, for 3 s and at least
                    until asr_node reports PredGen unreachable, then comes back: asr_node
                    kept hearing the question, reliable QoS delivers it when the link
                    returns, and it is answered.
  predgen_restart   predgen_node is killed while the robot answers and started again: the
                    robot falls silent (tts_node ends a reply its author can no longer
                    finish), speaks nothing of the old turn, and answers the next question.
  workstation_gone  predgen_node is killed and the link stays down: asr_node reports PredGen
                    unreachable on /diagnostics and keeps listening, the robot says nothing,
                    and no robot node crashes or hangs.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ...audio.recognition.recognizers import DEFAULT_RECOGNIZER
from ...nodes.bringup import HALVES, Graph, default_params_file
from ...nodes.two_hosts import TwoHosts

QUESTIONS = ("What is the capital of France?", "Name one planet of the solar system.", "Tell me a fun fact about whales.")
GRAPH_OVERRIDES = {"asr.backend": DEFAULT_RECOGNIZER, "asr.input": "topic", "tts.sink": "none", "tts.realtime": True}
OUTAGE_S = 3.0
ANSWER_TIMEOUT_S = 60.0
QUIET_S = 2.0
PLAY_TIMEOUT_S = 300.0  # a reply of 256 tokens plays for more than a minute
LATENCY_OVERRIDES = {"generation.max_new_tokens": 48}  # the table times the first audio: shorter replies, shorter runs
HEARTBEAT_WAIT_S = 15.0  # PeerWatch's 3 s, with room for a slow machine


def host_of(node: str) -> str:
    return next(host for host, nodes in HALVES.items() if node in nodes)


class SplitGraph:
    """TwoHosts and the graph placed on them; on enter, this process joins the robot."""

    def __init__(self, params_file: Path, overrides: dict, log, domain_id: int | None = None, together: bool = False):
        """`together`: every node on the robot (the single-host graph, in the same harness)."""
        self.together = together
        self.hosts = TwoHosts()
        self.domain_id = domain_id if domain_id is not None else 150 + os.getpid() % 60
        self.graph = Graph(params_file, overrides, log=log, placement=self._place)

    def _place(self, node: str) -> tuple[list[str], dict[str, str]]:
        host = "robot" if self.together else host_of(node)
        return self.hosts.prefix(host), self.hosts.ros_env(host, self.domain_id)

    def __enter__(self) -> SplitGraph:
        self.hosts.__enter__()
        try:
            os.environ.update(self.hosts.ros_env("robot", self.domain_id))
            self.hosts.enter("robot")
            self.graph.start()
        except BaseException:
            self.hosts.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.graph.stop()
        finally:
            self.hosts.close()


def spoken_questions(texts=QUESTIONS) -> list[np.ndarray]:
    from ...audio.pcm import to_pcm16k
    from ...audio.speech.tts import PiperSynthesizer

    synth = PiperSynthesizer()
    clips = []
    for text in texts:
        speech = synth.synthesize(text)
        clips.append(np.frombuffer(to_pcm16k(speech.samples, speech.sample_rate), dtype=np.int16))
    return clips


@contextmanager
def ready_robot(split: SplitGraph):
    """The robot side of a running split graph, once every node is active and connected."""
    import rclpy

    rclpy.init()
    try:
        robot = RobotSide(split.graph)
        try:
            robot.probe.wait_active(("asr_node", "tts_node", "predgen_node"))
            robot.probe.wait_connected(split.graph.nodes)
            yield robot
        finally:
            robot.close()
    finally:
        rclpy.try_shutdown()


class RobotSide:
    """What a program on the robot sees: the robot's voice, the user's partials, diagnostics."""

    def __init__(self, graph: Graph):
        from std_msgs.msg import Bool, Header, String

        from ...nodes.common import TEXT_QOS
        from ...nodes.probe import GraphProbe
        from ..barge_in.interruptions import AudioFeed

        self.probe = GraphProbe("predgen_split_robot", graph)
        sub = self.probe.node.create_subscription
        self.first_audio: list[float] = []
        self.sentences: list[str] = []  # each reply's first sentence, as tts/first_audio names it
        self.finals: list[tuple[float, str]] = []
        self.speaking: list[tuple[float, bool]] = []
        self.partials = 0
        sub(Header, "tts/first_audio", self._on_first_audio, TEXT_QOS)
        sub(String, "asr/final", lambda m: self.finals.append((time.time(), m.data)), TEXT_QOS)
        sub(Bool, "robot_speaking", lambda m: self.speaking.append((time.time(), m.data)), TEXT_QOS)
        sub(String, "asr/partial", lambda m: setattr(self, "partials", self.partials + 1), TEXT_QOS)
        self.feed = AudioFeed(self.probe.node)

    def _on_first_audio(self, msg) -> None:
        from ...nodes.common import seconds
        from ...nodes.messages import sentence_of

        self.first_audio.append(seconds(msg.stamp))
        self.sentences.append(sentence_of(msg))

    @property
    def is_speaking(self) -> bool:
        return bool(self.speaking) and self.speaking[-1][1]

    def answer_after(self, t: float) -> tuple[float, str] | None:
        """(first audio, first sentence) of the first reply spoken after `t`."""
        return next(((a, s) for a, s in zip(self.first_audio, self.sentences) if a > t), None)

    def predgen_reachable(self) -> str:
        """asr_node's word for it: "True", "False", or "" before its first report."""
        return self.probe.value("asr_node", "predgen_reachable")

    def spoke_after(self, t: float) -> bool:
        return any(stamp > t for stamp in self.first_audio)

    def quiet(self) -> None:
        """Until the robot has been silent QUIET_S (a question an early final cut in two gets
        a second reply after the first: the next question must not come over it)."""

        def quiet() -> bool:
            last = max([t for t, _ in self.speaking], default=0.0)
            if self.first_audio and self.first_audio[-1] > last:
                return False  # a reply began, and its robot_speaking true is still on its way
            return not self.is_speaking and time.time() - last >= QUIET_S

        self.probe.wait_for(quiet, PLAY_TIMEOUT_S)

    def close(self) -> None:
        self.feed.close()
        self.probe.close()


def fault_link_down(split: SplitGraph, robot: RobotSide, question: np.ndarray) -> dict:
    robot.quiet()
    onset = robot.feed.play(question)
    robot.probe.spin_for(0.5)  # the user is in the middle of the question
    down_at, partials = time.time(), robot.partials
    split.hosts.link(False)
    reported = robot.probe.wait_for(lambda: robot.predgen_reachable() == "False", HEARTBEAT_WAIT_S)
    robot.probe.wait_for(lambda: False, max(0.0, down_at + OUTAGE_S - time.time()))
    heard_while_down = robot.partials - partials
    split.hosts.link(True)
    up_at = time.time()
    answered = robot.probe.wait_for(lambda: robot.spoke_after(onset), ANSWER_TIMEOUT_S)
    return {
        "outage_s": round(up_at - down_at, 2),
        "unreachable_reported": reported,
        "partials_while_down": heard_while_down,
        "answered_after_recovery": answered,
        "answer_after_link_up_s": round(min(t for t in robot.first_audio if t > onset) - up_at, 2) if answered else None,
        "reachable_again": robot.probe.wait_for(lambda: robot.predgen_reachable() == "True", HEARTBEAT_WAIT_S),
    }


def fault_predgen_restart(split: SplitGraph, robot: RobotSide, question: np.ndarray, next_question: np.ndarray) -> dict:
    robot.quiet()
    onset = robot.feed.play(question)
    began = robot.probe.wait_for(lambda: robot.is_speaking and robot.spoke_after(onset), ANSWER_TIMEOUT_S)
    killed_at = time.time()
    robot.probe.graph = None  # predgen_node's exit is the fault, not a failure of the run
    split.graph.kill("predgen_node")
    fell_silent = robot.probe.wait_for(lambda: not robot.is_speaking, ANSWER_TIMEOUT_S)
    split.graph.launch("predgen_node")
    robot.probe.graph = split.graph
    robot.probe.wait_active(["predgen_node"])
    reachable = robot.probe.wait_for(lambda: robot.predgen_reachable() == "True", HEARTBEAT_WAIT_S)
    robot.probe.spin_for(2.0)  # the robot's writers match the new predgen_node's readers
    silent_until = time.time()
    stale = [t for t in robot.first_audio if killed_at < t < silent_until]
    next_onset = robot.feed.play(next_question)
    return {
        "reply_began": began,
        "fell_silent": fell_silent,
        "stale_spoken": len(stale),
        "reachable_after_restart": reachable,
        "next_answered": robot.probe.wait_for(lambda: robot.spoke_after(next_onset), ANSWER_TIMEOUT_S),
    }


def fault_workstation_gone(split: SplitGraph, robot: RobotSide, question: np.ndarray) -> dict:
    robot.quiet()
    robot.probe.graph = None  # predgen_node's exit is the fault; the robot's nodes are checked below
    split.graph.kill("predgen_node")
    split.hosts.link(False)
    reported = robot.probe.wait_for(lambda: robot.predgen_reachable() == "False", HEARTBEAT_WAIT_S)
    partials = robot.partials
    onset = robot.feed.play(question)
    robot.probe.spin_for(len(question) / 16000 + 3.0)
    level, message, values = robot.probe.health.get("asr_node", (0, "", {}))
    return {
        "unreachable_reported": reported,
        "asr_message": message,
        "asr_level": level,
        "partials_heard": robot.partials - partials,
        "spoken": robot.spoke_after(onset),
        "robot_nodes_running": all(split.graph.procs[n].poll() is None for n in HALVES["robot"]),
    }


def run_faults(out: Path, params_file: Path | None = None) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    questions = spoken_questions()
    result: dict = {}
    with open(out / "graph.log", "w") as log, SplitGraph(params_file or default_params_file(), GRAPH_OVERRIDES, log) as split:
        result["harness"] = {
            "namespaces": list(split.hosts.namespace.values()),
            "interfaces": list(split.hosts.interface.values()),
        }
        with ready_robot(split) as robot:
            result["link_down"] = fault_link_down(split, robot, questions[0])
            result["predgen_restart"] = fault_predgen_restart(split, robot, questions[1], questions[2])
            result["workstation_gone"] = fault_workstation_gone(split, robot, questions[0])
    return result


# The latency table: the same spoken questions through three set-ups and two policies.
SETUPS = {"single host": (True, None), "split": (False, None), "split, 1 Mbit/s": (False, "1mbit")}
POLICIES = ("predgen", "baseline")


def run_latency(out: Path, limit: int, params_file: Path | None = None, progress=None) -> dict:
    """p50/p90 of the audio latency (first audio - the question's last voiced sample) per
    set-up and policy, and each question's latency (None: no answer within a minute)."""
    from ..barge_in.interruption_bag import ROBOT_QUESTIONS
    from ..records import percentile

    out.mkdir(parents=True, exist_ok=True)
    texts = ROBOT_QUESTIONS.read_text(encoding="utf-8").split("\n")
    texts = [t for t in texts if t.strip()][:limit]
    clips = spoken_questions(texts)
    table = {}
    for setup, (together, rate) in SETUPS.items():
        for policy in POLICIES:
            name = f"{setup} / {policy}"
            overrides = {**GRAPH_OVERRIDES, **LATENCY_OVERRIDES, "policy": policy}
            split = SplitGraph(params_file or default_params_file(), overrides, None, together=together)
            stem = f"{setup.replace(' ', '-').replace(',', '').replace('/', '')}-{policy}"
            with open(out / f"{stem}.log", "w") as log:
                split.graph.log = log
                turns = _one_setup(split, rate, zip(texts, clips), progress, out / f"{stem}-timeline.json")
            heard = [turn["latency_s"] for turn in turns if turn["latency_s"] is not None]
            table[name] = {
                "questions": len(turns),
                "answered": len(heard),
                "p50_s": round(percentile(heard, 0.5), 3) if heard else None,
                "p90_s": round(percentile(heard, 0.9), 3) if heard else None,
                "turns": turns,
            }
            (out / "latency.json").write_text(json.dumps(table, indent=1), encoding="utf-8")  # each set-up as it ends
    return table


def _one_setup(split: SplitGraph, rate: str | None, questions, progress, timeline: Path) -> list[dict]:
    """Each (text, audio) question in turn: what asr_node heard, the first sentence spoken
    and its audio latency (None: no answer within ANSWER_TIMEOUT_S)."""
    from ..barge_in.interruption_bag import last_voiced_s

    turns: list[dict] = []
    with split:
        if rate:
            split.hosts.limit(rate)
        with ready_robot(split) as robot:
            for text, clip in questions:
                robot.quiet()
                onset = robot.feed.play(clip)
                end = onset + last_voiced_s(clip)
                robot.probe.wait_for(lambda onset=onset: robot.spoke_after(onset), ANSWER_TIMEOUT_S)
                answer = robot.answer_after(onset)
                turns.append(
                    {
                        "question": text,
                        "heard": " / ".join(said for t, said in robot.finals if t > onset),
                        "first_sentence": answer[1] if answer else None,
                        "latency_s": round(answer[0] - end, 3) if answer else None,
                    }
                )
                turns[-1]["onset"] = onset
                if progress:
                    progress()
            events = {
                "finals": robot.finals,
                "first_audio": list(zip(robot.first_audio, robot.sentences)),
                "speaking": robot.speaking,
            }
            timeline.write_text(json.dumps(events), encoding="utf-8")
    return turns


def format_latency_table(table: dict) -> str:
    rows = ["| set-up / policy | answered | p50 audio latency | p90 |", "|---|---:|---:|---:|"]
    for name, row in table.items():
        p50 = "—" if row["p50_s"] is None else f"{row['p50_s']:.3f} s"
        p90 = "—" if row["p90_s"] is None else f"{row['p90_s']:.3f} s"
        rows.append(f"| {name} | {row['answered']}/{row['questions']} | {p50} | {p90} |")
    return "\n".join(rows)
