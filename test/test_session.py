"""Policies behind the session API, on a tiny random model (float64), and the lossless
properties also on the real model in llama.cpp."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_kv_and_verify import assert_cache_matches
from user_turns import user_of

from predgen_ros.engine.config import VerifierRule
from predgen_ros.engine.copy_ban import CopyBan
from predgen_ros.engine.decode import ar_step
from predgen_ros.engine.lm import KVState
from predgen_ros.engine.sentences import SentenceRules
from predgen_ros.engine.session import DECODERS, POLICIES, ConfigError, EngineConfig
from predgen_ros.turn_taking import CUT_OFF_MARK

WORDS = [
    "what",
    "is",
    "the",
    "capital",
    "of",
    "france",
    "and",
    "why",
    "is",
    "it",
    "so",
    "famous",
    "robot",
    "please",
    "tell",
    "me",
    "about",
    "paris",
]
RULES = SentenceRules(min_chars=10, fallback_chars=60, max_tokens=8)


def run(session, partials, final, steps_between, early=False):
    """Deliver partials, running some steps after each (work may be cut short); `early`:
    the final is an eager end of turn."""
    emissions = []
    for text, steps in zip(partials, steps_between):
        user_of(session).partial(text, 0.0)
        for _ in range(steps):
            if session.has_work():
                emissions += session.step()
    user_of(session).final(final, 1.0, early=early)
    session.end_of_turn(1.0)
    for _ in range(500):
        if not session.has_work():
            break
        emissions += session.step()
    assert not session.has_work(), "the session never finished the turn"
    return emissions


def greedy_reply(lm, text, n):
    state = KVState(lm)
    prompt = lm.prompt_ids(text)
    state.append(prompt)
    out = []
    while len(out) < n and int(state.next_logits.argmax()) not in lm.stop_ids:
        out += ar_step(state)
    return out


def banned_greedy_reply(lm, prompt, n, ban):
    """The reference for the copy ban: a fresh pass per token, no cache, no KVState."""
    reply = []
    while len(reply) < n:
        logits = lm.token_logits(prompt + reply, [0])[0].copy()
        logits[list(ban.banned(reply))] = float("-inf")
        token = int(logits.argmax())
        if token in lm.stop_ids:
            break
        reply.append(token)
    return reply


# (copy_ban, copy_ban_opening): with runs of 2 an opening of 2 or more adds nothing
BANS = [(2, 0), (2, 1), (0, 2), (3, 2)]
utterances = st.lists(st.sampled_from(WORDS), min_size=2, max_size=9)


@st.composite
def partial_sequences(draw):
    """Partials growing towards the final, with revisions of earlier words and shrinkage."""
    final_words = draw(utterances)
    partials = []
    for n in range(1, len(final_words) + 1):
        words = list(final_words[:n])
        if draw(st.booleans()) and n > 1:  # the ASR rewrites an earlier word
            words[draw(st.integers(0, n - 2))] = draw(st.sampled_from(WORDS))
        if draw(st.integers(0, 4)) == 0 and n > 2:  # or shrinks the hypothesis
            words = words[: n - 2]
        partials.append(" ".join(words))
    steps = draw(st.lists(st.integers(0, 4), min_size=len(partials), max_size=len(partials)))
    return partials, " ".join(final_words), steps


BACKENDS = ["tiny_lm", "llama_lm"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_exact_predgen_commits_the_baseline_greedy_reply(backend, request, make_session, property_examples):
    lm = request.getfixturevalue(backend)

    @property_examples(backend, 30)
    @given(partial_sequences(), st.booleans())
    def check(case, anticipate):
        partials, final, steps = case
        # plain greedy (copy_ban 0): the reference below is; a reply that loops on its own
        # words is decoded otherwise under the default ban (the next test checks that rule)
        config = dict(verifier="exact", max_new_tokens=10, max_sentences=0, sentence=RULES, copy_ban=0)
        predgen = make_session(lm, policy="predgen", anticipate=anticipate, anticipate_tokens=3, **config)
        baseline = make_session(lm, policy="baseline", **config)
        run(predgen, partials, final, steps)
        run(baseline, partials, final, steps)
        assert predgen.turn.first_sentence == baseline.turn.first_sentence
        assert predgen.turn.reply == baseline.turn.reply
        expected = greedy_reply(lm, final, 10)
        assert predgen.state.tokens[len(predgen.turn.prompt_ids) :] == expected

    check()


@pytest.mark.parametrize("backend", BACKENDS)
def test_exact_predgen_commits_the_greedy_reply_under_the_copy_ban(backend, request, make_session, property_examples):
    """With an earlier reply in the history, every policy decodes under the ban on
    copying its runs and its opening (and, ban_user, the user's words: the rule changes
    with every partial), and the exact verifier compares against the ban's choice."""
    lm = request.getfixturevalue(backend)

    @property_examples(backend, 30)
    @given(partial_sequences(), st.booleans(), st.sampled_from(DECODERS), st.booleans(), st.sampled_from(BANS))
    def check(case, anticipate, decoder, ban_user, ban):
        partials, final, steps = case
        runs, opening = ban
        history = [(final, lm.decode(greedy_reply(lm, final, 12)))]  # the raw greedy reply: the ban has work
        config = dict(
            verifier="exact",
            max_new_tokens=10,
            max_sentences=0,
            sentence=RULES,
            copy_ban=runs,
            copy_ban_opening=opening,
            copy_ban_user=ban_user,
            decoder=decoder,
        )
        predgen = make_session(lm, policy="predgen", anticipate=anticipate, anticipate_tokens=3, **config)
        baseline = make_session(lm, policy="baseline", **config)
        for session in (predgen, baseline):
            session.reset(history)
            run(session, partials, final, steps)
        assert predgen.turn.reply == baseline.turn.reply
        replies = [lm.encode_reply(reply) for _, reply in history]
        rule = CopyBan(replies + ([lm.encode_reply(final)] if ban_user else []), runs, replies, opening)
        expected = banned_greedy_reply(lm, predgen.turn.prompt_ids, 10, rule)
        assert predgen.state.tokens[len(predgen.turn.prompt_ids) :] == expected

    check()


def test_the_copy_ban_changes_a_reply_that_would_copy_the_history(tiny_lm, make_session):
    """The property test above is not vacuous: here the ban's reply differs from the raw
    greedy one, and contains no 2-token run of the earlier reply."""
    earlier = greedy_reply(tiny_lm, "tell me about paris", 12)
    history = [("tell me about paris", tiny_lm.decode(earlier))]
    prompt = tiny_lm.prompt_ids("tell me about paris", history)
    raw = banned_greedy_reply(tiny_lm, prompt, 10, CopyBan([], 2))
    session = make_session(
        tiny_lm, policy="baseline", verifier="exact", max_new_tokens=10, max_sentences=0, sentence=RULES, copy_ban=2
    )
    session.reset(history)
    run(session, [], "tell me about paris", [])
    reply = session.state.tokens[len(prompt) :]
    runs = {tuple(earlier[i : i + 2]) for i in range(len(earlier) - 1)}
    assert reply != raw
    assert not any(tuple(reply[i : i + 2]) in runs for i in range(len(reply) - 1))


def test_the_opening_ban_bans_only_the_token_that_would_complete_an_earlier_opening():
    ban = CopyBan([], 0, [[5, 6, 7], [5, 8], [9]], opening=2)
    assert ban.banned([]) == set() and ban.banned([4]) == set() and ban.banned([5, 6]) == set()
    assert ban.banned([5]) == {6, 8}  # [9] is shorter than the opening: it bans nothing
    assert CopyBan([], 0, [[5, 6, 7], [9]], opening=1).banned([]) == {5, 9}
    assert CopyBan([[1, 2, 3]], 3, [[1, 2, 3]], opening=2).banned([1]) == {2}  # below the run length, the opening acts


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_cache_equals_a_fresh_encoding_of_the_kept_text_after_every_step(backend, request, make_session, property_examples):
    lm = request.getfixturevalue(backend)

    @property_examples(backend, 20)
    @given(partial_sequences(), st.sampled_from(POLICIES), st.sampled_from(DECODERS), st.booleans(), st.booleans())
    def check(case, policy, decoder, anticipate, with_history):
        partials, final, steps = case
        session = make_session(
            lm,
            policy=policy,
            decoder=decoder,
            max_new_tokens=10,
            sentence=RULES,
            anticipate=anticipate,
            anticipate_tokens=3,
            copy_ban=2,
            copy_ban_user=with_history,
        )
        if with_history:  # an earlier reply for the copy ban to act on
            session.reset([(final, lm.decode(greedy_reply(lm, final, 12)))])

        def step_and_check():
            session.step()
            if session.state.tokens:
                assert_cache_matches(session.state)

        for text, n in zip(partials, steps):
            user_of(session).partial(text, 0.0)
            for _ in range(n):
                if session.has_work():
                    step_and_check()
        user_of(session).final(final, 1.0)
        session.end_of_turn(1.0)
        for _ in range(500):
            if not session.has_work():
                break
            step_and_check()
        assert session.state.tokens[: len(session.turn.prompt_ids)] == session.turn.prompt_ids

    check()


def test_words_that_follow_the_guess_cost_no_pass_and_its_final_commits_at_once(tiny_lm, make_session):
    config = dict(verifier="exact", max_new_tokens=0, sentence=RULES)
    session = make_session(tiny_lm, policy="predgen", anticipate=True, anticipate_tokens=3, **config)
    user_of(session).partial("what is the", 0.0)
    while session.has_work():
        session.step()
    guessed = session.turn.anticipated
    assert guessed.startswith("what is the") and guessed != "what is the"
    assert 1 <= session.turn.guess_passes <= 3
    passes = tiny_lm.stats.passes
    assert user_of(session).partial(guessed, 0.5)  # the user said what the model guessed: nothing to compute,
    assert [kind for kind, _ in session.step()] == ["end_probability"]  # only its end-of-turn estimate to tell
    assert not session.has_work()
    user_of(session).final(guessed, 1.0)
    session.end_of_turn(1.0)
    while session.has_work():
        session.step()
    assert tiny_lm.stats.passes == passes and session.turn.first_sentence
    baseline = make_session(tiny_lm, policy="baseline", **config)
    run(baseline, [], guessed, [])
    assert session.turn.first_sentence == baseline.turn.first_sentence


@pytest.mark.parametrize("anticipate", [False, True])
def test_emissions_come_in_order_and_candidates_before_the_end(tiny_lm, make_session, anticipate):
    session = make_session(tiny_lm, policy="predgen", anticipate=anticipate, max_new_tokens=24, sentence=RULES)
    # time enough after each partial for a guess (at most 12 passes) and a candidate sentence
    emissions = run(session, ["tell", "tell me", "tell me about"], "tell me about paris", [40, 40, 40])
    kinds = [k for k, _ in emissions]
    assert "candidate" in kinds[: kinds.index("commit")]
    assert kinds.count("commit") == 1 and kinds[-1] == "done"
    spoken = [t for k, t in emissions if k in ("commit", "sentence")]
    assert " ".join(spoken).split() == emissions[-1][1].split()


@pytest.mark.parametrize("policy", ["baseline", "predgen"])
def test_the_first_sentence_is_told_word_by_word_while_it_is_decoded_after_the_final(tiny_lm, make_session, policy):
    """After the final each beginning is whole words of the sentence committed next (the TTS
    synthesizes its opening meanwhile), one more word each time."""
    rules = SentenceRules(min_chars=40, fallback_chars=80, max_tokens=24)  # a first sentence of many tokens
    session = make_session(tiny_lm, policy=policy, max_new_tokens=24, sentence=rules)
    emissions = run(session, [], "tell me about paris", [])
    kinds = [k for k, _ in emissions]
    beginnings = [t for k, t in emissions[: kinds.index("commit")] if k == "beginning"]
    committed = emissions[kinds.index("commit")][1]
    assert beginnings, "no beginning was told before the commit"
    assert all(committed == b or (committed.startswith(b) and committed[len(b)].isspace()) for b in beginnings)
    assert [len(b.split()) for b in beginnings] == sorted({len(b.split()) for b in beginnings})


@pytest.mark.parametrize("policy", ["baseline", "predgen"])
def test_the_reply_ends_after_max_sentences(tiny_lm, make_session, policy):
    rules = SentenceRules(min_chars=1, fallback_chars=12, max_tokens=3)  # a sentence every few tokens
    unlimited = make_session(tiny_lm, policy=policy, max_new_tokens=40, max_sentences=0, sentence=rules)
    limited = make_session(tiny_lm, policy=policy, max_new_tokens=40, max_sentences=2, sentence=rules)
    said = {}
    for name, session in (("unlimited", unlimited), ("limited", limited)):
        emissions = run(session, ["tell me about"], "tell me about paris", [20])
        said[name] = [text for kind, text in emissions if kind in ("commit", "sentence")]
    assert len(said["unlimited"]) > 2
    assert said["limited"] == said["unlimited"][:2]
    assert limited.turn.reply.split() == " ".join(said["limited"]).split()
    assert limited.history[-1][1] == limited.turn.reply  # the history keeps what was said


def test_baseline_does_no_work_before_the_end_of_turn(tiny_lm, make_session):
    session = make_session(tiny_lm, policy="baseline", sentence=RULES, max_new_tokens=0)
    user_of(session).partial("what is the capital", 0.0)
    assert not session.has_work()
    user_of(session).final("what is the capital of france", 1.0)
    assert not session.has_work()
    session.end_of_turn(1.5)
    assert session.has_work()


def test_preemptive_reuses_its_reply_only_for_the_same_transcript(tiny_lm, make_session):
    session = make_session(tiny_lm, policy="preemptive", sentence=RULES, max_new_tokens=0)
    run(session, ["what is the capital of france"], "what is the capital of france", [50])
    assert session.turn.rounds == 1  # the final equalled the partial: no restart
    session.reset()
    run(session, ["what is the capital of france"], "what is the capital of spain", [50])
    assert session.turn.rounds == 2


def test_history_is_used_on_the_next_turn(tiny_lm, make_session):
    session = make_session(tiny_lm, policy="predgen", sentence=RULES, max_new_tokens=6, history_turns=2)
    run(session, ["hello robot"], "hello robot", [5])
    first_reply = session.turn.reply
    run(session, ["and paris"], "and paris", [5])
    assert session.history[0] == ("hello robot", first_reply)
    assert session.turn.prompt_ids == tiny_lm.prompt_ids("and paris", [("hello robot", first_reply)])


def test_an_ending_sent_again_never_answers_the_finished_turn_again(tiny_lm, make_session):
    session = make_session(tiny_lm, policy="predgen", sentence=RULES, max_new_tokens=6)
    run(session, ["and what about germany"], "and what about germany", [5])
    answered = session.turn
    assert not user_of(session).again(30.0)  # however late: the utterance's number says it is the same
    assert session.turn is answered
    assert user_of(session).final("and what about germany", 31.0)  # said again: a new utterance
    assert session.turn is not answered


def test_the_history_keeps_what_the_user_heard_of_a_reply_they_cut_off(tiny_lm, make_session):
    session = make_session(tiny_lm, policy="predgen", sentence=RULES, max_new_tokens=6, history_turns=2, anticipate=False)
    run(session, ["hello robot"], "hello robot", [5])
    user_of(session).partial("and paris", 2.0)  # the user talks over the reply: a new turn is being built on it
    for _ in range(3):
        session.step()
    session.reply_heard("Hel—")  # tts_node: this much was played before the barge-in
    assert session.history[0] == ("hello robot", "Hel—")
    assert session.turn.previous_reply == "Hel—"
    assert session.turn.prompt_ids == tiny_lm.prompt_ids("and paris", [("hello robot", "Hel—")])  # rebuilt on it
    user_of(session).final("and paris", 3.0)
    session.end_of_turn(3.0)
    while session.has_work():
        session.step()
    assert session.history[0] == ("hello robot", "Hel—")


def test_a_cut_off_reply_still_being_decoded_ends_as_heard(tiny_lm, make_session):
    session = make_session(tiny_lm, policy="baseline", sentence=RULES, max_new_tokens=30, max_sentences=4)
    user_of(session).partial("hello robot", 0.0)
    user_of(session).final("hello robot", 1.0)
    session.end_of_turn(1.0)
    while session.turn.t_commit is None:
        session.step()
    session.reply_heard("Wor—")  # the user cut it off while the rest was decoded
    user_of(session).partial("and paris", 2.0)
    assert session.history == [("hello robot", "Wor—")]


@pytest.mark.parametrize("reported", ["before the words went on", "after"])
@pytest.mark.parametrize("went_on_in", ["a partial", "a final alone"])
def test_a_reply_withdrawn_before_a_word_was_played_leaves_no_exchange(tiny_lm, make_session, reported, went_on_in):
    """An eager final answered, then the user went on before any of the reply was heard:
    the whole question is answered next, with nothing of the withdrawn one in its prompt."""
    session = make_session(tiny_lm, policy="predgen", sentence=RULES, max_new_tokens=6, history_turns=2, anticipate=False)
    run(session, [], "hello robot", [])
    run(session, ["what is the capital"], "what is the capital", [5], early=True)
    if reported == "before the words went on":
        session.reply_heard(CUT_OFF_MARK)
    user_of(session).voice("resumed")
    if went_on_in == "a partial":
        assert user_of(session).partial("what is the capital of france", 2.0)
    else:
        assert user_of(session).final("what is the capital of france", 3.0)
    if reported == "after":
        session.reply_heard(CUT_OFF_MARK)
    assert [user for user, _ in session.history] == ["hello robot"]
    if went_on_in == "a partial":
        user_of(session).final("what is the capital of france", 3.0)
    session.end_of_turn(3.0)
    while session.has_work():
        session.step()
    assert [user for user, _ in session.history] == ["hello robot", "what is the capital of france"]
    assert session.turn.prompt_ids == tiny_lm.prompt_ids("what is the capital of france", session.history[:1])


def test_a_withdrawn_reply_the_user_heard_some_of_stays_as_heard(tiny_lm, make_session):
    session = make_session(tiny_lm, policy="predgen", sentence=RULES, max_new_tokens=6, anticipate=False)
    run(session, ["what is the capital"], "what is the capital", [5], early=True)
    user_of(session).voice("resumed")
    user_of(session).partial("what is the capital of france", 2.0)
    session.reply_heard("Hel" + CUT_OFF_MARK)
    assert session.history == [("what is the capital", "Hel" + CUT_OFF_MARK)]


@pytest.mark.parametrize(
    "field, value",
    [
        ("policy", "fastest"),
        ("verifier", "fuzzy"),
        ("decoder", "beam"),
        ("history_tokens", -1),
        ("history_turns", -1),
        ("max_sentences", -1),
        ("copy_ban", 1),
        ("copy_ban", -2),
        ("copy_ban_opening", -1),
        ("anticipate_tokens", 0),
    ],
)
def test_bad_settings_are_named(field, value):
    with pytest.raises(ConfigError, match=field):
        EngineConfig(**{field: value})


@pytest.mark.parametrize(
    "field, value",
    [("k", 0), ("max_gap", 0.0), ("max_gap", float("nan")), ("exact_head", -1), ("margin", 0.0), ("min_p", 0.0), ("min_p", 1.5)],
)
def test_bad_verifier_settings_are_named(field, value):
    with pytest.raises(ConfigError, match=f"verifier.{field}"):
        VerifierRule(**{field: value})


def test_a_verifier_rule_parses_describes_itself_and_knows_if_it_is_lossless():
    base = VerifierRule(max_gap=2.0, exact_head=0)
    topk = VerifierRule.parse("topk=5", base)
    assert (topk.kind, topk.k, topk.max_gap, topk.rank_limit, topk.gap_limit) == ("topk", 5, 2.0, 5, 2.0)
    assert not topk.lossless and topk.describe() == "topk K=5 max-gap=2 exact-head=0 copy-guard=True"
    exact = VerifierRule.parse("exact", base)
    assert exact.lossless and exact.rank_limit == 1 and exact.describe() == "exact"
    assert VerifierRule.parse("margin=0.1").rank_limit is None and VerifierRule.parse("margin=0.1").gap_limit == 0.1
    assert EngineConfig(verifier="minp=0.25").verifier == VerifierRule("minp", min_p=0.25)
    for spec, needle in [("fuzzy", "unknown verifier"), ("exact=1", "takes no value"), ("topk=three", "not a valid k")]:
        with pytest.raises(ConfigError, match=needle):
            VerifierRule.parse(spec)


def test_an_asr_revision_of_an_earlier_word_is_verified_not_assumed(tiny_lm, make_session):
    """pocketsphinx-style: 'cap old friends' becomes 'capital of france' in the final."""
    partials = ["what is the", "what is the cap", "what is the cap old", "what is the cap old friends"]
    final = "what is the capital of france"
    config = dict(verifier="exact", max_new_tokens=10, max_sentences=0, sentence=RULES)
    predgen = make_session(tiny_lm, policy="predgen", **config)
    baseline = make_session(tiny_lm, policy="baseline", **config)
    run(predgen, partials, final, [30] * len(partials))
    run(baseline, partials, final, [0] * len(partials))
    prompt = tiny_lm.prompt_ids(final)
    assert predgen.turn.final_candidate, "a candidate built on the old words was verified against the final"
    assert predgen.state.tokens[: len(prompt)] == prompt  # the cache was cropped to the common prefix and re-extended
    assert predgen.turn.reply == baseline.turn.reply
    assert predgen.state.tokens[len(prompt) :] == greedy_reply(tiny_lm, final, 10)


def test_the_history_keeps_the_newest_turns_within_its_token_budget(tiny_lm, make_session):
    session = make_session(tiny_lm, policy="predgen", max_new_tokens=6, history_tokens=40, sentence=RULES)
    for i in range(8):
        run(session, [], f"question {i} about paris", [])
    size = sum(len(tiny_lm.encode_reply(u)) + len(tiny_lm.encode_reply(r)) for u, r in session.history)
    assert 0 < size <= 40 and len(session.history) < 8
    assert [u for u, _ in session.history] == [f"question {i} about paris" for i in range(8 - len(session.history), 8)]


def test_history_turns_keeps_only_the_newest_turns(tiny_lm, make_session):
    session = make_session(tiny_lm, policy="baseline", max_new_tokens=6, history_turns=2, sentence=RULES)
    for i in range(4):
        run(session, [], f"question {i} about paris", [])
    assert [u for u, _ in session.history] == ["question 2 about paris", "question 3 about paris"]


def test_the_user_copy_ban_keeps_the_reply_from_echoing_the_request(smollm, make_session):
    """copy_ban_user, on SmolLM2 after two exchanges it answered by echoing (as it did in
    the robot conversation with two turns of history): without the
    user's words in the ban the next reply echoes its request too; with them it cannot."""
    history = [
        ("Remind me to call my mother at six.", "Remind me to call my mother at six."),
        ("No, wait, make it seven.", "No, no, no, make it seven."),
    ]
    text = "What is on my calendar tomorrow?"
    user = smollm.encode_reply(text)
    runs = {tuple(user[i : i + 4]) for i in range(len(user) - 3)}
    replies = {}
    for ban_user in (False, True):
        session = make_session(
            smollm, policy="baseline", max_new_tokens=12, max_sentences=0, copy_ban_user=ban_user, history_turns=2
        )
        session.reset(history)
        run(session, [], text, [])
        replies[ban_user] = session.state.tokens[len(session.turn.prompt_ids) :]
    echoes = lambda reply: any(tuple(reply[i : i + 4]) in runs for i in range(len(reply) - 3))  # noqa: E731
    assert echoes(replies[False]), smollm.decode(replies[False])
    assert not echoes(replies[True]), smollm.decode(replies[True])
