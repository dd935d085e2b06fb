"""What one forward pass costs, per backend and weight format, against the hardware's floor.

Each setting runs in a child process of its own, so its RSS is its own.  A pass
over n tokens follows a prompt of PROMPT_TOKENS (crop back, repeat, median); greedy
decode is 1-token passes.  The floor of a 1-token pass is the weights' bytes over the
memory bandwidth measured in the same run (numpy copying one large array on one
thread), since a decode step reads every weight once.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np
import psutil

from ...engine.config import ConfigError, ModelError

PASS_TOKENS = (1, 4, 16, 32)
PROMPT_TOKENS = 100
REPEATS = 10
DECODE_TOKENS = 48
DEFAULT_SETTINGS = "transformers:float32,transformers:bfloat16,llama_cpp:q4_1,llama_cpp:q8_0,llama_cpp:f16"


@dataclass(frozen=True)
class Setting:
    backend: str  # transformers | llama_cpp
    variant: str  # a dtype for transformers, a weight format for llama_cpp

    @classmethod
    def parse(cls, text: str) -> Setting:
        from ...engine.config import WEIGHTS

        backend, _, variant = text.partition(":")
        allowed = {"transformers": ("float32", "bfloat16", "float16"), "llama_cpp": tuple(WEIGHTS)}
        if backend not in allowed or variant not in allowed[backend]:
            choices = ", ".join(f"{b}:{v}" for b, vs in allowed.items() for v in vs)
            raise ConfigError(f"unknown setting {text!r}: choose from {choices}")
        return cls(backend, variant)

    def __str__(self) -> str:
        return f"{self.backend}:{self.variant}"


def memory_bandwidth(megabytes: int = 512, repeats: int = 5) -> float:
    """Bytes per second that numpy moves (read + write) copying an array on one thread."""
    src = np.ones(megabytes * 2**20 // 4, dtype=np.float32)
    dst = np.empty_like(src)
    best = min(_timed(lambda: np.copyto(dst, src)) for _ in range(repeats))
    return 2 * src.nbytes / best


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _load(setting: Setting, threads: int):
    """(LanguageModel, bytes of weights a pass reads)."""
    from ...engine.models import load_language_model
    from ...engine.params import ModelParams

    if setting.backend == "transformers":
        lm = load_language_model(ModelParams(None, "cpu", setting.variant, backend="transformers"))
        model = lm.backend.model
        # the tied embedding is read as the output layer, once
        return lm, sum(p.numel() * p.element_size() for p in model.parameters())
    lm = load_language_model(ModelParams(None, backend="llama_cpp", weights=setting.variant, threads=threads))
    return lm, lm.backend.weight_bytes()


def measure(setting: Setting, threads: int) -> dict:
    """One setting's pass costs (ms), greedy tokens/s and peak RSS (MiB)."""
    from ...audio.recognition.text_asr import load_questions

    lm, weight_bytes = _load(setting, threads)
    question = load_questions(limit=1)[0].text
    prompt = (lm.prompt_ids(question) * 10)[:PROMPT_TOKENS]
    prefill = []
    for _ in range(3):
        cache = lm.backend.new_cache()
        prefill.append(_timed(lambda c=cache: c.extend(prompt)))
    cache = lm.backend.new_cache()
    cache.extend(prompt)
    costs = {}
    for n in PASS_TOKENS:
        block = prompt[:n]
        times = []
        for _ in range(REPEATS):
            times.append(_timed(lambda b=block: cache.extend(b)))
            cache.crop(len(prompt))
        costs[str(n)] = statistics.median(times) * 1000
    token = int(cache.extend(prompt[-1:])[-1].argmax())
    start = time.perf_counter()
    for _ in range(DECODE_TOKENS):
        token = int(cache.extend([token])[-1].argmax())
    decode = DECODE_TOKENS / (time.perf_counter() - start)
    return {
        "setting": str(setting),
        "pass_ms": costs,
        "prefill_ms": statistics.median(prefill) * 1000,
        "tokens_per_s": decode,
        "weight_mib": weight_bytes / 2**20,
        # RSS now, not ru_maxrss: Linux carries the parent's peak over fork and exec
        "rss_mib": psutil.Process().memory_info().rss / 2**20,
        **lm.backend.describe(),
    }


def measure_in_child(setting: Setting, threads: int) -> dict:
    """`measure` in a fresh interpreter: the RSS is this setting's alone."""
    code = "import json,sys; from predgen_ros.eval import passes as p; "
    code += f"print(json.dumps(p.measure(p.Setting.parse({str(setting)!r}), {threads})))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        raise ModelError(f"{setting}: {(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def format_table(rows: list[dict], bandwidth: float) -> str:
    head = " | ".join(f"{n} tok" for n in PASS_TOKENS)
    lines = [
        f"| setting | {head} | {PROMPT_TOKENS}-token prefill | greedy tok/s | weights MiB | floor (1 tok) | 1 tok / floor | RSS MiB |",
        "|---|" + "---:|" * (len(PASS_TOKENS) + 7),
    ]
    for r in rows:
        floor = r["weight_mib"] * 2**20 / bandwidth * 1000
        cells = " | ".join(f"{r['pass_ms'][str(n)]:.1f}" for n in PASS_TOKENS)
        lines.append(
            f"| {r['setting']} | {cells} | {r['prefill_ms']:.0f} | {r['tokens_per_s']:.0f} | {r['weight_mib']:.0f} "
            f"| {floor:.1f} | {r['pass_ms']['1'] / floor:.2f}x | {r['rss_mib']:.0f} |"
        )
    lines.append(
        f"\npass costs in ms (median of {REPEATS} after a {PROMPT_TOKENS}-token prompt); memory bandwidth {bandwidth / 1e9:.1f} GB/s"
    )
    return "\n".join(lines)
