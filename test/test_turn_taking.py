"""Turn-taking rules: what speech over the robot is, what the voice does, what the engine hears."""

from __future__ import annotations

import pytest

from predgen_ros.turn_taking import (
    CUT_OFF_MARK,
    TAKE_OVER_S,
    Ruling,
    Speech,
    TurnOwner,
    TurnRules,
    Voice,
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
    [(None, Speech.TURN), (0.0, Speech.SHORT), (0.87, Speech.SHORT), (0.95, Speech.TURN), (1.07, Speech.TURN)],
)
def test_three_words_in_less_than_min_speech_s_are_no_turn(spoken_s, kind):
    # pocketsphinx heard Piper's 0.62 s "mm-hmm" as "and i'm on"; over the echo acknowledgements lasted up
    # to 0.87 s, questions from 1.07 s (scripts/voice_spans.py); None: no voice detector, words decide
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
    with pytest.raises(ValueError, match="turn.interruption"):
        TurnOwner(TurnRules(), "mute")
    with pytest.raises(ValueError, match="turn.resume_s"):
        TurnOwner(TurnRules(), "pause", 0.0)


def talking_owner(interruption="pause", clock=None, **rules) -> TurnOwner:
    owner = TurnOwner(TurnRules(**rules), interruption, 1.0, clock=clock or Clock())
    owner.robot_speaking(True)
    return owner


def test_stop_ignores_all_but_a_turn():
    owner = talking_owner("stop")
    assert owner.voice("start", 0.0).voice is Voice.KEEP
    assert owner.partial("wait") == Ruling(Voice.KEEP, hand_on=False)
    assert owner.final("mm hmm") == Ruling(Voice.KEEP, hand_on=False)
    owner.voice("start", 0.0)  # long ago: the voice has lasted long enough
    assert owner.partial("wait what is") == Ruling(Voice.STOP, hand_on=True)


def test_pause_resumes_at_an_acknowledgement_a_final_or_after_resume_s():
    clock = Clock()
    owner = talking_owner(clock=clock)
    assert owner.voice("start", clock.t).voice is Voice.PAUSE and owner.paused
    assert owner.partial("i").voice is Voice.KEEP  # a short partial keeps it paused, a while longer
    assert owner.partial("i see").voice is Voice.RESUME and not owner.paused
    owner.final("i see")

    assert owner.voice("start", clock.t).voice is Voice.PAUSE
    assert owner.final("ah").voice is Voice.RESUME  # the utterance ended without a turn

    assert owner.voice("start", clock.t).voice is Voice.PAUSE
    owner.voice("end", clock.t + 0.2)  # a cough: 0.2 s of voice, then no word within resume_s
    clock.t += 1.1
    assert owner.due() is Voice.KEEP
    clock.t += 0.2
    assert owner.due() is Voice.RESUME

    assert owner.voice("start", clock.t).voice is Voice.PAUSE
    clock.t += 1.0
    assert owner.partial("what time is it").voice is Voice.STOP and not owner.paused


def test_the_voice_is_left_alone_while_the_robot_is_silent_or_barge_in_is_off():
    clock = Clock()
    owner = TurnOwner(TurnRules(), "pause", 1.0, clock=clock)
    assert owner.voice("start", clock.t).voice is Voice.KEEP and not owner.paused
    clock.t += 1.0
    assert owner.partial("what time is it") == Ruling(Voice.KEEP, hand_on=True)
    owner.final("what time is it")

    deaf = TurnOwner(TurnRules(), "pause", 1.0, barge_in=False, clock=clock)
    deaf.robot_speaking(True)
    assert deaf.voice("start", clock.t).voice is Voice.KEEP
    clock.t += 1.0
    assert deaf.partial("what time is it") == Ruling(Voice.KEEP, hand_on=True)  # still a turn, answered after


def test_a_pause_lasts_while_the_user_speaks_and_resume_s_after():
    """The recognizer's words may come later than resume_s after the voice began: a pause
    does not resume while the voice goes on (it once resumed over a question it had not yet
    transcribed, then stopped 0.4 s later)."""
    clock = Clock()
    owner = talking_owner(clock=clock)
    assert owner.voice("start", clock.t).voice is Voice.PAUSE
    clock.t += 1.5
    assert owner.due() is Voice.KEEP  # still speaking, no words yet
    owner.voice("end", clock.t - 0.1)  # the voice fell silent 0.1 s ago
    clock.t += 0.8
    assert owner.due() is Voice.KEEP
    clock.t += 0.2
    assert owner.due() is Voice.RESUME  # resume_s after the voice ended


def test_a_pause_does_not_outlive_its_reply():
    clock = Clock()
    owner = talking_owner(clock=clock)
    assert owner.voice("start", clock.t).voice is Voice.PAUSE
    owner.robot_speaking(True)  # said again: still the same reply, still paused
    assert owner.paused
    owner.robot_speaking(False)
    owner.robot_speaking(True)
    clock.t += 2.0
    assert owner.due() is Voice.KEEP  # the new reply was never paused


def test_a_hum_heard_as_three_words_pauses_and_resumes_but_a_question_stops():
    clock = Clock()
    owner = talking_owner(clock=clock)
    assert owner.voice("start", clock.t).voice is Voice.PAUSE
    clock.t += 0.55
    assert owner.partial("and i'm").voice is Voice.KEEP
    assert owner.voice("end", clock.t + 0.07).voice is Voice.KEEP  # the voice fell silent at 0.62 s
    clock.t += 0.3
    assert owner.partial("and i'm on") == Ruling(Voice.KEEP, hand_on=False)  # three words, but 0.62 s of voice
    assert owner.final("and i'm on") == Ruling(Voice.RESUME, hand_on=False)

    assert owner.voice("start", clock.t).voice is Voice.PAUSE
    clock.t += 0.5
    assert owner.partial("why do cats") == Ruling(Voice.KEEP, hand_on=False)  # not yet: 0.5 s
    clock.t += 0.55
    assert owner.partial("why do cats purr") == Ruling(Voice.STOP, hand_on=True)
    assert owner.final("why do cats purr").hand_on


def test_speech_over_the_robot_reaches_the_engine_only_once_it_is_a_turn():
    owner = TurnOwner(TurnRules())
    assert owner.partial("hello there").hand_on and owner.final("hello there").hand_on  # the robot is silent: any turn

    owner.robot_speaking(True)
    assert not owner.partial("mm").hand_on
    assert not owner.final("mm hmm").hand_on  # an acknowledgement: no turn, nothing reaches the engine
    assert owner.ignored == 1

    assert not owner.partial("wait").hand_on
    assert owner.partial("wait what is").hand_on  # a turn: from here on the engine hears it
    assert owner.partial("wait what is the time").hand_on
    assert owner.final("wait what is the time").hand_on

    assert not owner.partial("what time").hand_on
    assert owner.final("what time is it").hand_on  # the final made it a turn
    assert owner.final("ok").hand_on  # a final without partials is a whole turn
    assert owner.ignored == 1


@pytest.mark.parametrize("robot_speaking", [False, True])
def test_an_utterance_without_a_word_is_no_turn(robot_speaking):
    owner = TurnOwner(TurnRules())
    owner.robot_speaking(robot_speaking)
    assert not owner.partial(".").hand_on
    assert not owner.final("...").hand_on  # Whisper's spelling of noise or of the robot's echo
    assert not owner.final("-").hand_on  # and without a partial before it
    assert owner.ignored == robot_speaking  # the count of utterances over the robot that made no turn
    assert owner.partial("what time is it").hand_on and owner.final("what time is it").hand_on


def test_once_the_robot_is_silent_any_speech_is_a_turn_but_one_begun_over_it_is_judged_so():
    clock = Clock()
    owner = TurnOwner(TurnRules(), clock=clock)
    owner.robot_speaking(True)
    assert not owner.partial("mm").hand_on
    clock.t += TAKE_OVER_S
    owner.robot_speaking(False)  # the reply ends while the user acknowledges it
    assert not owner.final("mm hmm").hand_on
    assert owner.partial("yes").hand_on and owner.final("yes").hand_on  # "yes" answers the robot's question

    owner.robot_speaking(True)
    assert not owner.partial("yes").hand_on
    clock.t += TAKE_OVER_S / 2
    owner.robot_speaking(False)  # the user began as the robot ended: they take the turn
    assert owner.final("yes").hand_on


@pytest.mark.parametrize("interruption", ["pause", "stop"])
def test_words_after_an_early_final_are_the_turn_and_stop_its_reply_however_few(interruption):
    """The robot answers a question cut short by an early endpoint; the user goes on
    (asr/voice "resumed"): a short "of france" must not be judged as speech over the robot."""
    clock = Clock()
    owner = TurnOwner(TurnRules(), interruption, 1.0, clock=clock)
    assert owner.partial("what is the") == Ruling(Voice.KEEP, hand_on=True)  # the robot is silent: a turn
    assert owner.final("what is the capital").hand_on
    owner.robot_speaking(True)  # the reply to the cut-off question
    expect = Voice.PAUSE if interruption == "pause" else Voice.KEEP
    assert owner.voice("resumed", clock.t).voice is expect  # silent at once while the words come
    clock.t += 0.3
    assert owner.partial("what is the capital of") == Ruling(Voice.STOP, hand_on=True)  # 0.3 s, one word
    assert owner.final("what is the capital of france").hand_on


def test_a_reply_that_begins_while_the_user_goes_on_after_an_early_final_stops_as_it_begins():
    """The early final's reply was not yet playing when the user went on: it answers the
    question cut short, so it stops as soon as tts_node says it began; the answer to the
    whole question, begun after its final, is left alone."""
    clock = Clock()
    owner = TurnOwner(TurnRules(), "pause", 1.0, clock=clock)
    owner.partial("what is the")
    assert owner.final("what is the capital").hand_on
    assert owner.voice("resumed", clock.t).voice is Voice.KEEP  # nothing plays yet
    assert owner.partial("what is the capital of") == Ruling(Voice.KEEP, hand_on=True)
    assert owner.robot_speaking(True) is Voice.STOP
    assert owner.final("what is the capital of france").hand_on
    owner.robot_speaking(False)
    assert owner.robot_speaking(True) is Voice.KEEP


@pytest.mark.parametrize("interruption, expect", [("pause", Voice.PAUSE), ("stop", Voice.KEEP)])
def test_a_reply_that_begins_before_the_users_further_words_waits_for_them(interruption, expect):
    """Resumed, no word yet: the reply beginning pauses (with `pause`) until the words
    stop it; a cough that makes none lets it go on once asr_node confirms the early final
    (not at resume_s: Whisper's first word may come later than that)."""
    clock = Clock()
    owner = TurnOwner(TurnRules(), interruption, 1.0, clock=clock)
    owner.final("what is the capital")
    owner.voice("resumed", clock.t)
    assert owner.robot_speaking(True) is expect
    assert owner.partial("what is the capital of").voice is Voice.STOP
    coughed = TurnOwner(TurnRules(), "pause", 1.0, clock=clock)
    coughed.final("what is the capital")
    coughed.voice("resumed", clock.t)
    assert coughed.robot_speaking(True) is Voice.PAUSE
    coughed.voice("end", clock.t + 0.2)
    clock.t += 0.2 + 3 * coughed.resume_s
    assert coughed.due() is Voice.KEEP  # the words may still come
    assert coughed.voice("confirmed", clock.t).voice is Voice.RESUME


def test_a_resumed_voice_that_makes_no_word_lets_the_reply_go_on():
    clock = Clock()
    owner = talking_owner(clock=clock)
    assert owner.voice("resumed", clock.t).voice is Voice.PAUSE
    owner.voice("end", clock.t + 0.2)  # a cough: no word ever comes
    clock.t += 0.2 + owner.resume_s
    assert owner.due() is Voice.KEEP
    assert owner.voice("confirmed", clock.t).voice is Voice.RESUME  # asr_node: it made no word, the final stands
    assert owner.voice("confirmed", clock.t).voice is Voice.KEEP  # an ordinary confirmation changes nothing
    assert owner.voice("start", clock.t).voice is Voice.PAUSE  # a new utterance over the robot
    assert owner.partial("okay") == Ruling(Voice.RESUME, hand_on=False)  # judged as speech over the robot again


def test_a_final_that_comes_after_the_next_utterance_began_is_judged_as_its_own():
    """Whisper's final may be published after the next utterance's voice began: an
    acknowledgement over the robot stays no turn."""
    owner = talking_owner()
    owner.voice("start", 0.0)
    assert not owner.partial("mm").hand_on
    owner.voice("start", 1.2)  # the next utterance opens before that one's final is ready
    assert not owner.final("mm hmm").hand_on


def test_what_was_heard_of_a_reply_cut_off():
    heard = heard_text([("Paris is the capital of France.", 1.0), ("It lies on the Seine, a long river.", 0.5)])
    assert heard == "Paris is the capital of France. It lies on the" + CUT_OFF_MARK
    assert heard_text([("Sure, here it is.", 0.0)]) == CUT_OFF_MARK
