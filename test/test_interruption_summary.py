"""eval-interruptions' scoring without ROS: what the summary and its table count."""

from __future__ import annotations

from predgen_ros.eval.barge_in.interruption_results import TrialResult, format_summary, summarize


def result(kind: str, number: int, **scored) -> TrialResult:
    return TrialResult("pause-open", number, kind, "How far away is the moon?", "", spoke=True, event_over_speech=True, **scored)


def test_replies_the_evaluation_had_to_stop_are_counted_and_shown():
    """A robot answering its own voice (no canceller, no mute) never falls silent: the
    trials after which the evaluation stopped it are counted apart from its self-stops."""
    results = [
        result("silence", 1000, stopped=True, ran_on=True),
        result("silence", 1001, paused=True, resumed=True),
        result("barge_in", 0, stopped=True, silence_s=0.2, answered=True, new_turn="how far away is the moon", ran_on=True),
    ]
    row = summarize(results)["pause-open"]
    assert row["ran_on"] == 2
    assert row["silence"] == {"replies": 2, "self_pauses": 1, "self_stops": 1, "own_voice_turns": 0}
    line = format_summary({"pause-open": row}).splitlines()[-1]
    assert line.startswith("| pause-open | 3 |")  # the trials run: a hearing whose robot ran on ends early
    assert line.endswith("| 1 | 2 |")  # replies lost (the self-stop), ran on


def test_a_barge_in_talked_over_counts_as_missed_with_how_long_the_robot_talked_on():
    """The time to silence's p90 is given twice: over the barge-ins that silenced the robot,
    and with each one it talked over counted at its talked-on time (what the user waited)."""
    stopped = [
        result(
            "barge_in", i, stopped=True, paused=True, silence_s=0.2 + i / 100, answered=True, new_turn="how far away is the moon"
        )
        for i in range(9)
    ]
    talked_over = result("barge_in", 9, talked_on_s=1.5, answered=True, new_turn="how far away is the moon")
    row = summarize([*stopped, talked_over])["pause-open"]["barge_in"]
    assert row["missed"] == 1 and row["missed_talked_on_s"] == [1.5]
    assert row["silence_p90_s"] < 0.3 < row["silence_p90_with_missed_s"]
    line = format_summary({"pause-open": summarize([*stopped, talked_over])["pause-open"]}).splitlines()[-1]
    assert "| 1/10 (talked on 1.50 s) |" in line and f"({row['silence_p90_with_missed_s']:.3f} with those)" in line


def test_pauses_before_the_event_are_counted_as_the_robots_own():
    """A reply that paused before the user said anything over it paused for its own voice:
    counted over the event trials, beside the replies with nothing said."""
    results = [
        result("backchannel", 0, paused_early=True),
        result("burst", 1),
        result("barge_in", 2, stopped=True, silence_s=0.2, answered=True, new_turn="how far away is the moon"),
        result("silence", 1000),
    ]
    row = summarize(results)["pause-open"]
    assert row["paused_early"] == {"replies": 3, "paused": 1}
    assert "| 0 / 0 / 0 of 1 | 1 of 3 | 0 | 0 |" in format_summary({"pause-open": row})
