"""The CPU budget (eval/graph/cpu_budget.py): threads read from /proc by their OS names, CPU cut by
a turn's stamps, and the stage meter of a shared thread (cpu_meter.py)."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

from predgen_ros.cpu_meter import CpuMeter
from predgen_ros.eval.graph.cpu_budget import ThreadSampler, TurnWindows, budget, cpu_between, format_budget, stage_of
from predgen_ros.os_threads import named_threads, thread_name


def spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


WHISPER_LIKE = """
import sys, threading, time
from predgen_ros.os_threads import name_thread

def spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass

def whisper_like():
    name_thread("whisper")
    child = threading.Thread(target=spin, args=(0.15,))  # a library's worker, started from the named thread
    child.start()
    spin(0.15)
    child.join()

sys.stdin.readline()  # the sampler is running
thread = threading.Thread(target=whisper_like)
thread.start()
thread.join()
print("done", flush=True)
sys.stdin.readline()  # the sampler read the ended threads
"""


def test_a_thread_named_for_its_stage_is_counted_under_it_and_its_children_inherit_the_name():
    # Another process, as the nodes are: the sampler's own thread would wait for the GIL here.
    worker = subprocess.Popen([sys.executable, "-c", WHISPER_LIKE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        with ThreadSampler({"asr_node": worker.pid}, period_s=0.01) as sampler:
            worker.stdin.write("go\n")
            worker.stdin.flush()
            assert worker.stdout.readline().strip() == "done"
            samples = len(sampler.times)
            while len(sampler.times) < samples + 2:  # samples after the work's threads ended
                time.sleep(0.01)
        worker.stdin.write("end\n")
        worker.stdin.flush()
        assert worker.wait(30) == 0
    finally:
        worker.kill()
    times, cumulative = sampler.series()
    whisper = cumulative["Whisper"]
    assert whisper[-1] - whisper[0] >= 0.25  # the thread and the worker it started, kept after they ended
    assert np.all(np.diff(whisper) >= 0)


def test_named_threads_gives_the_name_back():
    before = thread_name()
    with named_threads("piper"):
        assert thread_name() == "piper"
    assert thread_name() == before


def test_stages_by_node_and_thread_name():
    assert stage_of("asr_node", "asr-source") == "audio loop"
    assert stage_of("predgen_node", "predgen-engine") == "LLM"
    assert stage_of("tts_node", "dds.recv") == "DDS"
    assert stage_of("tts_node", "tts_node") == "tts_node executor"
    assert stage_of("tts_node", "python") == "tts_node: other threads"


def test_a_stages_cpu_is_cut_by_the_turns_stamps():
    times = np.arange(0.0, 10.01, 0.01)
    cumulative = {"LLM": times * 0.5, "Whisper": np.minimum(times, 4.0) * 0.25}  # the LLM half a core; Whisper until 4 s
    turn = TurnWindows(t_start=2.0, t_end=4.0, t_detector=4.1, t_final=4.6, t_commit=4.8, t_first_audio=5.0)
    assert cpu_between(times, cumulative["LLM"], 4.0, 5.0) == pytest.approx(0.5)
    result = budget(times, cumulative, [turn], {"aec3": 0.2})
    llm, whisper = result["stages"]["LLM"], result["stages"]["Whisper"]
    assert llm["per_speech_s"] == pytest.approx(0.5) and llm["critical_cores"] == pytest.approx(0.5)
    assert whisper["per_speech_s"] == pytest.approx(0.25) and whisper["critical_cores"] == pytest.approx(0.0)
    assert llm["phase_cores"]["LLM after final"] == pytest.approx(0.5)
    assert result["audio_loop_parts_s"]["aec3"] == 0.2
    table = format_budget(result)
    assert "| LLM | 0.500 | 5.000 | 0.500 |" in table


def test_the_meter_counts_only_its_own_threads_cpu_in_a_stage():
    meter = CpuMeter()
    with meter.stage("aec3"):
        spin(0.05)
    with meter.stage("aec3"):
        time.sleep(0.05)  # waiting is no CPU
    assert 0.04 <= meter.seconds["aec3"] < 0.09
    assert meter.figures() == {"cpu_aec3_s": round(meter.seconds["aec3"], 3)}
