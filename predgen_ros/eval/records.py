"""One row per question and setting, and the measures over them: latency percentiles,
speedups against baseline, agreement with baseline's first sentence, per speech
length.  Shared by bench, the bag evaluation and the endpoint tools."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field


@dataclass
class TurnRecord:
    qid: str
    policy: str
    speech_s: float
    # The measures (engine/metrics.py); the defaults are those of a question without a reply.
    audio_latency_s: float = math.nan
    ttfs_s: float = math.nan
    # The phases of audio_latency_s (engine/metrics.py): the voice detector's end after the true
    # end, the final after the detector's end (after the true end where that is unknown), the
    # commit after the final and the first audio after the commit.
    detector_lag_s: float = math.nan
    endpoint_s: float = math.nan
    llm_after_final_s: float = math.nan
    tts_s: float = math.nan
    first_audio_cached: bool | None = None  # the first sentence's opening came from tts_node's audio cache
    nfe_tfs: int = 0
    input_nfe: int = 0
    input_llm_s: float = 0.0
    rounds: int = 0
    final_accepted: int | None = None
    final_candidate: int | None = None
    decode_tokens: int = 0
    decode_s: float = 0.0
    jacobi_passes: int = 0
    jacobi_tokens: int = 0
    first_sentence: str = ""
    first_sentence_logprob: float = math.nan
    guess_nfe: int = 0  # passes spent anticipating the end of the user's sentence
    not_top_share: float = math.nan  # its tokens that were not the most likely under the complete prompt
    matches_baseline: bool | None = None
    rouge_l: float | None = None  # ROUGE-L F-measure against baseline's first sentence
    repeats_opening: bool | None = None  # its first words repeat an earlier answer's (eval/conversation.py)
    common_start: bool | None = None  # it begins with its policy's most frequent first two words (eval/conversation.py)
    history_copy: float | None = None  # share of its reply's 4-token runs found in earlier replies (eval/conversation.py)
    relevance: float | None = None  # log-probability under its own question minus under others
    no_reply: str = ""  # why the question got no reply; "" when it was answered
    early_finals: int | None = None  # eval --endpoint-policies: finals that cut the question off before its speech ended
    heard: str | None = None  # live ASR: the finals asr_node heard of the question, joined
    recognizer_lag_p90_s: float | None = None  # live ASR: asr_node's recognizer lag p90 as it reported it after the question
    talk_over_s: float | None = (
        None  # live ASR: the robot spoke this long before the user's speech ended (eval/bag_replay/talk_over.py)
    )
    words_lost: bool | None = None  # live ASR: answered from less than the whole question, never again whole
    withdrawn: int | None = None  # live ASR: how often asr/voice said "resumed" after its finals (an eager reply held)
    unconfirmed: int | None = None  # live ASR: its finals with neither "confirmed" nor "resumed" after them
    llm_passes: float | None = None  # live ASR: predgen_node's forward passes during the question and its replies
    synthesized_s: float | None = None  # live ASR: seconds of speech tts_node synthesized for them
    heard_right: bool | None = None  # its first sentence is the model's answer to the question's true text (heard_right.py)
    heard_right_in_context: bool | None = None  # ... to the true text after this run's own history (conversations)
    reply: str = ""  # the whole reply (the first sentence where generation stops there)
    first_sentence_ids: list[int] = field(default_factory=list, repr=False)
    prompt_ids: list[int] = field(default_factory=list, repr=False)

    @property
    def answered(self) -> bool:
        return not self.no_reply and math.isfinite(self.audio_latency_s)

    @classmethod
    def unanswered(cls, qid: str, policy: str, speech_s: float, reason: str) -> TurnRecord:
        """A question that got no reply: a row of its own, with the reason, and no measures."""
        return cls(qid=qid, policy=policy, speech_s=speech_s, no_reply=reason)


def percentile(values: list[float], q: float) -> float | None:
    """None when there is nothing to rank (no answered turn)."""
    ordered = sorted(values)
    if not ordered:
        return None
    pos = (len(ordered) - 1) * q
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def _mean_or_none(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _logprob_gap(rows: list[TurnRecord], baseline: dict[str, TurnRecord]) -> float | None:
    """Mean per-token log-probability baseline's first sentence has above this policy's,
    paired by question (each under its own complete prompt)."""
    gaps = [
        baseline[r.qid].first_sentence_logprob - r.first_sentence_logprob
        for r in rows
        if r.qid in baseline and math.isfinite(r.first_sentence_logprob) and math.isfinite(baseline[r.qid].first_sentence_logprob)
    ]
    return _mean_or_none(gaps)


def _not_top_share(rows: list[TurnRecord]) -> float | None:
    """Share of all committed first-sentence tokens that were not the most likely one."""
    scored = [r for r in rows if r.first_sentence_ids and math.isfinite(r.not_top_share)]
    tokens = sum(len(r.first_sentence_ids) for r in scored)
    return sum(r.not_top_share * len(r.first_sentence_ids) for r in scored) / tokens if tokens else None


def summarize(records: list[TurnRecord], policies: list[str]) -> dict:
    """Per policy aggregates over the answered questions (`asked` and `answered` say how
    many); speedups are per-turn ratios against baseline.  None where nothing was measured."""
    baseline = {r.qid: r for r in records if r.policy == "baseline" and r.answered}
    summary = {}
    for policy in policies:
        asked = [r for r in records if r.policy == policy]
        rows = [r for r in asked if r.answered]
        latency = [r.audio_latency_s for r in rows]
        speedups = [
            baseline[r.qid].audio_latency_s / r.audio_latency_s for r in rows if r.qid in baseline and r.audio_latency_s > 0
        ]
        matches = [r.matches_baseline for r in rows if r.matches_baseline is not None]
        jacobi_passes = sum(r.jacobi_passes for r in rows)
        decode_s = sum(r.decode_s for r in rows)
        speech_s = sum(r.speech_s for r in rows)
        summary[policy] = {
            "asked": len(asked),
            "answered": len(rows),
            "turns": len(rows),
            "audio_latency_p50_s": percentile(latency, 0.5),
            "audio_latency_p90_s": percentile(latency, 0.9),
            "audio_latency_mean_s": _mean_or_none(latency),
            "ttfs_p50_s": percentile([r.ttfs_s for r in rows], 0.5),
            "ttfs_p90_s": percentile([r.ttfs_s for r in rows], 0.9),
            "ttfs_mean_s": _mean_or_none([r.ttfs_s for r in rows]),
            "speedup_vs_baseline_p50": percentile(speedups, 0.5),
            "first_sentence_match": _mean_or_none(matches),
            "differs_from_baseline_share": _mean_or_none([not m for m in matches]),
            "repeated_opening_share": _mean_or_none([r.repeats_opening for r in rows if r.repeats_opening is not None]),
            "common_start_share": _mean_or_none([r.common_start for r in rows if r.common_start is not None]),
            "history_copy_mean": _mean_or_none([r.history_copy for r in rows if r.history_copy is not None]),
            "relevance_mean": _mean_or_none([r.relevance for r in rows if r.relevance is not None]),
            "first_sentence_logprob_mean": _mean_or_none(
                [r.first_sentence_logprob for r in rows if r.first_sentence_ids and math.isfinite(r.first_sentence_logprob)]
            ),
            "logprob_gap_to_baseline": _logprob_gap(rows, baseline),
            "not_top_share": _not_top_share(rows),
            "rouge_l_mean": _mean_or_none([r.rouge_l for r in rows if r.rouge_l is not None]),
            "nfe_tfs_p50": percentile([r.nfe_tfs for r in rows], 0.5),
            "input_nfe_mean": _mean_or_none([r.input_nfe for r in rows]),
            "guess_nfe_mean": _mean_or_none([r.guess_nfe for r in rows]),
            "llm_load": sum(r.input_llm_s for r in rows) / speech_s if speech_s else None,
            "precomputed_share": _mean_or_none([r.nfe_tfs <= 1 for r in rows]),
            "jacobi_tokens_per_iteration": sum(r.jacobi_tokens for r in rows) / jacobi_passes if jacobi_passes else None,
            "decode_tokens_per_s": sum(r.decode_tokens for r in rows) / decode_s if decode_s else None,
        }
    return summary


# Speech-duration buckets (seconds): short utterances leave little time to speculate.
DURATION_BUCKETS = ((0.0, 8.0, "< 8 s"), (8.0, 12.0, "8-12 s"), (12.0, 20.0, "12-20 s"), (20.0, math.inf, "> 20 s"))


def summarize_by_duration(records: list[TurnRecord], policies: list[str]) -> dict:
    """Per speech-duration bucket and policy: turns, audio latency p50, per-turn speedup p50."""
    baseline = {r.qid: r for r in records if r.policy == "baseline" and r.answered}
    buckets = {}
    for low, high, name in DURATION_BUCKETS:
        rows = [r for r in records if r.answered and low <= r.speech_s < high]
        if not rows:
            continue
        buckets[name] = {}
        for policy in policies:
            mine = [r for r in rows if r.policy == policy]
            speedups = [
                baseline[r.qid].audio_latency_s / r.audio_latency_s for r in mine if r.qid in baseline and r.audio_latency_s > 0
            ]
            buckets[name][policy] = {
                "turns": len(mine),
                "audio_latency_p50_s": percentile([r.audio_latency_s for r in mine], 0.5),
                "speedup_vs_baseline_p50": percentile(speedups, 0.5),
            }
    return buckets


def mark_matches(records: list[TurnRecord]) -> None:
    """Each answered turn against baseline's first sentence to the same question: equal? ROUGE-L?"""
    from rouge_score import rouge_scorer  # imported here: bench and eval need it, the nodes do not

    scorer = rouge_scorer.RougeScorer(["rougeL"])
    baseline = {r.qid: r.first_sentence for r in records if r.policy == "baseline" and r.answered}
    for r in records:
        if r.qid in baseline and r.answered:
            r.matches_baseline = r.first_sentence == baseline[r.qid]
            r.rouge_l = scorer.score(baseline[r.qid], r.first_sentence)["rougeL"].fmeasure
