"""What a second thread buys Whisper's features and Piper on a 2-core CPU (docs/results/cpu-budget.md).

Per setting, the median wall time and CPU time (this process's, all threads) of one call:
- Whisper tiny.en on 2 s of audio (the project's transcriber, one CTranslate2 thread), with
  numpy's OpenBLAS pool as it comes (a thread per core) and limited to one thread (as the nodes run);
- Piper synthesizing a first clause, ONNX Runtime with its default threads (one per core, spinning
  between runs), and with one thread, not spinning (tts.threads: 1, as tts_node runs).
Each setting quiet, then beside one busy core (a process this script starts and ends), where the
LLM sits in the graph.

    .venv/bin/python scripts/cpu_threads.py [--calls 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import onnxruntime
from threadpoolctl import threadpool_limits

from predgen_ros.audio.recognition.whisper import WhisperTranscriber
from predgen_ros.audio.speech.tts import PiperSynthesizer

CLAUSE = "I'm sorry, I'm not equipped"


def cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def measure(call, calls: int) -> tuple[float, float]:
    call()  # warm
    walls, cpus = [], []
    for _ in range(calls):
        c, w = cpu_s(), time.perf_counter()
        call()
        walls.append(time.perf_counter() - w)
        cpus.append(cpu_s() - c)
    return statistics.median(walls), statistics.median(cpus)


def show(name: str, load: str, figures: tuple[float, float]) -> None:
    print(f"{name:<44} {load:<12} {figures[0]:>12.3f} {figures[1]:>12.3f}")


def piper_default_threads(synth: PiperSynthesizer) -> PiperSynthesizer:
    """The same voice in ONNX Runtime's default session (as PiperVoice.load makes it)."""
    from piper import PiperVoice

    from predgen_ros.audio.speech.tts import default_voice_path

    synth.voice.session = PiperVoice.load(str(default_voice_path())).session
    return synth


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    whisper = WhisperTranscriber()
    audio = (np.random.default_rng(0).standard_normal(2 * 16000) * 1000).astype(np.int16).tobytes()
    one_thread = PiperSynthesizer(cache_size=0, threads=1)
    default = piper_default_threads(PiperSynthesizer(cache_size=0))
    print(f"onnxruntime {onnxruntime.__version__}, {os.cpu_count()} cores")
    print(f"{'setting':<44} {'load':<12} {'wall p50 (s)':>12} {'CPU p50 (s)':>12}")
    for load in ("quiet", "1 busy core"):
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if load != "quiet" else None
        try:
            show("Whisper, OpenBLAS as it comes", load, measure(lambda: whisper.transcribe(audio), args.calls))
            with threadpool_limits(1, "blas"):
                show("Whisper, one OpenBLAS thread (the nodes)", load, measure(lambda: whisper.transcribe(audio), args.calls))
                for name, synth in (
                    ("Piper, ONNX Runtime's default threads", default),
                    ("Piper, one thread (tts.threads: 1)", one_thread),
                ):
                    show(name, load, measure(lambda synth=synth: synth.synthesize(CLAUSE), args.calls))
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
