"""Where the silence goes: each turn's audio latency as four phases, their p50/p90, a stacked bar per question.

  detector lag   the voice detector's end of speech after the true end (a room's reverberation
                 and noise hold the detector open; predgen/latency counts from the detector's end
                 and cannot see this wait)
  endpoint       the final transcript after the detector's end (the ASR's endpoint)
  LLM            the commit after the final (what speculation did not have ready)
  TTS            the first audio after the commit (Piper, or nothing when the opening was cached)

The four add up to the audio latency from the true end of speech (engine/metrics.py).
`eval` and `demo` print the table; `predgen-ros phases DIR` rebuilds it for an eval
folder written before the reports carried the phases (its turns.csv and the latency
reports of its recorded bags).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from ..records import TurnRecord, percentile

PHASES = {
    "detector_lag_s": "detector lag",
    "endpoint_s": "endpoint",
    "llm_after_final_s": "LLM after final",
    "tts_s": "TTS after commit",
}


@dataclass(frozen=True)
class TurnPhases:
    question: str
    detector_lag_s: float
    endpoint_s: float
    llm_after_final_s: float
    tts_s: float
    cached: bool | None = None  # the first sentence's opening came from the audio cache

    @classmethod
    def of_record(cls, record: TurnRecord) -> TurnPhases:
        return cls(
            record.qid,
            record.detector_lag_s,
            record.endpoint_s,
            record.llm_after_final_s,
            record.tts_s,
            record.first_audio_cached,
        )

    @classmethod
    def of_report(cls, question: str, report: dict[str, str], t_true_end: float | None = None) -> TurnPhases:
        """From a predgen/latency report's stamps; `t_true_end`: the true end of speech, where
        known (else the detector's lag is unknown: NaN, and the phases start at the detector's end)."""
        t = {key: float(report[key]) for key in ("t_end_of_speech", "t_final_transcript", "t_commit", "t_first_audio")}
        cached = {"True": True, "False": False}.get(report.get("first_audio_cached", ""))
        return cls(
            question,
            math.nan if t_true_end is None else t["t_end_of_speech"] - t_true_end,
            t["t_final_transcript"] - t["t_end_of_speech"],
            t["t_commit"] - t["t_final_transcript"],
            t["t_first_audio"] - t["t_commit"],
            cached,
        )

    @property
    def complete(self) -> bool:
        """The turn had its first audio (the detector's lag may be unknown)."""
        return all(math.isfinite(getattr(self, phase)) for phase in PHASES if phase != "detector_lag_s")


def phase_summary(runs: dict[str, list[TurnPhases]]) -> dict[str, dict]:
    """Per run: p50 and p90 of each phase over the turns with first audio, and the cached share."""
    summary = {}
    for name, turns in runs.items():
        done = [t for t in turns if t.complete]
        row = {"turns": len(done)}
        for phase in PHASES:
            values = [v for t in done if math.isfinite(v := getattr(t, phase))]
            row[phase] = {"p50": percentile(values, 0.5), "p90": percentile(values, 0.9)}
        known = [t.cached for t in done if t.cached is not None]
        row["cached_share"] = sum(known) / len(known) if known else None
        summary[name] = row
    return summary


def format_phase_table(summary: dict[str, dict]) -> str:
    def cell(value):
        return "-" if value is None or math.isnan(value) else f"{value:.3f}"

    width = max([10] + [len(name) for name in summary])
    header = f"{'run':<{width}} {'turns':>5} " + " ".join(f"{label + ' p50 / p90 (s)':>30}" for label in PHASES.values())
    lines = [header + f" {'cached':>7}", "-" * (len(header) + 8)]
    for name, row in summary.items():
        cells = " ".join(f"{cell(row[p]['p50']) + ' / ' + cell(row[p]['p90']):>30}" for p in PHASES)
        cached = "-" if row["cached_share"] is None else f"{row['cached_share']:.0%}"
        lines.append(f"{name:<{width}} {row['turns']:>5} {cells} {cached:>7}")
    return "\n".join(lines)


def plot_phases(path: Path, runs: dict[str, list[TurnPhases]]) -> None:
    """One panel per run: a bar per question, stacked endpoint + LLM + TTS."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        len(runs), 1, figsize=(max(8, 0.16 * max(len(t) for t in runs.values())), 2.8 * len(runs)), squeeze=False
    )
    for ax, (name, turns) in zip(axes[:, 0], runs.items()):
        done = [t for t in turns if t.complete]
        x = range(len(done))
        bottom = [0.0] * len(done)
        for phase, label in PHASES.items():
            heights = [max(0.0, getattr(t, phase)) if math.isfinite(getattr(t, phase)) else 0.0 for t in done]
            ax.bar(x, heights, 0.8, bottom=bottom, label=label)
            bottom = [b + h for b, h in zip(bottom, heights)]
        ax.set_xticks(list(x), [t.question for t in done], rotation=90, fontsize=6)
        ax.set_ylabel("seconds")
        ax.set_title(f"{name}: audio latency by phase, per question")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def phases_of_eval_folder(folder: Path) -> dict[str, list[TurnPhases]]:
    """An eval folder's phases, per run: each answered row of turns.csv matched, in order, to
    the recorded latency report with its first sentence; the true end of speech is the
    report's first audio less the row's audio latency."""
    from rclpy.serialization import deserialize_message

    from .bags import read_bag
    from .replay import report_values

    with open(folder / "turns.csv", newline="") as f:
        rows = [row for row in csv.DictReader(f) if not row["no_reply"]]
    runs: dict[str, list[TurnPhases]] = {}
    for name in dict.fromkeys(row["policy"] for row in rows):
        from diagnostic_msgs.msg import DiagnosticArray

        recorded = read_bag(folder / f"recorded_{name}", ["predgen/latency"])
        reports = [report_values(deserialize_message(m.raw, DiagnosticArray)) for m in recorded]
        turns, start = [], 0
        for row in (r for r in rows if r["policy"] == name):
            match = next((i for i in range(start, len(reports)) if reports[i]["first_sentence"] == row["first_sentence"]), None)
            if match is None:
                continue
            report, start = reports[match], match + 1
            t_end = float(report["t_first_audio"]) - float(row["audio_latency_s"])
            turns.append(TurnPhases.of_report(row["qid"], report, t_true_end=t_end))
        runs[name] = turns
    return runs
