"""Bag replay evaluation: ASR quality measures, and the sample bag through the real graph."""
from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

from predgen_ros.eval.bags import read_bag
from predgen_ros.eval.replay import EvalSettings, asr_quality, load_replay, revisions, run_eval, word_errors, words
from predgen_ros.nodes.bringup import default_params_file

SAMPLE = Path(str(files("predgen_ros") / "data" / "bags" / "sample"))
BENCH_KEYS = {
    "turns", "audio_latency_p50_s", "audio_latency_p90_s", "audio_latency_mean_s", "ttfs_p50_s", "ttfs_p90_s", "ttfs_mean_s",
    "speedup_vs_baseline_p50", "first_sentence_match", "first_sentence_logprob_mean", "nfe_tfs_p50", "input_nfe_mean",
    "llm_load", "precomputed_share", "jacobi_tokens_per_iteration", "decode_tokens_per_s",
}


def test_a_revision_changes_a_word_before_the_last():
    partials = ["what", "what is", "what is the cap", "what is the capital", "what is a capital of", "what is a capital of france"]
    # the last word growing ("cap" -> "capital") is not a revision; "the" -> "a" is
    assert revisions(partials) == (5, 1)
    assert revisions(["hello"]) == (0, 0)
    assert revisions(["one two three", "one"]) == (1, 1)  # shrinking drops earlier words


def test_word_error_rate_counts_edits():
    assert word_errors(words("What is the capital of France?"), words("what is the capital of france")) == 0
    assert word_errors(words("a b c d"), words("a x c")) == 2  # one substitution, one deletion
    assert word_errors([], words("noise")) == 1


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


def test_replaying_the_sample_bag_reports_every_turn_of_every_policy(tmp_path):
    policies = ("baseline", "preemptive", "predgen")
    settings = EvalSettings(SAMPLE, tmp_path, default_params_file(), policies, {"generation.max_new_tokens": 0})
    records, summary = run_eval(settings)
    assert sorted((r.policy, r.qid) for r in records) == sorted((p, q) for p in policies for q in ("122", "152", "159"))
    for r in records:
        assert 0.4 < r.audio_latency_s < 20, r  # at least the ASR's endpoint silence after the true end of speech
    written = json.loads((tmp_path / "summary.json").read_text())
    for policy in policies:
        assert BENCH_KEYS <= set(written[policy])
    assert {"revision_rate", "wer"} <= set(written)
    report = (tmp_path / "report.md").read_text()
    assert sum(line.startswith(("| 122 ", "| 152 ", "| 159 ")) for line in report.splitlines()) == 3
    assert (tmp_path / "latency.png").stat().st_size > 10_000
    for policy in policies:
        recorded = read_bag(tmp_path / f"recorded_{policy}", ["predgen/latency", "tts/first_audio"])
        assert sum(m.topic == "predgen/latency" for m in recorded) == 3
