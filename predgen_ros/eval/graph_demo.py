"""The demo: questions spoken into the real ROS 2 graph, once per policy.

For each policy the three nodes start as processes (nodes.bringup.Graph), the
text ASR backend speaks the questions at 600 characters/min, tts_node writes
each reply as a WAV file, and this process listens to `predgen/latency` for the
per-turn reports.  Latencies come from the graph's own clocks (real time).
"""
from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from ..nodes.bringup import Graph, GraphError


@dataclass
class DemoSettings:
    params_file: Path
    out: Path
    policies: tuple[str, ...] = ("baseline", "predgen")
    limit: int = 3
    turn_timeout_s: float = 180.0


class ReportListener:
    """An rclpy node in this process that collects latency reports and replies."""

    def __init__(self, name: str = "predgen_demo_listener"):
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from std_msgs.msg import Bool, String

        from ..nodes.common import TEXT_QOS

        self.rclpy = rclpy
        self.node = rclpy.create_node(name)
        self.reports: list[dict[str, str]] = []
        self.responses: list[str] = []
        self.replies_spoken = 0
        self._speaking = False
        self.node.create_subscription(DiagnosticArray, "predgen/latency", self._on_report, TEXT_QOS)
        self.node.create_subscription(String, "predgen/response", lambda m: self.responses.append(m.data), TEXT_QOS)
        self.node.create_subscription(Bool, "robot_speaking", self._on_speaking, TEXT_QOS)

    def _on_speaking(self, msg) -> None:
        if self._speaking and not msg.data:
            self.replies_spoken += 1
        self._speaking = msg.data

    def _on_report(self, msg) -> None:
        for status in msg.status:
            self.reports.append({kv.key: kv.value for kv in status.values} | {"_level": int.from_bytes(status.level, "little"), "_message": status.message})

    def spin_until(self, done, graph: Graph, timeout: float, progress=None) -> None:
        deadline = time.time() + timeout
        seen = 0
        while not done():
            self.rclpy.spin_once(self.node, timeout_sec=0.1)
            if len(self.reports) > seen and progress:
                progress(len(self.reports) - seen)
                seen = len(self.reports)
            if (exited := graph.exited()) is not None:
                raise GraphError(f"{exited[0]} exited with code {exited[1]}")
            if time.time() > deadline:
                raise GraphError(f"not finished within {timeout:g} s")

    def close(self) -> None:
        self.node.destroy_node()


def run_policy(policy: str, settings: DemoSettings, progress=None) -> list[dict[str, str]]:
    """Start the graph with `policy`, let the user speak, return the per-turn reports."""
    wav_dir = settings.out / policy
    wav_dir.mkdir(parents=True, exist_ok=True)
    overrides = {
        "policy": policy, "asr.backend": "text", "asr.text.limit": settings.limit,
        "tts.sink": "wav", "tts.wav_dir": str(wav_dir.resolve()), "tts.realtime": False,
    }
    log_path = settings.out / f"graph-{policy}.log"
    listener = ReportListener()
    with open(log_path, "w") as log, Graph(settings.params_file, overrides, log=log) as graph:
        try:
            listener.spin_until(lambda: min(len(listener.responses), len(listener.reports), listener.replies_spoken) >= settings.limit,
                                graph, settings.turn_timeout_s * settings.limit, progress)
        except GraphError as err:
            raise GraphError(f"policy {policy}: {err}; see {log_path}") from None
        finally:
            listener.close()
    return listener.reports


def latency_table(reports: dict[str, list[dict[str, str]]]) -> str:
    """Per turn: audio latency of each policy, and baseline/predgen."""
    policies = list(reports)
    header = f"{'turn':<5} {'question':<42}" + "".join(f" {p + ' (s)':>15}" for p in policies)
    if "baseline" in reports and len(policies) > 1:
        header += f" {'speedup':>8}"
    lines = [header, "-" * len(header)]
    turns = min(len(rows) for rows in reports.values())
    for i in range(turns):
        question = reports[policies[0]][i]["transcript"]
        values = [float(reports[p][i]["audio_latency_s"]) for p in policies]
        line = f"{i + 1:<5} {question[:40] + ('..' if len(question) > 40 else ''):<42}" + "".join(f" {v:>15.3f}" for v in values)
        if "baseline" in reports and len(policies) > 1:
            line += f" {values[0] / values[-1]:>7.2f}x"
        lines.append(line)
    p50 = [statistics.median(float(r["audio_latency_s"]) for r in reports[p][:turns]) for p in policies]
    line = f"{'p50':<5} {'':<42}" + "".join(f" {v:>15.3f}" for v in p50)
    if "baseline" in reports and len(policies) > 1:
        line += f" {p50[0] / p50[-1]:>7.2f}x"
    lines.append(line)
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
