"""The per-turn measures: one definition for the benchmark, predgen_node's latency
report (predgen/latency) and the bag evaluation that reads those reports back.

Every time is measured from the end of the user's speech, `t_end` (docs/design.md#metrics-one-definition-for-every-policy-all-measured-from-the-end-of-speech).
"""

from __future__ import annotations

import math
from typing import Any

from .turn import TurnStats

# predgen/latency's key of a measure where the report names it differently (docs/guide.md#topics-services-qos)
REPORT_KEYS = {"final_accepted": "accepted_tokens", "final_candidate": "candidate_tokens"}
COUNTS = ("nfe_tfs", "input_nfe", "guess_nfe", "rounds", "decode_tokens", "jacobi_passes", "jacobi_tokens")
OPTIONAL_COUNTS = ("final_accepted", "final_candidate")  # None: no candidate was verified at the final
SECONDS = ("input_llm_s", "decode_s")


def latencies(
    t_end: float, t_final: float, t_commit: float, t_first_audio: float, t_detector_end: float | None = None
) -> dict[str, float]:
    """Audio latency (to the first audio of the reply), time to first sentence (to its
    commit), and the audio latency's phases: the endpoint (the final transcript after the
    end of speech), the LLM after the final (to the commit), the TTS (to the first audio).
    Where the true end of speech `t_end` and the voice detector's `t_detector_end` are both
    known (the evaluations), the detector's lag behind the true end is a phase of its own
    and the endpoint counts from the detector's end."""
    lag = {} if t_detector_end is None else {"detector_lag_s": t_detector_end - t_end}
    return {
        "audio_latency_s": t_first_audio - t_end,
        "ttfs_s": t_commit - t_end,
        **lag,
        "endpoint_s": t_final - (t_end if t_detector_end is None else t_detector_end),
        "llm_after_final_s": t_commit - t_final,
        "tts_s": t_first_audio - t_commit,
    }


def turn_measures(turn: TurnStats, t_end: float, t_first_audio: float) -> dict[str, Any]:
    """Every measure of one turn: latencies, forward passes (input_nfe: those started while
    the user spoke; input_llm_s: their seconds before t_end), decoding counts."""
    while_speaking = turn.input_passes(t_end)
    return {
        **latencies(t_end, turn.t_final, turn.t_commit, t_first_audio),
        "nfe_tfs": turn.nfe_tfs,
        "input_nfe": len(while_speaking),
        "input_llm_s": sum(min(stop, t_end) - start for start, stop in while_speaking),
        "guess_nfe": turn.guess_passes,
        "rounds": turn.rounds,
        "final_accepted": turn.final_accepted,
        "final_candidate": turn.final_candidate,
        "decode_tokens": turn.decode_tokens,
        "decode_s": turn.decode_seconds,
        "jacobi_passes": turn.jacobi_passes,
        "jacobi_tokens": turn.jacobi_tokens,
    }


def report_entries(measures: dict[str, Any]) -> dict[str, Any]:
    """The measures under their predgen/latency keys (an absent count is an empty value)."""
    return {REPORT_KEYS.get(name, name): "" if value is None else value for name, value in measures.items()}


def measures_from_report(values: dict[str, str], t_end: float) -> dict[str, Any]:
    """A latency report's measures read back, the latencies taken from `t_end` (in the bag
    evaluation, the true end of speech; the end the ASR stamped is the detector's, and the
    gap between the two is the detector's lag)."""

    def optional(key: str) -> int | None:
        return int(values[key]) if values[key] else None

    return {
        **latencies(
            t_end,
            float(values["t_final_transcript"]),
            float(values["t_commit"]),
            float(values["t_first_audio"]),
            float(values["t_end_of_speech"]),
        ),
        "first_audio_cached": {"True": True, "False": False}.get(values.get("first_audio_cached", "")),
        **{name: int(values[name]) for name in COUNTS},
        **{name: optional(REPORT_KEYS[name]) for name in OPTIONAL_COUNTS},
        **{name: float(values[name]) for name in SECONDS},
    }


def first_audio_missing(values: dict[str, str]) -> bool:
    """A report of a reply with words whose first audio never came."""
    return bool(values["first_sentence"]) and math.isnan(float(values["t_first_audio"]))
