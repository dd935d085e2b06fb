"""Answered as if heard right: what the recognizer's words cost the answers.

A turn is answered as if heard right when its first sentence is the one the same
model gives, with the same settings, to the true text of the utterance (baseline's
greedy reply: the exact verifier commits that reply to whatever words it was
given).  In a conversation the reference is the text replay's: every earlier
utterance heard right and answered by the model, so the history is what a perfect
ear would have left.  Whatever the recognizer, the share says how many
answers its mistakes left untouched; a recognizer that hears every word scores
the share the graph itself scores on text (its near-ties aside).

In a conversation one misheard word changes every later prompt, and a small model's
answers then part from the text replay's for good, however well the rest is heard.
So a conversation also gets the answer *in context*: the model's answer to the true
text with the history the run itself had (what it heard and said before).  That
counts each turn's own words only.  Its check: a turn heard exactly (the same text,
punctuation and case included: the same prompt) must be answered as in context (the
history is rebuilt right).
"""

from __future__ import annotations

from dataclasses import replace

from .asr_quality import reference_words, word_errors


def reference_first_sentences(lm, config, texts: dict[str, str], keep_history: bool = False, progress=None) -> dict[str, str]:
    """The first sentence the model answers to each text (qid -> sentence), in order;
    `keep_history`: one conversation (else each text alone)."""
    from ...engine.session import Session
    from ..benchmark.clock import VirtualClock
    from ..benchmark.questions import whole_turn

    session = Session(lm, replace(config, policy="baseline"), VirtualClock())
    sentences = {}
    for qid, text in texts.items():
        if not keep_history:
            session.reset([])
        whole_turn(session, text)
        while session.has_work():
            session.step()
        sentences[qid] = session.turn.first_sentence
        if progress:
            progress()
    return sentences


def in_context_first_sentences(lm, config, records: list, texts: dict[str, str], progress=None) -> dict[tuple[str, str], str]:
    """(run, qid) -> the model's first sentence to the true text after the history that run
    had at that question (its earlier finals and replies), for every run of a conversation."""
    from ...engine.session import Session
    from ..benchmark.clock import VirtualClock
    from ..benchmark.questions import whole_turn

    session = Session(lm, replace(config, policy="baseline"), VirtualClock())
    sentences = {}
    for run in dict.fromkeys(r.policy for r in records):
        history = []
        for r in (r for r in records if r.policy == run):
            if r.qid in texts:
                session.reset(history)
                whole_turn(session, texts[r.qid])
                while session.has_work():
                    session.step()
                sentences[(run, r.qid)] = session.turn.first_sentence
            if r.answered and r.heard:
                history.append((r.heard, r.reply))
            if progress:
                progress()
    return sentences


def mark_heard_right(records: list, references: dict[str, str], in_context: dict[tuple[str, str], str] | None = None) -> None:
    for r in records:
        if r.answered and r.qid in references:
            r.heard_right = r.first_sentence == references[r.qid]
        if r.answered and in_context and (r.policy, r.qid) in in_context:
            r.heard_right_in_context = r.first_sentence == in_context[(r.policy, r.qid)]


def heard_summary(records: list, texts: dict[str, str], runs: list[str]) -> dict:
    """Per run: answered as if heard right (share of the questions asked), and, where the
    run heard audio, the word error rate of the finals it heard."""
    result = {}
    for run in runs:
        rows = [r for r in records if r.policy == run]
        right = sum(bool(r.heard_right) for r in rows)
        heard = [r for r in rows if r.heard is not None]
        errors = sum(word_errors(reference_words(texts[r.qid]), reference_words(r.heard)) for r in heard)
        words = sum(len(reference_words(texts[r.qid])) for r in heard)
        result[run] = {
            "questions": len(rows),
            "answered_as_if_heard_right": right,
            "answered_as_if_heard_right_share": right / len(rows) if rows else None,
            "finals_wer": errors / words if heard and words else None,
        }
        in_context = [r for r in rows if r.heard_right_in_context is not None]
        if in_context:
            exact = [r for r in in_context if r.heard is not None and r.heard.split() == texts[r.qid].split()]
            result[run] |= {
                "answered_as_if_heard_right_in_context": sum(r.heard_right_in_context for r in in_context),
                "in_context_check": f"{sum(r.heard_right_in_context for r in exact)} of {len(exact)} heard exactly",
            }
    return result


def format_heard_table(summary: dict) -> str:
    lines = [
        "| run | answered as if heard right | in context (check: heard exactly and so answered) | WER of the finals heard |",
        "|---|---:|---:|---:|",
    ]
    for run, s in summary.items():
        wer = "–" if s["finals_wer"] is None else f"{100 * s['finals_wer']:.1f} %"
        context = "–"
        if "answered_as_if_heard_right_in_context" in s:
            context = f"{s['answered_as_if_heard_right_in_context']} of {s['questions']} ({s['in_context_check']})"
        lines.append(f"| {run} | {s['answered_as_if_heard_right']} of {s['questions']} | {context} | {wer} |")
    return "\n".join(lines)
