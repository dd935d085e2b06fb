"""Side-by-side latency benchmark of the policies on a virtual clock (DESIGN.md §4-5).

Every setting (a policy with its engine configuration, under a label) answers
the same questions with the same loaded model, sentence detector and Piper
voice; the label "baseline" is the reference of every ratio.  Events happen at their scheduled times; compute
advances the clock by its measured wall time; idle gaps are skipped.  Every
latency is measured from the end of user speech, including any wait for work
that was in flight when the user stopped.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections import deque
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ..audio.tts import PiperSynthesizer
from ..engine.config import EngineConfig
from ..engine.lm import LanguageModel
from ..engine.metrics import turn_measures
from ..engine.session import Session, TurnStats
from .clock import VirtualClock
from .questions import Question, TimedEvent, speak


@dataclass
class TurnRecord:
    qid: str
    policy: str
    speech_s: float
    audio_latency_s: float
    ttfs_s: float
    nfe_tfs: int
    input_nfe: int
    input_llm_s: float
    rounds: int
    final_accepted: int | None
    final_candidate: int | None
    decode_tokens: int
    decode_s: float
    jacobi_passes: int
    jacobi_tokens: int
    first_sentence: str
    first_sentence_logprob: float
    guess_nfe: int = 0  # passes spent anticipating the end of the user's sentence
    not_top_share: float = float("nan")  # its tokens that were not the most likely under the complete prompt
    matches_baseline: bool | None = None
    rouge_l: float | None = None  # ROUGE-L F-measure against baseline's first sentence
    repeats_opening: bool | None = None  # its first words repeat an earlier answer's (eval/conversation.py)
    common_start: bool | None = None  # it begins with its policy's most frequent first two words (eval/conversation.py)
    history_copy: float | None = None  # share of its reply's 4-token runs found in earlier replies (eval/conversation.py)
    relevance: float | None = None  # log-probability under its own question minus under others
    no_reply: str = ""  # why the question got no reply; "" when it was answered
    early_finals: int | None = None  # eval --endpoint-policies: finals that cut the question off before its speech ended
    reply: str = ""  # the whole reply (the first sentence where generation stops there)
    first_sentence_ids: list[int] = field(default_factory=list, repr=False)
    prompt_ids: list[int] = field(default_factory=list, repr=False)

    @property
    def answered(self) -> bool:
        return not self.no_reply and math.isfinite(self.audio_latency_s)

    @classmethod
    def unanswered(cls, qid: str, policy: str, speech_s: float, reason: str) -> TurnRecord:
        """A question that got no reply: a row of its own, with the reason, and no measures."""
        nan = float("nan")
        return cls(
            qid=qid,
            policy=policy,
            speech_s=speech_s,
            audio_latency_s=nan,
            ttfs_s=nan,
            nfe_tfs=0,
            input_nfe=0,
            input_llm_s=0.0,
            rounds=0,
            final_accepted=None,
            final_candidate=None,
            decode_tokens=0,
            decode_s=0.0,
            jacobi_passes=0,
            jacobi_tokens=0,
            first_sentence="",
            first_sentence_logprob=nan,
            no_reply=reason,
        )


def deliver(session: Session, event: TimedEvent) -> None:
    if event.kind == "partial":
        session.partial(event.text, event.t)
    elif event.kind == "final":
        session.final(event.text, event.t)
    else:
        session.end_of_turn(event.t)


def run_turn(session: Session, tts: PiperSynthesizer, events: list[TimedEvent], clock: VirtualClock) -> float:
    """Play one utterance into the session; returns the time of the first audio.

    Candidate sentences are pre-synthesized when the LLM has nothing to do;
    their synthesis time is spent on the same clock (one shared CPU).
    """
    pending = deque(events)
    candidate = None
    first_audio = None
    while True:
        while pending and pending[0].t <= clock():
            deliver(session, pending.popleft())
        if session.has_work():
            for kind, text in session.step():
                if kind == "candidate":
                    candidate = text
                elif kind == "commit":
                    if text:
                        tts.synthesize(text)  # instant when pre-synthesized
                    first_audio = clock()
                elif kind == "done":
                    return first_audio
        elif candidate is not None:
            tts.synthesize(candidate)
            candidate = None
        elif pending:
            clock.skip_to(pending[0].t)
        else:
            raise RuntimeError("the session went idle without a reply")


def turn_record(
    question: Question, policy: str, turn: TurnStats, t_start: float, t_end: float, first_audio: float, lm: LanguageModel
) -> TurnRecord:
    logprob, not_top = lm.continuation_scores(turn.prompt_ids, turn.first_sentence_ids)
    return TurnRecord(
        qid=question.qid,
        policy=policy,
        speech_s=t_end - t_start,
        **turn_measures(turn, t_end, first_audio),
        first_sentence=turn.first_sentence,
        first_sentence_logprob=logprob,
        not_top_share=not_top,
        reply=turn.reply,
        first_sentence_ids=turn.first_sentence_ids,
        prompt_ids=turn.prompt_ids,
    )


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


def format_duration_table(buckets: dict) -> str:
    """One line per bucket: turns, then each policy's audio p50 and speedup p50."""
    lines = []
    for name, per_policy in buckets.items():
        cells = [
            f"{policy} {fmt(s['audio_latency_p50_s'], '.3f')}s {fmt(s['speedup_vs_baseline_p50'], '.2f')}x"
            for policy, s in per_policy.items()
            if s["turns"]
        ]
        turns = max(s["turns"] for s in per_policy.values())
        lines.append(f"speech {name:<8} {turns:>3} turns: " + ", ".join(cells))
    return "\n".join(lines)


def near_tie_report(records: list[TurnRecord], lm: LanguageModel, policy: str) -> list[dict]:
    """For each first sentence that differs from baseline's: where the tokens part
    and the logit gap between the two choices under the complete prompt."""
    baseline = {r.qid: r for r in records if r.policy == "baseline"}
    report = []
    for r in records:
        if r.policy != policy or r.matches_baseline is not False:
            continue
        ours, theirs = r.first_sentence_ids, baseline[r.qid].first_sentence_ids
        split = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
        entry = {
            "qid": r.qid,
            "position": split,
            "policy_sentence": r.first_sentence,
            "baseline_sentence": baseline[r.qid].first_sentence,
        }
        if split < min(len(ours), len(theirs)):
            logits = lm.token_logits(r.prompt_ids + ours[:split], [ours[split]])[0]
            entry["logit_gap"] = float(logits[theirs[split]] - logits[ours[split]])
            entry["tokens"] = [lm.decode([ours[split]]), lm.decode([theirs[split]])]
        report.append(entry)
    return report


def mark_matches(records: list[TurnRecord]) -> None:
    """Each answered turn against baseline's first sentence to the same question: equal? ROUGE-L?"""
    from rouge_score import rouge_scorer  # imported here: bench and eval need it, the nodes do not

    scorer = rouge_scorer.RougeScorer(["rougeL"])
    baseline = {r.qid: r.first_sentence for r in records if r.policy == "baseline" and r.answered}
    for r in records:
        if r.qid in baseline and r.answered:
            r.matches_baseline = r.first_sentence == baseline[r.qid]
            r.rouge_l = scorer.score(baseline[r.qid], r.first_sentence)["rougeL"].fmeasure


@dataclass
class BenchSettings:
    variants: dict[str, EngineConfig]  # label -> configuration; "baseline" is the reference
    chars_per_second: float = 10.0
    endpoint_delay: float = 0.0
    conversation: bool = False  # keep the history across questions, like a robot dialogue


# The user starts the next question this long after the previous reply: longer
# than the late-copy window, so a question that starts like the previous one is new.
QUESTION_GAP_S = 2.0


def context_history(lm: LanguageModel, config: EngineConfig, context: tuple[str, ...]) -> list[tuple[str, str]]:
    """The earlier turns of a dialogue with the model's own replies (baseline's greedy
    decoding, untimed), so that every policy hears the follow-up after the same history."""
    session = Session(lm, replace(config, policy="baseline"), VirtualClock())
    for text in context:
        session.final(text, 0.0)
        session.end_of_turn(0.0)
        while session.has_work():
            session.step()
    return list(session.history)


def policy_variants(config: EngineConfig, policies: list[str]) -> dict[str, EngineConfig]:
    """One setting per policy, labelled by the policy's name."""
    return {p: replace(config, policy=p) for p in policies}


def run_bench(
    lm: LanguageModel, tts: PiperSynthesizer, questions: list[Question], settings: BenchSettings, progress=None
) -> list[TurnRecord]:
    """All settings on all questions; one session (and one virtual clock) per setting on
    the shared model.  Independent questions reset the history before each one (to
    the question's own context: MT-Bench turn 1 and its reply before turn 2)."""
    clocks = {label: VirtualClock() for label in settings.variants}
    sessions = {label: Session(lm, config, clocks[label]) for label, config in settings.variants.items()}
    reference = settings.variants["baseline"]
    records = []
    for question in questions:
        events, t_end = speak(question.text, settings.chars_per_second, settings.endpoint_delay)
        history = context_history(lm, reference, question.context) if question.context and not settings.conversation else []
        for policy, session in sessions.items():
            if not settings.conversation:
                session.reset(history)
            tts.clear()  # no policy may reuse audio another one synthesized
            clock = clocks[policy]
            start = clock() + QUESTION_GAP_S
            first_audio = run_turn(session, tts, [replace(e, t=start + e.t) for e in events], clock)
            records.append(turn_record(question, policy, session.turn, start, start + t_end, first_audio, lm))
            if progress:
                progress(question, policy)
    mark_matches(records)
    return records


def fmt(value, spec: str) -> str:
    """A table cell: "-" where nothing was measured."""
    return "-" if value is None else format(value, spec)


def format_table(summary: dict) -> str:
    width = max([11] + [len(label) for label in summary])
    header = (
        f"{'setting':<{width}} {'answered':>8} {'audio p50':>9} {'p90':>6} {'mean':>6} {'TTFS p50':>8} {'speedup':>7} {'NFE-TFS':>7} "
        f"{'pre':>4} {'in-NFE':>6} {'guess':>5} {'load':>5} {'match':>5} {'rougeL':>6} {'logprob':>7} {'lp gap':>6} {'not-top':>7} {'repeat':>6} {'start':>5} {'copy':>5} {'relev':>6} {'jac t/it':>8} {'dec t/s':>7}"
    )
    lines = [header, "-" * len(header)]
    for policy, s in summary.items():
        lines.append(
            f"{policy:<{width}} {str(s['answered']) + '/' + str(s['asked']):>8} {fmt(s['audio_latency_p50_s'], '>8.3f')}s "
            f"{fmt(s['audio_latency_p90_s'], '>6.3f')} {fmt(s['audio_latency_mean_s'], '>6.3f')} "
            f"{fmt(s['ttfs_p50_s'], '>7.3f')}s {fmt(s['speedup_vs_baseline_p50'], '>6.2f')}x {fmt(s['nfe_tfs_p50'], '>7.1f')} "
            f"{fmt(s['precomputed_share'], '>4.0%')} {fmt(s['input_nfe_mean'], '>6.1f')} {fmt(s['guess_nfe_mean'], '>5.1f')} "
            f"{fmt(s['llm_load'], '>5.2f')} "
            f"{fmt(s['first_sentence_match'], '>5.0%')} {fmt(s['rouge_l_mean'], '>6.3f')} {fmt(s['first_sentence_logprob_mean'], '>7.3f')} "
            f"{fmt(s['logprob_gap_to_baseline'], '>6.3f')} {fmt(s['not_top_share'], '>7.1%')} "
            f"{fmt(s['repeated_opening_share'], '>6.0%')} {fmt(s['common_start_share'], '>5.0%')} {fmt(s['history_copy_mean'], '>5.0%')} {fmt(s['relevance_mean'], '>6.3f')} "
            f"{fmt(s['jacobi_tokens_per_iteration'], '>8.2f')} {fmt(s['decode_tokens_per_s'], '>7.1f')}"
        )
    return "\n".join(lines)


def write_outputs(out: Path, records: list[TurnRecord], summary: dict, meta: dict, ties: dict, extra: dict | None = None) -> None:
    """summary.json (per policy, then `extra` keys, settings, mismatches), turns.csv, latency.png."""
    out.mkdir(parents=True, exist_ok=True)
    content = {**summary, **(extra or {}), "_settings": meta, "_mismatches": ties}
    (out / "summary.json").write_text(json.dumps(content, indent=2))
    with open(out / "turns.csv", "w", newline="") as f:
        rows = [{k: v for k, v in asdict(r).items() if k not in ("first_sentence_ids", "prompt_ids")} for r in records]
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    plot_latency(out / "latency.png", records, list(summary))


def plot_latency(path: Path, records: list[TurnRecord], policies: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (cdf, bars) = plt.subplots(1, 2, figsize=(12, 4.5))
    for policy in policies:
        values = sorted(r.audio_latency_s for r in records if r.policy == policy and r.answered)
        cdf.step(values, [(i + 1) / len(values) for i in range(len(values))], where="post", label=policy)
    cdf.set_xlabel("audio latency from end of speech (s)")
    cdf.set_ylabel("share of turns")
    cdf.set_title("Latency CDF")
    cdf.legend()
    qids = list(dict.fromkeys(r.qid for r in records))
    width = 0.8 / len(policies)
    for i, policy in enumerate(policies):
        lat = {r.qid: r.audio_latency_s for r in records if r.policy == policy}
        bars.bar([j + i * width for j in range(len(qids))], [lat.get(q, float("nan")) for q in qids], width, label=policy)
    bars.set_xlabel("turn")
    bars.set_ylabel("audio latency (s)")
    bars.set_title("Per turn")
    bars.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
