"""The served engine's faults through the graph: predgen_node on llama-cpp-python's server
(the embedded model), tts_node speaking into the null sink, a user speaking turn events.
Every turn is answered or told; no node dies."""

from __future__ import annotations

import os
import signal
import socket
import subprocess

import pytest

from predgen_ros.engine.config import SERVER_NOTICE
from predgen_ros.engine.models import embedded_gguf
from predgen_ros.eval.graph.stress import Monitor
from predgen_ros.eval.served.model_server import ModelServer
from predgen_ros.nodes.bringup import Graph, default_params_file, node_command

pytestmark = [pytest.mark.graph, pytest.mark.e2e]  # the real model, in a server process and in predgen_node
TURN_S = 300.0  # a turn's answer or notice comes within this, on a loaded machine too


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def served_overrides(url: str, fallback: str) -> dict:
    return {
        "model.backend": "openai",
        "model.server.url": url,
        "model.server.token_ids": False,
        "model.server.timeout_s": 30.0,  # its echo costs ~65 ms a prompt token here (docs/results/served.md)
        "model.server.fallback": fallback,
        "generation.max_new_tokens": 24,
        "tts.sink": "none",
    }


@pytest.fixture
def graph_on(tmp_path):
    """A server, and predgen_node and tts_node on it; yields (server, graph, monitor, said)."""
    import rclpy
    from std_msgs.msg import String

    from predgen_ros.nodes.common import TEXT_QOS

    def start(fallback: str):
        server = ModelServer(embedded_gguf("f16"), free_port(), log=tmp_path / "server.log").start()
        started.append(server)
        log = open(tmp_path / "graph.log", "w")  # noqa: SIM115  closed after the graph, below
        logs.append(log)
        graph = Graph(
            default_params_file(), served_overrides(server.url, fallback), ("predgen_node", "tts_node"), log=log
        ).start()
        started.append(graph)
        monitor = Monitor()
        monitor.graph = graph
        said: list[str] = []
        monitor.node.create_subscription(String, "tts/say", lambda m: m.data and said.append(m.data), TEXT_QOS)
        monitor.wait_active(["predgen_node", "tts_node"])
        started.append(monitor)
        return server, graph, monitor, said

    started, logs = [], []
    rclpy.init()
    try:
        yield start
    finally:
        for thing in reversed(started):
            thing.close() if isinstance(thing, Monitor) else thing.stop()
        for log in logs:
            log.close()
        rclpy.try_shutdown()


def test_a_server_down_at_start_is_one_line_or_the_local_model(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    command = node_command("predgen_node", default_params_file(), served_overrides(url, "notice"))
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip() and not set(line) <= {"."}]
    assert proc.returncode != 0 and len(lines) == 1 and url in lines[0] and "unreachable" in lines[0], lines


def test_a_server_killed_mid_reply_hands_the_turn_to_the_local_model_and_the_next_is_answered(graph_on):
    server, graph, monitor, said = graph_on("local")
    assert monitor.answered("what is the capital of france", TURN_S)  # on the server
    before = len(monitor.responses)
    monitor.say("please tell me a long story about a robot and its friends in the kitchen")
    assert monitor.wait_for(lambda: monitor.robot_speaking, TURN_S)  # the reply has begun
    server.kill()
    assert monitor.wait_for(lambda: len(monitor.responses) > before, TURN_S)  # finished on the local model
    assert monitor.answered("tell me one fact about the moon", TURN_S)  # the server still gone: local
    assert graph.exited() is None and SERVER_NOTICE not in said


def test_a_frozen_server_is_told_and_the_next_turn_answered_once_it_is_back(graph_on):
    server, graph, monitor, said = graph_on("notice")
    assert monitor.answered("what is the capital of france", TURN_S)
    os.kill(server.proc.pid, signal.SIGSTOP)  # slower than model.server.timeout_s, for ever
    try:
        monitor.wait_for(lambda: not monitor.robot_speaking, TURN_S)
        monitor.say("tell me one fact about the moon")
        assert monitor.wait_for(lambda: SERVER_NOTICE in said, TURN_S)  # told, not left waiting
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    assert monitor.answered("what is the capital of italy", TURN_S)  # the server answers again
    assert graph.exited() is None
