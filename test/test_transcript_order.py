"""The de-duplication ahead of Session, on its own (engine/transcript_order.py)."""

from predgen_ros.engine.transcript_order import Arrival, TranscriptOrder
from predgen_ros.turn_events import TurnEvent, TurnKind


def ev(kind, utterance, text="", stream="a"):
    return TurnEvent(TurnKind(kind), utterance, stream, text)


def taken(order, *events):
    return [order.take(e) for e in events]


NEWS, EMPTY, COPY, CONTINUES = Arrival.NEWS, Arrival.EMPTY, Arrival.COPY, Arrival.CONTINUES


def test_an_utterance_is_news_until_it_ends_and_its_events_sent_again_are_copies():
    order = TranscriptOrder()
    assert taken(order, ev("opened", 1), ev("text", 1, "what is"), ev("text", 1, ""), ev("ended", 1, "what is paris")) == [
        NEWS,
        NEWS,
        EMPTY,
        NEWS,
    ]
    assert taken(order, ev("opened", 1), ev("text", 1, "what is"), ev("ended", 1, "what is paris")) == [COPY] * 3
    assert taken(order, ev("text", 2, "and rome")) == [NEWS]  # a new number: a new utterance, whatever its words
    assert taken(order, ev("ended", 1, "what is paris")) == [COPY]  # stale: an older number


def test_words_after_an_early_end_continue_it_only_after_reopened():
    order = TranscriptOrder()
    taken(order, ev("text", 1, "what is the capital"), ev("ended_early", 1, "what is the capital"))
    assert order.take(ev("text", 1, "what is the capital of")) is COPY  # no reopened: sent again
    assert order.take(ev("reopened", 1)) is NEWS and order.awaiting_continuation
    assert order.take(ev("reopened", 1)) is COPY
    assert order.take(ev("text", 1, "what is the capital of france")) is CONTINUES
    assert not order.awaiting_continuation
    assert order.take(ev("text", 1, "what is the capital of france")) is NEWS  # the turn listens again
    assert order.take(ev("ended", 1, "what is the capital of france")) is NEWS


def test_an_ending_right_after_reopened_continues_the_turn():
    order = TranscriptOrder()
    taken(order, ev("ended_early", 1, "what is the capital"), ev("reopened", 1))
    assert order.take(ev("ended_early", 1, "what is the capital of france")) is CONTINUES


def test_confirmed_settles_an_early_end_and_nothing_else():
    order = TranscriptOrder()
    assert order.take(ev("confirmed", 1)) is COPY  # of nothing
    taken(order, ev("ended", 1, "hello"))
    assert taken(order, ev("reopened", 1), ev("confirmed", 1)) == [COPY, COPY]  # an end that was not early
    taken(order, ev("ended_early", 2, "what is the capital"), ev("reopened", 2))
    assert order.take(ev("confirmed", 2)) is NEWS and not order.awaiting_continuation  # that voice made no word
    assert order.take(ev("text", 2, "what is the capital of france")) is COPY


def test_a_newer_utterance_ends_the_wait_for_an_older_one():
    order = TranscriptOrder()
    taken(order, ev("ended_early", 1, "what is the capital"), ev("reopened", 1))
    assert order.take(ev("text", 2, "never mind")) is NEWS and not order.awaiting_continuation


def test_a_new_stream_counts_afresh():
    order = TranscriptOrder()
    taken(order, ev("text", 5, "hello"), ev("ended", 5, "hello"))
    assert order.take(ev("text", 1, "hello again", stream="b")) is NEWS  # asr_node restarted
    assert order.take(ev("ended", 1, "hello again", stream="b")) is NEWS
