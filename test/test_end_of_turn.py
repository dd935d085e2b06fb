"""The text end-of-turn signal: the LLM's probability of the end-of-user-message
token after the user's last word, read off passes the engine runs anyway."""

import math

import pytest

CUT = "what is the capital of"
COMPLETE = "what is the capital of france"


def drain(session):
    emissions = []
    while session.has_work():
        emissions += session.step()
    return emissions


def fresh_end_probability(lm, text):
    open_ids = lm.open_turn_ids(text)
    return lm.end_of_user_probability(lm.token_logits(open_ids, [lm.end_of_user_id])[0])


@pytest.mark.parametrize("anticipate", [False, True])
def test_a_partial_gets_its_probability_from_the_first_pass_it_causes(smollm, make_session, anticipate):
    """The pass that verifies against the new partial (or starts guessing its end)
    reads the user's last word; its logits there are the estimate, so it costs no
    pass of its own.  With anticipation a partial that follows the guess causes no
    pass: the guess's pass over those words gave it."""
    session = make_session(smollm, anticipate=anticipate, max_new_tokens=0)
    for text in (CUT, COMPLETE):
        user_of(session).partial(text, 0.0)
        passes = smollm.stats.passes
        first = session.step()
        assert smollm.stats.passes - passes <= 1
        assert ("end_probability", text) in first
        drain(session)
    scored = dict(session.turn.end_probabilities)
    if not anticipate:  # (a guess may write "France" where the user's words say "france")
        for text in (CUT, COMPLETE):
            assert math.isclose(scored[text], fresh_end_probability(smollm, text), rel_tol=1e-3, abs_tol=1e-9)
    # a complete question is far more likely finished than one cut mid-sentence
    assert scored[COMPLETE] > 100 * scored[CUT]


def test_the_final_ends_the_estimates(smollm, make_session):
    session = make_session(smollm, max_new_tokens=0)
    user_of(session).partial(CUT, 0.0)
    user_of(session).final(COMPLETE, 1.0)
    session.end_of_turn(1.0)
    kinds = [kind for kind, _ in drain(session)]
    assert "end_probability" not in kinds and session.turn.end_probabilities == []


def test_baseline_runs_no_pass_while_the_user_speaks_so_it_has_no_estimate(smollm, make_session):
    session = make_session(smollm, policy="baseline", max_new_tokens=0)
    user_of(session).partial(CUT, 0.0)
    assert not session.has_work() and session.turn.end_probabilities == []


# ------------------------------------------------- the user goes on after an early final

from test_session import RULES  # noqa: E402
from user_turns import user_of  # noqa: E402


@pytest.mark.parametrize("max_new_tokens", [0, 10])
def test_words_after_an_early_final_reopen_the_turn_and_are_answered_as_one_question(tiny_lm, make_session, max_new_tokens):
    session = make_session(tiny_lm, max_new_tokens=max_new_tokens, sentence=RULES)
    user_of(session).partial(CUT, 0.0)
    user_of(session).final(CUT, 1.0, early=True)
    session.end_of_turn(1.0)
    early = drain(session)
    assert ("commit", session.turn.first_sentence) in early  # the robot had its answer to the cut question
    cut_turn = session.turn
    user_of(session).voice("resumed")  # ... and the user went on (asr_node's word)
    user_of(session).partial(COMPLETE, 1.5)
    assert session.turn is not cut_turn and session.turn.t_final is None
    said = [(CUT, cut_turn.reply or cut_turn.first_sentence)]
    assert session.history == said  # no stop came: the user heard the reply to the cut question
    user_of(session).final(COMPLETE, 2.0)
    session.end_of_turn(2.0)
    drain(session)
    baseline = make_session(tiny_lm, policy="baseline", max_new_tokens=max_new_tokens, sentence=RULES)
    baseline.reset(said)
    user_of(baseline).final(COMPLETE, 0.0)
    baseline.end_of_turn(0.0)
    drain(baseline)
    assert (session.turn.first_sentence, session.turn.reply) == (baseline.turn.first_sentence, baseline.turn.reply)
    assert session.history == baseline.history


def test_a_new_question_after_the_final_is_a_new_turn(tiny_lm, make_session):
    session = make_session(tiny_lm, max_new_tokens=0, sentence=RULES)
    user_of(session).partial(COMPLETE, 0.0)
    user_of(session).final(COMPLETE, 1.0)
    session.end_of_turn(1.0)
    drain(session)
    user_of(session).partial("and what about germany", 1.5)
    assert session.turn.t_final is None and [user for user, _ in session.history] == [COMPLETE]


def test_longer_words_without_the_asrs_resumed_are_a_new_turn(tiny_lm, make_session):
    """Only the ASR decides that the user went on: words that merely extend the final
    (an ASR without voice events, or the user saying it again longer) are a new turn."""
    session = make_session(tiny_lm, max_new_tokens=0, sentence=RULES)
    user_of(session).partial(CUT, 0.0)
    user_of(session).final(CUT, 1.0)
    session.end_of_turn(1.0)
    drain(session)
    user_of(session).partial(COMPLETE, 1.5)
    assert session.turn.t_final is None and [user for user, _ in session.history] == [CUT]


def test_the_offline_scorer_estimate_equals_a_fresh_pass(smollm):
    """`predgen-ros endpoints` reuses the KV cache between growing hypotheses."""
    from predgen_ros.eval.hearing.endpoints import TextEstimator

    estimate = TextEstimator(smollm)
    for text in ("what is", "what is the capital", "what is the capital of france", "tell me a joke"):
        open_ids = smollm.open_turn_ids(text)
        fresh = smollm.end_of_user_probability(smollm.token_logits(open_ids, [smollm.end_of_user_id])[0])
        assert estimate(text) == pytest.approx(fresh, rel=1e-3, abs=1e-9), text


@pytest.mark.parametrize("played_first", [False, True])
def test_the_history_keeps_what_was_played_of_the_reply_to_a_cut_question(tiny_lm, make_session, played_first):
    """The user went on after an early final while its reply played: the reply is stopped,
    the whole question answered, and the history holds the earlier exchange untouched, the
    cut question with only what the user heard of its reply (tts/played, which may come
    before or after the continuation's words), then the whole question's."""
    session = make_session(tiny_lm, max_new_tokens=10, sentence=RULES, history_turns=0)  # every turn kept
    session.reset([("hello there", "Hi.")])
    user_of(session).partial(CUT, 0.0)
    user_of(session).final(CUT, 1.0, early=True)
    session.end_of_turn(1.0)
    drain(session)
    user_of(session).voice("resumed")
    heard = "The capital—"
    if played_first:
        session.reply_heard(heard)
    user_of(session).partial(COMPLETE, 1.5)
    if not played_first:
        session.reply_heard(heard)
    user_of(session).final(COMPLETE, 2.0)
    session.end_of_turn(2.0)
    drain(session)
    assert session.history[:2] == [("hello there", "Hi."), (CUT, heard)]
    assert session.history[2][0] == COMPLETE and len(session.history) == 3
    baseline = make_session(tiny_lm, policy="baseline", max_new_tokens=10, sentence=RULES, history_turns=0)
    baseline.reset(session.history[:2])
    user_of(baseline).final(COMPLETE, 0.0)
    baseline.end_of_turn(0.0)
    drain(baseline)
    assert session.turn.reply == baseline.turn.reply  # answered after what the user heard
