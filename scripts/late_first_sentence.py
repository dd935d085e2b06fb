"""When the committed first sentence began, against the final, in an eval run's recorded messages.

Per turn of a recorded run (`eval` keeps recorded_<run>/): the time before the final at which
the first sentence later committed first appeared as a candidate (the unbroken run of
`predgen/candidate` beginnings that lead to it), and the TTS phase (first audio after the
commit).  A first sentence begun only just before the final has its opening synthesized
late, and the commit waits for it (docs/results/first-audio.md).

    .venv/bin/python scripts/late_first_sentence.py eval-far-s1/recorded_predgen@fixed_0.5 [--late 0.3]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from rclpy.serialization import deserialize_message
from std_msgs.msg import Header, String

from predgen_ros.eval.bag_replay.bags import read_bag

TOPICS = ["/predgen/candidate", "/asr/final", "/tts/say", "/tts/first_audio"]
LOOK_BACK_S = 3.0  # candidates of a turn come within this of its final


def events(recording: Path) -> list[tuple[float, str, str]]:
    """(time, topic's last part, text) in time order; first audio's text is its frame id."""
    out = []
    for m in read_bag(recording, TOPICS):
        kind = m.topic.rsplit("/", 1)[-1]
        message = deserialize_message(m.raw, Header if kind == "first_audio" else String)
        out.append((m.t_ns / 1e9, kind, message.frame_id if kind == "first_audio" else message.data))
    return sorted(out)


def turns(evs: list[tuple[float, str, str]]) -> list[tuple[float | None, float]]:
    """Per final with a commit and a first audio: (when its first sentence began, s after the
    final, None if never a candidate; first audio after the commit, s)."""
    rows = []
    for i, (t_final, kind, _) in enumerate(evs):
        if kind != "final":
            continue
        say = next((j for j in range(i, len(evs)) if evs[j][1] == "say"), None)
        audio = next((k for k in range(say or len(evs), len(evs)) if evs[k][1] == "first_audio"), None)
        if say is None or audio is None:
            continue
        sentence, began = evs[say][2], None
        for t, kind, text in reversed(evs[:say]):
            if t < t_final - LOOK_BACK_S or kind != "candidate":
                continue
            if not sentence.startswith(text.rstrip("…").strip()):
                break
            began = t - t_final
        rows.append((began, evs[audio][0] - evs[say][0]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recording", type=Path, help="an eval run's recorded_<run> folder")
    parser.add_argument("--late", type=float, default=0.3, help="begun this close before the final counts as late (s)")
    args = parser.parse_args()
    rows = turns(events(args.recording))
    began = [(b, tts) for b, tts in rows if b is not None]
    late = [tts for b, tts in began if b > -args.late]
    early = [tts for b, tts in began if b <= -args.late]
    print(f"{len(rows)} turns, {len(rows) - len(began)} whose first sentence was never a candidate before the commit")
    print(f"first sentence began before the final: p50 {-statistics.median(b for b, _ in began):.3f} s")
    for name, values in ((f"begun within {args.late:g} s", late), ("begun earlier", early)):
        p50 = f"{statistics.median(values):.3f} s" if values else "-"
        print(f"{name}: {len(values)} turns, TTS after commit p50 {p50}")


if __name__ == "__main__":
    main()
