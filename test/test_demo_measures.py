"""The demo's conversation measures: replies matched to their reports, openings and copies counted."""

from predgen_ros.eval.graph_demo import conversation_measures, measures_table, with_replies


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
