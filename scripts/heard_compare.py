"""What the recognizer read over the robot, through the graph and offline, trial by trial.

Reads an `eval-interruptions --keep-heard` run and an `echo_turns.py --keep-heard` run of
the same interruption bag and prints, per barge-in, each hearing's finals with the level
of its saved audio in the first 0.5 s (where the user speaks over the robot before it
pauses) and after, then the word error rate of the barge-ins' words in each.

    .venv/bin/python scripts/heard_compare.py --graph graph-out --offline turns.json --offline-heard offline-heard
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from predgen_ros.audio.heard_audio import INDEX
from predgen_ros.audio.pcm import SAMPLE_RATE, read_wav
from predgen_ros.eval.hearing.asr_quality import reference_words, word_errors

ONSET_S = 0.5


def level_db(samples: np.ndarray) -> float:
    return float(10 * np.log10(np.mean(samples.astype(np.float64) ** 2) + 1.0)) if len(samples) else float("nan")


def described(folder: Path, files: list[str], finals: dict[str, str]) -> str:
    parts = []
    for name in files:
        samples = np.frombuffer(read_wav(folder / name), dtype=np.int16)
        onset = int(ONSET_S * SAMPLE_RATE)
        parts.append(
            f"{finals[name]!r} {len(samples) / SAMPLE_RATE:.2f} s, {level_db(samples[:onset]):.0f}/{level_db(samples[onset:]):.0f} dB"
        )
    return " | ".join(parts) or "(nothing)"


def finals_in(folder: Path) -> dict[str, str]:
    return {line["file"]: line["final"] for line in map(json.loads, (folder / INDEX).read_text().splitlines())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", type=Path, required=True, help="an eval-interruptions --keep-heard output folder (one hearing)")
    ap.add_argument("--offline", type=Path, required=True, help="echo_turns.py --out of the same bag")
    ap.add_argument("--offline-heard", type=Path, required=True, help="echo_turns.py --keep-heard folder")
    args = ap.parse_args()
    graph = [t for t in json.loads((args.graph / "trials.json").read_text()) if t["kind"] == "barge_in"]
    (graph_heard,) = sorted(args.graph.glob("heard-*"))
    offline = {t["number"]: t for t in json.loads(args.offline.read_text())["trials"]}
    graph_finals, offline_finals = finals_in(graph_heard), finals_in(args.offline_heard)
    errors = {"graph": [0, 0], "offline": [0, 0]}
    for trial in graph:
        mine = offline[trial["number"]]
        reference = reference_words(trial["event"])
        handed_on = " ".join(text for text, handed in mine["finals"] if handed)
        for name, heard in (("graph", trial["new_turn"]), ("offline", handed_on)):
            errors[name][0] += word_errors(reference, reference_words(heard))
            errors[name][1] += len(reference)
        print(f"{trial['number']:3d} {trial['event']!r}")
        print(f"    graph:   {described(graph_heard, [h.split(': ', 1)[0] for h in trial['heard']], graph_finals)}")
        print(f"    offline: {described(args.offline_heard, mine['heard'], offline_finals)}")
    for name, (wrong, total) in errors.items():
        print(f"{name}: WER of the barge-ins' words {wrong / total:.1%} ({wrong} of {total})")


if __name__ == "__main__":
    main()
