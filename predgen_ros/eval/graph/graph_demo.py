"""The demo: one spoken conversation through the real ROS 2 graph, once per policy.

For each policy the three nodes start as processes (nodes.bringup.Graph).  By
default Piper speaks each utterance into asr_node (`audio/user`, 20 ms chunks in
real time) and asr_node hears it with the default recognizer, each utterance only
after the reply to the previous one has ended; with `spoken` off, the text user
(eval/graph/text_user.py) types them at 600 characters/min in asr_node's place.  Either way
tts_node writes each reply as a WAV file, and this process listens to
`predgen/latency` for the per-turn reports and to `predgen/response` for the
whole replies.  A question without a report is shown as "no reply".  Latencies
come from the graph's own clocks (real time); the conversation measures
(eval/conversation.py) show whether the robot answered or parroted.
"""

from __future__ import annotations

import json
import statistics
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...audio.pcm import SAMPLE_RATE, to_pcm16k
from ...audio.recognition.recognizers import DEFAULT_RECOGNIZER
from ...audio.recognition.text_asr import load_questions
from ...audio.speech.tts import PiperSynthesizer
from ...nodes.bringup import NODES, TEXT_USER, Graph, GraphError, in_place_of_the_ear
from ...nodes.probe import GraphProbe
from .text_user import UserState


@dataclass
class DemoSettings:
    params_file: Path
    out: Path
    questions: Path
    policies: tuple[str, ...] = ("baseline", "predgen")
    limit: int = 8
    turn_timeout_s: float = 180.0
    spoken: bool = True  # Piper speaks into asr_node; False: the text backend
    asr_backend: str = DEFAULT_RECOGNIZER


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

        from ...nodes.common import TEXT_QOS

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
        """Until the text user has said every question (and heard each reply end); reports count as progress."""
        seen = 0

        def finished() -> bool:
            nonlocal seen
            if progress and len(self.reports) > seen:
                progress(len(self.reports) - seen)
                seen = len(self.reports)
            return self.value(TEXT_USER, "state") == UserState.INPUT_FINISHED.value

        self.spin_until(finished, timeout, "the text user to finish its questions")


class SpokenUser(ReportListener):
    """The user: Piper's voice on `audio/user` in real time, one utterance after each reply."""

    LEAD_S, TAIL_S = 0.5, 1.5  # silence before an utterance, and after it while the endpoint waits

    def __init__(self):
        from std_msgs.msg import Bool, Int16MultiArray

        from ...nodes.common import TEXT_QOS

        super().__init__("predgen_demo_user")
        self.audio = self.node.create_publisher(Int16MultiArray, "audio/user", TEXT_QOS)
        self.robot_speaking = False
        self.said: list[Said] = []  # the utterances said so far
        self.node.create_subscription(Bool, "robot_speaking", self._on_speaking, TEXT_QOS)

    def _on_speaking(self, msg) -> None:
        self.robot_speaking = msg.data

    def play(self, pcm: bytes, marks_s: tuple[float, ...] = ()) -> list[float]:
        """`pcm` (16 kHz int16) in 20 ms chunks, each when its last sample would be heard.
        Returns when the sample at each of `marks_s` (s into `pcm`) was heard: the time its
        chunk went out (a busy CPU may send a chunk late; asr_node dates audio by its
        arrival) less the rest of that chunk."""
        import time

        from ...audio.pcm import AUDIO_CHUNK_MS, chunks
        from ...nodes.messages import audio_chunk

        chunk_s = AUDIO_CHUNK_MS / 1000
        start, heard = time.time(), []
        for i, piece in enumerate(chunks(pcm, chunk_s), 1):
            self.wait_for(lambda: False, max(0.0, start + i * chunk_s - time.time()))
            self.audio.publish(audio_chunk(np.frombuffer(piece, dtype=np.int16), SAMPLE_RATE))
            now = time.time()
            heard += [now - (i * chunk_s - mark) for mark in marks_s[len(heard) :] if i * chunk_s >= mark]
        return heard

    def say_all(self, utterances: list[bytes], timeout: float, progress=None) -> list[Said]:
        """Each utterance once the graph listens and the last reply has ended: what was
        said of each, and the reports that came for it."""
        silence = lambda s: b"\0" * (2 * int(s * SAMPLE_RATE))  # noqa: E731
        self.wait_connected(self.graph.nodes)  # asr_node listens once predgen_node hears it
        said = self.said
        for pcm in utterances:
            before = len(self.reports)
            voiced = voiced_span_s(pcm)
            t_start, t_end = self.play(silence(self.LEAD_S) + pcm + silence(self.TAIL_S), tuple(self.LEAD_S + t for t in voiced))
            self.wait_for(lambda before=before: len(self.reports) > before and not self.robot_speaking, timeout)
            self.play(silence(0.5))  # a final that came late (a split utterance) is still this one's
            said.append(Said(list(range(before, len(self.reports))), t_start, t_end))
            if progress:
                progress(1)
        return said


@dataclass(frozen=True)
class Said:
    """One utterance as the user said it: the reports that came for it, and the wall times
    of its true start and end of speech (its first and last voiced samples)."""

    reports: list[int]
    t_start: float
    t_end: float


def voiced_span_s(pcm: bytes) -> tuple[float, float]:
    """Where the speech in `pcm` (16 kHz int16) begins and ends: its first voiced sample and
    the end of its last (s; (0, 0) without one)."""
    from ..bag_replay.make_bag import VOICED

    loud = np.flatnonzero(np.abs(np.frombuffer(pcm, dtype=np.int16).astype(np.int32)) > VOICED)
    return (int(loud[0]) / SAMPLE_RATE, (int(loud[-1]) + 1) / SAMPLE_RATE) if len(loud) else (0.0, 0.0)


def run_policy(policy: str, settings: DemoSettings, progress=None, watch=None) -> list[dict[str, str] | None]:
    """Start the graph with `policy`, let the user speak, return each utterance's report
    (with its whole reply under "reply"; None where none came).  `watch(graph, listener)`:
    a context manager around the conversation (the CPU budget samples the graph in it)."""
    wav_dir = settings.out / policy
    wav_dir.mkdir(parents=True, exist_ok=True)
    overrides = {"policy": policy, "tts.sink": "wav", "tts.wav_dir": str(wav_dir.resolve()), "tts.realtime": False}
    if settings.spoken:
        overrides |= {"asr.backend": settings.asr_backend, "asr.input": "topic"}
    else:
        overrides |= {
            "text.source": str(settings.questions),
            "text.limit": settings.limit,
            "text.wait_for_reply": True,
            "text.reply_timeout_s": settings.turn_timeout_s,
        }
    log_path = settings.out / f"graph-{policy}.log"
    listener = SpokenUser() if settings.spoken else ReportListener()
    texts = [q.text for q in load_questions(settings.questions, settings.limit)]
    nodes = NODES if settings.spoken else in_place_of_the_ear(NODES, "text")
    with open(log_path, "w") as log, Graph(settings.params_file, overrides, nodes, log=log) as graph:
        listener.graph = graph
        try:
            utterances = [spoken_pcm(text) for text in texts] if settings.spoken else []
            with watch(graph, listener) if watch else nullcontext():
                if settings.spoken:
                    heard = listener.say_all(utterances, settings.turn_timeout_s, progress)
                else:  # the text user asks each question once the previous reply has ended (or timed out)
                    listener.wait_until_input_finished(settings.turn_timeout_s * settings.limit, progress)
        except GraphError as err:
            raise GraphError(f"policy {policy}: {err}; see {log_path}") from None
        finally:
            listener.close()
    reports = with_replies(listener.reports, listener.responses)
    if settings.spoken:  # the last report of each utterance is its answer
        return [from_true_end(reports[u.reports[-1]], u.t_end) if u.reports else None for u in heard]
    return reports_by_question(texts, reports)


def from_true_end(report: dict[str, str], true_end: float) -> dict[str, str]:
    """The report with the utterance's true end of speech (`t_true_end`) and the audio
    latency from it (`audio_latency_s`; predgen_node's, from the voice detector's end,
    stays as `detector_audio_latency_s`)."""
    latency = float(report["t_first_audio"]) - true_end
    return {
        **report,
        "t_true_end": str(true_end),
        "detector_audio_latency_s": report["audio_latency_s"],
        "audio_latency_s": str(latency),
    }


def spoken_pcm(text: str) -> bytes:
    """`text` in Piper's voice as 16 kHz int16 (the same audio every run)."""
    global _VOICE
    if _VOICE is None:
        _VOICE = PiperSynthesizer(reproducible=True)
    speech = _VOICE.synthesize(text)
    return to_pcm16k(speech.samples, speech.sample_rate)


_VOICE = None


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
    from ..conversation import mark_common_starts, mark_history_copies, mark_repeated_openings

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


def heard_table(questions: list[str], answers: dict[str, list[dict[str, str] | None]]) -> str:
    """What was said, what asr_node heard (its WER) and the answer, per utterance of the last policy."""
    from ..hearing.asr_quality import reference_words, word_errors

    policy = list(answers)[-1]
    lines, errors, words = [], 0, 0
    for i, (said, report) in enumerate(zip(questions, answers[policy]), 1):
        heard = report["transcript"] if report else ""
        wrong = word_errors(reference_words(said), reference_words(heard))
        errors, words = errors + wrong, words + len(reference_words(said))
        lines += [f"{i:>3}  said:  {said}", f"     heard: {heard or '(nothing)'}   [{wrong} word errors]"]
        lines.append(f"     -> {report['reply'] if report else '(no reply)'}")
    lines.append(f"word error rate of what {policy}'s asr_node heard: {errors / words:.1%} ({errors} of {words} words)")
    return "\n".join(lines)
