"""How long asr_node's hearing times each event's voice over the robot: the span
`turn.min_speech_s` is compared with, from a graph run's own audio.

Replays the canceller inputs an `eval-interruptions --robot-in-mic N --keep-heard` run
recorded through asr_node's hearing (predgen_ros/eval/hearing/hearing_replay.py), places the
run's trials on the recording by the graph's own pauses, and prints, per kind of event,
the voiced span of the utterance each event opened (where the voice began, read back over
the echo, to its last end): acknowledgements and bursts must stay under
`turn.min_speech_s`, or their words, the robot's residue among them, can make a turn;
every real barge-in must reach it, or it is never answered.

    .venv/bin/python scripts/voice_spans.py graph-out --min-speech-s 0.8
"""

from __future__ import annotations

import argparse
from pathlib import Path

from predgen_ros.eval.hearing.hearing_replay import (
    EVENT_AFTER_S,
    EVENT_BEFORE_S,
    align,
    graph_pauses,
    load_trials,
    read_inputs,
    replayed_voice,
)
from predgen_ros.turn_taking import TurnRules


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="the --out folder of eval-interruptions --keep-heard")
    parser.add_argument("--hearing", default="echo", help="which hearing's recording (default echo)")
    parser.add_argument("--min-speech-s", type=float, default=TurnRules().min_speech_s, help="the threshold to count against")
    args = parser.parse_args()
    recording = args.run / f"heard-pause-{args.hearing}" / "canceller-inputs.wav"
    if not recording.is_file():
        raise SystemExit(f"{recording}: missing (run eval-interruptions with --robot-in-mic and --keep-heard)")
    trials = [t for t in load_trials(args.run) if t["policy"] == f"pause-{args.hearing}" and t.get("onset_at")]
    spans = replayed_voice(*read_inputs(recording))
    alignment = align([s.opened for s in spans if s.over_echo], graph_pauses(args.run / f"pause-{args.hearing}.log"))
    if alignment is None:
        raise SystemExit(f"{args.run}: no pause of the graph's to place the trials by")
    print(
        f"{alignment.matched} of the graph's {alignment.graph} pauses at a voice start replayed; threshold {args.min_speech_s:g} s"
    )
    by_kind: dict[str, list[tuple[float, int, str]]] = {}
    unopened: dict[str, int] = {}
    for trial in trials:
        onset = trial["onset_at"] - alignment.offset_s
        mine = [s for s in spans if onset - EVENT_BEFORE_S <= s.opened <= onset + EVENT_AFTER_S and s.voiced_s is not None]
        if not mine:
            unopened[trial["kind"]] = unopened.get(trial["kind"], 0) + 1
            continue
        by_kind.setdefault(trial["kind"], []).append((mine[0].voiced_s, trial["number"], trial["event"]))
    for kind, rows in sorted(by_kind.items()):
        rows.sort()
        # a barge-in under the threshold is never a turn; anything else over it may be one
        wrong = [r for r in rows if (r[0] < args.min_speech_s) == (kind == "barge_in")]
        side = "under" if kind == "barge_in" else "at or over"
        print(
            f"\n{kind}: {len(rows)} opened an utterance ({unopened.get(kind, 0)} did not); voiced s min {rows[0][0]:.2f}, max {rows[-1][0]:.2f}"
        )
        print("  " + " ".join(f"{r[0]:.2f}" for r in rows))
        print(
            f"  {side} {args.min_speech_s:g} s: {len(wrong)}" + "".join(f"\n    {r[0]:.2f} s trial {r[1]}: {r[2]}" for r in wrong)
        )


if __name__ == "__main__":
    main()
