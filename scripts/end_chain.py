"""What happens between the voice detector's end of speech and the first audio, step by step.

Per final of an eval run's recorded messages (`eval` keeps recorded_<run>/), from the
detector's end of speech (the final's `asr/speech_end` stamp):

- notice: asr_node's `asr/voice` "end" (it says the voice ended after a short pause);
- words: the utterance's last partial, Whisper's transcription of the whole utterance
  at the voice's end (what the LLM verifies against and the endpoint judges);
- estimate: predgen_node's `turn/end_probability` for those words (the `llm` and
  `fused` endpoints wait for it);
- final: `asr/final` (the endpoint);
- commit: the first `tts/say` after the final;
- first audio: `tts/first_audio`'s stamp.

Each step's time is from the detector's end; a step that did not happen for a turn (no
estimate for its words, a voice end not seen) is left out of its column's median.

    .venv/bin/python scripts/end_chain.py EVAL_OUT/recorded_predgen@fixed_0.5 [...]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from diagnostic_msgs.msg import KeyValue
from rclpy.serialization import deserialize_message
from std_msgs.msg import Header, String

from predgen_ros.eval.bag_replay.bags import read_bag
from predgen_ros.transcripts import same_words

TYPES = {
    "asr/voice": Header,
    "asr/speech_end": Header,
    "asr/partial": String,
    "asr/final": String,
    "turn/end_probability": KeyValue,
    "tts/say": String,
    "tts/first_audio": Header,
}
STEPS = ("notice", "words", "estimate", "final", "commit", "first audio")
LOOK_BACK_S = 3.0  # a final's partials and voice events come within this of it


def _stamp(header: Header) -> float:
    return header.stamp.sec + header.stamp.nanosec * 1e-9


def events(recording: Path) -> list[tuple[float, str, object]]:
    """(receive time, topic, message) in time order."""
    out = [(m.t_ns / 1e9, m.topic, deserialize_message(m.raw, TYPES[m.topic])) for m in read_bag(recording, list(TYPES))]
    return sorted(out, key=lambda e: e[0])


def chains(evs: list[tuple[float, str, object]]) -> list[dict[str, float]]:
    """Per final with a speech end: each step's seconds after the detector's end."""
    rows = []
    for i, (t_final, topic, final) in enumerate(evs):
        if topic != "asr/final":
            continue
        ends = [_stamp(m) for t, tp, m in evs if tp == "asr/speech_end" and abs(t - t_final) < 0.05]
        if not ends:
            continue
        end = ends[0]
        before = [(t, tp, m) for t, tp, m in evs[:i] if t > t_final - LOOK_BACK_S]
        row = {"final": t_final - end}
        notices = [t for t, tp, m in before if tp == "asr/voice" and m.frame_id == "end" and abs(_stamp(m) - end) < 0.03]
        if notices:
            row["notice"] = notices[-1] - end
        partials = [(t, m.data) for t, tp, m in before if tp == "asr/partial"]
        if partials and same_words(partials[-1][1], final.data):
            row["words"] = partials[-1][0] - end
            estimates = [
                t for t, tp, m in evs if tp == "turn/end_probability" and t >= partials[-1][0] and same_words(m.key, final.data)
            ]
            if estimates:
                row["estimate"] = estimates[0] - end
        after = evs[i + 1 :]
        says = [t for t, tp, m in after if tp == "tts/say" and m.data]
        audio = [_stamp(m) for t, tp, m in after if tp == "tts/first_audio"]
        if says and audio:
            row["commit"], row["first audio"] = says[0] - end, audio[0] - end
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recordings", nargs="+", type=Path)
    args = parser.parse_args()
    print(f"| run | finals | {' | '.join(STEPS)} |")
    print("|---|---:|" + "---:|" * len(STEPS))
    for recording in args.recordings:
        rows = chains(events(recording))
        cells = []
        for step in STEPS:
            values = [r[step] for r in rows if step in r]
            cells.append(f"{statistics.median(values):.3f} s ({len(values)})" if values else "–")
        print(f"| {recording.name.removeprefix('recorded_')} | {len(rows)} | {' | '.join(cells)} |")
    print("\nmedians after the detector's end of speech (turns with that step)")


if __name__ == "__main__":
    main()
