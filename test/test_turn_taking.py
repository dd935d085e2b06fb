"""Turn-taking rules: what speech over the robot is, what the voice does, what the engine hears."""

from __future__ import annotations

import pytest

from predgen_ros.turn_taking import (
    CUT_OFF_MARK,
    TAKE_OVER_S,
    Speech,
    TurnGate,
    TurnRules,
    Voice,
    VoiceControl,
    VoicedSpan,
    heard_text,
)


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


@pytest.mark.parametrize(
    "text, kind",
    [
        ("", Speech.EMPTY),
        ("mm hmm", Speech.BACKCHANNEL),
        ("Okay, okay.", Speech.BACKCHANNEL),
        ("I see", Speech.BACKCHANNEL),
        ("an h m", Speech.SHORT),  # pocketsphinx's "mhm": letters are no words, "an" is one
        ("and they m h a", Speech.SHORT),  # another "mhm" of pocketsphinx's
        ("yeah mum", Speech.SHORT),  # an acknowledgement, then one word
        ("wait what", Speech.SHORT),
        ("wait what is", Speech.TURN),
        ("okay but what is", Speech.TURN),  # acknowledgements first do not count
    ],
)
def test_speech_over_the_robot_is_sorted_by_its_words(text, kind):
    assert TurnRules().kind(text) is kind


@pytest.mark.parametrize(
    "spoken_s, kind",
    [(None, Speech.TURN), (0.0, Speech.SHORT), (0.79, Speech.SHORT), (0.8, Speech.TURN), (1.1, Speech.TURN)],
)
def test_three_words_in_less_than_min_speech_s_are_no_turn(spoken_s, kind):
    # pocketsphinx heard Piper's 0.62 s "mm-hmm" as "and i'm on"; None: no voice detector, words decide
    assert TurnRules().kind("and i'm on", spoken_s) is kind


def test_the_voiced_span_runs_from_the_start_to_the_last_end_and_pauses_count():
    span = VoicedSpan()
    assert span.seconds(5.0) is None  # no asr/voice ever: an ASR without a voice detector
    span.voice("start", 10.0)
    assert span.seconds(10.3) == pytest.approx(0.3)  # still speaking
    span.voice("end", 10.5)
    assert span.seconds(11.0) == pytest.approx(0.5)  # silent since 10.5
    span.voice("more", 11.2)
    assert span.seconds(11.4) == pytest.approx(1.4)  # a pause inside the utterance counts
    span.close()
    assert span.seconds(12.0) == 0.0  # words before their utterance's start: not yet spoken
    span.voice("start", 12.0)
    assert span.seconds(12.1) == pytest.approx(0.1)


def test_one_word_and_no_acknowledgements_is_todays_barge_in():
    rules = TurnRules(min_words=1, backchannels="")
    assert rules.kind("okay") is Speech.TURN and rules.kind("stop") is Speech.TURN


def test_bad_rules_say_which_parameter():
    with pytest.raises(ValueError, match="turn.min_words"):
        TurnRules(min_words=0)
    with pytest.raises(ValueError, match="turn.min_speech_s"):
        TurnRules(min_speech_s=-1)
    with pytest.raises(ValueError, match="tts.interruption"):
        VoiceControl(TurnRules(), "mute", 1.0)


def test_stop_ignores_all_but_a_turn():
    control = VoiceControl(TurnRules(), "stop", 1.0)
    assert control.voice("start", 0.0) is Voice.KEEP
    assert control.partial("wait") is Voice.KEEP
    assert control.final("mm hmm") is Voice.KEEP
    control.voice("start", 0.0)  # long ago: the voice has lasted long enough
    assert control.partial("wait what is") is Voice.STOP


def test_pause_resumes_at_an_acknowledgement_a_final_or_after_resume_s():
    clock = Clock()
    control = VoiceControl(TurnRules(), "pause", 1.0, clock)
    assert control.voice("start", clock.t) is Voice.PAUSE and control.paused
    assert control.partial("i") is Voice.KEEP  # a short partial keeps it paused, a while longer
    assert control.partial("i see") is Voice.RESUME and not control.paused

    assert control.voice("start", clock.t) is Voice.PAUSE
    assert control.final("ah") is Voice.RESUME  # the utterance ended without a turn

    assert control.voice("start", clock.t) is Voice.PAUSE
    clock.t += 0.9
    assert control.due() is Voice.KEEP
    clock.t += 0.2
    assert control.due() is Voice.RESUME  # a cough: no word within resume_s

    assert control.voice("start", clock.t) is Voice.PAUSE
    clock.t += 1.0
    assert control.partial("what time is it") is Voice.STOP and not control.paused


def test_a_hum_heard_as_three_words_pauses_and_resumes_but_a_question_stops():
    clock = Clock()
    control = VoiceControl(TurnRules(), "pause", 1.0, clock)
    assert control.voice("start", clock.t) is Voice.PAUSE
    clock.t += 0.55
    assert control.partial("and i'm") is Voice.KEEP
    assert control.voice("end", clock.t + 0.07) is Voice.KEEP  # the voice fell silent at 0.62 s
    clock.t += 0.3
    assert control.partial("and i'm on") is Voice.KEEP  # three words, but 0.62 s of voice
    assert control.final("and i'm on") is Voice.RESUME

    assert control.voice("start", clock.t) is Voice.PAUSE
    clock.t += 0.5
    assert control.partial("why do cats") is Voice.KEEP  # not yet: 0.5 s
    clock.t += 0.4
    assert control.partial("why do cats purr") is Voice.STOP


def test_the_gate_holds_speech_over_the_robot_until_it_is_a_turn():
    gate = TurnGate(TurnRules())
    assert gate.partial("hello there") and gate.final("hello there", "F") == ["F"]  # the robot is silent: any turn

    gate.robot_talks()
    assert not gate.partial("mm")
    assert gate.speech_end("E") == []
    assert gate.final("mm hmm", "F") == []  # an acknowledgement: no turn, nothing reaches the engine
    assert gate.ignored == 1

    assert not gate.partial("wait")
    assert gate.partial("wait what is")  # a turn: from here on the engine hears it
    assert gate.partial("wait what is the time")
    assert gate.speech_end("E") == ["E"]
    assert gate.final("wait what is the time", "F") == ["F"]

    assert not gate.partial("what time")
    assert gate.speech_end("E") == []
    assert gate.final("what time is it", "F") == ["E", "F"]  # the final made it a turn: its end of speech comes along
    assert gate.final("ok", "F") == ["F"]  # a final without partials is a whole turn


def test_the_gate_times_the_voice_over_the_robot():
    clock = Clock()
    gate = TurnGate(TurnRules(), clock)
    gate.robot_talks()
    gate.voice("start", clock.t)
    clock.t += 0.6
    assert not gate.partial("and i'm on")  # three words in 0.6 s: a hum
    gate.voice("end", clock.t)
    clock.t += 0.5
    assert gate.speech_end("E") == []
    assert gate.final("and i'm on", "F") == []

    gate.voice("start", clock.t)
    clock.t += 0.9
    assert gate.partial("why do cats purr")
    assert gate.final("why do cats purr", "F") == ["F"]


def test_once_the_robot_is_silent_any_speech_is_a_turn_but_one_begun_over_it_is_judged_so():
    clock = Clock()
    gate = TurnGate(TurnRules(), clock)
    gate.robot_talks()
    assert not gate.partial("mm")
    clock.t += TAKE_OVER_S
    gate.robot_silent()  # the reply ends while the user acknowledges it
    assert gate.final("mm hmm", "F") == []
    assert gate.partial("yes") and gate.final("yes", "F") == ["F"]  # "yes" answers the robot's question

    gate.robot_talks()
    assert not gate.partial("yes")
    assert gate.speech_end("E") == []
    clock.t += TAKE_OVER_S / 2
    gate.robot_silent()  # the user began as the robot ended: they take the turn
    assert gate.final("yes", "F") == ["E", "F"]


def test_what_was_heard_of_a_reply_cut_off():
    heard = heard_text([("Paris is the capital of France.", 1.0), ("It lies on the Seine, a long river.", 0.5)])
    assert heard == "Paris is the capital of France. It lies on the" + CUT_OFF_MARK
    assert heard_text([("Sure, here it is.", 0.0)]) == CUT_OFF_MARK
