"""`predgen-ros eval`: replay a bag's ASR stream into the graph, once per policy, and score it.

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

import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..engine.metrics import first_audio_missing, measures_from_report
from ..engine.params import ENGINE_PARAMS
from ..nodes.bringup import Graph, GraphError
from ..nodes.probe import GraphProbe
from .bags import GRAPH_TOPICS, USER_TOPICS, BagError, BagMessage, read_bag, write_bag
from .bench import TurnRecord, format_duration_table, format_table, mark_matches, summarize, summarize_by_duration, write_outputs
from .conversation import score_answers

REPLAYED = ("asr/partial", "asr/final", "asr/speech_end")


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
    endpoint_policies: tuple[str, ...] = ()  # live ASR: the bag's audio through asr_node, one run per policy (eval/live_asr.py)
    baseline_endpoint: str = "fixed_0.35"  # live ASR: the endpoint policy of the baseline run
    resume: bool = False  # keep the runs already in out/runs/


@dataclass(frozen=True)
class QuestionMarker:
    qid: str
    text: str
    t_start_ns: int
    t_end_ns: int
    pauses: list = ()  # make-bag --hesitations: [start_ns, length_s] of each pause inside the question


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


class Player(GraphProbe):
    """The probe, publishing the bag's ASR messages on time and recording the graph's answers."""

    replayed = REPLAYED
    recorded_topics = GRAPH_TOPICS

    def __init__(self):
        from diagnostic_msgs.msg import DiagnosticArray
        from std_msgs.msg import Bool, Header, Int16MultiArray, String
        from std_srvs.srv import Trigger

        from ..nodes.common import TEXT_QOS

        super().__init__("predgen_eval_player")
        types = {
            "std_msgs/msg/String": String,
            "std_msgs/msg/Header": Header,
            "std_msgs/msg/Bool": Bool,
            "std_msgs/msg/Int16MultiArray": Int16MultiArray,
            "diagnostic_msgs/msg/DiagnosticArray": DiagnosticArray,
        }
        self.types = types
        self.publishers = {t: self.node.create_publisher(types[USER_TOPICS[t]], t, TEXT_QOS) for t in self.replayed}
        self.reset = self.node.create_client(Trigger, "/predgen_node/reset")
        self.reset_request = Trigger.Request()
        self.recorded: list[tuple[str, int, object]] = []
        self._last_final_ns: int | None = None
        for topic, msgtype in self.recorded_topics.items():
            self.node.create_subscription(
                types[msgtype], topic, lambda msg, topic=topic: self.recorded.append((topic, time.time_ns(), msg)), TEXT_QOS
            )

    def wait_for_graph(self, graph: Graph, timeout: float = 180.0) -> None:
        self.graph = graph
        # matched writers, not just discovered nodes: a final sent before predgen_node's
        # reader matched would be lost, and with it a question
        self.spin_until(
            lambda: (
                all(p.get_subscription_count() > 0 for p in self.publishers.values())
                and self.node.count_subscribers("asr/final") > 0
                and self.node.count_publishers("robot_speaking") > 0
                and self.node.count_publishers("predgen/latency") > 0
                and self.reset.service_is_ready()
            ),
            timeout,
            "the graph to come up",
        )
        self.spin_for(0.5)  # discovery settles both ways

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
        for marker, messages in zip(markers, questions):
            zero += max(0, time.time_ns() - (zero + marker.t_start_ns - bag_zero))  # the wait shifts the rest
            if reset_each:
                self._wait_until(zero + (marker.t_start_ns - bag_zero), graph)
                self._reset_history(graph)
            self._last_final_ns = None
            for message in messages:
                self._wait_until(zero + (message.t_ns - bag_zero), graph)
                if message.topic == "asr/final":
                    self._last_final_ns = time.time_ns()  # before publishing: the receiver may stamp it before publish() returns
                self.publishers[message.topic].publish(self._on_replay_clock(message, zero - bag_zero))
            final_ns = self._final_of(marker, zero - bag_zero, graph, reply_timeout_s)
            outcomes.append((zero - bag_zero, self._wait_for_reply(final_ns, graph, reply_timeout_s)))
            if progress:
                progress()
        return outcomes

    def _final_of(self, marker: QuestionMarker, shift_ns: int, graph: Graph, timeout: float) -> int | None:
        """When the question's last final went out (ns), or None: here, the last one replayed."""
        return self._last_final_ns

    def _on_replay_clock(self, message: BagMessage, shift_ns: int):
        """The bag's message; an end-of-speech stamp moved to the replay's clock."""
        from rclpy.serialization import deserialize_message

        from ..nodes.common import stamp

        msg = deserialize_message(message.raw, self.types[message.msgtype])
        if message.topic == "asr/speech_end":
            msg.stamp = stamp((msg.stamp.sec * 1_000_000_000 + msg.stamp.nanosec + shift_ns) / 1e9)
        return msg

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


def split_by_question(messages: list[BagMessage], markers: list[QuestionMarker]) -> list[list[BagMessage]]:
    """The replayed messages of each question: from its start marker to the next one's,
    except that an utterance's end of speech and final belong to the question in which
    its speech ended.  A slow recognizer (make-bag's closing re-decode of a long
    question) can publish a final after the next question began; by publish time that
    question would lose its final and the next one get two."""
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import Header

    questions: list[list[BagMessage]] = [[] for _ in markers]
    starts = [m.t_start_ns for m in markers[1:]]
    question_at = lambda t_ns: sum(t_ns >= start for start in starts)  # noqa: E731
    closing = None  # the question of the last end of speech: its final follows it
    for message in messages:
        index = question_at(message.t_ns)
        if message.topic == "asr/speech_end":
            stamp = deserialize_message(message.raw, Header).stamp
            index = closing = question_at(stamp.sec * 1_000_000_000 + stamp.nanosec)
        elif message.topic == "asr/final" and closing is not None:
            index, closing = closing, None
        questions[index].append(message)
    return questions


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

    utterances, errors, total = [], 0, 0
    for marker, question in zip(markers, split_by_question(messages, markers)):
        current, finals = [], []
        for m in question:
            if m.topic == "asr/partial":
                current.append(deserialize_message(m.raw, String).data)
            elif m.topic == "asr/final":
                finals.append(deserialize_message(m.raw, String).data)
                utterances.append(current)
                current = []
        reference = words(marker.text)
        errors += word_errors(reference, words(" ".join(finals)))
        total += len(reference)
    counts = [revisions(u) for u in utterances]
    changes, revised = sum(c for c, _ in counts), sum(r for _, r in counts)
    return {"revision_rate": revised / changes if changes else 0.0, "wer": errors / total if total else 0.0}


# ------------------------------------------------------------------- the run
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


def graph_runs(settings: EvalSettings) -> list[GraphRun]:
    if settings.endpoint_policies:
        from .live_asr import live_asr_runs

        return live_asr_runs(settings)
    return [GraphRun(policy, policy) for policy in settings.policies]


def run_eval(settings: EvalSettings, progress=None) -> tuple[list[TurnRecord], dict]:
    """Every run on the same bag; returns the records and summary.json's content.

    Each run's records are kept in runs/<name>.json as soon as it ends; with
    `resume`, a run found there is not repeated (a long evaluation can be split)."""
    import rclpy

    live = bool(settings.endpoint_policies)
    messages, markers = load_replay(settings.bag, settings.limit)
    quality = asr_quality(messages, markers)
    if live:
        from .live_asr import load_audio_replay

        messages = load_audio_replay(settings.bag, settings.limit)
    runs = graph_runs(settings)
    (settings.out / "runs").mkdir(parents=True, exist_ok=True)
    records: list[TurnRecord] = []
    rclpy.init()
    try:
        for run in runs:
            kept = settings.out / "runs" / f"{run.name}.json"
            if settings.resume and kept.is_file():
                records += [TurnRecord(**row) for row in json.loads(kept.read_text())]
                continue
            mine = run_graph(run, messages, markers, settings, lambda run=run: progress(run.name) if progress else None)
            kept.write_text(json.dumps([asdict(r) for r in mine]))
            records += mine
    finally:
        rclpy.try_shutdown()
    names = [run.name for run in runs]
    mark_matches(records)
    score_answers(records, {m.qid: m.text for m in markers}, scoring_model(settings))
    summary = summarize(records, names)
    quality["_by_duration"] = summarize_by_duration(records, names)
    if live:
        from .live_asr import endpoint_summary

        quality["endpoint_policies"] = endpoint_summary(records, summary, runs)
    meta = {
        "bag": str(settings.bag),
        "questions": len(markers),
        "overrides": settings.overrides,
        "keep_history": settings.keep_history,
        "live_asr": live,
    }
    write_outputs(settings.out, records, summary, meta, {}, extra=quality)
    (settings.out / "report.md").write_text(markdown_report(summary, quality, records, settings, names))
    return records, {**summary, **quality}


def scoring_model(settings: EvalSettings):
    """The graph's model, loaded here after the replay, to score relevance."""
    from ..engine.models import load_language_model
    from ..engine.params import engine_config, read_params_file

    params = {**read_params_file(settings.params_file), **settings.overrides}
    _, model = engine_config({name: value for name, value in params.items() if name in ENGINE_PARAMS})
    return load_language_model(model)


def markdown_report(summary: dict, quality: dict, records: list[TurnRecord], settings: EvalSettings, names: list[str]) -> str:
    from .live_asr import format_endpoint_table

    questions = len({r.qid for r in records})
    lines = [
        f"# predgen_ros evaluation on `{settings.bag}`",
        "",
        f"{questions} questions replayed with their recorded timing, "
        + (
            "their audio through asr_node, predgen_node and tts_node"
            if settings.endpoint_policies
            else "their transcripts through predgen_node and tts_node"
        )
        + f", once per run ({', '.join(names)}), each question only after the reply to the previous one had ended. Audio latency is measured from the true end of speech (the last voiced sample) "
        "to the first audio chunk handed to the sink for the reply to the question's last final transcript. "
        + (
            "The conversation history is kept across questions."
            if settings.keep_history
            else "The questions are independent: predgen_node's history is reset before each."
        ),
        "",
        f"- ASR revision rate: {quality['revision_rate']:.1%} of partial updates change a word other than the last",
        f"- ASR word error rate of the finals against the question text: {quality['wer']:.1%}",
        "- repeat: share of answers whose first six words repeat an earlier answer's in this run; start: share that "
        "begin with the run's most frequent first two words; copy: mean share of "
        "each reply's 4-token runs found in an earlier reply of the run; relev: mean relevance "
        "of each first sentence to its question (log-probability given the question alone minus given other questions "
        "of the bag, see `eval/conversation.py`)",
        "",
        "```",
        format_table(summary),
        "",
        format_duration_table(quality["_by_duration"]),
        "```",
        "",
        *(
            [
                "Endpoint policies (the bag's audio through a live asr_node; a cut-off question got a final before its speech ended):",
                "",
                format_endpoint_table(quality["endpoint_policies"]),
                "",
            ]
            if "endpoint_policies" in quality
            else []
        ),
        "| question | " + " | ".join(f"{p} (s)" for p in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    cells = {(r.qid, r.policy): f"{r.audio_latency_s:.3f}" if r.answered else f"no reply: {r.no_reply}" for r in records}
    for qid in dict.fromkeys(r.qid for r in records):
        lines.append(f"| {qid} | " + " | ".join(cells.get((qid, p), "-") for p in names) + " |")
    lines += ["", "![latency](latency.png)", ""]
    return "\n".join(lines)
