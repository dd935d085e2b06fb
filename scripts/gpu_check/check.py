"""The GPU node measured in one prepared run (scripts/cuda_check.py is its command; this
harness lives outside the runtime package: the robot never imports it).

A lent GPU machine has Python, torch and transformers and nothing else, and it is
lent for minutes: everything it runs is here, tested on the CPU with a tiny random
model, and writes what it has after every part, so a run cut short still reports:

1. properties: the exact verifier's claim on the transformers backend, per dtype:
   PredGen's reply equals baseline's for random partial sequences with revisions,
   the KV cache equals a fresh encoding after every step (largest difference), and
   how often a batched verification pass and one-token passes pick a different
   argmax (the near-ties DESIGN §10 measured for llama.cpp).
2. passes: 1/4/16/32-token passes, 100- and 1,000-token prefill, greedy tokens/s and
   GPU memory, for SmolLM2-135M and for random-weight models of a ~1.5 B and a ~7 B
   model's shape (the configuration alone, written below).
3. bench: the 80 MT-Bench turn-1 questions through the virtual-clock benchmark with
   the real SmolLM2 weights: baseline, PredGen (exact) and PredGen with Jacobi
   decoding; no speech synthesis (the time to the first sentence is the LLM's).

The real weights reach the machine as the embedded GGUF in two halves (one call
carries 64 MiB at most), joined there (`prepare_carry` makes them here).
"""

from __future__ import annotations

import json
import random
import statistics
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from predgen_ros.turn_events import TurnEventWriter

from .models import (
    DECODE_TOKENS,
    DTYPES,
    PASS_TOKENS,
    PREFILLS,
    RANDOM_SHAPES,
    REPEATS,
    TINY_SHAPE,
    WORDS,
    CheckSettings,
    language_model,
    property_model,
    random_model,
    smollm2,
    tokenizer,
)


def partial_sequence(rng: random.Random) -> tuple[list[str], str]:
    """Partials growing to a final, an earlier word revised now and then, sometimes shrinking."""
    final = [rng.choice(WORDS) for _ in range(rng.randint(2, 9))]
    partials = []
    for n in range(1, len(final) + 1):
        words = list(final[:n])
        if n > 1 and rng.random() < 0.5:
            words[rng.randrange(n - 1)] = rng.choice(WORDS)
        if n > 2 and rng.random() < 0.2:
            words = words[: n - 2]
        partials.append(" ".join(words))
    return partials, " ".join(final)


def cache_difference(state) -> float:
    """Largest |K, V| difference between the cache and a fresh encoding of its tokens
    (one device sync: the per-layer maxima stay on the GPU until the end)."""
    fresh = state.lm.backend.new_cache()
    fresh.extend(state.tokens)
    maxima = [
        (mine - theirs).abs().max().float()
        for layer, fresh_layer in zip(state.cache.kv.layers, fresh.kv.layers)
        for mine, theirs in ((layer.keys, fresh_layer.keys), (layer.values, fresh_layer.values))
    ]
    return float(torch.stack(maxima).max())


def run_turn_checked(session, partials: list[str], final: str, steps: list[int]) -> float:
    """Play a turn; the largest cache difference seen after any step."""
    worst = 0.0

    def step():
        nonlocal worst
        session.step()
        if session.state.tokens:
            worst = max(worst, cache_difference(session.state))

    user = TurnEventWriter()
    for text, n in zip(partials, steps):
        for event in user.words(text, 0.0):
            session.hear(event, 0.0)
        for _ in range(n):
            if session.has_work():
                step()
    for event in user.final(final, 1.0, may_continue=False, handed_on=True):
        session.hear(event, 1.0)
    session.end_of_turn(1.0)
    for _ in range(500):
        if not session.has_work():
            return worst
        step()
    raise RuntimeError("the session never finished the turn")


def near_ties(lm, prompts: list[str], tokens: int = 24) -> dict:
    """Greedy tokens from one-token passes, then verified in one batched pass: how many
    positions pick another argmax there, and at what logit gap."""
    disagree, gaps, positions = 0, [], 0
    for text in prompts:
        prompt = lm.prompt_ids(text)
        cache = lm.backend.new_cache()
        logits = cache.extend(prompt)[-1]
        greedy, rows = [], []
        for _ in range(tokens):
            token = int(logits.argmax())
            greedy.append(token)
            rows.append(logits)
            logits = cache.extend([token])[-1]
        batched = lm.backend.new_cache()
        verified = batched.extend(prompt + greedy[:-1])[len(prompt) - 1 :]
        for row, token in zip(verified, greedy):
            positions += 1
            if int(row.argmax()) != token:
                disagree += 1
                gaps.append(float(np.sort(row)[-1] - row[token]))
    return {"positions": positions, "disagree": disagree, "gap_max": max(gaps) if gaps else None}


def check_properties(settings: CheckSettings, tok, dtype: torch.dtype) -> dict:
    from predgen_ros.engine.config import EngineConfig
    from predgen_ros.engine.sentences import SentenceRules
    from predgen_ros.engine.session import Session
    from predgen_ros.eval.benchmark.clock import VirtualClock

    model, what = property_model(settings, dtype)
    lm = language_model(model, tok)
    rules = SentenceRules(min_chars=10, fallback_chars=60, max_tokens=8)
    rng = random.Random(0)
    same, worst = 0, 0.0
    for _ in range(settings.cases):
        partials, final = partial_sequence(rng)
        steps = [rng.randint(0, 4) for _ in partials]
        config = EngineConfig(verifier="exact", max_new_tokens=10, max_sentences=0, sentence=rules)
        predgen = Session(lm, replace(config, policy="predgen"), VirtualClock())
        baseline = Session(lm, replace(config, policy="baseline"), VirtualClock())
        worst = max(worst, run_turn_checked(predgen, partials, final, steps))
        run_turn_checked(baseline, partials, final, steps)
        same += predgen.turn.reply == baseline.turn.reply
    prompts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 10))) for _ in range(settings.near_tie_prompts)]
    ties = near_ties(lm, prompts)
    return {
        "dtype": str(dtype).removeprefix("torch."),
        "model": what,
        "cases": settings.cases,
        "exact_equals_baseline": same,
        "cache_max_abs_diff": worst,
        **{f"near_tie_{k}": v for k, v in ties.items()},
    }


# ---------------------------------------------------------------- 2. passes
def timed(fn, device: str) -> float:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - start


def measure_passes(model, name: str, device: str) -> dict:
    from predgen_ros.engine.backends.hf import TransformersBackend

    backend = TransformersBackend(model)
    vocab = model.config.vocab_size
    rng = np.random.default_rng(0)
    ids = [int(i) for i in rng.integers(0, vocab, max(PREFILLS))]
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    prefill = {}
    for n in PREFILLS:
        prefill[str(n)] = 1000 * statistics.median(
            timed(lambda n=n: backend.new_cache().extend(ids[:n]), device) for _ in range(3)
        )
    cache = backend.new_cache()
    cache.extend(ids[:100])
    costs = {}
    for n in PASS_TOKENS:
        times = []
        for _ in range(REPEATS):
            times.append(timed(lambda n=n: cache.extend(ids[100 : 100 + n]), device))
            cache.crop(100)
        costs[str(n)] = 1000 * statistics.median(times)
    token = int(cache.extend(ids[99:100])[-1].argmax())
    start = time.perf_counter()
    for _ in range(DECODE_TOKENS):
        token = int(cache.extend([token])[-1].argmax())
    return {
        "model": name,
        "dtype": str(model.dtype).removeprefix("torch."),
        "parameters_m": sum(p.numel() for p in model.parameters()) / 1e6,
        "pass_ms": costs,
        "prefill_ms": prefill,
        "tokens_per_s": DECODE_TOKENS / (time.perf_counter() - start),
        "peak_memory_mib": torch.cuda.max_memory_allocated() / 2**20 if device.startswith("cuda") else None,
    }


def check_passes(settings: CheckSettings) -> list[dict]:
    dtype = torch.bfloat16
    rows = []
    if "smollm2" in settings.models:
        model, what = smollm2(settings, dtype)
        rows.append(measure_passes(model, "smollm2-135m" if not settings.tiny else what, settings.device))
        del model
    for name, shape in RANDOM_SHAPES.items():
        if name not in settings.models:
            continue
        model = random_model(TINY_SHAPE if settings.tiny else shape, settings.device, dtype)
        rows.append(measure_passes(model, name + (" (tiny stand-in)" if settings.tiny else ""), settings.device))
        del model
        if settings.device.startswith("cuda"):
            torch.cuda.empty_cache()
    return rows


# ----------------------------------------------------------------- 3. bench
class NoVoice:
    """Speech synthesis left out: the first audio is the first sentence's commit."""

    def pieces(self, text: str) -> list[str]:
        return [text]

    def opening_ahead(self, words: str, finished: bool = True) -> None:
        return None

    def synthesize(self, piece: str) -> None:
        return None

    def clear(self) -> None:
        return None


def check_bench(settings: CheckSettings, tok) -> dict:
    from predgen_ros.engine.config import EngineConfig
    from predgen_ros.eval import records
    from predgen_ros.eval.benchmark import bench
    from predgen_ros.eval.benchmark.questions import load_questions

    model, what = smollm2(settings, torch.float32)
    lm = language_model(model, tok)
    config = EngineConfig(verifier="exact")
    variants = {
        "baseline": replace(config, policy="baseline"),
        "predgen": replace(config, policy="predgen"),
        "predgen-jacobi": replace(config, policy="predgen", decoder="jacobi"),
    }
    questions = load_questions(limit=settings.limit)
    rows = bench.run_bench(lm, NoVoice(), questions, bench.BenchSettings(variants))
    summary = records.summarize(rows, list(variants))
    keep = ("answered", "ttfs_p50_s", "ttfs_p90_s", "speedup_vs_baseline_p50", "first_sentence_match")
    nfe = {label: [r.nfe_tfs for r in rows if r.policy == label and r.answered] for label in variants}
    return {
        "model": what,
        "dtype": "float32",
        "questions": len(questions),
        "policies": {
            label: {k: summary[label].get(k) for k in keep}
            | {"nfe_p50": statistics.median(nfe[label]), "nfe_p90": float(np.percentile(nfe[label], 90))}
            for label in variants
        },
    }


# ------------------------------------------------------------------ the run
def environment(device: str) -> dict:
    import platform

    import transformers

    gpu = torch.cuda.get_device_name(0) if device.startswith("cuda") else platform.processor() or platform.machine()
    return {
        "device": gpu,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
    }


def run_check(settings: CheckSettings, say=print) -> dict:
    """Every part asked for, in order; results.json and results.md rewritten after each."""
    settings.out.mkdir(parents=True, exist_ok=True)
    result = {"environment": environment(settings.device), "parts": {}, "errors": {}}
    tok = tokenizer()
    for part in settings.parts:
        started = time.perf_counter()
        say(f"cuda-check: {part} ...")
        try:
            if part == "properties":
                result["parts"][part] = [check_properties(settings, tok, dtype) for dtype in DTYPES]
            elif part == "passes":
                result["parts"][part] = check_passes(settings)
            elif part == "bench":
                result["parts"][part] = check_bench(settings, tok)
        except (FileNotFoundError, RuntimeError, ValueError) as err:  # report it and go on: the other parts still count
            result["errors"][part] = f"{type(err).__name__}: {err}"
            say(f"cuda-check: {part} failed: {result['errors'][part]}")
        result.setdefault("seconds", {})[part] = round(time.perf_counter() - started, 1)
        write(result, settings.out)
    return result


def write(result: dict, out: Path) -> None:
    (out / "results.json").write_text(json.dumps(result, indent=1, default=str))
    (out / "results.md").write_text(markdown(result))


def markdown(result: dict) -> str:
    env = result["environment"]
    lines = [f"Device: {env['device']}; torch {env['torch']}, transformers {env['transformers']}, Python {env['python']}.", ""]
    parts = result["parts"]
    if "properties" in parts:
        lines += [
            "| dtype | model | PredGen (exact) reply = baseline's | cache vs fresh encoding, max abs diff | batched vs 1-token argmax differs | largest gap there |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for r in parts["properties"]:
            gap = "–" if r["near_tie_gap_max"] is None else f"{r['near_tie_gap_max']:.4f}"
            lines.append(
                f"| {r['dtype']} | {r['model']} | {r['exact_equals_baseline']} of {r['cases']} | {r['cache_max_abs_diff']:.2e} "
                f"| {r['near_tie_disagree']} of {r['near_tie_positions']} | {gap} |"
            )
        lines.append("")
    if "passes" in parts:
        head = " | ".join(f"{n} tok" for n in PASS_TOKENS)
        lines += [
            f"| model (bf16) | params (M) | {head} | prefill 100 / 1,000 | greedy tok/s | peak memory MiB |",
            "|---|---:|" + "---:|" * (len(PASS_TOKENS) + 3),
        ]
        for r in parts["passes"]:
            cells = " | ".join(f"{r['pass_ms'][str(n)]:.2f}" for n in PASS_TOKENS)
            memory = "–" if r["peak_memory_mib"] is None else f"{r['peak_memory_mib']:.0f}"
            lines.append(
                f"| {r['model']} | {r['parameters_m']:.0f} | {cells} | {r['prefill_ms']['100']:.1f} / {r['prefill_ms']['1000']:.1f} "
                f"| {r['tokens_per_s']:.0f} | {memory} |"
            )
        lines += ["", f"Pass costs in ms, median of {REPEATS} after a 100-token prompt.", ""]
    if "bench" in parts:
        b = parts["bench"]
        lines += [
            f"Bench: {b['questions']} MT-Bench turn-1 questions, {b['model']}, {b['dtype']}, no speech synthesis.",
            "",
            "| policy | answered | TTFS p50 / p90 (s) | speedup p50 | first sentence = baseline's | NFE p50 / p90 |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for label, s in b["policies"].items():
            match = "–" if s["first_sentence_match"] is None else f"{100 * s['first_sentence_match']:.0f} %"
            speedup = "–" if s["speedup_vs_baseline_p50"] is None else f"{s['speedup_vs_baseline_p50']:.2f}x"
            lines.append(
                f"| {label} | {s['answered']} | {s['ttfs_p50_s']:.3f} / {s['ttfs_p90_s']:.3f} | {speedup} | {match} "
                f"| {s['nfe_p50']:.0f} / {s['nfe_p90']:.0f} |"
            )
        lines.append("")
    for part, error in result["errors"].items():
        lines.append(f"- {part}: not measured ({error})")
    return "\n".join(lines) + "\n"
