"""The real SmolLM2-135M and Piper voice on two MT-Bench questions."""

import csv
import json

import pytest

from predgen_ros.audio.speech.tts import PiperSynthesizer
from predgen_ros.cli import main

pytestmark = pytest.mark.e2e

SUMMARY_KEYS = {
    "audio_latency_p50_s",
    "audio_latency_p90_s",
    "audio_latency_mean_s",
    "ttfs_p50_s",
    "speedup_vs_baseline_p50",
    "first_sentence_match",
    "first_sentence_logprob_mean",
    "nfe_tfs_p50",
    "input_nfe_mean",
    "llm_load",
    "turns",
    "rouge_l_mean",
    "logprob_gap_to_baseline",
    "not_top_share",
}


def test_bench_on_two_questions_with_real_model_and_voice(tmp_path, capsys):
    assert main(["bench", "--limit", "2", "--verifier", "exact", "--device", "cpu", "--out", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "baseline" in table and "preemptive" in table and "predgen" in table

    summary = json.loads((tmp_path / "summary.json").read_text())
    for policy in ("baseline", "preemptive", "predgen"):
        assert set(summary[policy]) >= SUMMARY_KEYS, policy
        assert summary[policy]["turns"] == 2
    # exact verification is lossless: the same first sentences as baseline
    assert summary["predgen"]["first_sentence_match"] == 1.0
    assert summary["preemptive"]["first_sentence_match"] == 1.0
    assert summary["predgen"]["rouge_l_mean"] == 1.0 and abs(summary["predgen"]["logprob_gap_to_baseline"]) < 1e-4
    assert summary["baseline"]["not_top_share"] < 0.05  # greedy: the most likely token (up to float ties)
    assert "turns: baseline" in table  # a line per speech-duration bucket

    with open(tmp_path / "turns.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 6
    for row in rows:
        assert float(row["audio_latency_s"]) >= float(row["ttfs_s"]) >= 0
        assert row["first_sentence"].strip()
    assert (tmp_path / "latency.png").stat().st_size > 10_000

    voice = PiperSynthesizer()
    speech = voice.synthesize(rows[0]["first_sentence"])
    assert speech.sample_rate == 22050 and speech.seconds > 0.8
    assert voice.synthesize(rows[0]["first_sentence"]) is speech  # served from the cache
