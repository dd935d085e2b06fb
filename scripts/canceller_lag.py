"""Where the robot's echo lay against its reference, as the echo canceller was given them.

Reads `canceller-inputs.wav` (asr_node's `asr.record_dir` with the canceller on, or
`echo_turns.py --keep-heard`): the microphone on the left, the reference paired with it
on the right, 10 ms frame by frame.  In every window where the robot spoke, the lag
at which the microphone best matches the reference is where the canceller had to find
the echo: positive, the echo after its reference (as it must be: Speex's filter models
only the TAIL_S after it); negative, the echo before it (nothing can cancel that).  A
steady lag is a steady echo path; one that moves is a path the filters must learn again.

With `--graph-log`, the inputs are also replayed through asr_node's hearing (the
canceller, the guarded voice detector, the endpoint; no recognizer) and each voice start
it finds over the echo is matched with the graph's pauses at a voice start in that log
(asr_node's "turn: pause (voice start)" lines): the same decisions at one constant offset
mean that the graph decided on its audio alone, not late for want of CPU.

    .venv/bin/python scripts/canceller_lag.py graph-out/heard-pause-echo/canceller-inputs.wav \\
        --compare offline-heard/canceller-inputs.wav --graph-log graph-out/pause-echo.log
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from predgen_ros.audio.pcm import SAMPLE_RATE
from predgen_ros.eval.hearing.hearing_replay import align, graph_pauses, read_inputs, replayed_voice_starts

WINDOW_S = 1.0
HOP_S = 0.5
LAGS_S = (-0.1, 0.25)  # the lags searched: the echo up to 0.1 s ahead of its reference, 0.25 s behind it
MIN_REFERENCE_SHARE = 0.8  # a window counts when the reference sounds in this share of its 10 ms frames
MIN_MATCH = 0.3  # and the microphone matches the reference this well at the best lag (normalized)
MOVED_S = 0.002  # consecutive windows whose lags differ more than this: the path moved


def best_lag(mic: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    """(lag in s, normalized match) of the reference in `mic`, which holds LAGS_S[0] of
    audio before the reference's start and LAGS_S[1] after its end."""
    lo = int(round(LAGS_S[0] * SAMPLE_RATE))
    size = 1 << (len(mic) - 1).bit_length()
    # corr[d] = sum over t of mic[t + d] * reference[t]: the echo d + lo samples after its reference
    corr = np.fft.irfft(np.fft.rfft(mic, size) * np.conj(np.fft.rfft(reference, size)), size)[: len(mic) - len(reference) + 1]
    d = int(np.argmax(corr))
    scale = np.linalg.norm(reference) * np.linalg.norm(mic[d : d + len(reference)]) + 1e-9
    return (d + lo) / SAMPLE_RATE, float(corr[d] / scale)


def lags(mic: np.ndarray, reference: np.ndarray) -> list[tuple[float, float]]:
    """(window start s, lag s) for each window where the robot spoke and its echo was found."""
    window, hop = int(WINDOW_S * SAMPLE_RATE), int(HOP_S * SAMPLE_RATE)
    margin_lo, margin_hi = (int(round(abs(s) * SAMPLE_RATE)) for s in LAGS_S)
    frame = SAMPLE_RATE // 100
    out = []
    for start in range(margin_lo, len(reference) - window - margin_hi, hop):
        ref = reference[start : start + window]
        frames = np.abs(ref.reshape(-1, frame)).max(axis=1)
        if np.mean(frames > 64) < MIN_REFERENCE_SHARE:
            continue
        lag, match = best_lag(mic[start - margin_lo : start + window + margin_hi], ref)
        if match >= MIN_MATCH:
            out.append((start / SAMPLE_RATE, lag))
    return out


def describe(name: str, found: list[tuple[float, float]]) -> str:
    if not found:
        return f"{name}: no window where the robot spoke and its echo was found"
    ms = np.array([lag for _, lag in found]) * 1000
    moved = int(np.sum(np.abs(np.diff(ms)) > MOVED_S * 1000))
    p10, p50, p90 = np.percentile(ms, [10, 50, 90])
    return (
        f"{name}: {len(ms)} windows; echo after its reference by p10 {p10:.1f} / p50 {p50:.1f} / p90 {p90:.1f} ms "
        f"(min {ms.min():.1f}, max {ms.max():.1f}); ahead of it in {int(np.sum(ms < 0))}; "
        f"moved by more than {MOVED_S * 1000:.0f} ms between windows {moved} times"
    )


def match_graph(starts: list[float], log: Path) -> str:
    """The graph's pauses at a voice start against the replay's, at the offset that matches most."""
    found = align(starts, graph_pauses(log))
    if found is None:
        return f"{log.name}: {len(graph_pauses(log))} pauses at a voice start, {len(starts)} replayed: nothing to match"
    return (
        f"{log.name}: {found.matched} of the graph's {found.graph} pauses at a voice start are replayed decisions "
        f"({found.replayed} replayed), at one offset within p90 {found.spread_p90_s * 1000:.0f} / "
        f"max {found.spread_max_s * 1000:.0f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", type=Path, help="a canceller-inputs.wav")
    ap.add_argument("--compare", type=Path, default=None, help="another, e.g. the offline hearing's")
    ap.add_argument("--timeline", action="store_true", help="also print every window's lag")
    ap.add_argument("--graph-log", type=Path, default=None, help="the graph run's log: match its pauses with a replay")
    args = ap.parse_args()
    for name, path in [("inputs", args.inputs), ("compare", args.compare)]:
        if path is None:
            continue
        found = lags(*read_inputs(path))
        print(describe(f"{name} ({path.name})", found))
        if args.timeline:
            for t, lag in found:
                print(f"  {t:8.1f} s  {lag * 1000:6.1f} ms")
    if args.graph_log:
        print(match_graph(replayed_voice_starts(*read_inputs(args.inputs)), args.graph_log))


if __name__ == "__main__":
    main()
