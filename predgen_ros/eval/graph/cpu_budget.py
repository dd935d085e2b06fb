"""The CPU budget of the graph: which stage holds the cores while the user speaks, and from
the true end of speech to the first audio of the reply.

The demo's conversation runs through the three nodes with the given parameters (the
defaults unless told), and a sampler reads every thread of the three node processes from
/proc every `period_s`: its OS name (os_threads.py names each stage's thread) and its
on-CPU time (`schedstat`, ns).  A stage is a named thread:

  asr-source       the audio loop: voice detector, AEC3, linear echo filter, leak gate and
                   Smart Turn, split by asr_node's meter (cpu_meter.py, `cpu_*_s`), and the
                   loop's own work (the rest)
  whisper          Whisper: partials while the user speaks, then the voice's end and the final
  predgen-engine   the LLM: speculation while the user speaks, verification and decoding after
  tts-player, tts-ahead, piper   Piper (openings ahead, the reply) and the hand-over to the sink
  <node name>      a node's executor: its subscriptions, timers and diagnostics
  dds.*            DDS (Cyclone's threads)
  any other        a node's other threads (a library's own), shown by node

Each turn's stamps (the true end of speech, the detector's end, the final, the commit, the
first audio) cut a stage's CPU into while the user speaks, the critical path (true end to
first audio, by phase) and the reply.  The sampler itself is a thread of this process, not
of the graph's.
"""

from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .graph_demo import DemoSettings, Said, run_policy

AUDIO_LOOP_PARTS = ("voice detector", "aec3", "linear echo", "echo leak gate", "smart turn")
THREAD_STAGES = {  # (node, OS thread name) -> stage
    ("asr_node", "asr-source"): "audio loop",
    ("asr_node", "whisper"): "Whisper",
    ("predgen_node", "predgen-engine"): "LLM",
    ("tts_node", "tts-player"): "Piper + playback",
    ("tts_node", "tts-ahead"): "Piper + playback",
    ("tts_node", "piper"): "Piper + playback",
}
_STAGE_THREADS = {thread for _, thread in THREAD_STAGES}
PHASES = ("detector lag", "endpoint", "LLM after final", "TTS after commit")


def stage_of(node: str, thread: str) -> str:
    if (node, thread) in THREAD_STAGES:
        return THREAD_STAGES[(node, thread)]
    if thread.startswith("dds."):
        return "DDS"
    if thread == node:
        return f"{node} executor"
    return f"{node}: other threads"


class ThreadSampler:
    """Every `period_s`, the on-CPU seconds so far of each stage of the processes `pids`
    (node -> pid); `series()` gives them as arrays over the sample times."""

    def __init__(self, pids: dict[str, int], period_s: float = 0.02):
        self.pids, self.period_s = pids, period_s
        self.times: list[float] = []
        self.rows: list[dict[str, float]] = []
        self._names: dict[tuple[int, int], str] = {}
        self._threads: dict[tuple[int, int], tuple[str, float]] = {}  # (pid, tid) -> (stage, on-CPU s)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def __enter__(self) -> ThreadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(2.0)

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            row = self._read()
            self.times.append(time.time())
            self.rows.append(row)

    def _read(self) -> dict[str, float]:
        for node, pid in self.pids.items():
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:  # the node exited
                continue
            for tid in tids:
                try:
                    with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                        seconds = int(f.read().split()[0]) / 1e9
                    name = self._name(pid, int(tid))
                except (OSError, ValueError, IndexError):  # the thread ended
                    continue
                self._threads[(pid, int(tid))] = (stage_of(node, name), seconds)
        row: dict[str, float] = {}
        for stage, seconds in self._threads.values():  # a thread that ended keeps its last figure
            row[stage] = row.get(stage, 0.0) + seconds
        return row

    def _name(self, pid: int, tid: int) -> str:
        """A thread's OS name.  A thread names itself once it runs, so a name that is no stage's
        thread yet is read again every sample, and every name every 50 samples (a loader
        gives its name back after a model loads)."""
        key = (pid, tid)
        cached = self._names.get(key)
        if cached not in _STAGE_THREADS or len(self.times) % 50 == 0:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                self._names[key] = f.read().strip()
        return self._names[key]

    def series(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Sample times, and each stage's cumulative on-CPU seconds at them (never falling: a
        thread that names itself moves its CPU so far to its stage)."""
        stages = sorted({s for row in self.rows for s in row})
        cumulative = {s: np.maximum.accumulate(np.array([row.get(s, 0.0) for row in self.rows])) for s in stages}
        return np.array(self.times), cumulative


@dataclass(frozen=True)
class TurnWindows:
    """One answered turn's stamps (wall time, s)."""

    t_start: float  # the user's first voiced sample
    t_end: float  # the true end of speech
    t_detector: float
    t_final: float
    t_commit: float
    t_first_audio: float

    @property
    def phases(self) -> list[tuple[str, float, float]]:
        stamps = (self.t_end, self.t_detector, self.t_final, self.t_commit, self.t_first_audio)
        return [(name, a, b) for name, a, b in zip(PHASES, stamps, stamps[1:])]


def turn_windows(said: list[Said], reports: list[dict[str, str] | None]) -> list[TurnWindows]:
    out = []
    for utterance, report in zip(said, reports):
        if report is None or report.get("t_first_audio", "nan") == "nan":
            continue
        t = {k: float(report[k]) for k in ("t_end_of_speech", "t_final_transcript", "t_commit", "t_first_audio")}
        out.append(
            TurnWindows(
                utterance.t_start,
                utterance.t_end,
                t["t_end_of_speech"],
                t["t_final_transcript"],
                t["t_commit"],
                t["t_first_audio"],
            )
        )
    return out


def cpu_between(times: np.ndarray, cumulative: np.ndarray, a: float, b: float) -> float:
    """CPU seconds spent between wall times `a` and `b` (linear between samples)."""
    return float(np.interp(b, times, cumulative) - np.interp(a, times, cumulative))


def budget(times: np.ndarray, cumulative: dict[str, np.ndarray], turns: list[TurnWindows], meter: dict[str, float]) -> dict:
    """Per stage: CPU seconds per second of speech while the user speaks, per turn over the
    whole conversation, and the cores it held on the critical path (per phase and in all);
    the audio loop split by asr_node's meter."""
    speech_s = sum(t.t_end - t.t_start for t in turns)
    critical_s = sum(t.t_first_audio - t.t_end for t in turns)
    span = (times[0], times[-1])
    rows = {}
    for stage, series in cumulative.items():
        speaking = sum(cpu_between(times, series, t.t_start, t.t_end) for t in turns)
        critical = sum(cpu_between(times, series, t.t_end, t.t_first_audio) for t in turns)
        per_phase = {
            name: sum(cpu_between(times, series, a, b) for t in turns for n, a, b in t.phases if n == name) for name in PHASES
        }
        phase_s = {name: sum(b - a for t in turns for n, a, b in t.phases if n == name) for name in PHASES}
        rows[stage] = {
            "cpu_s": cpu_between(times, series, *span),
            "per_speech_s": speaking / speech_s if speech_s else None,
            "per_turn_s": cpu_between(times, series, *span) / len(turns) if turns else None,
            "critical_cores": critical / critical_s if critical_s else None,
            "phase_cores": {name: (per_phase[name] / phase_s[name] if phase_s[name] > 0 else None) for name in PHASES},
        }
    loop_total = meter_total = 0.0
    if "audio loop" in rows:
        loop_total = rows["audio loop"]["cpu_s"]
        meter_total = sum(meter.get(part, 0.0) for part in AUDIO_LOOP_PARTS)
    return {
        "turns": len(turns),
        "speech_s": speech_s,
        "critical_path_s": critical_s,
        "run_s": span[1] - span[0],
        "stages": rows,
        "audio_loop_parts_s": {part: meter.get(part, 0.0) for part in AUDIO_LOOP_PARTS}
        | {"the loop itself": max(0.0, loop_total - meter_total)},
    }


def format_budget(result: dict) -> str:
    def cell(value, fmt="{:.3f}"):
        return "-" if value is None else fmt.format(value)

    lines = [
        f"{result['turns']} turns, {result['speech_s']:.1f} s of speech, {result['critical_path_s']:.2f} s from the true ends "
        f"of speech to the first audio, {result['run_s']:.0f} s sampled",
        "",
        "| stage | CPU s per s of speech | CPU s per turn | cores on the critical path | "
        + " | ".join(f"cores in {p}" for p in PHASES)
        + " |",
        "|---|---:|---:|---:|" + "---:|" * len(PHASES),
    ]
    order = sorted(result["stages"].items(), key=lambda kv: -kv[1]["cpu_s"])
    for stage, row in order:
        lines.append(
            f"| {stage} | {cell(row['per_speech_s'])} | {cell(row['per_turn_s'])} | {cell(row['critical_cores'])} | "
            + " | ".join(cell(row["phase_cores"][p]) for p in PHASES)
            + " |"
        )
    total = {
        key: sum(r[key] or 0.0 for r in result["stages"].values()) for key in ("per_speech_s", "per_turn_s", "critical_cores")
    }
    phase_total = [sum(r["phase_cores"][p] or 0.0 for r in result["stages"].values()) for p in PHASES]
    lines.append(
        f"| **all** | {total['per_speech_s']:.3f} | {total['per_turn_s']:.3f} | {total['critical_cores']:.3f} | "
        + " | ".join(f"{v:.3f}" for v in phase_total)
        + " |"
    )
    lines += ["", "The audio loop's CPU seconds in all, by part (asr_node's meter):", ""]
    lines += ["| part | CPU s | per turn |", "|---|---:|---:|"]
    for part, seconds in result["audio_loop_parts_s"].items():
        lines.append(f"| {part} | {seconds:.3f} | {seconds / max(1, result['turns']):.3f} |")
    return "\n".join(lines)


def plot_turn(path: Path, times: np.ndarray, cumulative: dict[str, np.ndarray], turn: TurnWindows, title: str) -> None:
    """Cores held per stage (20 ms bins) from 1 s before the true end of speech to just after the first audio."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    edges = np.arange(turn.t_end - 1.0, turn.t_first_audio + 0.3, 0.02)
    stages = sorted(cumulative, key=lambda s: -cpu_between(times, cumulative[s], edges[0], edges[-1]))
    held = [np.diff(np.interp(edges, times, cumulative[s])) / np.diff(edges) for s in stages]
    x = edges[:-1] - turn.t_end
    fig, ax = plt.subplots(figsize=(10, 4))
    colors = plt.get_cmap("tab20").colors  # one colour per stage (tab10 repeats after ten)
    ax.stackplot(x, held, labels=stages, step="post", colors=colors[: len(stages)])
    for i, (label, t) in enumerate(
        (
            ("true end", turn.t_end),
            ("detector end", turn.t_detector),
            ("final", turn.t_final),
            ("commit", turn.t_commit),
            ("first audio", turn.t_first_audio),
        )
    ):
        ax.axvline(t - turn.t_end, color="black", lw=0.8, ls="--")
        ax.text(t - turn.t_end, 2.02, label, rotation=90, va="bottom", ha="right" if i % 2 else "left", fontsize=7)
    ax.axhline(2.0, color="grey", lw=0.6)
    ax.set_ylim(0, 2.6)
    ax.set_xlabel("seconds from the true end of speech")
    ax.set_ylabel("cores held")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_budget(settings: DemoSettings, policy: str = "predgen", progress=None) -> dict:
    """The demo's conversation once with `policy`, sampled; writes budget.json, budget.md
    and timeline.png (the turn of median audio latency) into settings.out."""
    import rclpy

    settings.out.mkdir(parents=True, exist_ok=True)
    caught: dict = {}

    @contextmanager
    def sampled(graph, listener):
        with ThreadSampler({node: proc.pid for node, proc in graph.procs.items()}) as sampler:
            yield
            caught["meter"] = listener.fresh_values("asr_node", timeout=10.0)
        caught["sampler"], caught["said"] = sampler, listener.said

    rclpy.init()
    try:
        reports = run_policy(policy, settings, progress, watch=sampled)
    finally:
        rclpy.try_shutdown()
    meter = {part: float(caught["meter"].get(f"cpu_{part.replace(' ', '_')}_s", 0.0)) for part in AUDIO_LOOP_PARTS}
    times, cumulative = caught["sampler"].series()
    turns = turn_windows(caught["said"], reports)
    result = budget(times, cumulative, turns, meter)
    (settings.out / "budget.json").write_text(json.dumps(result, indent=2))
    (settings.out / "budget.md").write_text(format_budget(result) + "\n")
    if turns:
        latencies = [t.t_first_audio - t.t_end for t in turns]
        median = turns[int(np.argsort(latencies)[len(latencies) // 2])]
        number = turns.index(median) + 1
        plot_turn(
            settings.out / "timeline.png",
            times,
            cumulative,
            median,
            f"turn {number} of {len(turns)} ({policy}, the median first audio: {median.t_first_audio - median.t_end:.3f} s after the true end)",
        )
    return result
