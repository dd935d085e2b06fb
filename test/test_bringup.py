"""`predgen-ros bringup`: three processes, prefixed logs, stopped together."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager

import psutil
import pytest
import yaml

from predgen_ros.nodes.bringup import default_params_file, node_command, node_for, ros_value

pytestmark = pytest.mark.graph


def start_bringup(*args):
    # as from a shell: Ctrl-C's default action, whatever an earlier test left in this process
    return subprocess.Popen(
        [sys.executable, "-m", "predgen_ros.cli", "bringup", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def node_pids(proc):
    return [child.pid for child in psutil.Process(proc.pid).children(recursive=True)]


def test_parameters_go_to_the_node_that_declares_them():
    assert [node_for(p) for p in ("asr.backend", "tts.sink", "verifier.k", "policy")] == [
        "asr_node",
        "tts_node",
        "predgen_node",
        "predgen_node",
    ]
    command = node_command("tts_node", "p.yaml", {"tts.sink": "none", "policy": "baseline", "tts.realtime": False})
    assert command[-4:] == ["-p", "tts.sink:='none'", "-p", "tts.realtime:=false"]
    assert ros_value("007") == "'007'"  # stays a string
    # the turn rules are asr_node's alone: its turn owner decides for the other two
    assert node_command("asr_node", "p.yaml", {"turn.min_words": 1})[-2:] == ["-p", "turn.min_words:=1"]
    for node in ("predgen_node", "tts_node"):
        assert "turn.min_words:=1" not in node_command(node, "p.yaml", {"turn.min_words": 1})


@pytest.mark.parametrize("value", ["/data/o'brien/voice.onnx", "it's", "''", "a: b", "#x", "007", "true", "[1, 2]"])
def test_a_string_parameter_reaches_the_node_unchanged(value):
    assert yaml.safe_load(ros_value(value)) == value  # rcl reads -p values as YAML


def test_a_path_with_a_quote_reaches_the_node(tmp_path):
    missing = tmp_path / "o'brien" / "voice.onnx"
    command = node_command("tts_node", default_params_file(), {"tts.sink": "none", "tts.voice_path": str(missing)})
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"tts.voice_path: Piper voice not found: {missing}" in result.stderr  # the path arrived whole


@pytest.mark.e2e  # starts the nodes, which load the real models
def test_one_node_failing_stops_the_others():
    proc = start_bringup("--asr-backend", "nemo", "--sink", "none")
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2, output[-3000:]
    assert "[asr_node] asr_node: error: asr.backend: unknown backend 'nemo'" in output
    assert "[bringup] asr_node exited with code 2; stopping the other nodes" in output


@contextmanager
def ready_graph():
    """bringup with the text user, once predgen_node is ready; whatever is left is killed after."""
    proc = start_bringup("--asr-backend", "text", "--sink", "none", "--set", "text.wait_for_reply=false")
    try:
        lines = []
        deadline = time.time() + 120
        while not any("[predgen_node]" in line and "ready" in line for line in lines):
            assert time.time() < deadline and proc.poll() is None, "".join(lines)[-3000:]
            lines.append(proc.stdout.readline())
        yield proc
    finally:
        if proc.poll() is None:  # a failed shutdown must not leave nodes talking to the next tests
            for child in psutil.Process(proc.pid).children(recursive=True):
                child.kill()
            proc.kill()


def still_running(pids):
    return [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


@pytest.mark.e2e  # starts the nodes, which load the real models
def test_ctrl_c_stops_every_node_cleanly():
    with ready_graph() as proc:
        children = node_pids(proc)
        assert len(children) >= 3
        proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=30)[0]
        assert proc.returncode == 0, output[-3000:]
        assert "Traceback" not in output
        assert not still_running(children)


@pytest.mark.e2e  # starts the nodes, which load the real models
def test_a_killed_node_stops_the_others():
    """As the launch file's on_exit=Shutdown does (checked statically in test_launch)."""
    with ready_graph() as proc:
        nodes = {psutil.Process(pid).cmdline()[2].rsplit(".", 1)[-1]: pid for pid in node_pids(proc)}
        os.kill(nodes["predgen_node"], signal.SIGKILL)
        output = proc.communicate(timeout=60)[0]
        assert proc.returncode != 0, output[-3000:]
        assert "[bringup] predgen_node exited with code -9; stopping the other nodes" in output
        assert not still_running(nodes.values())
