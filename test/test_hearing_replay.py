"""Scoring a replayed hearing against a run's trials (predgen_ros/eval/hearing/hearing_replay.py)."""

import json

import numpy as np
import pytest

from predgen_ros.eval.hearing.hearing_replay import align, load_trials, score

WALL = 1_800_000_000.0  # the recording's first sample, on the wall clock


def test_the_offset_lines_the_replay_up_with_the_graphs_pauses_and_ignores_strays():
    replay = [2.0, 6.0, 9.0, 14.0]
    graph = np.array([WALL + 2.03, WALL + 6.02, WALL + 14.04, WALL + 20.0])  # one pause the replay did not make
    found = align(replay, graph)
    assert found.matched == 3 and found.graph == 4 and found.replayed == 4
    assert found.offset_s == pytest.approx(WALL + 0.03, abs=0.011)
    assert found.spread_max_s <= 0.011
    assert align([], graph) is None and align(replay, np.array([])) is None


def test_each_start_is_an_events_or_the_robots_own():
    trials = [
        {"number": 0, "kind": "barge_in", "onset_at": WALL + 10.0},
        {"number": 1, "kind": "backchannel", "onset_at": WALL + 30.0},
        {"number": 2, "kind": "barge_in", "onset_at": WALL + 50.0},  # no start: missed
        {"number": 3, "kind": "burst", "onset_at": WALL + 70.0},  # no start: did not pause the robot
        {"number": 1000, "kind": "silence", "onset_at": None},  # nothing said: no window of its own
        {"number": 4, "kind": "barge_in", "onset_at": WALL + 500.0},  # after the recording ended: not counted
    ]
    starts = [5.0, 10.25, 10.9, 30.4, 33.0, 90.0]
    s = score(starts, WALL, trials, recorded_s=100.0)
    assert s.latency_s == {0: pytest.approx(0.25)}  # the first start in its window
    assert s.missed == [2]
    assert s.paused_by == {"backchannel": 1}
    assert s.events == {"barge_in": 2, "backchannel": 1, "burst": 1}
    assert s.own == [5.0, 33.0, 90.0]  # before the event, after its window, in no trial's
    assert list(s.latencies()) == [pytest.approx(0.25)]


def test_a_run_without_onsets_is_named(tmp_path):
    with pytest.raises(SystemExit, match="no trials.json"):
        load_trials(tmp_path)
    (tmp_path / "trials.json").write_text(json.dumps([{"number": 0, "kind": "barge_in"}]))
    with pytest.raises(SystemExit, match="no trial has onset_at"):
        load_trials(tmp_path)
