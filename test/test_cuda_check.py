"""scripts/cuda_check.py on the CPU with a tiny random model, as a lent GPU machine would run
it: with Python, torch and transformers (and the carried wheels), none of the robot's stack."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
# what the device lacks: importing any of it must fail the check
ABSENT = ("rclpy", "llama_cpp", "piper", "pocketsphinx", "vosk", "faster_whisper", "ctranslate2", "sounddevice", "rosbags")
BLOCKER = f"""
import sys
class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {ABSENT!r}:
            raise ImportError(name + " is not on the GPU machine")
sys.meta_path.insert(0, Absent())
sys.argv = sys.argv[1:]
import runpy
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_the_check_runs_every_part_on_the_cpu_without_the_robot_stack(tmp_path):
    out = tmp_path / "check"
    args = ["--out", str(out), "--device", "cpu", "--tiny", "--cases", "3", "--limit", "2"]
    done = subprocess.run(
        [sys.executable, "-c", BLOCKER, str(ROOT / "scripts" / "cuda_check.py"), *args], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((out / "results.json").read_text())
    assert result["errors"] == {}
    properties = result["parts"]["properties"]
    assert [p["dtype"] for p in properties] == ["float32", "bfloat16", "float16"]
    assert all(p["exact_equals_baseline"] == 3 for p in properties)  # the tiny model's choices are well separated
    assert properties[0]["cache_max_abs_diff"] < 1e-4 and properties[0]["near_tie_positions"] > 0
    assert len(result["parts"]["passes"]) == 3
    assert all(row["pass_ms"]["32"] > 0 and row["prefill_ms"]["1000"] > 0 for row in result["parts"]["passes"])
    bench = result["parts"]["bench"]["policies"]
    assert set(bench) == {"baseline", "predgen", "predgen-jacobi"} and all(p["answered"] == 2 for p in bench.values())
    assert bench["predgen"]["first_sentence_match"] == 1.0
    page = (out / "results.md").read_text()
    assert "| float32 | tiny random model (CPU test) | 3 of 3 |" in page and "predgen-jacobi" in page


def test_the_dry_run_prints_the_device_calls():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "cuda_check.py"), "--dry-run"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    calls = [line for line in done.stdout.splitlines() if line.startswith("call ")]
    assert calls == [
        "call 1: timeout_s=240 carry=['.cuda_carry/smollm2.gguf.part1', '.cuda_carry/tokenizer', '.cuda_carry/wheels']",
        "call 2: timeout_s=480 carry=['.cuda_carry/smollm2.gguf.part2', '.cuda_carry/tokenizer', '.cuda_carry/wheels']",
    ]
    assert "--parts properties,passes,bench --models smollm2" in done.stdout


def test_a_missing_half_of_the_weights_is_reported_and_the_rest_still_runs(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))  # the harness lives outside the package
    from gpu_check import check, models

    monkeypatch.setattr(models, "CARRY", tmp_path / "carry")
    (tmp_path / "carry").mkdir()
    (tmp_path / "carry" / models.GGUF_HALVES[0]).write_bytes(b"half")
    assert models.real_gguf(tmp_path / "carry") is None
    settings = models.CheckSettings(tmp_path / "out", "cpu", ("passes",), models=("smollm2",))
    result = check.run_check(settings, say=lambda _: None)
    assert "has not arrived" in result["errors"]["passes"]
    assert "passes: not measured" in (tmp_path / "out" / "results.md").read_text()
