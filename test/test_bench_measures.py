"""The benchmark's measures and material: duration buckets, quality against baseline,
MT-Bench turn 2 with its own turn 1 in the history."""

import json

import pytest
from user_turns import user_of

from predgen_ros.engine.config import VerifierRule
from predgen_ros.engine.sentences import SentenceRules
from predgen_ros.engine.session import ConfigError, EngineConfig
from predgen_ros.eval.benchmark.bench import context_history
from predgen_ros.eval.benchmark.frontier import frontier_variants, parse_setting
from predgen_ros.eval.benchmark.questions import QuestionError, load_questions
from predgen_ros.eval.records import TurnRecord, mark_matches, summarize, summarize_by_duration
from predgen_ros.eval.report import format_duration_table


def record(qid, policy, speech_s, latency, sentence="Paris is the capital.", logprob=-0.5, not_top=0.0, ids=(1, 2, 3, 4)):
    return TurnRecord(
        qid=qid,
        policy=policy,
        speech_s=speech_s,
        audio_latency_s=latency,
        ttfs_s=latency,
        nfe_tfs=1,
        input_nfe=0,
        input_llm_s=0.0,
        rounds=1,
        final_accepted=None,
        final_candidate=None,
        decode_tokens=0,
        decode_s=0.0,
        jacobi_passes=0,
        jacobi_tokens=0,
        first_sentence=sentence,
        first_sentence_logprob=logprob,
        not_top_share=not_top,
        first_sentence_ids=list(ids),
    )


def test_each_turn_falls_in_the_bucket_of_its_speech_duration():
    records = [
        record("1", "baseline", 5.0, 2.0),
        record("1", "predgen", 5.0, 1.0),
        record("2", "baseline", 7.9, 3.0),
        record("2", "predgen", 7.9, 0.5),
        record("3", "baseline", 25.0, 1.0),
        record("3", "predgen", 25.0, 0.1),
    ]
    buckets = summarize_by_duration(records, ["baseline", "predgen"])
    assert list(buckets) == ["< 8 s", "> 20 s"]  # empty buckets are left out
    assert buckets["< 8 s"]["predgen"]["turns"] == 2
    assert buckets["< 8 s"]["predgen"]["speedup_vs_baseline_p50"] == pytest.approx((2.0 + 6.0) / 2)
    assert buckets["> 20 s"]["predgen"]["speedup_vs_baseline_p50"] == pytest.approx(10.0)
    assert "speech < 8 s" in format_duration_table(buckets)


def test_quality_against_baseline_is_paired_by_question():
    records = [
        record("1", "baseline", 5.0, 1.0, "Paris is the capital of France.", logprob=-0.4),
        record("1", "predgen", 5.0, 0.5, "Paris is the capital of France.", logprob=-0.4),
        record("2", "baseline", 5.0, 1.0, "The sky is blue today.", logprob=-0.6),
        record("2", "predgen", 5.0, 0.5, "The ocean is green.", logprob=-1.0, not_top=0.5, ids=(1, 2)),
    ]
    mark_matches(records)
    predgen = summarize(records, ["baseline", "predgen"])["predgen"]
    assert predgen["first_sentence_match"] == 0.5
    assert predgen["logprob_gap_to_baseline"] == pytest.approx((0.0 + 0.4) / 2)
    assert predgen["not_top_share"] == pytest.approx(1 / 6)  # one of 4 + 2 tokens
    # ROUGE-L of the second pair: "the ... is" common (2 of 5 and 2 of 4 words)
    second = 2 * (2 / 4) * (2 / 5) / (2 / 4 + 2 / 5)
    assert predgen["rouge_l_mean"] == pytest.approx((1.0 + second) / 2)


def test_turn_2_carries_turn_1_as_its_context(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"question_id": 7, "turns": ["Name a  planet.", "Now a moon of it."]}) + "\n")
    (question,) = load_questions(path, turn=2)
    assert (question.qid, question.text, question.context) == ("7", "Now a moon of it.", ("Name a planet.",))
    (first,) = load_questions(path)
    assert first.text == "Name a planet." and first.context == ()
    text = tmp_path / "q.txt"
    text.write_text("one question\n")
    with pytest.raises(QuestionError, match="turn 2"):
        load_questions(text, turn=2)


def test_a_follow_up_is_asked_after_the_models_own_reply_to_turn_1(tiny_lm, make_session):
    from predgen_ros.engine.session import EngineConfig

    config = EngineConfig(max_new_tokens=6, sentence=SentenceRules(min_chars=1, fallback_chars=20, max_tokens=6))
    history = context_history(tiny_lm, config, ("name a planet",))
    baseline = make_session(tiny_lm, policy="baseline", max_new_tokens=6, sentence=config.sentence)
    user_of(baseline).final("name a planet", 0.0)
    baseline.end_of_turn(0.0)
    while baseline.has_work():
        baseline.step()
    assert history == baseline.history and history[0][1]  # the greedy reply, as baseline says it
    session = make_session(tiny_lm, policy="predgen", history_tokens=10_000)
    session.reset(history)
    assert session.history == history


@pytest.mark.parametrize(
    "spec, rule, expected",
    [
        ("exact", dict(kind="exact"), dict(anticipate=False)),
        ("exact+anticipate", dict(kind="exact"), dict(anticipate=True)),
        ("margin=0.1", dict(kind="margin", margin=0.1), {}),
        ("minp=0.3+anticipate", dict(kind="minp", min_p=0.3), dict(anticipate=True)),
        ("topk=5", dict(kind="topk", k=5), {}),
        ("exact+anticipate=4", dict(kind="exact"), dict(anticipate=True, anticipate_tokens=4)),
    ],
)
def test_a_frontier_setting_names_its_verifier_value_and_anticipation(spec, rule, expected):
    base = EngineConfig(policy="baseline", verifier=VerifierRule(max_gap=2.0))
    config = parse_setting(spec, base)
    assert config.policy == "predgen"
    assert config.verifier == VerifierRule(max_gap=2.0, **rule)  # the guards come from the common configuration
    for name, value in expected.items():
        assert getattr(config, name) == value


@pytest.mark.parametrize(
    "spec, needle",
    [
        ("fuzzy", "unknown verifier"),
        ("exact=1", "takes no value"),
        ("margin=wide", "not a valid margin"),
        ("minp=2", "min_p must lie"),
        ("exact+anticipate4", "anticipate=TOKENS"),
        ("exact+anticipate=0", "anticipate_tokens must be"),
    ],
)
def test_a_bad_frontier_setting_is_named(spec, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_setting(spec, EngineConfig())


def test_the_frontier_compares_every_setting_with_one_baseline():
    variants = frontier_variants(["exact", "margin=0.25+anticipate"], EngineConfig(anticipate=True))
    assert list(variants) == ["baseline", "exact", "margin=0.25+anticipate"]
    assert variants["baseline"].policy == "baseline" and not variants["baseline"].anticipate
    with pytest.raises(ConfigError, match="given twice"):
        frontier_variants(["exact", "exact"], EngineConfig())


def test_both_turns_are_asked_with_distinct_ids():
    from predgen_ros.eval.benchmark.bench_job import questions_of_turns

    questions = questions_of_turns(None, 2, [1, 2])
    assert [q.qid for q in questions] == ["81", "82", "81.2", "82.2"]
    assert questions[2].context == (questions[0].text,) and not questions[0].context
