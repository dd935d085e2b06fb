"""Try a change to asr_node's onset rule on a graph run's own audio, offline.

Replays the canceller inputs an `eval-interruptions --robot-in-mic N --keep-heard` run
recorded through asr_node's hearing, once as shipped and once per `--variant` (the
guarded detector's settings, audio/echo/double_talk.py), and scores every voice start it
opens over the robot's echo against the run's trials (predgen_ros/eval/hearing/hearing_replay.py):
a barge-in's latency from its onset to the start (the graph adds the pause's way to the
loudspeaker), the acknowledgements and bursts that paused the robot (a pause, not a stop:
stopping needs words), the barge-ins no start was found for, and the starts no event
made (the robot pausing for its own voice).  The shipped replay is checked against the
graph's own pauses first: the offset that lines them up places the trials.

    .venv/bin/python scripts/onset_replay.py graph-out --variant share=0.5 --variant share=0.5,window=0.15
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np

from predgen_ros.audio.ear import EarSettings
from predgen_ros.audio.echo.double_talk import ONSET_SHARE, ONSET_WINDOW_S, VOICE_OVER_NOISE_DB
from predgen_ros.audio.pcm import SAMPLE_RATE
from predgen_ros.eval.hearing.hearing_replay import align, graph_pauses, load_trials, read_inputs, replayed_voice_starts, score

SETTINGS = {"share": ONSET_SHARE, "window": ONSET_WINDOW_S, "over_noise": VOICE_OVER_NOISE_DB}


def parse_variant(text: str) -> dict[str, float]:
    settings = dict(SETTINGS)
    for item in filter(None, text.split(",")):
        name, _, value = item.partition("=")
        if name not in SETTINGS:
            raise SystemExit(f"--variant {text}: unknown setting {name!r} (known: {', '.join(SETTINGS)})")
        try:
            settings[name] = float(value)
        except ValueError:
            raise SystemExit(f"--variant {text}: {name} needs a number, got {value!r}") from None
    return settings


def replay(inputs: Path, settings: dict[str, float]) -> list[float]:
    ear = EarSettings(
        onset_window_s=settings["window"], onset_share=settings["share"], voice_over_noise_db=settings["over_noise"]
    )
    return replayed_voice_starts(*read_inputs(inputs), ear)


def label(settings: dict[str, float]) -> str:
    changed = [f"{k}={v:g}" for k, v in settings.items() if v != SETTINGS[k]]
    return ",".join(changed) or "shipped"


def ms(values: np.ndarray, q: float) -> str:
    return f"{np.percentile(values, q) * 1000:.0f}" if len(values) else "-"


def after_event(t: float, onsets: list[tuple[float, dict]]) -> str:
    """A start no event made, with the latest event before it (a long barge-in's second
    utterance is one of the user's, not the robot's)."""
    before = [(t - onset, trial) for onset, trial in onsets if onset <= t]
    if not before:
        return f"{t:.2f} s"
    gap, trial = min(before, key=lambda pair: pair[0])
    return f"{t:.2f} s ({gap:.1f} s after {trial['kind']} {trial['number']})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="eval-interruptions --out folder (with --keep-heard)")
    ap.add_argument("--hearing", default="pause-echo", help="the policy-hearing whose recording to replay (default pause-echo)")
    ap.add_argument("--variant", action="append", default=[], help="settings to try: share=0.5,window=0.15,over_noise=8")
    ap.add_argument("--jobs", type=int, default=2, help="replays at once (each takes one core)")
    args = ap.parse_args()
    inputs, log = args.run / f"heard-{args.hearing}" / "canceller-inputs.wav", args.run / f"{args.hearing}.log"
    for path in (inputs, log):
        if not path.is_file():
            raise SystemExit(f"{path}: missing (run eval-interruptions with --keep-heard and --hearing echo)")
    trials = [t for t in load_trials(args.run) if t["policy"] in (args.hearing, args.hearing.split("-")[0])]
    variants = [dict(SETTINGS)] + [parse_variant(v) for v in args.variant]
    recorded_s = len(read_inputs(inputs)[0]) / SAMPLE_RATE
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        starts = list(pool.map(partial(replay, inputs), variants))
    found = align(starts[0], graph_pauses(log))
    if found is None:
        raise SystemExit(f"{log}: no pause at a voice start to line the recording up with")
    print(
        f"shipped replay: {found.matched} of the graph's {found.graph} pauses at a voice start matched "
        f"(offset spread p90 {found.spread_p90_s * 1000:.0f} ms); {recorded_s / 60:.1f} min recorded"
    )
    print(
        "| variant | starts | barge-ins started | onset to start p50 / p90 / max ms | acks paused | bursts paused | own starts |"
    )
    print("|---|---|---|---|---|---|---|")
    onsets = [(t["onset_at"] - found.offset_s, t) for t in trials if t.get("onset_at")]
    for settings, these in zip(variants, starts, strict=True):
        s = score(these, found.offset_s, trials, recorded_s)
        lat = s.latencies()
        events = s.events
        print(
            f"| {label(settings)} | {len(these)} | {len(lat)}/{events.get('barge_in', 0)} "
            f"| {ms(lat, 50)} / {ms(lat, 90)} / {ms(lat, 100)} "
            f"| {s.paused_by.get('backchannel', 0)}/{events.get('backchannel', 0)} "
            f"| {s.paused_by.get('burst', 0)}/{events.get('burst', 0)} | {len(s.own)} |"
        )
        if s.missed:
            print(f"    no start for barge-in {', '.join(map(str, s.missed))}")
        if s.own:
            print(f"    own starts: {'; '.join(after_event(t, onsets) for t in s.own)}")


if __name__ == "__main__":
    main()
