"""The engine worker thread and its latest-wins mailbox."""

from __future__ import annotations

import logging
import threading
import time

from hypothesis import given
from hypothesis import strategies as st

from predgen_ros.engine.session import EngineConfig, Session
from predgen_ros.engine.worker import EngineWorker, Event, Mailbox


def test_a_partial_replaces_the_unread_partial_but_finals_stay_in_order():
    box = Mailbox(capacity=4)
    for text in ("a", "a b", "a b c"):
        box.post(Event("partial", text))
    box.post(Event("final", "a b c d"))
    box.post(Event("partial", "next"))
    assert [(e.kind, e.text) for e in box.take(0)] == [("partial", "a b c"), ("final", "a b c d"), ("partial", "next")]
    assert box.replaced == 2 and box.take(0) == []


def test_a_backlog_drops_old_partials_never_a_final_or_a_reset():
    box = Mailbox(capacity=4)
    for i in range(10):
        box.post(Event("partial", f"utterance {i}"))
        box.post(Event("final", f"utterance {i}"))
    box.post(Event("reset"))
    pending = box.take(0)
    assert [e.text for e in pending if e.kind == "final"] == [f"utterance {i}" for i in range(10)]
    assert pending[-1].kind == "reset"
    assert not any(e.kind == "partial" for e in pending) and box.dropped == 10


@given(st.lists(st.sampled_from(["partial", "final", "speech_end", "reset"]), max_size=400), st.integers(1, 16))
def test_pending_partials_stay_bounded_and_no_other_event_is_lost(kinds, capacity):
    box = Mailbox(capacity)
    for i, kind in enumerate(kinds):
        box.post(Event(kind, str(i)))
        others = sum(k != "partial" for k in kinds[: i + 1])
        assert len(box) <= max(capacity, others + 1)  # only partials are dropped, the newest event never
    pending = box.take(0)
    assert box.dropped + box.replaced + len(pending) == len(kinds)  # every event is accounted for
    if kinds:
        assert pending[-1].text == str(len(kinds) - 1)
    assert [e.text for e in pending if e.kind != "partial"] == [str(i) for i, k in enumerate(kinds) if k != "partial"]
    assert all(not (a.kind == b.kind == "partial") for a, b in zip(pending, pending[1:]))
    assert [int(e.text) for e in pending] == sorted(int(e.text) for e in pending)


class Recorder:
    def __init__(self):
        self.emissions = []
        self.done = threading.Event()

    def __call__(self, kind, text, turn):
        self.emissions.append((kind, text, turn))
        if kind == "done":
            self.done.set()


def start_worker(lm, **config):
    recorder = Recorder()
    worker = EngineWorker(Session(lm, EngineConfig(**config), time.time), recorder)
    worker.start()
    return worker, recorder


def say(worker, text):
    words = text.split()
    for n in range(1, len(words) + 1):
        worker.mailbox.post(Event("partial", " ".join(words[:n]), time.time()))
    worker.mailbox.post(Event("final", text, time.time()))


def test_worker_answers_a_turn_in_order(tiny_lm):
    worker, recorder = start_worker(tiny_lm, policy="predgen", verifier="exact", max_new_tokens=12)
    try:
        say(worker, "What is the capital of France?")
        assert recorder.done.wait(60)
        kinds = [kind for kind, _, _ in recorder.emissions]
        assert "commit" in kinds and kinds.index("commit") < kinds.index("done")
        assert set(kinds[: kinds.index("commit")]) <= {"candidate", "beginning"}
        assert worker.session.history[-1][0] == "What is the capital of France?"
    finally:
        worker.stop()


def test_the_same_words_as_two_utterances_get_two_replies_and_their_speech_ends(tiny_lm):
    worker, recorder = start_worker(tiny_lm, policy="predgen", verifier="exact", max_new_tokens=4)
    base = time.time() - 100  # event times in the past: each end of turn is due at once

    def utterance(text, number, t_end):
        recorder.done.clear()
        worker.mailbox.post(Event("partial", text, t_end - 0.5))
        worker.mailbox.post(Event("speech_end", number, t_end))
        worker.mailbox.post(Event("final", text, t_end + 0.3))

    try:
        for number, t_end in (("1", base), ("2", base + 10)):
            utterance("yes", number, t_end)
            assert recorder.done.wait(60), f"no reply to utterance {number}"
        worker.mailbox.post(Event("speech_end", "2", base + 10))  # the second utterance re-delivered
        worker.mailbox.post(Event("final", "yes", base + 10.4))
        recorder.done.clear()
        worker.mailbox.post(Event("final", "thanks", base + 12))  # an ASR without speech ends from here on
        assert recorder.done.wait(60)
        turns = [turn for kind, _, turn in recorder.emissions if kind == "done"]
        assert [(t.utterance, t.user_text) for t in turns] == [("1", "yes"), ("2", "yes"), (None, "thanks")]
        assert [t.t_speech_end for t in turns] == [base, base + 10, None]  # the re-delivery's stamp went with it
    finally:
        worker.stop()


def test_a_speech_end_that_arrives_after_its_final_still_counts(tiny_lm):
    worker, recorder = start_worker(tiny_lm, policy="baseline", max_new_tokens=4)
    try:
        t_end = time.time() - 1
        worker.mailbox.post(Event("final", "what is paris", t_end + 0.4))
        worker.mailbox.post(Event("speech_end", "3", t_end))  # another topic: may overtake or trail its final
        assert recorder.done.wait(60)
        turn = recorder.emissions[-1][2]
        assert turn.t_speech_end == t_end and turn.utterance == "3"
    finally:
        worker.stop()


def test_a_burst_of_partials_costs_a_few_verifications(tiny_lm):
    worker, recorder = start_worker(tiny_lm, policy="predgen", verifier="exact", max_new_tokens=4)
    try:
        for i in range(1000):
            worker.mailbox.post(Event("partial", f"count the numbers up to {i}", time.time()))
        worker.mailbox.post(Event("final", "count the numbers up to 999", time.time()))
        assert recorder.done.wait(60)
        turn = recorder.emissions[-1][2]
        assert turn.user_text == "count the numbers up to 999"
        assert turn.rounds < 100, turn.rounds  # one verification per batch taken, not per message
        assert worker.mailbox.replaced > 900
    finally:
        worker.stop()


def test_an_error_in_a_turn_is_logged_and_the_next_turn_served(tiny_lm, caplog):
    worker, recorder = start_worker(tiny_lm, policy="predgen", verifier="exact", max_new_tokens=4)
    real_step = worker.session.step
    calls = {"n": 0}

    def failing_once():
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("simulated fault")
        return real_step()

    worker.session.step = failing_once
    logged = threading.Event()  # the worker logs the error once it has counted it
    handler = logging.Handler(logging.ERROR)
    handler.emit = lambda record: logged.set()
    log = logging.getLogger()  # on the root, after caplog's handler: the record is captured before the event
    log.addHandler(handler)
    try:
        with caplog.at_level(logging.ERROR, logger="predgen_ros.engine.worker"):
            say(worker, "First question?")
            assert logged.wait(60)
        assert worker.errors == 1 and worker.alive
        assert "simulated fault" in caplog.text and "dropping the turn" in caplog.text
        say(worker, "Second question?")
        assert recorder.done.wait(60)
        assert recorder.emissions[-1][2].user_text == "Second question?"
    finally:
        log.removeHandler(handler)
        worker.stop()


def test_words_after_an_early_final_cancel_its_end_of_turn(tiny_lm):
    """The user went on within the endpoint delay: the robot does not answer the cut
    question when the old end of turn falls due; it answers the whole one."""
    recorder = Recorder()
    worker = EngineWorker(
        Session(tiny_lm, EngineConfig(policy="predgen", max_new_tokens=4), time.time), recorder, endpoint_delay=0.2
    )
    now = time.time()
    worker.mailbox.post(Event("partial", "what is the capital", now))
    worker.mailbox.post(Event("final", "what is the capital", now))
    worker.mailbox.post(Event("voice", "resumed", now + 0.05))
    worker.mailbox.post(Event("partial", "what is the capital of france", now + 0.1))
    worker.start()
    try:

        def settled():  # the continuation was taken in, and the cut question's end of turn is past due
            heard = ("end_probability", "what is the capital of france") in [(kind, text) for kind, text, _ in recorder.emissions]
            return heard and time.time() > now + 0.3 and not worker.busy()

        deadline = time.time() + 60
        while not settled() and time.time() < deadline:
            time.sleep(0.05)
        assert settled()
        assert not [kind for kind, _, _ in recorder.emissions if kind in ("commit", "done")]
        worker.mailbox.post(Event("final", "what is the capital of france", time.time()))
        assert recorder.done.wait(60)
        assert [user for user, _ in worker.session.history] == ["what is the capital of france"]
    finally:
        worker.stop()


def test_no_reply_begins_while_the_user_goes_on_after_an_early_final(tiny_lm):
    """asr/voice's "resumed" came with the early final: the robot does not answer the cut
    question; "confirmed" (that voice made no word) lets the answer out."""
    recorder = Recorder()
    worker = EngineWorker(Session(tiny_lm, EngineConfig(policy="predgen", max_new_tokens=4), time.time), recorder)
    now = time.time()
    worker.mailbox.post(Event("partial", "what is the capital", now - 1.0))
    worker.mailbox.post(Event("voice", "resumed", now - 0.2))  # asr/voice may overtake asr/final
    worker.mailbox.post(Event("speech_end", "7", now - 0.4))
    worker.mailbox.post(Event("final", "what is the capital", now))  # its end of turn is due at once
    worker.start()
    try:

        def settled():  # the final is in and the first sentence ready: a reply free to begin would have
            turn = worker.session.turn
            return turn.t_commit is not None or (turn.t_final is not None and not worker.session.has_work())

        deadline = time.time() + 60
        while not settled() and time.time() < deadline:
            time.sleep(0.05)
        assert settled()
        assert worker.session.turn.t_commit is None
        assert not [kind for kind, _, _ in recorder.emissions if kind in ("commit", "done")]
        worker.mailbox.post(Event("voice", "confirmed", now + 0.5))
        assert recorder.done.wait(60)
        assert [user for user, _ in worker.session.history] == ["what is the capital"]
    finally:
        worker.stop()
