"""docs/results/cuda.md from the device calls' results.json files (scripts/cuda_check.py --page)."""

from __future__ import annotations

import json
import subprocess
from datetime import date
from pathlib import Path

from .check import markdown


def merged(folders: list[Path]) -> dict:
    """The calls' results as one: each part from the call that measured it (the passes rows joined)."""
    result = {"parts": {}, "errors": {}, "seconds": {}}
    for folder in folders:
        call = json.loads((folder / "results.json").read_text())
        result["environment"] = call["environment"]
        for part, value in call["parts"].items():
            if part == "passes":
                result["parts"].setdefault("passes", [])[:0] = value  # the real model's rows first
            else:
                result["parts"][part] = value
        result["errors"].update(call["errors"])
        for part, seconds in call.get("seconds", {}).items():
            result["seconds"][f"{folder.name}:{part}"] = seconds
    return result


def write_page(page: Path, folders: list[Path], commands: list[str]) -> None:
    result = merged(folders)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    timing = ", ".join(f"{k} {v:g} s" for k, v in result["seconds"].items())
    lines = [
        "# The GPU node: properties, pass costs and the bench on CUDA",
        "",
        f"Measured {date.today().isoformat()} at commit {commit} by `scripts/cuda_check.py` in two device calls "
        "(the embedded GGUF travels in two halves, one per call; see the script's `--dry-run`):",
        "",
        "```bash",
        *commands,
        "```",
        "",
        f"Script time per part: {timing}.",
        "",
        markdown(result),
    ]
    page.write_text("\n".join(lines))
