"""The quality-latency frontier: many engine settings against one baseline, on one loaded model.

A setting is written `KIND[=VALUE][+anticipate[=TOKENS]]`: `exact`, `topk=3`,
`margin=0.25` (nats), `minp=0.5`, each optionally with anticipation (and its
cap on guessed tokens).  The
guards of the lossy verifiers (max gap, exact head, copy guard) come from the
common engine configuration.  A frontier run may repeat the comparison at
several speaking rates and history budgets (issue 13, item 6); each run has its
own baseline.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

from ...engine.config import ConfigError, EngineConfig, VerifierRule
from ..report import fmt

ANTICIPATE = "+anticipate"


def parse_setting(spec: str, base: EngineConfig) -> EngineConfig:
    """The predgen configuration a setting names; a bad one raises ConfigError naming it."""
    verifier, _, anticipation = spec.strip().partition(ANTICIPATE)
    try:
        rule = VerifierRule.parse(verifier, base.verifier)
    except ConfigError as err:
        raise ConfigError(f"setting {spec!r}: {err}; write KIND[=VALUE][+anticipate[=TOKENS]]") from None
    changes = {"policy": "predgen", "verifier": rule, "anticipate": ANTICIPATE in spec}
    if anticipation:
        if not anticipation.startswith("=") or not anticipation[1:].isdigit():
            raise ConfigError(f"setting {spec!r}: write +anticipate or +anticipate=TOKENS")
        changes["anticipate_tokens"] = int(anticipation[1:])
    return replace(base, **changes)


def frontier_variants(specs: list[str], base: EngineConfig) -> dict[str, EngineConfig]:
    """Baseline plus each named setting, in the order given."""
    variants = {"baseline": replace(base, policy="baseline", anticipate=False)}
    for spec in specs:
        label = spec.strip()
        if label in variants:
            raise ConfigError(f"setting {label!r} given twice")
        variants[label] = parse_setting(label, base)
    return variants


def run_label(chars_per_minute: float, history_tokens: int | None) -> str:
    """The folder name of one run of the sweep."""
    return f"{chars_per_minute:g}cpm" + ("" if history_tokens is None else f"-history{history_tokens}")


COLUMNS = (  # (header, summary key, format)
    ("audio p50", "audio_latency_p50_s", ".3f"),
    ("speedup", "speedup_vs_baseline_p50", ".2f"),
    ("match", "first_sentence_match", ".0%"),
    ("rougeL", "rouge_l_mean", ".3f"),
    ("lp gap", "logprob_gap_to_baseline", ".3f"),
    ("not-top", "not_top_share", ".1%"),
    ("load", "llm_load", ".2f"),
    ("in-NFE", "input_nfe_mean", ".1f"),
    ("guess", "guess_nfe_mean", ".1f"),
    ("repeat", "repeated_opening_share", ".0%"),
)


def format_frontier(runs: list[dict]) -> str:
    """A markdown table: one row per run and setting."""
    header = "| run | setting | " + " | ".join(name for name, _, _ in COLUMNS) + " |"
    lines = [header, "|---|---|" + "---:|" * len(COLUMNS)]
    for run in runs:
        for label, s in run["summary"].items():
            cells = [fmt(s[key], spec) for _, key, spec in COLUMNS]
            lines.append(f"| {run['run']} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_frontier(out: Path, runs: list[dict], meta: dict) -> None:
    """frontier.json, frontier.md and frontier.png (speedup against quality loss)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "frontier.json").write_text(json.dumps({"runs": runs, "_settings": meta}, indent=2))
    (out / "frontier.md").write_text(format_frontier(runs) + "\n")
    plot_frontier(out / "frontier.png", runs)


def plot_frontier(path: Path, runs: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_gap, by_match) = plt.subplots(1, 2, figsize=(12, 4.8))
    for run in runs:
        points = [
            (label, s) for label, s in run["summary"].items() if label != "baseline" and s["speedup_vs_baseline_p50"] is not None
        ]
        for axis, key, scale in ((by_gap, "logprob_gap_to_baseline", 1.0), (by_match, "first_sentence_match", 100.0)):
            xs = [s[key] * scale if s[key] is not None else math.nan for _, s in points]
            ys = [s["speedup_vs_baseline_p50"] for _, s in points]
            axis.scatter(xs, ys, label=run["run"] if len(runs) > 1 else None)
            for (label, _), x, y in zip(points, xs, ys):
                axis.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    by_gap.set_xlabel("log-probability gap to baseline's first sentence (nats/token; 0 = lossless)")
    by_match.set_xlabel("first sentence equal to baseline's (%)")
    for axis in (by_gap, by_match):
        axis.set_ylabel("p50 per-turn speedup over baseline (x)")
        axis.axhline(1.0, color="grey", linewidth=0.8)
        axis.grid(alpha=0.3)
        if len(runs) > 1:
            axis.legend(fontsize=8)
    by_match.invert_xaxis()  # right = more changed answers, like the gap panel
    fig.suptitle("Quality-latency frontier (predgen-ros frontier)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
