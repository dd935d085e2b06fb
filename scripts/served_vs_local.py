"""The served engine against the robot's own on the same questions: two `bench` folders
(the same questions and settings, one with `--backend openai --server-url ...`), compared
question for question.

    python scripts/served_vs_local.py LOCAL_DIR SERVED_DIR [POLICY]

Prints how many first sentences are the same, and the time per verification pass while
the user speaks (input_llm_s / input_nfe) served, local and their difference, p50 and p90
over the questions."""

from __future__ import annotations

import csv
import sys
from pathlib import Path


def rows(folder: Path, policy: str) -> dict[str, dict]:
    with open(folder / "turns.csv", newline="") as f:
        return {r["qid"]: r for r in csv.DictReader(f) if r["policy"] == policy}


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def main(local_dir: str, served_dir: str, policy: str = "predgen") -> int:
    local, served = rows(Path(local_dir), policy), rows(Path(served_dir), policy)
    common = sorted(set(local) & set(served), key=lambda q: int(q) if q.isdigit() else q)
    same = [q for q in common if local[q]["first_sentence"] == served[q]["first_sentence"]]
    print(f"{policy}: the same first sentence in {len(same)} of {len(common)} questions")
    for q in common:
        if q not in same:
            print(f"  {q}: local {local[q]['first_sentence']!r}\n  {' ' * len(q)}  served {served[q]['first_sentence']!r}")
    per_pass = {}
    for name, table in (("local", local), ("served", served)):
        per_pass[name] = {
            q: float(table[q]["input_llm_s"]) / float(table[q]["input_nfe"]) for q in common if float(table[q]["input_nfe"]) > 0
        }
    both = [q for q in common if q in per_pass["local"] and q in per_pass["served"]]
    added = [per_pass["served"][q] - per_pass["local"][q] for q in both]
    for name, values in (
        ("local", [per_pass["local"][q] for q in both]),
        ("served", [per_pass["served"][q] for q in both]),
        ("added", added),
    ):
        print(
            f"seconds per verification pass while the user speaks, {name}: p50 {quantile(values, 0.5):.4f}, p90 {quantile(values, 0.9):.4f}"
        )
    return 0 if len(same) == len(common) else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
