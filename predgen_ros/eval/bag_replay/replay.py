"""One replay of a bag's ASR stream into the graph, and its records (`predgen-ros eval`).

For each policy, predgen_node and tts_node start as processes; this process
publishes the bag's `asr/*` messages at their recorded offsets (stamps moved to
the replay's clock), records what the graph publishes, and writes the
recording as a bag.  Latency per question is measured from the true end of
speech (the bag's `eval/turn` marker) to the first audio of the reply to the
question's last final transcript.

No question is lost to a slow machine: a question is replayed only once the
reply to the previous one has ended (or `reply_timeout_s` passed); the rest of
the bag's timeline shifts by that wait, keeping its recorded gaps.  A question
without a reply is a row of its own with the reason.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from ...audio.pcm import AUDIO_CHUNK_MS
from ...audio.recognition.recognizers import DEFAULT_RECOGNIZER
from ...engine.metrics import first_audio_missing, measures_from_report
from ...nodes.bringup import Graph, GraphError
from ...nodes.probe import GraphProbe
from ..records import TurnRecord
from .bag_turns import BagTurns
from .bags import (
    GRAPH_TOPICS,
    BagError,
    BagMessage,
    QuestionMarker,
    first_questions,
    question_markers,
    read_bag,
    split_by_question,
    write_bag,
)

# asr/voice says when the user went on after an early final (bags made before it have none)
REPLAYED = ("asr/voice", "asr/partial", "asr/final", "asr/speech_end")


@dataclass
class EvalSettings:
    bag: Path
    out: Path
    params_file: Path
    policies: tuple[str, ...] = ("baseline", "preemptive", "predgen")
    overrides: dict = field(default_factory=dict)
    limit: int | None = None  # only the first N questions of the bag
    keep_history: bool = False  # False: questions are independent, the history is reset before each
    reply_timeout_s: float = 120.0  # wait at most this long for a question's reply before the next question
    endpoint_policies: tuple[
        str, ...
    ] = ()  # live ASR: the bag's audio through asr_node, one run per policy (eval/bag_replay/live_asr.py)
    baseline_endpoint: str = "fixed_0.35"  # live ASR: the endpoint policy of the baseline run
    resume: bool = False  # keep the runs already in out/runs/
    audio_chunk_ms: int = AUDIO_CHUNK_MS  # live ASR: the bag's audio replayed in chunks of at most this length
    asr_backend: str = DEFAULT_RECOGNIZER  # live ASR: the recognizer that hears the bag's audio


def load_replay(bag: Path, limit: int | None = None) -> tuple[list[BagMessage], list[QuestionMarker]]:
    """The ASR messages to replay and the question markers (of the first `limit` questions)."""
    messages = read_bag(bag, [*REPLAYED, "eval/turn"])
    replayed, markers = first_questions([m for m in messages if m.topic in REPLAYED], question_markers(messages), limit)
    if not markers or not any(m.topic == "asr/final" for m in replayed):
        raise BagError(f"{bag}: no eval/turn markers or no asr/final messages: make it with `predgen-ros make-bag`")
    return replayed, markers


class Player(GraphProbe):
    """The probe, replaying the bag's ASR messages on time as the turn owner's events
    (eval/bag_replay/bag_turns.py) and recording the graph's answers."""

    replayed = REPLAYED  # read from the bag
    sent = {"turn/events": "std_msgs/msg/String"}  # published to the graph
    recorded_topics = GRAPH_TOPICS

    def __init__(self):
        from diagnostic_msgs.msg import DiagnosticArray, KeyValue
        from std_msgs.msg import Bool, Header, Int16MultiArray, String
        from std_srvs.srv import Trigger

        from ...nodes.common import TEXT_QOS

        super().__init__("predgen_eval_player")
        types = {
            "std_msgs/msg/String": String,
            "std_msgs/msg/Header": Header,
            "std_msgs/msg/Bool": Bool,
            "std_msgs/msg/Int16MultiArray": Int16MultiArray,
            "diagnostic_msgs/msg/DiagnosticArray": DiagnosticArray,
            "diagnostic_msgs/msg/KeyValue": KeyValue,
        }
        self.types = types
        self.publishers = {t: self.node.create_publisher(types[msgtype], t, TEXT_QOS) for t, msgtype in self.sent.items()}
        self._turns: BagTurns | None = None
        self.reset = self.node.create_client(Trigger, "/predgen_node/reset")
        self.reset_request = Trigger.Request()
        self.recorded: list[tuple[str, int, object]] = []
        self._last_final_ns: int | None = None
        self.recorders = [
            self.node.create_subscription(
                types[msgtype], topic, lambda msg, topic=topic: self.recorded.append((topic, time.time_ns(), msg)), TEXT_QOS
            )
            for topic, msgtype in self.recorded_topics.items()
        ]

    def wait_for_graph(self, graph: Graph, timeout: float = 180.0) -> None:
        self.graph = graph
        # matched both ways, not just discovered nodes: a final sent before predgen_node's
        # reader matched would be lost, and with it a question; a report sent before ours
        # matched would be missing from the record
        self.spin_until(
            lambda: (
                all(p.get_subscription_count() > 0 for p in self.publishers.values())
                and all(r.get_publisher_count() > 0 for r in self.recorders)
                and self.node.count_subscribers("turn/events") > 0
                and self.reset.service_is_ready()
            ),
            timeout,
            "the graph to come up",
        )
        self.wait_connected(graph.nodes, timeout)

    def play(
        self,
        questions: list[list[BagMessage]],
        markers: list[QuestionMarker],
        graph: Graph,
        reset_each: bool,
        reply_timeout_s: float,
        progress=None,
    ) -> list[tuple[int, str]]:
        """Publish each question's messages at their recorded offsets, after the reply
        to the previous question has ended; clear predgen_node's history before each
        question when `reset_each`.  Per question: (shift from bag time to replay time
        in ns, why it got no reply or "")."""
        bag_zero = min(markers[0].t_start_ns, *(m.t_ns for group in questions for m in group[:1]))
        zero = time.time_ns() + 500_000_000
        outcomes = []
        self._turns = BagTurns(voiced=any(m.topic == "asr/voice" for group in questions for m in group))
        for marker, messages in zip(markers, questions):
            zero += max(0, time.time_ns() - (zero + marker.t_start_ns - bag_zero))  # the wait shifts the rest
            if reset_each:
                self._wait_until(zero + (marker.t_start_ns - bag_zero), graph)
                self._reset_history(graph)
            self._last_final_ns = None
            for message in messages:
                self._wait_until(zero + (message.t_ns - bag_zero), graph)
                self._send(message, zero - bag_zero)
            final_ns = self._final_of(marker, zero - bag_zero, graph, reply_timeout_s)
            outcomes.append((zero - bag_zero, self._wait_for_reply(final_ns, graph, reply_timeout_s)))
            if progress:
                progress()
        return outcomes

    def _final_of(self, marker: QuestionMarker, shift_ns: int, graph: Graph, timeout: float) -> int | None:
        """When the question's last final went out (ns), or None: here, the last one replayed."""
        return self._last_final_ns

    def _send(self, message: BagMessage, shift_ns: int) -> None:
        """The bag's message as turn events on turn/events, its stamps on the replay's clock."""
        from rclpy.serialization import deserialize_message

        from ...nodes.common import seconds
        from ...nodes.messages import turn_event, voice_kind

        msg = deserialize_message(message.raw, self.types[message.msgtype])
        now, turns = time.time(), self._turns
        if message.topic == "asr/partial":
            events = turns.partial(msg.data, now)
        elif message.topic == "asr/final":
            events = turns.final(msg.data, now)
            self._last_final_ns = time.time_ns()  # before publishing: the receiver may stamp it before publish() returns
        elif message.topic == "asr/voice":
            events = turns.voice(voice_kind(msg), seconds(msg.stamp) + shift_ns / 1e9)
        else:  # asr/speech_end: the final after it carries it
            turns.speech_end(seconds(msg.stamp) + shift_ns / 1e9)
            events = []
        for event in events:
            self.publishers["turn/events"].publish(turn_event(event))

    def _reset_history(self, graph: Graph) -> None:
        future = self.reset.call_async(self.reset_request)
        self.spin_until(future.done, 30, "predgen_node's answer to ~/reset")

    def _wait_for_reply(self, final_ns: int | None, graph: Graph, timeout: float) -> str:
        """Until the reply to the final sent at `final_ns` has ended: its latency report
        and its whole response are out and the robot is silent.  "" or why not."""
        if final_ns is None:
            return "the ASR gave no final transcript"
        if not self.wait_for(lambda: self._reply_ended(final_ns), timeout):
            return f"no reply within {timeout:g} s"
        return ""

    def _reply_ended(self, final_ns: int) -> bool:
        reported = any(
            topic == "predgen/latency" and float(report_values(msg)["t_final_transcript"]) * 1e9 >= final_ns
            for topic, _, msg in self.recorded
        )
        responded = any(topic == "predgen/response" and t_ns >= final_ns for topic, t_ns, _ in self.recorded)
        speaking = [msg.data for topic, _, msg in self.recorded if topic == "robot_speaking"]
        return reported and responded and not (speaking and speaking[-1])

    def _wait_until(self, due_ns: int, graph: Graph) -> None:
        self.spin_for(max(0.0, (due_ns - time.time_ns()) / 1e9))

    def records(self, name: str, markers: list[QuestionMarker], outcomes: list[tuple[int, str]]) -> list[TurnRecord]:
        return question_records(name, markers, outcomes, self.recorded)

    def save(self, path: Path) -> None:
        from rclpy.serialization import serialize_message

        write_bag(
            path,
            [BagMessage(topic, self.recorded_topics[topic], t_ns, serialize_message(msg)) for topic, t_ns, msg in self.recorded],
        )


def report_values(msg) -> dict[str, str]:
    return {kv.key: kv.value for status in msg.status for kv in status.values}


def question_records(policy: str, markers: list[QuestionMarker], outcomes: list[tuple[int, str]], recorded) -> list[TurnRecord]:
    """One record per question: the report of its last final, latency from the true end
    of speech; a question without one is a `no_reply` row with the reason."""
    reports = [report_values(msg) for topic, _, msg in recorded if topic == "predgen/latency"]
    responses = [(t_ns, msg.data) for topic, t_ns, msg in recorded if topic == "predgen/response"]
    starts = [m.t_start_ns + shift for m, (shift, _) in zip(markers, outcomes)] + [float("inf")]
    records = []
    for i, (marker, (shift_ns, no_reply)) in enumerate(zip(markers, outcomes)):
        speech_s = (marker.t_end_ns - marker.t_start_ns) / 1e9
        mine = [r for r in reports if starts[i] <= float(r["t_final_transcript"]) * 1e9 < starts[i + 1]]
        if no_reply or not mine:
            records.append(TurnRecord.unanswered(marker.qid, policy, speech_s, no_reply or "no latency report"))
            continue
        r = mine[-1]
        if first_audio_missing(r):
            records.append(TurnRecord.unanswered(marker.qid, policy, speech_s, "the reply's first audio was never reported"))
            continue
        true_end = (marker.t_end_ns + shift_ns) / 1e9
        records.append(
            TurnRecord(
                qid=marker.qid,
                policy=policy,
                speech_s=speech_s,
                **measures_from_report(r, true_end),
                first_sentence=r["first_sentence"],
                first_sentence_logprob=float("nan"),
                reply=next((text for t_ns, text in reversed(responses) if starts[i] <= t_ns < starts[i + 1]), ""),
            )
        )
    return records


@dataclass(frozen=True)
class GraphRun:
    """One replay of the bag: its name in the report, predgen_node's policy, the nodes
    started and their parameter overrides, and the player that feeds them."""

    name: str
    policy: str
    overrides: dict = field(default_factory=dict)
    nodes: tuple[str, ...] = ("predgen_node", "tts_node")
    player: type = Player


def run_graph(
    run: GraphRun, messages: list[BagMessage], markers: list[QuestionMarker], settings: EvalSettings, progress=None
) -> list[TurnRecord]:
    overrides = {"policy": run.policy, "tts.sink": "none", "tts.realtime": False, **settings.overrides, **run.overrides}
    log_path = settings.out / f"graph-{run.name}.log"
    player = run.player()
    try:
        with open(log_path, "w") as log, Graph(settings.params_file, overrides, nodes=run.nodes, log=log) as graph:
            try:
                player.wait_for_graph(graph)
                outcomes = player.play(
                    split_by_question(messages, markers),
                    markers,
                    graph,
                    not settings.keep_history,
                    settings.reply_timeout_s,
                    progress,
                )
            except GraphError as err:
                raise GraphError(f"{run.name}: {err}; see {log_path}") from None
        player.save(settings.out / f"recorded_{run.name}")
        return player.records(run.name, markers, outcomes)
    finally:
        player.close()
