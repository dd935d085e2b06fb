"""`predgen-ros eval`: replay a bag's ASR stream into the graph, once per policy, and score it.

For each policy, predgen_node and tts_node start as processes; this process
publishes the bag's `asr/*` messages at their recorded offsets (stamps moved to
the replay's clock), records what the graph publishes, and writes the
recording as a bag.  Latency per question is measured from the true end of
speech (the bag's `eval/turn` marker) to the first audio of the reply to the
question's last final transcript.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..nodes.bringup import Graph, GraphError
from .bags import GRAPH_TOPICS, USER_TOPICS, BagError, BagMessage, read_bag, write_bag
from .bench import TurnRecord, format_table, mark_matches, summarize, write_outputs

REPLAYED = ("asr/partial", "asr/final", "asr/speech_end")
SETTLE_S = 15.0  # after the last message: time for the last reply's first audio


@dataclass
class EvalSettings:
    bag: Path
    out: Path
    params_file: Path
    policies: tuple[str, ...] = ("baseline", "preemptive", "predgen")
    overrides: dict = field(default_factory=dict)
    limit: int | None = None      # only the first N questions of the bag
    keep_history: bool = False    # False: questions are independent, the history is reset before each


@dataclass(frozen=True)
class QuestionMarker:
    qid: str
    text: str
    t_start_ns: int
    t_end_ns: int


def load_replay(bag: Path, limit: int | None = None) -> tuple[list[BagMessage], list[QuestionMarker]]:
    """The ASR messages to replay and the question markers (of the first `limit` questions)."""
    messages = read_bag(bag, [*REPLAYED, "eval/turn"])
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import String

    markers = [QuestionMarker(**json.loads(deserialize_message(m.raw, String).data)) for m in messages if m.topic == "eval/turn"]
    replayed = [m for m in messages if m.topic in REPLAYED]
    if limit and limit < len(markers):
        replayed = [m for m in replayed if m.t_ns < markers[limit].t_start_ns]
        markers = markers[:limit]
    if not markers or not any(m.topic == "asr/final" for m in replayed):
        raise BagError(f"{bag}: no eval/turn markers or no asr/final messages: make it with `predgen-ros make-bag`")
    return replayed, markers


class Player:
    """Publishes the bag's ASR messages on time and records the graph's answers."""

    def __init__(self):
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from std_msgs.msg import Bool, Header, String
        from std_srvs.srv import Trigger

        from ..nodes.common import TEXT_QOS

        self.rclpy = rclpy
        self.node = rclpy.create_node("predgen_eval_player")
        types = {"std_msgs/msg/String": String, "std_msgs/msg/Header": Header, "std_msgs/msg/Bool": Bool,
                 "diagnostic_msgs/msg/DiagnosticArray": DiagnosticArray}
        self.types = types
        self.publishers = {t: self.node.create_publisher(types[USER_TOPICS[t]], t, TEXT_QOS) for t in REPLAYED}
        self.reset = self.node.create_client(Trigger, "/predgen_node/reset")
        self.reset_request = Trigger.Request()
        self.recorded: list[tuple[str, int, object]] = []
        for topic, msgtype in GRAPH_TOPICS.items():
            self.node.create_subscription(types[msgtype], topic, lambda msg, topic=topic: self.recorded.append((topic, time.time_ns(), msg)), TEXT_QOS)

    def wait_for_graph(self, graph: Graph, timeout: float = 180.0) -> None:
        deadline = time.time() + timeout
        # matched writers, not just discovered nodes: a final sent before predgen_node's
        # reader matched would be lost, and with it a question
        while not (all(p.get_subscription_count() > 0 for p in self.publishers.values())
                   and self.node.count_publishers("robot_speaking") > 0 and self.node.count_publishers("predgen/latency") > 0
                   and self.reset.service_is_ready()):
            self._spin_checked(graph, deadline)
        for _ in range(10):  # discovery settles both ways
            self.rclpy.spin_once(self.node, timeout_sec=0.05)

    def play(self, messages: list[BagMessage], graph: Graph, resets: list[int] = (), progress=None) -> int:
        """Publish at the recorded offsets, and clear predgen_node's history at each
        time of `resets` (bag ns); returns the shift (ns) from bag time to replay time."""
        from rclpy.serialization import deserialize_message

        from ..nodes.common import stamp

        bag_zero = messages[0].t_ns
        zero = time.time_ns() + 500_000_000
        resets = sorted(resets)
        for message in messages:
            while resets and resets[0] <= message.t_ns:
                self._wait_until(zero + (resets.pop(0) - bag_zero), graph)
                self.reset.call_async(self.reset_request)
            self._wait_until(zero + (message.t_ns - bag_zero), graph)
            msg = deserialize_message(message.raw, self.types[message.msgtype])
            if message.topic == "asr/speech_end":  # the end of speech, moved to the replay's clock
                msg.stamp = stamp((zero + (msg.stamp.sec * 1_000_000_000 + msg.stamp.nanosec - bag_zero)) / 1e9)
            self.publishers[message.topic].publish(msg)
            if progress and message.topic == "asr/final":
                progress()
        return zero - bag_zero

    def _wait_until(self, due_ns: int, graph: Graph) -> None:
        while time.time_ns() < due_ns:
            self.rclpy.spin_once(self.node, timeout_sec=min(0.05, max(0.0, (due_ns - time.time_ns()) / 1e9)))
            if graph.exited() is not None:
                raise GraphError(f"{graph.exited()[0]} exited with code {graph.exited()[1]}")

    def settle(self, graph: Graph, finals: int) -> None:
        """Wait until every final has its latency report (or SETTLE_S passes)."""
        deadline = time.time() + SETTLE_S
        while sum(topic == "predgen/latency" for topic, _, _ in self.recorded) < finals and time.time() < deadline:
            self._spin_checked(graph, deadline + 1)

    def _spin_checked(self, graph: Graph, deadline: float) -> None:
        self.rclpy.spin_once(self.node, timeout_sec=0.1)
        if graph.exited() is not None:
            raise GraphError(f"{graph.exited()[0]} exited with code {graph.exited()[1]}")
        if time.time() > deadline:
            raise GraphError("the graph did not come up")

    def save(self, path: Path) -> None:
        from rclpy.serialization import serialize_message

        write_bag(path, [BagMessage(topic, GRAPH_TOPICS[topic], t_ns, serialize_message(msg)) for topic, t_ns, msg in self.recorded])

    def close(self) -> None:
        self.node.destroy_node()


def report_values(msg) -> dict[str, str]:
    return {kv.key: kv.value for status in msg.status for kv in status.values}


def question_records(policy: str, markers: list[QuestionMarker], shift_ns: int, recorded) -> list[TurnRecord]:
    """One record per question: the report of its last final, latency from the true end of speech."""
    reports = [report_values(msg) for topic, _, msg in recorded if topic == "predgen/latency"]
    starts = [m.t_start_ns + shift_ns for m in markers] + [float("inf")]
    records = []
    for i, marker in enumerate(markers):
        mine = [r for r in reports if starts[i] <= float(r["t_final_transcript"]) * 1e9 < starts[i + 1]]
        if not mine:
            continue  # the ASR heard nothing: no turn to score
        r = mine[-1]
        t_end = (marker.t_end_ns + shift_ns) / 1e9
        records.append(TurnRecord(
            qid=marker.qid, policy=policy, speech_s=(marker.t_end_ns - marker.t_start_ns) / 1e9,
            audio_latency_s=float(r["t_first_audio"]) - t_end, ttfs_s=float(r["t_commit"]) - t_end,
            nfe_tfs=int(r["nfe_tfs"]), input_nfe=int(r["input_nfe"]), input_llm_s=float(r["input_llm_s"]),
            rounds=int(r["rounds"]), final_accepted=_int_or_none(r["accepted_tokens"]), final_candidate=_int_or_none(r["candidate_tokens"]),
            decode_tokens=int(r["decode_tokens"]), decode_s=float(r["decode_s"]), jacobi_passes=int(r["jacobi_passes"]),
            jacobi_tokens=int(r["jacobi_tokens"]), first_sentence=r["first_sentence"], first_sentence_logprob=float("nan"),
        ))
    return records


def _int_or_none(text: str) -> int | None:
    return int(text) if text else None


# ------------------------------------------------------------------ ASR quality
def words(text: str) -> list[str]:
    return re.sub(r"[^\w\s']", " ", text.lower()).split()


def revisions(partials: list[str]) -> tuple[int, int]:
    """(updates, revisions) within one utterance: a revision changes a word other
    than the last one of the previous hypothesis."""
    pairs = list(zip(partials, partials[1:]))
    revised = sum(before.split()[:-1] != after.split()[: len(before.split()) - 1] for before, after in pairs)
    return len(pairs), revised


def word_errors(reference: list[str], hypothesis: list[str]) -> int:
    row = list(range(len(hypothesis) + 1))
    for i, ref_word in enumerate(reference, 1):
        previous, row[0] = row[0], i
        for j, hyp_word in enumerate(hypothesis, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (ref_word != hyp_word))
    return row[-1]


def asr_quality(messages: list[BagMessage], markers: list[QuestionMarker]) -> dict[str, float]:
    """Revision rate of the partials and word error rate of the finals against the questions."""
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import String

    texts = [(m.topic, m.t_ns, deserialize_message(m.raw, String).data) for m in messages if m.topic in ("asr/partial", "asr/final")]
    utterances, current = [], []
    for topic, _, text in texts:
        if topic == "asr/partial":
            current.append(text)
        else:
            utterances.append(current)
            current = []
    counts = [revisions(u) for u in utterances]
    changes, revised = sum(c for c, _ in counts), sum(r for _, r in counts)
    starts = [m.t_start_ns for m in markers] + [float("inf")]
    errors = total = 0
    for i, marker in enumerate(markers):
        heard = " ".join(text for topic, t, text in texts if topic == "asr/final" and starts[i] <= t < starts[i + 1])
        reference = words(marker.text)
        errors += word_errors(reference, words(heard))
        total += len(reference)
    return {"revision_rate": revised / changes if changes else 0.0, "wer": errors / total if total else 0.0}


# ------------------------------------------------------------------- the run
def run_policy(policy: str, messages: list[BagMessage], markers: list[QuestionMarker], settings: EvalSettings, progress=None) -> list[TurnRecord]:
    overrides = {"policy": policy, "tts.sink": "none", "tts.realtime": False, **settings.overrides}
    log_path = settings.out / f"graph-{policy}.log"
    player = Player()
    try:
        with open(log_path, "w") as log, Graph(settings.params_file, overrides, nodes=("predgen_node", "tts_node"), log=log) as graph:
            try:
                player.wait_for_graph(graph)
                # a question's first partial comes at least one ASR chunk after its first voiced sample
                resets = [] if settings.keep_history else [m.t_start_ns for m in markers]
                shift = player.play(messages, graph, resets, progress)
                player.settle(graph, sum(m.topic == "asr/final" for m in messages))
            except GraphError as err:
                raise GraphError(f"policy {policy}: {err}; see {log_path}") from None
        player.save(settings.out / f"recorded_{policy}")
        return question_records(policy, markers, shift, player.recorded)
    finally:
        player.close()


def run_eval(settings: EvalSettings, progress=None) -> tuple[list[TurnRecord], dict]:
    """Every policy on the same bag; returns the records and summary.json's content."""
    import rclpy

    messages, markers = load_replay(settings.bag, settings.limit)
    quality = asr_quality(messages, markers)
    settings.out.mkdir(parents=True, exist_ok=True)
    records: list[TurnRecord] = []
    rclpy.init()
    try:
        for policy in settings.policies:
            records += run_policy(policy, messages, markers, settings, lambda: progress(policy) if progress else None)
    finally:
        rclpy.try_shutdown()
    mark_matches(records)
    summary = summarize(records, list(settings.policies))
    meta = {"bag": str(settings.bag), "questions": len(markers), "overrides": settings.overrides, "keep_history": settings.keep_history}
    write_outputs(settings.out, records, summary, meta, {}, extra=quality)
    (settings.out / "report.md").write_text(markdown_report(summary, quality, records, settings))
    return records, {**summary, **quality}


def markdown_report(summary: dict, quality: dict, records: list[TurnRecord], settings: EvalSettings) -> str:
    questions = len({r.qid for r in records})
    lines = [
        f"# predgen_ros evaluation on `{settings.bag}`",
        "",
        f"{questions} questions replayed through predgen_node and tts_node with their recorded timing, once per policy "
        f"({', '.join(settings.policies)}). Audio latency is measured from the true end of speech (the last voiced sample) "
        "to the first audio chunk handed to the sink for the reply to the question's last final transcript. "
        + ("The conversation history is kept across questions." if settings.keep_history
           else "The questions are independent: predgen_node's history is reset before each."),
        "",
        f"- ASR revision rate: {quality['revision_rate']:.1%} of partial updates change a word other than the last",
        f"- ASR word error rate of the finals against the question text: {quality['wer']:.1%}",
        "",
        "```",
        format_table(summary),
        "```",
        "",
        "| question | " + " | ".join(f"{p} (s)" for p in settings.policies) + " |",
        "|---|" + "---|" * len(settings.policies),
    ]
    latency = {(r.qid, r.policy): r.audio_latency_s for r in records}
    for qid in dict.fromkeys(r.qid for r in records):
        lines.append(f"| {qid} | " + " | ".join(f"{latency[(qid, p)]:.3f}" if (qid, p) in latency else "-" for p in settings.policies) + " |")
    lines += ["", "![latency](latency.png)", ""]
    return "\n".join(lines)
