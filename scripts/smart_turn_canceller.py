"""Smart Turn at the end of each question, heard as the endpoint sweep hears it and as asr_node does.

The sweep (`predgen-ros endpoints --sweep`) feeds the bag's audio to the voice detector and
Smart Turn as it is; asr_node puts the echo canceller in front of them (audio/ear.py:
AEC3's suppressed output for the voice detector, Speex's linear output for the recognizer and
Smart Turn), even with the robot silent.  If the canceller changed what Smart Turn hears, a
rule chosen by the sweep would fire less through the graph.  Per question: Smart Turn's
probability when the pause after its true end reached each of the sweep's pause lengths, and
the pause's start against the true end, once per path.  No ROS; the recognizer is
pocketsphinx (fast: only the voice detector's pauses and Smart Turn matter here).

    .venv/bin/python scripts/smart_turn_canceller.py --bag ~/.cache/predgen_ros/bags/mtbench-80-h30-s0 --limit 40 --out st.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from predgen_ros.audio.ear import EarSettings, build_ear
from predgen_ros.audio.pcm import SAMPLE_RATE
from predgen_ros.audio.recognition.endpoint import EndpointConfig
from predgen_ros.audio.recognition.turn_models import SmartTurn
from predgen_ros.eval.hearing.endpoint_sweep import CLOSING_TOLERANCE_S, PAUSES_S, PauseRecorder
from predgen_ros.eval.hearing.endpoints import load_audio

OBSERVE_S = 1.5  # longer than any pause length asked about


def question_ends(audio, markers, t0_ns: int, smart_turn: SmartTurn, canceller: bool) -> list[dict]:
    """Per question, the pause after its true end: Smart Turn at each of PAUSES_S, and its start minus the true end."""
    ear = build_ear(EarSettings(recognizer="pocketsphinx", echo_cancel="webrtc" if canceller else "none"))
    asr = ear.asr
    recorder = PauseRecorder(
        EndpointConfig(policy="fused", pause_s=min(PAUSES_S), max_silence_s=OBSERVE_S),
        lambda: smart_turn.probability(asr.utterance_audio),
        lambda: asr.stream_time,
    )
    asr.endpointer = recorder
    for t_end, pcm in audio:
        ear.feed(pcm, t_end - len(pcm) / 2 / SAMPLE_RATE)
    asr.close()
    ends = []
    for i, marker in enumerate(markers):
        end = (marker.t_end_ns - t0_ns) / 1e9
        stop = (markers[i + 1].t_start_ns - t0_ns) / 1e9 if i + 1 < len(markers) else float("inf")
        last = [p for p in recorder.pauses if end - CLOSING_TOLERANCE_S <= p.t_voice_end < stop]
        ends.append(
            {"qid": marker.qid, "pause_start_after_end_s": last[0].t_voice_end - end, "smart_turn": last[0].audio}
            if last
            else {"qid": marker.qid}
        )
    return ends


def summary(ends: list[dict], threshold: float) -> dict:
    heard = [e for e in ends if "smart_turn" in e]
    return {
        "questions": len(ends),
        "pause_start_after_end_p50_s": statistics.median(e["pause_start_after_end_s"] for e in heard),
        **{
            f"at_{pause:g}_s": {
                "median": statistics.median(e["smart_turn"][pause] for e in heard if pause in e["smart_turn"]),
                f"at_least_{threshold:g}": sum(e["smart_turn"].get(pause, 0.0) >= threshold for e in heard),
            }
            for pause in PAUSES_S
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bag", required=True, type=Path)
    parser.add_argument("--limit", type=int, default=None, help="the first N questions")
    parser.add_argument("--threshold", type=float, default=0.98, help="count the questions Smart Turn gives at least this")
    parser.add_argument("--out", type=Path, required=True, help="JSON: per path, the summary and every question's values")
    args = parser.parse_args()
    audio, markers, t0_ns = load_audio(args.bag.expanduser(), args.limit)
    smart_turn = SmartTurn()
    report = {}
    for path, canceller in (("as the sweep hears it", False), ("through asr_node's echo canceller", True)):
        ends = question_ends(audio, markers, t0_ns, smart_turn, canceller)
        report[path] = {"summary": summary(ends, args.threshold), "questions": ends}
        print(path, json.dumps(report[path]["summary"]))
    args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
