"""What the spoken soak writes as it goes, and its verdict on drift and memory.

requests.csv   one row per request spoken (a turn's own, and a barge-in's): what was
               heard and its word errors, and the latency phases from the true end of
               speech (the clip's last voiced sample): the voice detector's lag (its end of
               speech after the true end), the recognizer's lag (its final after the true
               end) and the first audio
resources.csv  one row per turn: each node's resident memory (MB) and CPU seconds since
               the last row, and the soak process's own
soak.png       memory per node and first-audio latency over the turns
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..hearing.asr_quality import reference_words, word_errors
from ..records import percentile

WINDOW = 100  # turns compared at the start and the end
LATE_TURNS = 500  # memory growth is judged over these last turns


@dataclass
class RequestRow:
    turn: int
    role: str  # request (the turn's own) or barge_in
    said: str
    heard: str = ""
    words: int = 0
    word_errors: int = 0
    answered: bool = False  # a latency report for it, with a first sentence
    first_audio_s: float = math.nan  # from the true end of speech
    detector_lag_s: float = math.nan
    recognizer_lag_s: float = math.nan
    llm_after_final_s: float = math.nan
    tts_s: float = math.nan  # the first audio after the commit
    reply: str = ""

    @classmethod
    def of(cls, turn: int, role: str, said: str, report: dict[str, str] | None, t_true_end: float) -> RequestRow:
        row = cls(turn, role, said, words=len(reference_words(said)))
        if report is None:
            row.word_errors = row.words
            return row
        row.heard, row.reply = report["transcript"], report["first_sentence"]
        row.word_errors = word_errors(reference_words(said), reference_words(row.heard))
        row.answered = bool(row.reply)
        row.first_audio_s = float(report["t_first_audio"]) - t_true_end
        row.detector_lag_s = float(report["t_end_of_speech"]) - t_true_end
        row.recognizer_lag_s = float(report["t_final_transcript"]) - t_true_end
        row.llm_after_final_s = float(report["t_commit"]) - float(report["t_final_transcript"])
        row.tts_s = float(report["t_first_audio"]) - float(report["t_commit"])
        return row


class CsvLog:
    """Rows appended and flushed as they come: a soak cut short keeps what it measured."""

    def __init__(self, path: Path):
        self._file = open(path, "w", newline="")  # noqa: SIM115  open for the whole soak, closed by close()
        self._writer: csv.DictWriter | None = None

    def write(self, row: dict) -> None:
        if self._writer is None:
            self._writer = csv.DictWriter(self._file, fieldnames=list(row))
            self._writer.writeheader()
        self._writer.writerow(row)
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class ResourceSampler:
    """Each process's resident memory and the CPU it used since the last sample (a
    respawned node's CPU counts from its new process)."""

    def __init__(self):
        self._cpu: dict[int, float] = {}  # pid -> CPU seconds at the last sample

    def sample(self, pids: dict[str, int]) -> dict[str, float]:
        import psutil

        row = {}
        for name, pid in pids.items():
            try:
                proc = psutil.Process(pid)
                memory, times = proc.memory_info().rss / 2**20, proc.cpu_times()
            except psutil.Error:
                continue  # it just died: the crash check counts it
            cpu = times.user + times.system
            row[f"{name}_rss_mb"] = round(memory, 1)
            row[f"{name}_cpu_s"] = round(cpu - self._cpu.get(pid, 0.0), 3)
            self._cpu[pid] = cpu
        return row


def window_figures(rows: list[RequestRow]) -> dict[str, float]:
    """p50 first audio, detector and recognizer lag; pooled WER; requests answered."""
    timed = [r for r in rows if r.answered and math.isfinite(r.first_audio_s)]
    words = sum(r.words for r in rows)
    figures = {"requests": len(rows), "answered": sum(r.answered for r in rows)}
    for name in ("first_audio_s", "detector_lag_s", "recognizer_lag_s"):
        figures[f"{name}_p50"] = percentile([getattr(r, name) for r in timed], 0.5)
    figures["wer"] = sum(r.word_errors for r in rows) / words if words else math.nan
    return figures


def drift(rows: list[RequestRow], turns: int) -> dict[str, dict[str, float]]:
    """The first WINDOW turns' figures against the last WINDOW's (all turns when fewer than 2 WINDOWs)."""
    span = min(WINDOW, turns // 2)
    first = [r for r in rows if r.turn <= span]
    last = [r for r in rows if r.turn > turns - span]
    return {f"turns 1-{span}": window_figures(first), f"turns {turns - span + 1}-{turns}": window_figures(last)}


def verdicts(windows: dict[str, dict[str, float]], growth_mb: dict[str, float], nodes) -> dict[str, bool]:
    """The issue's bars: each node's late growth under 20 MB; the last window's first-audio p50
    within 10 % and its WER within 2 points of the first window's."""
    first, last = windows.values()
    a, b = first["first_audio_s_p50"], last["first_audio_s_p50"]
    return {
        "memory_flat": all(growth_mb.get(node, math.inf) < 20.0 for node in nodes),
        "first_audio_within_10_percent": a is not None and b is not None and abs(b / a - 1) <= 0.10,
        "wer_within_2_points": abs(last["wer"] - first["wer"]) <= 0.02,
    }


def memory_growth(resources: list[dict], turns: int) -> dict[str, float]:
    """Each process's growth over the last LATE_TURNS turns (half the soak when shorter), MB."""
    start_turn = max(1, turns - LATE_TURNS) if turns > LATE_TURNS else max(1, turns // 2)
    start = next((r for r in resources if r["turn"] >= start_turn), None)
    if start is None:
        return {}
    end = resources[-1]
    keys = [k for k in end if k.endswith("_rss_mb") and k in start]
    return {k.removesuffix("_rss_mb"): round(end[k] - start[k], 1) for k in keys}


def rolling_median(values: list[float], window: int) -> list[float]:
    """Each value's median with the `window` - 1 before it (fewer at the start)."""
    return [float(np.median(values[max(0, i - window + 1) : i + 1])) for i in range(len(values))]


def plot(resources: list[dict], rows: list[RequestRow], faults: dict[int, str], path: Path) -> None:
    """Memory per process over the turns, and the latency from the true end of speech (its
    rolling median over 25 turns); a dotted line at each fault."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (memory, latency) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    turns = [r["turn"] for r in resources]
    for key in sorted({k for r in resources for k in r if k.endswith("_rss_mb")}):
        memory.plot(turns, [r.get(key, math.nan) for r in resources], label=key.removesuffix("_rss_mb"))
    memory.set_ylabel("resident memory (MB)")
    memory.legend(loc="upper left", fontsize=8)
    timed = [r for r in rows if r.role == "request" and r.answered]
    for name, label in (
        ("first_audio_s", "first audio"),
        ("recognizer_lag_s", "recognizer lag"),
        ("detector_lag_s", "detector lag"),
    ):
        values = [getattr(r, name) for r in timed]
        line = latency.plot([r.turn for r in timed], rolling_median(values, 25), label=f"{label} (median of 25)")[0]
        latency.plot([r.turn for r in timed], values, ".", markersize=2, color=line.get_color(), alpha=0.4)
    for axis in (memory, latency):
        for turn in faults:
            axis.axvline(turn, color="grey", linestyle=":", linewidth=1)
    for turn, fault in faults.items():
        latency.annotate(fault, (turn, 0.98), xycoords=("data", "axes fraction"), fontsize=7, rotation=90, va="top", ha="right")
    latency.set_ylabel("s after the true end of speech")
    latency.set_xlabel("turn")
    latency.legend(loc="center right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
