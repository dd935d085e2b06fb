"""The audio latency's phases (engine/metrics.py, eval/bag_replay/phases.py): the voice detector's lag
behind the true end of speech is a phase of its own, apart from the endpoint."""

from __future__ import annotations

import math

import pytest

from predgen_ros.engine.metrics import latencies
from predgen_ros.eval.bag_replay.phases import TurnPhases, format_phase_table, phase_summary

REPORT = {"t_end_of_speech": "10.30", "t_final_transcript": "10.80", "t_commit": "10.85", "t_first_audio": "10.90"}


def test_the_detectors_lag_is_apart_from_the_endpoint_where_the_true_end_is_known():
    measured = latencies(10.0, 10.8, 10.85, 10.9, t_detector_end=10.3)
    assert measured["detector_lag_s"] == pytest.approx(0.3)
    assert measured["endpoint_s"] == pytest.approx(0.5)
    assert measured["audio_latency_s"] == pytest.approx(0.9)
    phases = ("detector_lag_s", "endpoint_s", "llm_after_final_s", "tts_s")
    assert sum(measured[p] for p in phases) == pytest.approx(measured["audio_latency_s"])


def test_without_the_detectors_end_the_endpoint_counts_from_the_end_given():
    measured = latencies(10.3, 10.8, 10.85, 10.9)
    assert "detector_lag_s" not in measured and measured["endpoint_s"] == pytest.approx(0.5)


def test_the_phase_table_shows_the_lag_where_known_and_a_dash_where_not():
    known = TurnPhases.of_report("1", REPORT, t_true_end=10.0)
    unknown = TurnPhases.of_report("2", REPORT)
    assert known.detector_lag_s == pytest.approx(0.3) and math.isnan(unknown.detector_lag_s)
    assert known.complete and unknown.complete  # the lag is not needed for a turn to count
    summary = phase_summary({"with": [known], "without": [unknown]})
    assert summary["with"]["detector_lag_s"]["p50"] == pytest.approx(0.3)
    assert summary["without"]["detector_lag_s"]["p50"] is None
    table = format_phase_table(summary)
    assert "detector lag" in table and "0.300 / 0.300" in table and "- / -" in table
