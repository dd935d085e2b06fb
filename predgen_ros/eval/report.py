"""A run's tables, summary.json, turns.csv and latency plot."""

from __future__ import annotations

import csv
import json
from dataclasses import asdict
from pathlib import Path

from .records import TurnRecord


def fmt(value, spec: str) -> str:
    """A table cell: "-" where nothing was measured."""
    return "-" if value is None else format(value, spec)


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
