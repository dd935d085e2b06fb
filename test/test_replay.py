"""Bag replay evaluation: ASR quality measures, and the sample bag through the real graph."""

from __future__ import annotations

import json
from dataclasses import replace
from importlib.resources import files
from pathlib import Path

import pytest

from predgen_ros.eval.bag_replay.bags import BagError, read_bag, split_by_question
from predgen_ros.eval.bag_replay.evaluate import run_eval
from predgen_ros.eval.bag_replay.replay import EvalSettings, load_replay, question_records
from predgen_ros.eval.hearing.asr_quality import asr_quality, reference_words, revisions, word_errors
from predgen_ros.eval.records import TurnRecord, summarize
from predgen_ros.eval.report import format_table
from predgen_ros.nodes.bringup import default_params_file

SAMPLE = Path(str(files("predgen_ros") / "data" / "bags" / "sample"))
BENCH_KEYS = {
    "asked",
    "answered",
    "turns",
    "audio_latency_p50_s",
    "audio_latency_p90_s",
    "audio_latency_mean_s",
    "ttfs_p50_s",
    "ttfs_p90_s",
    "ttfs_mean_s",
    "speedup_vs_baseline_p50",
    "first_sentence_match",
    "first_sentence_logprob_mean",
    "nfe_tfs_p50",
    "input_nfe_mean",
    "llm_load",
    "precomputed_share",
    "jacobi_tokens_per_iteration",
    "decode_tokens_per_s",
}


def test_a_revision_changes_a_word_before_the_last():
    partials = [
        "what",
        "what is",
        "what is the cap",
        "what is the capital",
        "what is a capital of",
        "what is a capital of france",
    ]
    # the last word growing ("cap" -> "capital") is not a revision; "the" -> "a" is
    assert revisions(partials) == (5, 1)
    assert revisions(["hello"]) == (0, 0)
    assert revisions(["one two three", "one"]) == (1, 1)  # shrinking drops earlier words


def test_word_error_rate_counts_edits():
    assert word_errors(reference_words("What is the capital of France?"), reference_words("what is the capital of france")) == 0
    assert word_errors(reference_words("a b c d"), reference_words("a x c")) == 2  # one substitution, one deletion
    assert word_errors([], reference_words("noise")) == 1


def test_sample_bag_quality_is_measured():
    messages, markers = load_replay(SAMPLE)
    quality = asr_quality(read_bag(SAMPLE, ["asr/partial", "asr/final"]), markers)
    assert 0.0 < quality["revision_rate"] < 1.0  # pocketsphinx rewrites earlier words, but not always
    assert 0.0 < quality["wer"] < 1.0
    assert len(markers) == 3


def test_a_limit_keeps_the_first_questions_only():
    messages, markers = load_replay(SAMPLE)
    first_two, two_markers = load_replay(SAMPLE, limit=2)
    assert two_markers == markers[:2]
    assert first_two == [m for m in messages if m.t_ns < markers[2].t_start_ns]
    assert sum(m.topic == "asr/final" for m in first_two) == 2


@pytest.mark.graph
@pytest.mark.e2e  # the nodes load the real models
def test_replaying_the_sample_bag_reports_every_turn_of_every_policy(tmp_path):
    policies = ("baseline", "preemptive", "predgen")
    settings = EvalSettings(SAMPLE, tmp_path, default_params_file(), policies, {"generation.max_new_tokens": 0})
    records, summary = run_eval(settings)
    assert sorted((r.policy, r.qid) for r in records) == sorted((p, q) for p in policies for q in ("122", "152", "159"))
    for r in records:
        assert r.audio_latency_s > 0.4, r  # at least the ASR's endpoint silence after the true end of speech
        # the four phases, from the true end: the detector's lag, then what follows the detector's end
        phases = (r.detector_lag_s, r.endpoint_s, r.llm_after_final_s, r.tts_s)
        assert sum(phases) == pytest.approx(r.audio_latency_s) and r.detector_lag_s != 0.0, r
    assert all(r.answered for r in records), [(r.policy, r.qid, r.no_reply) for r in records if not r.answered]
    written = json.loads((tmp_path / "summary.json").read_text())
    for policy in policies:
        assert set(written[policy]) >= BENCH_KEYS
        assert (written[policy]["asked"], written[policy]["answered"]) == (3, 3)
    assert {"revision_rate", "wer"} <= set(written)
    report = (tmp_path / "report.md").read_text()
    assert sum(line.startswith(("| 122 ", "| 152 ", "| 159 ")) for line in report.splitlines()) == 3
    assert (tmp_path / "latency.png").stat().st_size > 10_000
    for policy in policies:
        recorded = read_bag(tmp_path / f"recorded_{policy}", ["predgen/latency", "tts/first_audio"])
        assert sum(m.topic == "predgen/latency" for m in recorded) == 3


def test_an_existing_recording_is_refused_before_any_run(tmp_path):
    (tmp_path / "recorded_predgen").mkdir()
    settings = EvalSettings(SAMPLE, tmp_path, default_params_file(), ("predgen",), {})
    with pytest.raises(BagError, match=r"recorded_predgen already exists: remove it, choose another --out, or --resume"):
        run_eval(settings)
    assert not (tmp_path / "runs").exists()  # nothing started


def test_each_question_is_replayed_with_its_own_messages():
    messages, markers = load_replay(SAMPLE)
    questions = split_by_question(messages, markers)
    assert [sum(m.topic == "asr/final" for m in q) for q in questions] == [1, 1, 1]
    assert [m for q in questions for m in q] == messages
    for marker, following, question in zip(markers, markers[1:] + [None], questions):
        assert all(marker.t_start_ns <= m.t_ns < (following.t_start_ns if following else float("inf")) for m in question[1:])


def test_a_final_published_after_the_next_question_began_stays_with_its_question():
    """A slow recognizer's closing re-decode can publish a long question's final after
    the next question's speech began; it still closes its own question."""
    messages, markers = load_replay(SAMPLE)
    late_ns = markers[1].t_start_ns + 500_000_000 - markers[0].t_end_ns
    closing = [m for m in messages if m.topic in ("asr/speech_end", "asr/final") and m.t_ns < markers[1].t_start_ns]
    late = [replace(m, t_ns=m.t_ns + late_ns) if m in closing else m for m in messages]
    late.sort(key=lambda m: m.t_ns)
    questions = split_by_question(late, markers)
    assert [sum(m.topic == "asr/final" for m in q) for q in questions] == [1, 1, 1]
    late_final = next(m for m in late if m.topic == "asr/final")
    assert late_final.t_ns > markers[1].t_start_ns and late_final in questions[0]
    assert asr_quality(late, markers)["wer"] == asr_quality(messages, markers)["wer"]


def test_a_question_without_a_reply_is_a_row_with_its_reason(tmp_path):
    _, markers = load_replay(SAMPLE)
    outcomes = [(0, ""), (0, "no reply within 120 s"), (0, "")]
    records = question_records("baseline", markers, outcomes, recorded=[])
    assert [r.no_reply for r in records] == ["no latency report", "no reply within 120 s", "no latency report"]
    summary = summarize(records, ["baseline", "predgen"])  # predgen: no records at all
    assert (summary["baseline"]["asked"], summary["baseline"]["answered"]) == (3, 0)
    assert summary["baseline"]["audio_latency_p50_s"] is None and summary["predgen"]["asked"] == 0
    assert "0/3" in format_table(summary)


def test_summaries_survive_a_policy_without_records_and_nan_latencies():
    def row(qid, latency):
        return TurnRecord(
            qid=qid,
            policy="baseline",
            speech_s=4.0,
            audio_latency_s=latency,
            ttfs_s=latency,
            nfe_tfs=3,
            input_nfe=0,
            input_llm_s=0.0,
            rounds=1,
            final_accepted=None,
            final_candidate=None,
            decode_tokens=5,
            decode_s=0.2,
            jacobi_passes=0,
            jacobi_tokens=0,
            first_sentence="Hi.",
            first_sentence_logprob=float("nan"),
        )

    summary = summarize([row("1", 0.8), row("2", float("nan")), row("3", 1.2)], ["baseline", "preemptive"])
    assert summary["baseline"]["audio_latency_p50_s"] == 1.0  # the NaN turn is not ranked
    assert summary["preemptive"]["turns"] == 0 and summary["preemptive"]["audio_latency_mean_s"] is None
    assert "preemptive" in format_table(summary)
