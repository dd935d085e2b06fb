"""The engine worker thread and its latest-wins mailbox."""

from __future__ import annotations

import logging
import threading
import time

from hypothesis import given
from hypothesis import strategies as st

from predgen_ros.engine.session import EngineConfig, Session
from predgen_ros.engine.worker import EngineWorker, Event, Mailbox
from predgen_ros.turn_events import TurnEvent, TurnEventWriter, TurnKind


def words(text, utterance=1):
    return Event("turn", TurnEvent(TurnKind.TEXT, utterance, "s", text))


def ending(text, utterance=1):
    return Event("turn", TurnEvent(TurnKind.ENDED, utterance, "s", text))


def test_words_replace_the_unread_words_of_their_utterance_but_endings_stay_in_order():
    box = Mailbox(capacity=4)
    for text in ("a", "a b", "a b c"):
        box.post(words(text))
    box.post(ending("a b c d"))
    box.post(words("next", 2))
    box.post(words("other", 3))  # another utterance's words do not replace them
    taken = [(e.turn.kind, e.turn.text) for e in box.take(0)]
    assert taken == [("text", "a b c"), ("ended", "a b c d"), ("text", "next"), ("text", "other")]
    assert box.replaced == 2 and box.take(0) == []


def test_a_backlog_drops_old_words_never_an_ending_or_a_reset():
    box = Mailbox(capacity=4)
    for i in range(10):
        box.post(words(f"utterance {i}", i + 1))
        box.post(ending(f"utterance {i}", i + 1))
    box.post(Event("reset"))
    pending = box.take(0)
    assert [e.turn.text for e in pending if e.turn and e.turn.kind == "ended"] == [f"utterance {i}" for i in range(10)]
    assert pending[-1].kind == "reset"
    assert not any(e.words for e in pending) and box.dropped == 10


@given(st.lists(st.sampled_from(["text", "ended", "reset"]), max_size=400), st.integers(1, 16))
def test_pending_words_stay_bounded_and_no_other_event_is_lost(kinds, capacity):
    box = Mailbox(capacity)
    events = [
        Event("reset", text=str(i)) if k == "reset" else Event("turn", TurnEvent(TurnKind(k), 1, "s", str(i)))
        for i, k in enumerate(kinds)
    ]
    label = lambda e: e.turn.text if e.turn else e.text  # noqa: E731
    for i, event in enumerate(events):
        box.post(event)
        others = sum(k != "text" for k in kinds[: i + 1])
        assert len(box) <= max(capacity, others + 1)  # only words are dropped, the newest event never
    pending = box.take(0)
    assert box.dropped + box.replaced + len(pending) == len(kinds)  # every event is accounted for
    if kinds:
        assert label(pending[-1]) == str(len(kinds) - 1)
    assert [label(e) for e in pending if not e.words] == [str(i) for i, k in enumerate(kinds) if k != "text"]
    assert all(not (a.words and b.words) for a, b in zip(pending, pending[1:]))
    assert [int(label(e)) for e in pending] == sorted(int(label(e)) for e in pending)


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


def post(worker, events, t=None):
    for event in events:
        worker.mailbox.post(Event("turn", event, t=time.time() if t is None else t))


def say(worker, text, user=None, t_speech_end=None):
    """The user's words one more at a time, then the ending."""
    user = user or TurnEventWriter()
    said = text.split()
    for n in range(1, len(said) + 1):
        post(worker, user.words(" ".join(said[:n]), time.time()))
    post(worker, user.final(text, t_speech_end or time.time(), may_continue=False, handed_on=True))


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
    user, base = TurnEventWriter(), time.time() - 100
    try:
        for t_end in (base, base + 10):
            recorder.done.clear()
            say(worker, "yes", user, t_speech_end=t_end)
            assert recorder.done.wait(60), f"no reply to the utterance that ended at {t_end}"
        sent_again = user.final("yes", base + 10, may_continue=False, handed_on=True)[-1]
        post(worker, [TurnEvent(sent_again.kind, 2, user.stream, "yes", base + 10)])  # the second ending re-delivered
        recorder.done.clear()
        say(worker, "thanks", user, t_speech_end=base + 12)
        assert recorder.done.wait(60)
        turns = [turn for kind, _, turn in recorder.emissions if kind == "done"]
        assert [(t.utterance, t.user_text) for t in turns] == [("1", "yes"), ("2", "yes"), ("4", "thanks")]
        assert [t.t_speech_end for t in turns] == [base, base + 10, base + 12]
        assert worker.finals_not_taken == 1
    finally:
        worker.stop()


def test_a_burst_of_partials_costs_a_few_verifications(tiny_lm):
    worker, recorder = start_worker(tiny_lm, policy="predgen", verifier="exact", max_new_tokens=4)
    try:
        user = TurnEventWriter()
        for i in range(1000):
            post(worker, user.words(f"count the numbers up to {i}", time.time()))
        post(worker, user.final("count the numbers up to 999", time.time(), may_continue=False, handed_on=True))
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


def early_start(tiny_lm):
    """A worker, not started, with the cut question ended early and the user going on (the
    ear's `reopened`), all taken in one batch."""
    recorder = Recorder()
    worker = EngineWorker(Session(tiny_lm, EngineConfig(policy="predgen", max_new_tokens=4), time.time), recorder)
    user, now = TurnEventWriter(), time.time()
    post(worker, user.words("what is the capital", now - 1.0))
    post(worker, user.final("what is the capital", now - 0.4, may_continue=True, handed_on=True))
    post(worker, user.voice("resumed", now - 0.2))
    return worker, recorder, user


def test_words_after_an_early_final_are_answered_as_one_question(tiny_lm):
    """The user went on after an eager end of turn: the robot does not answer the cut
    question; it answers the whole one."""
    worker, recorder, user = early_start(tiny_lm)
    post(worker, user.words("what is the capital of france", time.time()))
    worker.start()
    try:

        def settled():  # the continuation was taken in, its words scored, nothing left to do
            heard = ("end_probability", "what is the capital of france") in [(kind, text) for kind, text, _ in recorder.emissions]
            return heard and not worker.busy()

        deadline = time.time() + 60
        while not settled() and time.time() < deadline:
            time.sleep(0.05)
        assert settled()
        assert not [kind for kind, _, _ in recorder.emissions if kind in ("commit", "done")]
        post(worker, user.final("what is the capital of france", time.time(), may_continue=True, handed_on=True))
        assert recorder.done.wait(60)
        assert [user for user, _ in worker.session.history] == ["what is the capital of france"]
    finally:
        worker.stop()


def test_no_reply_begins_while_the_user_goes_on_after_an_early_final(tiny_lm):
    """`reopened` came after the early ending: the robot does not answer the cut question;
    `confirmed` (that voice made no word) lets the answer out."""
    worker, recorder, user = early_start(tiny_lm)
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
        post(worker, user.voice("confirmed", time.time()))
        assert recorder.done.wait(60)
        assert [user for user, _ in worker.session.history] == ["what is the capital"]
    finally:
        worker.stop()


def test_a_served_model_that_cannot_be_reached_is_told_not_traced(tokenizer, caplog):
    """No server at the address and nothing behind it (model.server.fallback: notice): the
    user who finished speaking hears the notice, the log has one line, the worker serves on."""
    import socket

    from predgen_ros.engine.backends.served import ServedBackend, ServerSettings
    from predgen_ros.engine.config import SERVER_NOTICE
    from predgen_ros.engine.lm import LanguageModel

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    lm = LanguageModel(ServedBackend(ServerSettings(url, api="openai", token_ids=False, timeout_s=2), tokenizer), tokenizer)
    recorder, told = Recorder(), threading.Event()
    recorder_call = recorder.__call__
    worker = EngineWorker(
        Session(lm, EngineConfig(policy="predgen", max_new_tokens=4), time.time),
        lambda kind, text, turn: (recorder_call(kind, text, turn), kind == "notice" and told.set()),
    )
    worker.start()
    try:
        with caplog.at_level(logging.ERROR, logger="predgen_ros.engine.worker"):
            say(worker, "Please bring me a glass of water.")
            assert told.wait(60)
        notices = [(text, turn.user_text) for kind, text, turn in recorder.emissions if kind == "notice"]
        assert notices == [(SERVER_NOTICE, "Please bring me a glass of water.")]
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert all(r.exc_info is None and url in r.getMessage() for r in errors) and worker.alive
    finally:
        worker.stop()
