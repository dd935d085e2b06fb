"""Bad transcripts never crash the engine or lose a turn (tiny float64 model).

One test per kind of bad input; each asserts what the user gets, not only
that nothing raised.  The ROS-level counterparts are in test_graph.py.
"""

from __future__ import annotations

import logging

import pytest
from test_session import greedy_reply
from user_turns import user_of

from predgen_ros.engine.lm import LanguageModel
from predgen_ros.engine.sentences import SentenceRules
from predgen_ros.turn_events import TurnKind

RULES = SentenceRules(min_chars=10, fallback_chars=60, max_tokens=8)
EXACT = dict(policy="predgen", verifier="exact", max_new_tokens=6, sentence=RULES, history_turns=0)  # every turn kept: counted


def finish(session, t: float = 1.0) -> list[tuple[str, str]]:
    """End the turn and run the session until it is done; its emissions."""
    session.end_of_turn(t)
    out = []
    for _ in range(500):
        if not session.has_work():
            break
        out += session.step()
    assert not session.has_work(), "the turn never finished"
    return out


def speak(session, partials: list[str], final: str | None, steps: int = 2) -> list[tuple[str, str]]:
    out = []
    for text in partials:
        user_of(session).partial(text, 0.0)
        for _ in range(steps):
            if session.has_work():
                out += session.step()
    if final is not None:
        user_of(session).final(final, 0.5)
    return out + finish(session)


def replies(emissions) -> list[str]:
    return [text for kind, text in emissions if kind == "done"]


def baseline_text(lm, text: str, n: int = 6) -> str:
    return lm.decode(greedy_reply(lm, text, n)).strip()


def test_empty_and_whitespace_partials_are_ignored(tiny_lm, make_session):
    session = make_session(tiny_lm, **EXACT)
    out = speak(session, ["", "   ", "\t\n", "tell me", " ", "tell me about paris"], "tell me about paris")
    assert replies(out) == [baseline_text(tiny_lm, "tell me about paris")]
    assert session.history[-1][0] == "tell me about paris"


@pytest.mark.parametrize(
    "text",
    [
        "what does 🤖🚀 mean?",
        "ما هي عاصمة فرنسا؟ and paris",
        "tell\x00 me\x07 about\x1b[31m paris\u202e",
        "x" * 10_000,
    ],
)
def test_odd_unicode_is_answered_like_any_text(tiny_lm, make_session, text):
    session = make_session(tiny_lm, **EXACT)
    out = speak(session, [text[: len(text) // 2], text], text)
    assert len(replies(out)) == 1
    assert session.turn.user_text == " ".join(text.split())
    assert replies(out)[0] == baseline_text(tiny_lm, " ".join(text.split()))


def test_a_final_without_any_partial_is_answered(tiny_lm, make_session):
    session = make_session(tiny_lm, **EXACT)
    out = speak(session, [], "what is the capital of france")
    assert replies(out) == [baseline_text(tiny_lm, "what is the capital of france")]


def test_a_duplicated_final_gives_one_reply(tiny_lm, make_session):
    session = make_session(tiny_lm, **EXACT)
    user_of(session).partial("what is", 0.0)
    assert user_of(session).final("what is paris", 0.5)
    assert not user_of(session).again(0.6)
    out = finish(session)
    assert not user_of(session).again(1.1)  # once more, after the reply
    assert not session.has_work()
    assert replies(out) == [baseline_text(tiny_lm, "what is paris")]
    assert [user for user, _ in session.history] == ["what is paris"]


def test_partials_after_the_final_do_not_replace_it(tiny_lm, make_session):
    session = make_session(tiny_lm, **EXACT)
    user = user_of(session)
    user.partial("what is the", 0.0)
    user.final("what is the capital", 0.5)
    words = next(e for e in user.sent if e.kind is TurnKind.TEXT)
    assert not session.hear(words, 0.55)  # the utterance's words delivered again after its ending
    out = finish(session)
    assert not session.hear(words, 1.2)  # and after the reply
    assert not session.has_work()
    assert replies(out) == [baseline_text(tiny_lm, "what is the capital")]
    assert [user for user, _ in session.history] == ["what is the capital"]


def say_utterance(session, text: str, t: float) -> list[tuple[str, str]]:
    """One whole utterance at time `t`: its partial, its final, the end of turn, the reply."""
    user_of(session).partial(text, t)
    user_of(session).final(text, t + 0.5)
    return finish(session, t + 0.5)


@pytest.mark.parametrize("policy", ["baseline", "preemptive", "predgen"])
def test_the_same_words_said_twice_get_two_replies(tiny_lm, make_session, policy):
    """ "Shall I bring it?" - "yes". "Shall I bring it?" - "yes": two utterances, two turns."""
    session = make_session(tiny_lm, **{**EXACT, "policy": policy})
    first = say_utterance(session, "yes", 0.0)
    second = say_utterance(session, "yes", 5.0)
    assert replies(first) == [baseline_text(tiny_lm, "yes")]
    assert len(replies(second)) == 1 and session.turn.history_turns == 1  # answered, with the first "yes" in its prompt
    assert [user for user, _ in session.history] == ["yes", "yes"]


def test_utterance_numbers_decide_what_is_a_repeated_final(tiny_lm, make_session):
    session = make_session(tiny_lm, **EXACT)
    say_utterance(session, "yes", 0.0)
    assert not user_of(session).again(30.0)  # the same utterance, however late
    assert user_of(session).final("yes", 30.1)  # a new one, however soon
    assert len(replies(finish(session, 30.1))) == 1
    assert [user for user, _ in session.history] == ["yes", "yes"]


def test_a_barge_in_that_repeats_the_question_is_answered(tiny_lm, make_session):
    session = make_session(tiny_lm, **{**EXACT, "max_new_tokens": 40})
    user_of(session).partial("tell me about paris", 0.0)
    user_of(session).final("tell me about paris", 0.5)
    session.end_of_turn(0.5)
    while session.turn.t_commit is None:
        session.step()  # the robot starts its reply...
    for n, text in enumerate(["tell", "tell me", "tell me about paris"]):  # ...and the user asks again
        assert user_of(session).partial(text, 3.0 + n)
    user_of(session).final("tell me about paris", 5.5)
    out = finish(session, 5.5)
    assert len(replies(out)) == 1  # answered, with the interrupted reply in its history
    assert [user for user, _ in session.history] == ["tell me about paris"] * 2  # the interrupted reply, then the new one


def test_a_hypothesis_that_rewrites_everything_is_verified(tiny_lm, make_session):
    session = make_session(tiny_lm, **EXACT)
    out = speak(session, ["tell me about paris robot", "tell me", "why is it so famous"], "why is it so famous", steps=6)
    assert replies(out) == [baseline_text(tiny_lm, "why is it so famous")]


def test_a_very_short_turn_is_answered(tiny_lm, make_session):
    session = make_session(tiny_lm, **EXACT)
    out = speak(session, ["hi"], "hi")
    assert replies(out) == [baseline_text(tiny_lm, "hi")]


@pytest.fixture
def small_context_lm(tiny_lm):
    """The tiny model with a 200-token prompt budget."""
    lm = LanguageModel(tiny_lm.backend, tiny_lm.tokenizer, reply_reserve=tiny_lm.backend.context_length - 200)
    assert lm.prompt_budget == 200
    return lm


def test_old_history_turns_are_dropped_first_when_the_context_is_full(small_context_lm, caplog):
    history = [(f"question number {i} " * 3, f"answer number {i} " * 3) for i in range(12)]
    with caplog.at_level(logging.WARNING, logger="predgen_ros.engine.lm"):
        ids, dropped = small_context_lm.fit_prompt("what is paris", history)
    assert len(ids) <= 200 and 0 < dropped < len(history)
    assert ids == small_context_lm.fit_prompt("what is paris", history[dropped:])[0]  # newest turns kept, in order
    assert len(small_context_lm._template_ids("what is paris", history[dropped - 1 :])) > 200  # no more dropped than needed
    assert "dropped the" in caplog.text and "oldest history turn" in caplog.text


def test_a_transcript_longer_than_the_context_keeps_its_latest_words(small_context_lm, caplog):
    text = " ".join(f"word{i}" for i in range(400)) + " so what is paris"
    with caplog.at_level(logging.WARNING, logger="predgen_ros.engine.lm"):
        ids, dropped = small_context_lm.fit_prompt(text, [("old question", "old answer")])
    prompt = small_context_lm.decode(ids)
    assert len(ids) <= 200 and dropped == 1
    assert "so what is paris" in prompt and "word0 " not in prompt and "old question" not in prompt
    assert "oldest words are cut" in caplog.text


def test_a_session_over_the_context_answers_and_forgets_the_oldest_turns(small_context_lm, make_session):
    session = make_session(small_context_lm, **EXACT)  # no turn limit: the context is the limit
    for i in range(12):
        out = speak(session, [], f"question number {i} about paris and france")
        assert len(replies(out)) == 1
        assert len(session.turn.prompt_ids) <= 200
    assert 0 < len(session.history) < 12
    assert session.history[-1][0] == "question number 11 about paris and france"
