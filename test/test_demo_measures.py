"""The demo's conversation measures: replies matched to their reports, openings and copies counted."""

import numpy as np
import pytest

from predgen_ros.audio.pcm import SAMPLE_RATE
from predgen_ros.eval.graph.graph_demo import conversation_measures, from_true_end, measures_table, voiced_span_s, with_replies


def report(first_sentence):
    return {"first_sentence": first_sentence}


def test_each_report_gets_the_response_that_begins_with_its_first_sentence():
    reports = [report("Hello there."), report("It is noon.")]
    responses = ["Hello there. How can I help?", "It is noon. Lunch time."]
    assert [r["reply"] for r in with_replies(reports, responses)] == responses
    # a turn cut short by the next utterance published no response: its first sentence stands in
    assert [r["reply"] for r in with_replies(reports, responses[1:])] == ["Hello there.", "It is noon. Lunch time."]


def test_a_parroting_policy_shows_repeats_starts_and_copies_and_differs_from_baseline():
    encode = lambda text: text.split()  # noqa: E731 (words as tokens)
    baseline = [
        {"first_sentence": "I can hear you.", "reply": "I can hear you well today."},
        {"first_sentence": "It is noon now.", "reply": "It is noon now, time for lunch."},
    ]
    parrot = [
        {"first_sentence": "I can hear you.", "reply": "I can hear you well today."},
        {"first_sentence": "I can hear you.", "reply": "I can hear you well today."},
    ]
    measures = conversation_measures({"baseline": baseline, "predgen": parrot}, encode)
    assert measures["baseline"] == {
        "repeated_opening_share": 0.0,
        "common_start_share": 0.0,
        "history_copy_mean": 0.0,
        "same_as_baseline_share": 1.0,
    }
    assert measures["predgen"] == {
        "repeated_opening_share": 0.5,
        "common_start_share": 1.0,
        "history_copy_mean": 0.5,
        "same_as_baseline_share": 0.5,
    }
    assert "50%" in measures_table(measures)


def test_the_true_end_of_speech_is_after_the_last_voiced_sample_and_the_latency_counts_from_it():
    speech = np.zeros(SAMPLE_RATE, dtype=np.int16)
    speech[1000:8000] = 3000  # 0.0625-0.5 s voiced, then silence
    speech[7990:8000] = 200  # a quiet tail under the voiced level
    assert voiced_span_s(speech.tobytes()) == pytest.approx((1000 / SAMPLE_RATE, 7990 / SAMPLE_RATE))
    assert voiced_span_s(np.zeros(10, dtype=np.int16).tobytes()) == (0.0, 0.0)
    reported = {"t_first_audio": "11.0", "audio_latency_s": "0.8"}  # predgen_node's, from the detector's end
    shown = from_true_end(reported, true_end=10.0)
    assert float(shown["audio_latency_s"]) == pytest.approx(1.0) and shown["detector_audio_latency_s"] == "0.8"
