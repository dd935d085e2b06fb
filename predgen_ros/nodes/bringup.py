"""Start the three nodes as separate processes from one parameter file.

The pip-only stand-in for `ros2 launch predgen_ros predgen.launch.py`: the
same nodes, the same YAML, each node's log lines prefixed with its name, and
all of them stopped together on Ctrl-C or as soon as one of them exits.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

NODES = ("asr_node", "predgen_node", "tts_node")  # lifecycle nodes: they share the `autostart` parameter
# One side of a two-host graph: microphone, ASR, TTS and speaker on the robot; the LLM where the GPU is.
HALVES = {"robot": ("asr_node", "tts_node"), "workstation": ("predgen_node",)}
# `asr.backend: text` (bringup, the demo, the launch file): a simulated user who types its texts
# (eval/graph/text_user.py, parameters text.*) speaks in asr_node's place
TEXT_USER = "text_user"
MODULES = {TEXT_USER: "predgen_ros.eval.graph.text_user"}  # the others: predgen_ros.nodes.<node>


def in_place_of_the_ear(nodes: tuple[str, ...], asr_backend: str | None) -> tuple[str, ...]:
    """`nodes` with the text user in asr_node's place when `asr_backend` is "text"."""
    return tuple(TEXT_USER if node == "asr_node" and asr_backend == "text" else node for node in nodes)


class GraphError(RuntimeError):
    """A node of the graph stopped, or the graph did not do its job in time; the message says which."""


def default_params_file() -> Path:
    """config/predgen.yaml of a source checkout, else the installed share/ copy."""
    here = Path(__file__).resolve().parents[2] / "config" / "predgen.yaml"
    if here.is_file():
        return here
    return Path(sys.prefix) / "share" / "predgen_ros" / "config" / "predgen.yaml"


def node_for(parameter: str) -> str:
    """Which node declares `parameter` (asr.* and turn.* -> asr_node, whose turn owner
    judges speech over the robot; tts.* -> tts_node; text.* -> the text user; else predgen_node)."""
    group = parameter.split(".", 1)[0]
    return {"asr": "asr_node", "turn": "asr_node", "tts": "tts_node", "text": TEXT_USER}.get(group, "predgen_node")


def ros_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        # YAML single quotes: a string stays a string even when it looks like a number;
        # a quote inside is written twice (/data/o'brien -> '/data/o''brien')
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def node_command(node: str, params_file: Path, overrides: dict[str, Any]) -> list[str]:
    module = MODULES.get(node, f"predgen_ros.nodes.{node}")
    command = [sys.executable, "-m", module, "--ros-args", "--params-file", str(params_file)]
    for name, value in overrides.items():
        if node == node_for(name) or name == "autostart":
            command += ["-p", f"{name}:={ros_value(value)}"]
    return command


class Graph:
    """The running node processes."""

    def __init__(
        self,
        params_file: Path,
        overrides: dict[str, Any] | None = None,
        nodes=NODES,
        env: dict[str, str] | None = None,
        log: TextIO | None = sys.stdout,
        placement: Callable[[str], tuple[list[str], dict[str, str]]] | None = None,
    ):
        """`placement`: where a node runs, as (command prefix, environment) for its name
        (a network namespace of TwoHosts); None: here."""
        self.params_file = Path(params_file)
        self.overrides = overrides or {}
        self.nodes = nodes
        self.env = {**os.environ, **(env or {})}
        self.log = log
        self.placement = placement or (lambda node: ([], {}))
        self.procs: dict[str, subprocess.Popen] = {}
        self._log_lock = threading.Lock()

    def start(self) -> Graph:
        for node in self.nodes:
            self.launch(node)
        return self

    def launch(self, node: str, overrides: dict[str, Any] | None = None) -> subprocess.Popen:
        """Start `node` (again, after it stopped: a supervisor's respawn); `overrides`
        replace the graph's for this start."""
        prefix, env = self.placement(node)
        command = [*prefix, *node_command(node, self.params_file, {**self.overrides, **(overrides or {})})]
        proc = subprocess.Popen(
            command,
            env={**self.env, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        self.procs[node] = proc
        threading.Thread(target=self._relay, args=(node, proc), daemon=True).start()
        return proc

    def kill(self, node: str) -> None:
        """SIGKILL `node`, as a crash would end it."""
        proc = self.procs[node]
        proc.kill()
        proc.wait()

    def terminate(self, node: str, timeout: float = 10.0) -> None:
        """SIGTERM `node`: rclpy shuts it down cleanly, so its endpoints leave the graph
        at once (a killed node's linger until the DDS lease runs out); SIGKILL after `timeout`."""
        proc = self.procs[node]
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill(node)

    def _relay(self, node: str, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            if self.log is not None:
                with self._log_lock:
                    self.log.write(f"[{node}] {line}")
                    self.log.flush()

    def exited(self) -> tuple[str, int] | None:
        """(node, exit code) of the first node that has stopped, if any."""
        for node, proc in self.procs.items():
            if proc.poll() is not None:
                return node, proc.returncode
        return None

    def wait(self) -> tuple[str, int]:
        """Block until one node exits."""
        while (done := self.exited()) is None:
            time.sleep(0.2)
        return done

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM to every node (rclpy shuts down cleanly), then SIGKILL after `timeout`."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.time() + timeout
        for proc in self.procs.values():
            try:
                proc.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> Graph:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def bringup(params_file: Path, overrides: dict[str, Any], nodes=NODES) -> int:
    """Run the graph (or `nodes` of it) until Ctrl-C (exit 0) or until a node exits (its exit code, at least 1)."""
    graph = Graph(params_file, overrides, nodes).start()
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(0.2):
            if (done := graph.exited()) is not None:
                node, code = done
                print(f"[bringup] {node} exited with code {code}; stopping the other nodes", file=sys.stderr, flush=True)
                return code or 1
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        graph.stop()
        signal.signal(signal.SIGTERM, previous)
