"""The spoken soak (`predgen-ros stress --ear spoken`): its plan, its records, and a short
run of the real graph through every audio-path fault."""

from __future__ import annotations

import csv
import math
import os

import pytest

from predgen_ros.audio.recognition.text_asr import load_questions, robot_conversation_file
from predgen_ros.eval.graph.soak_faults import FAULTS
from predgen_ros.eval.graph.soak_plan import ACKNOWLEDGEMENT, BARGE_IN, PAUSE_S, SPEAKING_RATES, plan_soak
from predgen_ros.eval.graph.soak_records import CsvLog, RequestRow, ResourceSampler, drift, memory_growth, verdicts
from predgen_ros.eval.hearing.asr_quality import reference_words
from predgen_ros.nodes.bringup import default_params_file

REQUESTS = [q.text for q in load_questions(robot_conversation_file())]


def test_the_plan_cycles_the_conversation_with_events_and_each_fault_once_spread_out():
    plan = plan_soak(REQUESTS, 1000, list(FAULTS), seed=0)
    assert [t.request for t in plan[:80]] == REQUESTS + REQUESTS and [t.number for t in plan] == list(range(1, 1001))
    assert {t.rate for t in plan} == set(SPEAKING_RATES) and all(PAUSE_S[0] <= t.pause_s <= PAUSE_S[1] for t in plan)
    barge_ins = [t for t in plan if t.kind == BARGE_IN]
    acknowledgements = [t for t in plan if t.kind == ACKNOWLEDGEMENT]
    assert 60 < len(barge_ins) < 140 and 60 < len(acknowledgements) < 140
    assert all(t.event in REQUESTS and t.event != t.request and t.after_s > 0 for t in barge_ins)
    assert all(t.event not in REQUESTS for t in acknowledgements)
    assert [(t.number, t.fault) for t in plan if t.fault] == [(167, "microphone_gap"), (333, "odd_chunks"),
                                                               (500, "clipped_burst"), (667, "tts_restart"),
                                                               (833, "asr_restart")]  # fmt: skip
    assert plan_soak(REQUESTS, 1000, list(FAULTS), seed=0) == plan != plan_soak(REQUESTS, 1000, list(FAULTS), seed=1)


def report(t_true_end: float, transcript: str, reply: str = "Sure.") -> dict[str, str]:
    return {
        "transcript": transcript,
        "first_sentence": reply,
        "t_end_of_speech": str(t_true_end + 0.2),
        "t_final_transcript": str(t_true_end + 0.7),
        "t_commit": str(t_true_end + 0.75),
        "t_first_audio": str(t_true_end + 0.9),
    }


def test_a_request_row_holds_the_word_errors_and_the_phases_from_the_true_end():
    row = RequestRow.of(
        3, "request", "Is it going to rain this afternoon?", report(100.0, "is it going to ring this afternoon"), 100.0
    )
    assert (row.words, row.word_errors, row.answered) == (7, 1, True)
    phases = (row.detector_lag_s, row.recognizer_lag_s, row.llm_after_final_s, row.tts_s, row.first_audio_s)
    assert [round(p, 3) for p in phases] == [0.2, 0.7, 0.05, 0.15, 0.9]
    unanswered = RequestRow.of(4, "barge_in", "Stop, please.", None, 100.0)
    assert not unanswered.answered and unanswered.word_errors == unanswered.words == 2 and math.isnan(unanswered.first_audio_s)


def test_drift_compares_the_first_and_the_last_window_and_memory_the_late_turns():
    rows = [
        RequestRow.of(n, "request", "what time is it", report(n, "what time is it", "It is noon."), n - 0.1 * (n > 900))
        for n in range(1, 1001)
    ]
    first, last = drift(rows, 1000).values()
    assert list(drift(rows, 1000)) == ["turns 1-100", "turns 901-1000"]
    assert first["first_audio_s_p50"] == pytest.approx(0.9) and last["first_audio_s_p50"] == pytest.approx(1.0)
    assert first["wer"] == last["wer"] == 0.0 and first["answered"] == first["requests"] == 100
    resources = [{"turn": n, "asr_node_rss_mb": 400 + (n > 700) * 5.0, "asr_node_cpu_s": 1.0} for n in range(1, 1001)]
    assert memory_growth(resources, 1000) == {"asr_node": 5.0}  # from turn 500 on
    assert memory_growth(resources[:200], 200) == {"asr_node": 0.0}  # a short soak: its second half


def test_resources_are_sampled_per_process_and_written_as_they_come(tmp_path):
    sampler = ResourceSampler()
    first = sampler.sample({"me": os.getpid(), "gone": 2**22 + 12345})
    sum(i * i for i in range(300_000))  # some CPU between the samples
    second = sampler.sample({"me": os.getpid()})
    assert set(first) == {"me_rss_mb", "me_cpu_s"} and first["me_rss_mb"] > 10
    assert 0 < second["me_cpu_s"] < first["me_cpu_s"]  # since the last sample, not since the start
    log = CsvLog(tmp_path / "r.csv")
    log.write({"turn": 1} | first)
    assert list(csv.DictReader((tmp_path / "r.csv").read_text().splitlines()))[0]["turn"] == "1"  # flushed before the soak ends
    log.close()


@pytest.mark.graph
@pytest.mark.e2e  # Whisper, the canceller, SmolLM2 and Piper, as the defaults run them
def test_a_short_spoken_soak_answers_every_request_and_survives_every_audio_fault(tmp_path):
    from predgen_ros.eval.graph.spoken_soak import SoakSettings, run_spoken_soak

    # seed 3: a barge-in on turn 3 (after the clipped burst), an acknowledgement on turn 6
    result = run_spoken_soak(SoakSettings(default_params_file(), tmp_path, turns=6, seed=3))
    assert result.faults == {name: "ok" for name in FAULTS}, result
    assert (result.turns, result.requests, result.answered, result.crashes, result.stuck) == (6, 7, 7, 0, 0), result
    assert (result.barge_ins_honoured, result.acknowledgements) == (result.barge_ins, 1), result
    assert result.passed
    rows = list(csv.DictReader((tmp_path / "requests.csv").read_text().splitlines()))
    assert [r["role"] for r in rows].count("barge_in") == 1
    heard = sum(int(r["word_errors"]) for r in rows) / sum(len(reference_words(r["said"])) for r in rows)
    assert heard < 0.5, rows  # the room and the faults do not deafen the ear
    resources = list(csv.DictReader((tmp_path / "resources.csv").read_text().splitlines()))
    assert [r["turn"] for r in resources] == ["1", "2", "3", "4", "5", "6"]
    assert all(float(resources[-1][f"{node}_rss_mb"]) > 50 for node in ("asr_node", "predgen_node", "tts_node"))
    assert (tmp_path / "soak.png").stat().st_size > 10_000


def test_the_verdicts_hold_the_issues_bars():
    first = {"first_audio_s_p50": 1.0, "wer": 0.10}
    assert verdicts({"a": first, "b": {"first_audio_s_p50": 1.09, "wer": 0.119}}, {"asr_node": 19.9}, ["asr_node"]) == {
        "memory_flat": True,
        "first_audio_within_10_percent": True,
        "wer_within_2_points": True,
    }
    worse = verdicts({"a": first, "b": {"first_audio_s_p50": 1.11, "wer": 0.121}}, {"asr_node": 20.0, "soak": 0}, ["asr_node"])
    assert not any(worse.values())
    assert not verdicts({"a": first, "b": first}, {}, ["tts_node"])["memory_flat"]  # a node never sampled is no pass
