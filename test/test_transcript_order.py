"""The ordering rules ahead of Session, on their own (engine/transcript_order.py)."""

from predgen_ros.engine.transcript_order import (
    LATE_COPY_WINDOW_S,
    SPEECH_END_MAX_LAG_S,
    Arrival,
    TranscriptOrder,
    Utterance,
)


def finalized(text="what is the capital", t=10.0, utterance=None) -> TranscriptOrder:
    order = TranscriptOrder()
    assert order.partial("what is", t - 1) is Arrival.NEWS
    assert order.final(text, t, utterance, None) is Arrival.NEWS
    assert order.state is Utterance.FINALIZED
    return order


def test_partials_before_the_final_are_news_and_empty_text_is_nothing():
    order = TranscriptOrder()
    assert order.state is Utterance.HEARING
    assert order.partial("", 0.0) is Arrival.EMPTY
    assert order.partial("what", 0.1) is Arrival.NEWS
    assert order.final("", 0.2, None, None) is Arrival.EMPTY


def test_only_words_after_the_final_can_stand_for_an_empty_final():
    order = finalized()
    assert not order.last_partial_unfinalized  # the final covered "what is"
    assert order.partial("and then", 10.0 + LATE_COPY_WINDOW_S + 0.5) is Arrival.NEWS
    assert order.last_partial_unfinalized


def test_a_late_copy_of_a_partial_is_dropped_only_within_its_window():
    assert finalized().partial("what is the", 10.0 + LATE_COPY_WINDOW_S / 2) is Arrival.COPY
    assert finalized().partial("what is the", 10.0 + LATE_COPY_WINDOW_S + 0.1) is Arrival.NEWS  # the user said it again


def test_more_words_after_an_early_final_reopen_the_utterance_once_the_asr_said_resumed():
    order = finalized()
    order.voice("resumed")
    assert order.partial("what is the capital of france", 11.0) is Arrival.CONTINUES
    assert order.state is Utterance.HEARING


def test_the_resumed_word_may_come_just_before_the_final_it_continues():
    order = TranscriptOrder()
    order.partial("what is the capital", 9.0)
    order.voice("resumed")  # on asr/voice, which may overtake asr/final
    order.final("what is the capital", 10.0, None, None)
    assert order.partial("what is the capital of france", 11.0) is Arrival.CONTINUES


def test_without_the_resumed_word_more_words_are_a_new_turn_however_soon():
    assert finalized().partial("what is the capital of france", 10.5 + LATE_COPY_WINDOW_S) is Arrival.NEWS
    started = finalized()
    started.voice("resumed")
    started.voice("start")  # that speech made no word; this is a new utterance
    assert started.partial("what is the capital of france", 13.0) is Arrival.NEWS


def test_a_redelivered_final_is_a_copy_by_number_or_by_words_with_nothing_heard_between():
    numbered = finalized(utterance="7")
    assert numbered.final("what is the capital", 40.0, "7", None) is Arrival.COPY  # however late
    assert numbered.final("what is the capital", 40.1, "8", None) is Arrival.NEWS  # a new utterance, however soon
    unnumbered = finalized()
    assert unnumbered.final("what is the capital", 10.5, None, None) is Arrival.COPY
    assert unnumbered.partial("yes", 10.6) is Arrival.NEWS  # something heard in between...
    assert unnumbered.final("what is the capital", 10.7, None, None) is Arrival.NEWS  # ...so it was said again


def test_an_end_of_speech_pairs_with_its_final_whichever_comes_first():
    before = TranscriptOrder()
    assert not before.speech_end("3", 9.5)  # waits for its final
    before.final("hello", 10.0, None, None)
    assert (before.utterance, before.t_speech_end) == ("3", 9.5)

    after = TranscriptOrder()
    after.final("hello", 10.0, None, None)
    assert after.speech_end("3", 9.5)  # it trailed its final
    assert (after.utterance, after.t_speech_end) == ("3", 9.5)


def test_a_stale_end_of_speech_pairs_with_nothing():
    order = TranscriptOrder()
    order.speech_end("1", 0.0)
    order.final("hello", SPEECH_END_MAX_LAG_S + 1.0, None, None)
    assert (order.utterance, order.t_speech_end) == (None, None)


def test_resumed_holds_the_final_until_the_words_that_went_on_or_confirmed_come():
    order = TranscriptOrder()
    order.partial("what is the capital", 9.0)
    order.voice("resumed", 10.4)  # overtook its final, whose speech ended at 10.2
    order.final("what is the capital", 10.5, "3", 10.2)
    assert order.awaiting_continuation
    order.voice("confirmed", 11.2)  # that voice made no word
    assert not order.awaiting_continuation


def test_a_final_that_extends_the_early_one_reopens_it_and_settles_the_resumption():
    order = finalized()
    order.voice("resumed", 10.4)
    assert order.awaiting_continuation
    assert order.final("what is the capital of france", 12.3, None, None) is Arrival.CONTINUES  # no partial came
    assert not order.awaiting_continuation


def test_a_final_whose_speech_ended_after_the_voice_came_back_settles_the_resumption():
    """Whisper may rewrite the early words in the whole question's final: its end of speech
    still says it holds what was said after the voice came back."""
    order = finalized()
    order.voice("resumed", 10.4)
    order.speech_end("4", 12.0)
    assert order.final("what was the capital of france", 12.3, None, None) is Arrival.NEWS
    assert not order.awaiting_continuation
    trailing = finalized(t=20.0)
    trailing.voice("resumed", 20.4)
    trailing.final("what was the capital of france", 22.3, None, None)
    assert trailing.awaiting_continuation  # which speech it holds is known only with its end of speech
    assert trailing.speech_end("5", 22.0)
    assert not trailing.awaiting_continuation


def test_a_final_after_resumed_that_does_not_add_to_the_early_one_is_news():
    order = finalized()
    order.voice("resumed", 10.4)
    assert order.final("tell me a joke", 12.3, None, 12.0) is Arrival.NEWS
