"""Can the user's first syllables over the robot's voice be told from its echo? Evidence
from a graph run's own audio.

A barge-in is heard late when the user begins under a loud stretch of the robot's voice:
AEC3's suppressor (what the voice detector hears) takes the user out with the echo until
the robot's syllable ends.  This reads the canceller inputs of an `eval-interruptions
--robot-in-mic N --keep-heard` run and asks the two other signals a double-talk rule could
use whether they do better, frame by frame (10 ms), in the first USER_S of each barge-in
(the user over a loud reference) against the robot alone before it (ROBOT_S before the
onset up to GUARD_S before it):

- Speex's linear filter (what the recognizer hears): its output over the microphone.  The
  echo alone comes out some 15-20 dB lower; with the user over it, higher.
- the microphone's coherence with the reference (the classic double-talk detector): the
  echo alone is a filtered copy of the reference, near 1; a second talker lowers it.

For each barge-in it also prints when the shipped hearing opened an utterance (the replay,
as eval/hearing/hearing_replay.py) and when a coherence rule (COHERENCE_BELOW on RUN_OF of the last
RUN_IN frames) first fired.

    .venv/bin/python scripts/double_talk_evidence.py graph-out
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from predgen_ros.audio.echo.canceller import FRAME, EchoCanceller
from predgen_ros.audio.pcm import SAMPLE_RATE
from predgen_ros.eval.hearing.hearing_replay import (
    EVENT_AFTER_S,
    EVENT_BEFORE_S,
    align,
    graph_pauses,
    load_trials,
    read_inputs,
    replayed_voice_starts,
)

USER_S = 0.3
ROBOT_S, GUARD_S = 4.0, 0.3
LOUD_DB = 55.0  # a reference frame this loud (dB re 1 LSB rms, about -35 dBFS) is the robot speaking
ECHO_LAG_S = 0.0337  # where the echo lies after its reference in these runs (scripts/canceller_lag.py)
WINDOW = 512  # coherence: 32 ms windows every 10 ms, cross-spectra smoothed by SMOOTHING
SMOOTHING = 0.8
BAND = (250, 3500)  # Hz: where speech has its energy
COHERENCE_BELOW, RUN_OF, RUN_IN = 0.3, 8, 10


def frame_db(x: np.ndarray) -> np.ndarray:
    frames = x[: len(x) // FRAME * FRAME].astype(np.float64).reshape(-1, FRAME)
    return 10 * np.log10(np.mean(frames**2, axis=1) + 1e-3)


def linear_output(mic: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """The recognizer's audio: the canceller fed as the recording paired it."""
    canceller, out = EchoCanceller(), bytearray()
    mic16, ref16 = mic.astype(np.int16), reference.astype(np.int16)
    for at in range(0, len(mic16) // FRAME * FRAME, FRAME):
        canceller.played(at / SAMPLE_RATE, ref16[at : at + FRAME].tobytes())
        out += canceller.process(mic16[at : at + FRAME].tobytes(), at / SAMPLE_RATE).audio
    return np.frombuffer(bytes(out), dtype=np.int16)


def coherence(mic: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Per 10 ms frame, the power-weighted magnitude-squared coherence of the microphone
    with the reference (shifted by the echo's lag) over BAND."""
    lag = int(round(ECHO_LAG_S * SAMPLE_RATE))
    shifted = np.concatenate([np.zeros(lag), reference[:-lag]])
    window = np.hanning(WINDOW)
    lo, hi = (int(f * WINDOW / SAMPLE_RATE) for f in BAND)
    cross = np.zeros(hi - lo, dtype=complex)
    mic_power, ref_power = np.zeros(hi - lo), np.zeros(hi - lo)
    out = np.ones(len(mic) // FRAME)
    for i in range((len(mic) - WINDOW) // FRAME):
        a = i * FRAME
        x = np.fft.rfft(mic[a : a + WINDOW] * window)[lo:hi]
        y = np.fft.rfft(shifted[a : a + WINDOW] * window)[lo:hi]
        cross = SMOOTHING * cross + (1 - SMOOTHING) * x * np.conj(y)
        mic_power = SMOOTHING * mic_power + (1 - SMOOTHING) * np.abs(x) ** 2
        ref_power = SMOOTHING * ref_power + (1 - SMOOTHING) * np.abs(y) ** 2
        each = np.abs(cross) ** 2 / (mic_power * ref_power + 1e-9)
        out[i] = float(np.sum(each * mic_power) / (np.sum(mic_power) + 1e-9))
    return out


def percentiles(values: np.ndarray) -> str:
    return " / ".join(f"{v:.2f}" for v in np.percentile(values, [10, 25, 50, 75, 90]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="eval-interruptions --out folder (with --keep-heard)")
    ap.add_argument("--hearing", default="pause-echo")
    args = ap.parse_args()
    mic, reference = read_inputs(args.run / f"heard-{args.hearing}" / "canceller-inputs.wav")
    trials = [t for t in load_trials(args.run) if t["policy"] in (args.hearing, args.hearing.split("-")[0])]
    starts = replayed_voice_starts(mic, reference)
    found = align(starts, graph_pauses(args.run / f"{args.hearing}.log"))
    if found is None:
        raise SystemExit(f"{args.run}: no pause at a voice start to line the recording up with")
    lag = int(round(ECHO_LAG_S * SAMPLE_RATE / FRAME))
    mic_db, ref_db = frame_db(mic), frame_db(reference)
    ref_db = np.concatenate([np.full(lag, -30.0), ref_db[:-lag]])  # the echo's time
    lin_db = frame_db(linear_output(mic, reference))
    n = min(len(mic_db), len(lin_db))
    coh = coherence(mic, reference)[:n]
    per_s = SAMPLE_RATE // FRAME
    user, robot = np.zeros(n, bool), np.zeros(n, bool)
    onsets = []
    for t in trials:
        if t.get("onset_at") and t["kind"] == "barge_in":
            o = int(round((t["onset_at"] - found.offset_s) * per_s))
            onsets.append((t["number"], o))
            user[o : o + int(USER_S * per_s)] = True
            robot[max(0, o - int(ROBOT_S * per_s)) : max(0, o - int(GUARD_S * per_s))] = True
    loud = ref_db[:n] > LOUD_DB
    user, robot = user & loud, robot & loud & ~user
    ratio = lin_db[:n] - mic_db[:n]
    print(f"frames with the robot loud: {user.sum()} in barge-ins' first {USER_S} s, {robot.sum()} of the robot alone")
    print(f"echo at the microphone against its reference: {np.median((mic_db[:n] - ref_db[:n])[robot]):.1f} dB (median)")
    print("percentiles 10 / 25 / 50 / 75 / 90:")
    print(
        f"  linear output less microphone, dB: user over robot {percentiles(ratio[user])}; robot alone {percentiles(ratio[robot])}"
    )
    print(f"  coherence with the reference:      user over robot {percentiles(coh[user])}; robot alone {percentiles(coh[robot])}")
    flagged = (coh < COHERENCE_BELOW) & loud
    fired = np.convolve(flagged, np.ones(RUN_IN), "full")[:n] >= RUN_OF
    replay = np.array(starts)  # stream seconds
    print(f"per barge-in: shipped hearing's start / coherence rule ({COHERENCE_BELOW} on {RUN_OF} of {RUN_IN}), s after onset")
    for number, o in onsets:
        onset_s = o / per_s
        mine = replay[(replay >= onset_s - EVENT_BEFORE_S) & (replay <= onset_s + EVENT_AFTER_S)]
        hit = np.flatnonzero(fired[max(0, o - 5) : o + 2 * per_s])
        shipped = f"{mine[0] - onset_s:.2f}" if len(mine) else "-"
        rule = f"{(hit[0] + max(0, o - 5) - o) / per_s:.2f}" if len(hit) else "-"
        print(f"  {number:4d}: {shipped:>5} / {rule:>5}")


if __name__ == "__main__":
    main()
