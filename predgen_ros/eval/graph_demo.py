"""The demo: one spoken conversation through the real ROS 2 graph, once per policy.

For each policy the three nodes start as processes (nodes.bringup.Graph), the
text ASR backend speaks the utterances at 600 characters/min, each only after
the reply to the previous one has ended (or `asr.text.reply_timeout_s` passed),
tts_node writes each reply as a WAV file, and this process listens to
`predgen/latency` for the per-turn reports and to `predgen/response` for the
whole replies.  A question without a report is shown as "no reply".  Latencies
come from the graph's own clocks (real time); the conversation measures
(eval/conversation.py) show whether the robot answered or parroted.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from ..nodes.asr_node import AsrState
from ..nodes.bringup import Graph, GraphError
from ..nodes.probe import GraphProbe


@dataclass
class DemoSettings:
    params_file: Path
    out: Path
    questions: Path
    policies: tuple[str, ...] = ("baseline", "predgen")
    limit: int = 8
    turn_timeout_s: float = 180.0


@dataclass
class DemoAnswer:
    """One turn's answer, in the shape the conversation measures read."""

    policy: str
    first_sentence: str
    reply: str
    answered: bool = True
    repeats_opening: bool | None = None
    common_start: bool | None = None
    history_copy: float | None = None


class ReportListener(GraphProbe):
    """The probe, collecting latency reports as well."""

    def __init__(self, name: str = "predgen_demo_listener"):
        from diagnostic_msgs.msg import DiagnosticArray
        from std_msgs.msg import String

        from ..nodes.common import TEXT_QOS

        super().__init__(name)
        self.reports: list[dict[str, str]] = []
        self.responses: list[str] = []
        self.node.create_subscription(DiagnosticArray, "predgen/latency", self._on_report, TEXT_QOS)
        self.node.create_subscription(String, "predgen/response", lambda msg: self.responses.append(msg.data), TEXT_QOS)

    def _on_report(self, msg) -> None:
        for status in msg.status:
            self.reports.append(
                {kv.key: kv.value for kv in status.values}
                | {"_level": int.from_bytes(status.level, "little"), "_message": status.message}
            )

    def wait_until_input_finished(self, timeout: float, progress=None) -> None:
        """Until asr_node has spoken every question (and heard each reply end); reports count as progress."""
        seen = 0

        def finished() -> bool:
            nonlocal seen
            if progress and len(self.reports) > seen:
                progress(len(self.reports) - seen)
                seen = len(self.reports)
            return self.value("asr_node", "state") == AsrState.INPUT_FINISHED.value

        self.spin_until(finished, timeout, "asr_node to finish its questions")


def run_policy(policy: str, settings: DemoSettings, progress=None) -> list[dict[str, str]]:
    """Start the graph with `policy`, let the user speak, return the per-turn reports
    (each with its whole reply under "reply")."""
    wav_dir = settings.out / policy
    wav_dir.mkdir(parents=True, exist_ok=True)
    overrides = {
        "policy": policy,
        "asr.backend": "text",
        "asr.text.source": str(settings.questions),
        "asr.text.limit": settings.limit,
        "asr.text.wait_for_reply": True,
        "asr.text.reply_timeout_s": settings.turn_timeout_s,
        "tts.sink": "wav",
        "tts.wav_dir": str(wav_dir.resolve()),
        "tts.realtime": False,
    }
    log_path = settings.out / f"graph-{policy}.log"
    listener = ReportListener()
    with open(log_path, "w") as log, Graph(settings.params_file, overrides, log=log) as graph:
        listener.graph = graph
        try:
            # asr_node asks each question once the previous reply has ended (or timed out)
            listener.wait_until_input_finished(settings.turn_timeout_s * settings.limit, progress)
        except GraphError as err:
            raise GraphError(f"policy {policy}: {err}; see {log_path}") from None
        finally:
            listener.close()
    return with_replies(listener.reports, listener.responses)


def with_replies(reports: list[dict[str, str]], responses: list[str]) -> list[dict[str, str]]:
    """Each report with its whole reply: the next response that begins with its first
    sentence (a turn cut short by the next utterance may have none: its first sentence)."""
    remaining = list(responses)
    out = []
    for report in reports:
        reply = next((r for r in remaining if r.startswith(report["first_sentence"])), report["first_sentence"])
        if reply in remaining:
            remaining = remaining[remaining.index(reply) + 1 :]
        out.append({**report, "reply": reply})
    return out


def reports_by_question(questions: list[str], reports: list[dict[str, str]]) -> list[dict[str, str] | None]:
    """The latency report of each question (the text backend's final is the question's
    text), or None where the question got no reply."""
    remaining = list(reports)
    found = []
    for question in questions:
        report = next((r for r in remaining if r["transcript"] == " ".join(question.split())), None)
        if report is not None:
            remaining.remove(report)
        found.append(report)
    return found


def latency_table(questions: list[str], reports: dict[str, list[dict[str, str] | None]]) -> str:
    """Per question: audio latency of each policy ("no reply" where none came), and baseline/last policy."""
    policies = list(reports)
    compare = "baseline" in reports and len(policies) > 1
    header = (
        f"{'turn':<5} {'question':<42}"
        + "".join(f" {p + ' (s)':>15}" for p in policies)
        + (f" {'speedup':>8}" if compare else "")
    )
    lines = [header, "-" * len(header)]
    latency = {p: [float(r["audio_latency_s"]) if r else None for r in rows] for p, rows in reports.items()}
    for i, question in enumerate(questions):
        values = [latency[p][i] for p in policies]
        line = f"{i + 1:<5} {question[:40] + ('..' if len(question) > 40 else ''):<42}"
        line += "".join(f" {'no reply':>15}" if v is None else f" {v:>15.3f}" for v in values)
        if compare and None not in (values[0], values[-1]):
            line += f" {values[0] / values[-1]:>7.2f}x"
        lines.append(line)
    p50 = [
        statistics.median(v for v in latency[p] if v is not None) if any(v is not None for v in latency[p]) else None
        for p in policies
    ]
    line = f"{'p50':<5} {'':<42}" + "".join(f" {'-':>15}" if v is None else f" {v:>15.3f}" for v in p50)
    if compare and None not in (p50[0], p50[-1]):
        line += f" {p50[0] / p50[-1]:>7.2f}x"
    lines.append(line)
    return "\n".join(lines)


def conversation_measures(answers: dict[str, list[dict[str, str] | None]], encode) -> dict[str, dict[str, float | None]]:
    """Per policy: the share of answers whose opening repeats an earlier one, the share that
    begin with the policy's most frequent start, the mean share of each reply's token runs
    copied from an earlier reply (`encode`: text to token ids), and the share of first
    sentences equal to baseline's."""
    from .conversation import mark_common_starts, mark_history_copies, mark_repeated_openings

    measures = {}
    for policy, rows in answers.items():
        turns = [DemoAnswer(policy, r["first_sentence"], r["reply"]) for r in rows if r is not None]
        mark_repeated_openings(turns)
        mark_common_starts(turns)
        mark_history_copies(turns, encode)
        copies = [t.history_copy for t in turns if t.history_copy is not None]
        pairs = [(r, b) for r, b in zip(rows, answers.get("baseline", rows)) if r is not None and b is not None]
        measures[policy] = {
            "repeated_opening_share": sum(t.repeats_opening for t in turns) / len(turns) if turns else None,
            "common_start_share": sum(t.common_start for t in turns) / len(turns) if turns else None,
            "history_copy_mean": sum(copies) / len(copies) if copies else None,
            "same_as_baseline_share": sum(r["first_sentence"] == b["first_sentence"] for r, b in pairs) / len(pairs)
            if pairs
            else None,
        }
    return measures


def measures_table(measures: dict[str, dict[str, float | None]]) -> str:
    cell = lambda v: "-" if v is None else f"{v:.0%}"  # noqa: E731
    lines = [f"{'policy':<10} {'repeat':>7} {'start':>6} {'copy':>6} {'same as baseline':>17}"]
    for policy, m in measures.items():
        lines.append(
            f"{policy:<10} {cell(m['repeated_opening_share']):>7} {cell(m['common_start_share']):>6} {cell(m['history_copy_mean']):>6} "
            f"{cell(m['same_as_baseline_share']):>17}"
        )
    return "\n".join(lines)


def run_demo(settings: DemoSettings) -> dict[str, list[dict[str, str]]]:
    import rclpy
    from tqdm import tqdm

    settings.out.mkdir(parents=True, exist_ok=True)
    rclpy.init()
    try:
        with tqdm(total=settings.limit * len(settings.policies), desc="demo", unit="turn") as bar:
            reports = {}
            for policy in settings.policies:
                bar.set_postfix_str(policy)
                reports[policy] = run_policy(policy, settings, progress=bar.update)
    finally:
        rclpy.try_shutdown()
    (settings.out / "reports.json").write_text(json.dumps(reports, indent=2, ensure_ascii=False))
    return reports
