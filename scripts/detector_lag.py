"""The voice detector's end of speech after the true end, heard as asr_node hears it.

A bag's user audio goes through asr_node's echo canceller and guarded voice detector
(audio/ear.py, audio/echo/double_talk.py) with the fixed 0.5 s endpoint, as in the
graph with the robot silent; per question: the end of speech of its last final minus the
true end (the bag's marker), and how many finals it made (more than one: the utterance was
split at a pause).  Once with the room's tail rule (double_talk.TAIL_BELOW_PEAK_DB, the
default) and once without.  No ROS; the recognizer is pocketsphinx (only the voice
detector's ends matter here, and it is fast).

    .venv/bin/python scripts/detector_lag.py --bag FAR_FIELD_BAG --out lag.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np

from predgen_ros.audio.ear import EarSettings, build_ear
from predgen_ros.audio.echo.double_talk import TAIL_BELOW_PEAK_DB
from predgen_ros.audio.pcm import SAMPLE_RATE
from predgen_ros.eval.hearing.endpoints import load_audio
from predgen_ros.events import Heard


def speech_ends(audio, tail_below_peak_db: float | None) -> list[float]:
    """The end of speech of every final, in stream time."""
    ear = build_ear(EarSettings(recognizer="pocketsphinx", tail_below_peak_db=tail_below_peak_db))
    asr, ends = ear.asr, []
    for t_end, pcm in audio:
        ends += [e.t_speech_end for e in ear.feed(pcm, t_end - len(pcm) / 2 / SAMPLE_RATE) if e.kind is Heard.FINAL]
    ends += [e.t_speech_end for e in asr.finish_stream() if e.kind is Heard.FINAL]
    asr.close()
    return ends


def per_question(ends: list[float], markers, t0_ns: int) -> list[dict]:
    rows = []
    for i, marker in enumerate(markers):
        start, end = (marker.t_start_ns - t0_ns) / 1e9, (marker.t_end_ns - t0_ns) / 1e9
        stop = (markers[i + 1].t_start_ns - t0_ns) / 1e9 if i + 1 < len(markers) else float("inf")
        mine = [e for e in ends if start <= e < stop]
        rows.append({"qid": marker.qid, "finals": len(mine), "lag_s": (mine[-1] - end) if mine else None})
    return rows


def summary(rows: list[dict]) -> dict:
    lags = [r["lag_s"] for r in rows if r["lag_s"] is not None]
    return {
        "questions": len(rows),
        "heard": len(lags),
        "lag_p50_s": statistics.median(lags),
        "lag_p90_s": float(np.percentile(lags, 90)),
        "split": sum(r["finals"] > 1 for r in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bag", required=True, type=Path)
    parser.add_argument("--limit", type=int, default=None, help="the first N questions")
    parser.add_argument("--out", type=Path, required=True, help="JSON: per setting, the summary and every question's lag")
    args = parser.parse_args()
    audio, markers, t0_ns = load_audio(args.bag.expanduser(), args.limit)
    report = {}
    for name, tail in ((f"tail rule ({TAIL_BELOW_PEAK_DB:g} dB under the peak)", TAIL_BELOW_PEAK_DB), ("no tail rule", None)):
        rows = per_question(speech_ends(audio, tail), markers, t0_ns)
        report[name] = {"summary": summary(rows), "questions": rows}
        print(name, json.dumps(report[name]["summary"]))
    args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
