"""Answered as if heard right: the first sentence against the model's answer to the true text."""

from __future__ import annotations

from user_turns import user_of

from predgen_ros.eval.hearing.heard_right import (
    format_heard_table,
    heard_summary,
    in_context_first_sentences,
    mark_heard_right,
    reference_first_sentences,
)
from predgen_ros.eval.records import TurnRecord


def record(qid, policy, first_sentence, heard=None, answered=True):
    r = TurnRecord(qid=qid, policy=policy, speech_s=1.0, audio_latency_s=0.5, first_sentence=first_sentence, heard=heard)
    if not answered:
        r.no_reply = "no final"
    return r


def test_a_turn_is_heard_right_when_its_first_sentence_is_the_true_texts():
    texts = {"1": "What is the capital of France?", "2": "How many legs does a spider have?"}
    references = {"1": "Paris.", "2": "Eight."}
    records = [
        record("1", "whisper", "Paris.", heard="What is the capital of France?"),
        record("2", "whisper", "Six.", heard="How many licks does the spider have?"),
        record("1", "sphinx", "Paris.", heard="what is the capital of france"),
        record("2", "sphinx", "", heard="", answered=False),
    ]
    mark_heard_right(records, references)
    assert [r.heard_right for r in records] == [True, False, True, None]
    summary = heard_summary(records, texts, ["whisper", "sphinx"])
    assert summary["whisper"]["answered_as_if_heard_right"] == 1 and summary["whisper"]["questions"] == 2
    assert summary["whisper"]["finals_wer"] == 2 / 13  # "licks" and "the": 2 of 13 words
    assert summary["sphinx"]["finals_wer"] == 7 / 13  # the unheard question's 7 words are all deletions
    assert "| whisper | 1 of 2 | – | 15.4 % |" in format_heard_table(summary)


def test_the_reference_is_the_greedy_baseline_answer_to_the_text(tiny_lm):
    from predgen_ros.engine.config import EngineConfig
    from predgen_ros.engine.sentences import SentenceRules

    config = EngineConfig(
        max_new_tokens=10, max_sentences=0, sentence=SentenceRules(min_chars=10, fallback_chars=60, max_tokens=8)
    )
    texts = {"a": "tell me about paris", "b": "what is the capital of france"}
    first = reference_first_sentences(tiny_lm, config, texts)
    again = reference_first_sentences(tiny_lm, config, dict(reversed(texts.items())))
    assert first == again and all(first.values())  # no history: the order of the questions changes nothing
    talk = reference_first_sentences(tiny_lm, config, texts, keep_history=True)
    assert talk["a"] == first["a"]  # the first turn of the conversation has no history yet


def test_in_context_the_reference_has_the_runs_own_history(tiny_lm):
    """A conversation whose first turn was misheard: in context, the second turn's reference
    is the model's answer after the misheard turn (as the run had it); the text replay's is
    after the true one.  A turn answered as the run did, heard word for word, passes the check."""
    from predgen_ros.engine.config import EngineConfig
    from predgen_ros.engine.sentences import SentenceRules
    from predgen_ros.engine.session import Session
    from predgen_ros.eval.benchmark.clock import VirtualClock

    config = EngineConfig(
        policy="baseline",
        max_new_tokens=10,
        max_sentences=0,
        sentence=SentenceRules(min_chars=10, fallback_chars=60, max_tokens=8),
    )
    texts = {"a": "tell me about paris", "b": "what is the capital of france"}
    misheard = "tell me about pairs"
    live = Session(tiny_lm, config, VirtualClock())  # the run: it heard "pairs", then "b" right
    replies = []
    for text in (misheard, texts["b"]):
        user_of(live).final(text, 0.0)
        live.end_of_turn(0.0)
        while live.has_work():
            live.step()
        replies.append((live.turn.first_sentence, live.history[-1][1]))
    records = [
        record("a", "whisper", replies[0][0], heard=misheard),
        record("b", "whisper", replies[1][0], heard=texts["b"]),
    ]
    for r, (_, reply) in zip(records, replies):
        r.reply = reply
    in_context = in_context_first_sentences(tiny_lm, config, records, texts)
    mark_heard_right(records, reference_first_sentences(tiny_lm, config, texts, keep_history=True), in_context)
    assert records[1].heard_right_in_context  # heard right, answered as the model does after this history
    summary = heard_summary(records, texts, ["whisper"])["whisper"]
    assert summary["in_context_check"] == "1 of 1 heard exactly"
