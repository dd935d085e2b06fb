"""In one conversation, every answer must be about the question that was asked.

The questions all start with "Tell me": on those first words the model's guess
comes from the history, not from the question.  The paper's top-3 rule kept
such guesses alive (commit 9a0cc46: the capital of France became "the capital
of the United States", rainbows and the blue sky got the computer joke's
answer); neither the default (exact) verifier nor top-3 with its guards may.

A spoken conversation of short requests, whole replies in the history as
predgen_node keeps them: with plain greedy decoding the model copied its first
reply into every later one (3183991); with two earlier turns in the prompt a
glass of water still got "I'm here to assist with your questions.", less likely
under that request than under the others.  Under the node's defaults (the copy
ban with its opening ban, the one turn before in the prompt) each answer is
about its own request.  A fixed cost per forward pass makes the outcome the
same on every machine.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from predgen_ros.engine.session import EngineConfig, Session
from predgen_ros.eval.benchmark.bench import deliver
from predgen_ros.eval.benchmark.questions import speak
from predgen_ros.eval.conversation import (
    RelevanceScorer,
    contrast_questions,
    mark_common_starts,
    mark_repeated_openings,
    opening,
)

pytestmark = pytest.mark.e2e

TELL_ME = [
    "Tell me a fun fact about octopuses.",
    "Tell me how to boil an egg.",
    "Tell me what the capital of France is.",
    "Tell me a joke about computers.",
    "Tell me how rainbows form.",
    "Tell me why the sky is blue.",
]
# as an ASR writes them: lower case, no punctuation
SPOKEN = [
    "hey robot can you hear me",
    "what time is it right now",
    "please bring me a glass of water from the kitchen",
    "yes please",
    "is it going to rain this afternoon",
    "tell me a short joke",
]
PASS_S = 0.07  # virtual seconds per forward pass (about this CPU's decoding speed)
QUESTION_GAP_S = 2.0


class PassClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def converse(lm, config: EngineConfig, questions: list[str], chars_per_second: float = 10.0) -> list[tuple[str, str]]:
    """Ask the questions in one session, history kept, each once the robot has finished
    its reply to the one before; (first sentence, whole reply) of each answer."""
    clock = PassClock()
    session = Session(lm, config, clock)

    def step() -> list[tuple[str, str]]:
        emissions = session.step()
        clock.t += PASS_S
        return [(kind, text) for kind, text in emissions if kind in ("commit", "done")]

    answers = []
    for question in questions:
        events, _ = speak(question, chars_per_second)
        start = clock.t + QUESTION_GAP_S
        said: list[tuple[str, str]] = []
        for event in (replace(e, t=start + e.t) for e in events):
            while session.has_work() and clock.t + PASS_S <= event.t:  # speculate while the user speaks
                said += step()
            clock.t = max(clock.t, event.t)
            deliver(session, event)
        while not any(kind == "done" for kind, _ in said):
            said += step()
        answers.append((dict(said)["commit"], dict(said)["done"]))
    return answers


def judge(lm, questions: list[str], answers: list[str]) -> tuple[list[float | None], list[bool], str]:
    """Relevance and repeated opening of each answer, and a report to print."""
    relevance = RelevanceScorer(lm, {str(i): q for i, q in enumerate(questions)}).score(
        [(str(i), a) for i, a in enumerate(answers)]
    )
    records = [SimpleNamespace(policy="predgen", answered=True, first_sentence=a) for a in answers]
    mark_repeated_openings(records)
    repeats = [r.repeats_opening for r in records]
    report = "\n".join(
        f"{r:+.2f} {'repeat' if rep else '      '}  {q} -> {a}" for q, a, r, rep in zip(questions, answers, relevance, repeats)
    )
    return relevance, repeats, report


@pytest.mark.parametrize("verifier", ["exact", "topk"])  # the default, and top-3 with its guards
def test_predgen_answers_each_question_of_a_conversation_on_its_topic(smollm, verifier):
    config = EngineConfig(policy="predgen", max_new_tokens=0, verifier=verifier)
    answers = [first for first, _ in converse(smollm, config, TELL_ME)]
    relevance, repeats, report = judge(smollm, TELL_ME, answers)
    print(report)
    assert all(r is not None and r > 0 for r in relevance), (
        f"an answer is more likely under other questions than under its own:\n{report}"
    )
    assert not any(repeats), f"an answer repeats an earlier opening:\n{report}"


def test_a_spoken_conversation_with_whole_replies_in_the_history_follows_each_request(smollm):
    config = EngineConfig(policy="predgen", max_new_tokens=48)  # the node's defaults, replies capped for time
    answers = converse(smollm, config, SPOKEN)
    relevance, repeats, report = judge(smollm, SPOKEN, [first for first, _ in answers])
    print(report)
    assert all(r is not None and r > 0 for r in relevance), (
        f"an answer is more likely under other utterances than under its own:\n{report}"
    )
    assert not any(repeats), f"an answer repeats an earlier opening:\n{report}"


def test_openings_compare_the_first_six_words_without_case_or_punctuation():
    assert opening("Sure! Here's a fun fact about octopuses: they have three hearts.") == (
        "sure",
        "here's",
        "a",
        "fun",
        "fact",
        "about",
    )
    records = [
        SimpleNamespace(policy=p, answered=a, first_sentence=s)
        for p, a, s in [
            ("predgen", True, "The sky is blue, because of scattering."),
            ("baseline", True, "the sky is blue because of light"),  # another policy: not a repeat
            ("predgen", True, "The sky is blue because of dust."),  # same first six words
            ("predgen", False, "The sky is blue because of x"),  # unanswered: not judged
            ("predgen", True, ""),  # empty: repeats nothing
            ("predgen", True, ""),
        ]
    ]
    mark_repeated_openings(records)
    assert [getattr(r, "repeats_opening", None) for r in records] == [False, False, True, None, False, False]


def test_a_common_start_is_the_policy_s_most_frequent_first_two_words():
    """The template the copy ban left ("I'm sorry <the request's words> is gone.") repeats
    no six-word opening; its first two words give it away."""
    answers = [
        ("predgen", "I'm sorry pasta is gone."),
        ("predgen", "I'm sorry, the piano is gone."),
        ("predgen", "Sure, ten minutes."),
        ("baseline", "Sure, ten minutes."),  # once for baseline: no common start
        ("baseline", "It is ten."),
    ]
    records = [SimpleNamespace(policy=p, answered=True, first_sentence=s) for p, s in answers]
    mark_common_starts(records)
    assert [r.common_start for r in records] == [True, True, False, False, False]


def test_each_answer_is_contrasted_with_the_next_questions_of_the_set():
    qids = [str(i) for i in range(10)]
    assert contrast_questions(qids, "8", 3) == ["9", "0", "1"]
    assert contrast_questions(qids, "0") == [str(i) for i in range(1, 9)]
    assert contrast_questions(["a", "b"], "a") == ["b"]
    assert contrast_questions(["a"], "a") == []
