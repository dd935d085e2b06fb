"""`predgen-ros endpoints`: endpoint policies scored offline on a bag's audio.

The bag's user audio is fed, chunk by chunk, to the streaming ASR of asr_node
(the chosen recognizer and VAD) once per policy; no ROS graph and no reply
generation, so a policy is scored in minutes.  The text estimate for `llm` and
`fused` is the LLM's end-of-message probability of each hypothesis, computed
here at once (in the graph predgen_node sends it after its next pass).  Whisper
is waited for after every chunk, as if it were instant: its partials come as
often as on an idle CPU, but without their lag, so a rule that needs the words
fires here sooner than through the graph, which measures that lag.

Per policy: the endpoint delay from the true end of each question's speech to
its final (p50, p90), the false-endpoint rate (questions with a final before
their speech ended) and the questions cut off.  And the text signal's quality:
ROC AUC of "this partial is the whole question" over every partial heard.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ...audio.pcm import AUDIO_CHUNK_MS, SAMPLE_RATE
from ...audio.recognition.asr import StreamingAsr
from ...audio.recognition.asr_events import AsrEvent
from ...audio.recognition.endpoint import EndpointConfig, Endpointer
from ...audio.recognition.recognizers import make_recognizer
from ...audio.recognition.vad import make_vad
from ...events import Heard
from ...transcripts import words
from ..bag_replay.bags import BagError, QuestionMarker, first_questions, question_markers, read_bag


def endpoint_config(name: str, base: EndpointConfig = EndpointConfig()) -> EndpointConfig:  # noqa: B008 (frozen)
    """`fixed_0.35` -> a fixed 0.35 s silence; `smart_turn`, `llm`, `fused` as they are."""
    from dataclasses import replace

    if name.startswith("fixed_"):
        try:
            return replace(base, policy="fixed", silence_s=float(name.removeprefix("fixed_")))
        except ValueError:
            raise BagError(f"endpoint policy {name!r}: write fixed_<seconds>, e.g. fixed_0.35") from None
    return replace(base, policy=name)


@dataclass
class PolicyRun:
    name: str
    finals: list[AsrEvent] = field(default_factory=list)
    partials: list[AsrEvent] = field(default_factory=list)


class TextEstimator:
    """The LLM's probability that the user is done after a hypothesis (memoized).

    Like predgen_node, it keeps the KV cache of the last hypothesis and passes
    only the tokens after the common prefix: a growing partial costs a few tokens."""

    def __init__(self, lm):
        from ...engine.lm import KVState

        self.lm = lm
        self._state = KVState(lm)
        self._memo: dict[str, float] = {}

    def __call__(self, text: str) -> float:
        key = words(text)
        if key not in self._memo:
            open_ids = self.lm.open_turn_ids(text)
            kept = self._state.sync_prefix(open_ids)
            self._state.append(open_ids[kept:])
            self._memo[key] = self.lm.end_of_user_probability(self._state.next_logits)
        return self._memo[key]


def load_audio(
    bag: Path, limit: int | None = None, chunk_ms: int = AUDIO_CHUNK_MS
) -> tuple[list[tuple[float, bytes]], list[QuestionMarker], int]:
    """The user's audio chunks (stream time of their end, bytes), none longer than `chunk_ms`
    (a bag's 100 ms chunks split, as the graph's replay and a microphone deliver them: the
    endpoint is decided per chunk), the question markers, and the bag time (ns) of stream time 0."""
    import numpy as np
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import Int16MultiArray

    messages = read_bag(bag, ["audio/user", "eval/turn"])
    markers = question_markers(messages)
    audio = [m for m in messages if m.topic == "audio/user"]
    if not markers or not audio:
        raise BagError(f"{bag}: no eval/turn markers or no audio/user: make it with `predgen-ros make-bag`")
    audio, markers = first_questions(audio, markers, limit)
    chunks = [np.asarray(deserialize_message(m.raw, Int16MultiArray).data, dtype=np.int16).tobytes() for m in audio]
    t0_ns = audio[0].t_ns - int(len(chunks[0]) / 2 / SAMPLE_RATE * 1e9)
    size = 2 * SAMPLE_RATE * chunk_ms // 1000
    pieces = []
    for m, pcm in zip(audio, chunks):
        end_s = (m.t_ns - t0_ns) / 1e9
        for at in range(0, len(pcm), size):
            pieces.append((end_s - (len(pcm) - min(at + size, len(pcm))) / 2 / SAMPLE_RATE, pcm[at : at + size]))
    return pieces, markers, t0_ns


def run_policy(
    name: str,
    config: EndpointConfig,
    audio: list[tuple[float, bytes]],
    vad: str,
    text_estimate: TextEstimator | None,
    smart_turn=None,
    progress=None,
    recognizer: str = "whisper",
) -> PolicyRun:
    """The bag's audio through StreamingAsr with one endpoint policy."""
    asr = StreamingAsr(make_recognizer(recognizer), vad=make_vad(vad))
    audio_estimate = (lambda: smart_turn.probability(asr.utterance_audio)) if config.uses_audio else None
    asr.endpointer = Endpointer(config, audio_estimate)
    return hear(name, asr, audio, text_estimate if config.uses_text else None, progress)


def hear(name: str, asr: StreamingAsr, audio: list[tuple[float, bytes]], text_estimate=None, progress=None) -> PolicyRun:
    """Feed the audio to `asr`; its partials and finals, each partial's text estimate
    handed back to it when `text_estimate` is given."""
    run = PolicyRun(name)
    settle = getattr(asr.recognizer, "idle", None)  # a background recognizer: as if instant
    try:
        for _, pcm in audio:
            events = asr.feed(pcm)
            if settle:
                settle()
            for event in events:
                (run.partials if event.kind is Heard.PARTIAL else run.finals).append(event)
                if event.kind is Heard.PARTIAL and text_estimate:
                    asr.text_estimate(event.text, text_estimate(event.text))
            if progress:
                progress()
        run.finals += [event for event in asr.finish_stream() if event.kind is Heard.FINAL]
    finally:
        asr.close()
    return run


@dataclass(frozen=True)
class QuestionOutcome:
    qid: str
    endpoint_delay_s: float | None  # first final after the true end of speech, minus that end
    false_endpoints: int  # finals before the speech ended


def outcomes(run: PolicyRun, markers: list[QuestionMarker], t0_ns: int) -> list[QuestionOutcome]:
    """Each question's finals: those from its start until the next question's start."""
    result = []
    for i, marker in enumerate(markers):
        start, end = (marker.t_start_ns - t0_ns) / 1e9, (marker.t_end_ns - t0_ns) / 1e9
        stop = (markers[i + 1].t_start_ns - t0_ns) / 1e9 if i + 1 < len(markers) else float("inf")
        mine = [f for f in run.finals if start <= f.t < stop]
        after = [f.t - end for f in mine if f.t >= end]
        result.append(QuestionOutcome(marker.qid, min(after) if after else None, sum(f.t < end for f in mine)))
    return result


def roc_auc(positives: list[float], negatives: list[float]) -> float | None:
    """P(a positive scores above a negative), ties counting half (the Mann-Whitney form)."""
    if not positives or not negatives:
        return None
    import numpy as np

    pos, neg = np.asarray(positives)[:, None], np.asarray(negatives)[None, :]
    return float(((pos > neg).sum() + 0.5 * (pos == neg).sum()) / (pos.size * neg.size))


def text_signal_auc(run: PolicyRun, markers: list[QuestionMarker], t0_ns: int, text_estimate: TextEstimator) -> dict:
    """Every partial of each question, labelled complete when its words are the question's
    last partial's: all the ASR heard of it.  (Not the final's: pocketsphinx decodes the
    final again, and its words seldom equal any partial's.)"""
    positives, negatives = [], []
    for i, marker in enumerate(markers):
        start = (marker.t_start_ns - t0_ns) / 1e9
        stop = (markers[i + 1].t_start_ns - t0_ns) / 1e9 if i + 1 < len(markers) else float("inf")
        partials = [p for p in run.partials if start <= p.t < stop]
        if not partials:
            continue
        whole = words(partials[-1].text)
        for partial in partials:
            (positives if words(partial.text) == whole else negatives).append(text_estimate(partial.text))
    # what a threshold would do: the share of complete and of incomplete partials at or above it
    at = {
        f"{t:g}": {"complete": _share_at_least(positives, t), "incomplete": _share_at_least(negatives, t)}
        for t in TEXT_THRESHOLDS
    }
    return {
        "roc_auc": roc_auc(positives, negatives),
        "complete_partials": len(positives),
        "incomplete_partials": len(negatives),
        "at_threshold": at,
    }


def _share_at_least(values: list[float], threshold: float) -> float | None:
    return sum(v >= threshold for v in values) / len(values) if values else None


TEXT_THRESHOLDS = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2)


def summarize(name: str, config: EndpointConfig, results: list[QuestionOutcome]) -> dict:
    from ..records import percentile

    delays = [r.endpoint_delay_s for r in results if r.endpoint_delay_s is not None]
    cut = [r.qid for r in results if r.false_endpoints]
    return {
        "policy": config.policy,
        "silence_s": config.silence_s,
        "pause_s": config.pause_s,
        "max_silence_s": config.max_silence_s,
        "questions": len(results),
        "endpoint_delay_p50_s": percentile(delays, 0.5),
        "endpoint_delay_p90_s": percentile(delays, 0.9),
        "false_endpoint_rate": len(cut) / len(results) if results else None,
        "cut_off": cut,
        "no_final": [r.qid for r in results if r.endpoint_delay_s is None],
    }


def write_summary(out: Path, summary: dict) -> str:
    """summary.json and endpoints.md (the table, which is returned)."""
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    table = format_table(summary)
    (out / "endpoints.md").write_text(table + "\n")
    return table


def format_table(summary: dict) -> str:
    from ..report import fmt

    lines = ["| policy | endpoint delay p50 | p90 | false endpoints | cut off |", "|---|---:|---:|---:|---|"]
    for name, s in summary["endpoint_policies"].items():
        lines.append(
            f"| {name} | {fmt(s['endpoint_delay_p50_s'], '.3f')} s | {fmt(s['endpoint_delay_p90_s'], '.3f')} s | "
            f"{fmt(s['false_endpoint_rate'], '.1%')} | {', '.join(s['cut_off']) or '–'} |"
        )
    text = summary.get("text_signal")
    if text:
        lines.append(
            f"\ntext signal: ROC AUC {fmt(text['roc_auc'], '.3f')} over {text['complete_partials']} complete and "
            f"{text['incomplete_partials']} incomplete partials"
        )
    return "\n".join(lines)


def format_endpoint_table(policies: dict) -> str:
    from ..report import fmt

    lines = [
        "| endpoint policy | audio latency p50 | p90 | false endpoints | talk-over | its overlap p90 | words lost "
        "| replies withdrawn | LLM passes per question | speech synthesized per question | baseline p50 | speedup "
        "| cut off | without a final | recognizer lag p90, worst |",
        "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|---|---:|",
    ]
    for name, s in policies.items():
        lines.append(
            f"| {name} | {fmt(s['audio_latency_p50_s'], '.3f')} s | {fmt(s['audio_latency_p90_s'], '.3f')} s | "
            f"{fmt(s['false_endpoint_rate'], '.1%')} | {fmt(s.get('talk_over_rate'), '.1%')} | "
            f"{fmt(s.get('talk_over_p90_s'), '.3f')} s | {', '.join(s.get('words_lost', [])) or '–'} | "
            f"{fmt(s.get('replies_withdrawn'), 'd')} | {fmt(s.get('llm_passes_per_question'), '.1f')} | {fmt(s.get('synthesized_s_per_question'), '.1f')} s | "
            f"{fmt(s['baseline_audio_latency_p50_s'], '.3f')} s | "
            f"{fmt(s['speedup_vs_baseline_p50'], '.2f')}x | {', '.join(s['cut_off']) or '–'} | "
            f"{', '.join(s.get('without_final', [])) or '–'} | {fmt(s.get('recognizer_lag_p90_s_max'), '.3f')} s |"
        )
    return "\n".join(lines)
