"""How a llama.cpp context's memory and prompt speed depend on the tokens per llama_decode call.

One context of the embedded SmolLM2, a 1,000-token prompt decoded three times (the cache
cropped between), freed heap handed back to the OS after each; prints the resident
memory's growth over the loaded model and the seconds per prompt.  docs/results/stress.md

    .venv/bin/python scripts/llama_batch_memory.py 512
"""

from __future__ import annotations

import ctypes
import sys
import time

import psutil

import predgen_ros.engine.backends.llama as llama
from predgen_ros.engine.models import load_language_model
from predgen_ros.engine.params import ModelParams


def main() -> None:
    llama.N_BATCH = int(sys.argv[1]) if len(sys.argv) > 1 else llama.N_BATCH
    process = psutil.Process()
    rss_mb = lambda: process.memory_info().rss / 2**20  # noqa: E731
    cache = load_language_model(ModelParams(None)).backend.new_cache()
    loaded = rss_mb()
    seconds = []
    for _ in range(3):
        cache.crop(0)
        start = time.perf_counter()
        cache.extend(list(range(1000, 2000)))
        seconds.append(time.perf_counter() - start)
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    times = ", ".join(f"{s:.2f}" for s in seconds)
    print(f"tokens per call {llama.N_BATCH}: growth {rss_mb() - loaded:.1f} MB; seconds per 1,000-token prompt: {times}")


if __name__ == "__main__":
    main()
