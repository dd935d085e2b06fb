#!/usr/bin/env python3
"""The GPU node measured in one prepared run: properties, passes, bench (scripts/gpu_check/).

Here, once:   .venv/bin/python scripts/cuda_check.py --prepare     (fills .cuda_carry/, ignored by git)
              .venv/bin/python scripts/cuda_check.py --dry-run     (the device calls, exactly)
There:        python3 scripts/cuda_check.py --out $OUT/call2 --parts properties,passes,bench --models smollm2
On the CPU:   .venv/bin/python scripts/cuda_check.py --out cuda-check-out --device cpu --tiny
Then here:    .venv/bin/python scripts/cuda_check.py --page docs/results/cuda.md --results DIR [DIR ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the device has the repository, not the installed package
sys.path.insert(0, str(ROOT / "scripts"))  # the harness (gpu_check/) is not part of the package

CALL_TIMEOUT_S = {"call1": 240, "call2": 480}
INSTALL = (
    "python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target .cuda_site "
    ".cuda_carry/wheels/*.whl && export PYTHONPATH=$PWD/.cuda_site PYTHONUNBUFFERED=1 && "
)


def device_calls() -> list[dict]:
    """The two calls a lent device runs; the second must follow within the machine's
    warm time (30 s on an H200), so that the first half of the weights is still there."""
    from gpu_check.models import GGUF_HALVES, RANDOM_SHAPES

    common = [".cuda_carry/tokenizer", ".cuda_carry/wheels"]
    return [
        {
            "carry": [f".cuda_carry/{GGUF_HALVES[0]}", *common],
            "timeout_s": CALL_TIMEOUT_S["call1"],
            "command": INSTALL
            + "python3 scripts/cuda_check.py --out $OUT/call1 --parts passes --models "
            + ",".join(RANDOM_SHAPES),
        },
        {
            "carry": [f".cuda_carry/{GGUF_HALVES[1]}", *common],
            "timeout_s": CALL_TIMEOUT_S["call2"],
            "command": INSTALL
            + "python3 scripts/cuda_check.py --out $OUT/call2 --parts properties,passes,bench --models smollm2",
        },
    ]


def prepare() -> None:
    """.cuda_carry/: the embedded GGUF in two halves, its tokenizer, and the wheels the device lacks."""
    import shutil
    import subprocess

    from gpu_check.models import CARRY, GGUF_HALVES, WHEELS

    from predgen_ros.engine.models import _default_gguf, embedded_tokenizer

    carry = ROOT / CARRY
    carry.mkdir(exist_ok=True)
    data = _default_gguf().read_bytes()
    half = len(data) // 2
    for name, piece in zip(GGUF_HALVES, (data[:half], data[half:])):
        (carry / name).write_bytes(piece)
    shutil.rmtree(carry / "tokenizer", ignore_errors=True)
    embedded_tokenizer().save_pretrained(carry / "tokenizer")
    # pure-Python wheels (rouge-score ships only its sdist: built into one here)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(carry / "wheels"), *WHEELS], check=True
    )
    sizes = {p.name: p.stat().st_size / 2**20 for p in carry.rglob("*") if p.is_file()}
    print(f"{carry}: {len(sizes)} files, {sum(sizes.values()):.1f} MiB in all")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="folder for results.json and results.md")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--parts", default="properties,passes,bench", help="comma-separated, in order")
    parser.add_argument("--models", default=None, help="the passes table's rows (default: smollm2 and the random shapes)")
    parser.add_argument("--tiny", action="store_true", help="a tiny random model for every model (the CPU test)")
    parser.add_argument("--cases", type=int, default=30, help="random partial sequences per dtype")
    parser.add_argument("--limit", type=int, default=80, help="MT-Bench questions in the bench")
    parser.add_argument("--prepare", action="store_true", help="fill .cuda_carry/ for the device calls")
    parser.add_argument("--dry-run", action="store_true", help="print the device calls and stop")
    parser.add_argument("--page", type=Path, help="write the results page from --results folders")
    parser.add_argument("--results", type=Path, nargs="*", default=[])
    args = parser.parse_args(argv)
    if args.prepare:
        prepare()
        return 0
    if args.dry_run:
        for i, call in enumerate(device_calls(), 1):
            print(f"call {i}: timeout_s={call['timeout_s']} carry={call['carry']}\n  {call['command']}")
        return 0
    if args.page:
        from gpu_check.page import write_page

        write_page(args.page, args.results, [call["command"] for call in device_calls()])
        return 0
    if not args.out:
        parser.error("--out is required (or --prepare, --dry-run, --page)")
    from gpu_check.check import run_check
    from gpu_check.models import PARTS, CheckSettings

    parts = tuple(p for p in args.parts.split(",") if p)
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part {unknown[0]!r}: choose from {', '.join(PARTS)}")
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            parser.error("no CUDA device here: use --device cpu --tiny for the CPU check")
    settings = CheckSettings(args.out, args.device, parts, args.tiny, args.cases, limit=args.limit)
    if args.models:
        settings.models = tuple(args.models.split(","))
    result = run_check(settings)
    print((args.out / "results.md").read_text())
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
