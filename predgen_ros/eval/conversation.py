"""Judge-free measures of whether each answer fits its own question (DESIGN.md §9).

In one conversation a policy can answer fast and still answer the wrong
question: an early guess, made from the history more than from the user's
first words, survives to the final; or the model copies its own earlier
replies from the history.  Five measures catch it:

  repeated opening   the answer's first six words repeat those of an earlier
                     answer of the same policy in the same run;
  common start       the answer begins with the two words its policy began with
                     most often in the run (a template: "I'm sorry <the request's
                     words> is gone." repeats no six-word opening and no run);
  history copy       the share of the reply's runs of COPY_RUN tokens that
                     occur in an earlier reply of the same policy in the run;
  differs            its first sentence is not the one baseline said;
  relevance          mean token log-probability of the first sentence given
                     its own question alone (under the built-in system prompt, so that a changed prompt
                     does not change the ruler), minus the mean of the same given
                     each of a few other questions of the set (no history):
                     an answer to the question is more likely under it.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterable

import numpy as np

from ..engine.config import SYSTEM_PROMPT
from ..engine.lm import KVState, log_softmax
from ..engine.verify import COPY_NGRAM

OPENING_WORDS = 6
START_WORDS = 2
COPY_RUN = COPY_NGRAM  # tokens: a run this long found in an earlier reply is copied
RELEVANCE_CONTRASTS = 8  # other questions each answer is scored against (the next ones in the set)


def opening(text: str, words: int = OPENING_WORDS) -> tuple[str, ...]:
    """The first `words` words, lower case, without punctuation."""
    return tuple(re.sub(r"[^\w\s']", " ", text.lower()).split()[:words])


def mark_common_starts(records: Iterable) -> None:
    """`common_start` per answered record: whether it begins with the START_WORDS words its
    policy began with most often in the run (False where no start occurs twice)."""
    records = [r for r in records if r.answered]
    counts: dict[str, Counter] = {}
    for r in records:
        counts.setdefault(r.policy, Counter())[opening(r.first_sentence, START_WORDS)] += 1
    for r in records:
        top, times = counts[r.policy].most_common(1)[0]
        r.common_start = times > 1 and bool(top) and opening(r.first_sentence, START_WORDS) == top


def mark_repeated_openings(records: Iterable) -> None:
    """`repeats_opening` per answered record: whether an earlier answer of its policy
    (in run order) began with the same words.  An empty answer repeats nothing."""
    seen: dict[str, set[tuple[str, ...]]] = {}
    for r in records:
        if not r.answered:
            continue
        words = opening(r.first_sentence)
        earlier = seen.setdefault(r.policy, set())
        r.repeats_opening = bool(words) and words in earlier
        if words:
            earlier.add(words)


def token_runs(ids: list[int], n: int = COPY_RUN) -> list[tuple[int, ...]]:
    return [tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)]


def mark_history_copies(records: Iterable, encode) -> None:
    """`history_copy` per answered record: the share of its reply's token runs (`encode`:
    text to token ids) found in an earlier reply of its policy, in run order; None for a
    reply too short to have a run."""
    seen: dict[str, set[tuple[int, ...]]] = {}
    for r in records:
        if not r.answered:
            continue
        runs = token_runs(encode(r.reply or r.first_sentence))
        earlier = seen.setdefault(r.policy, set())
        r.history_copy = sum(run in earlier for run in runs) / len(runs) if runs else None
        earlier.update(runs)


def contrast_questions(qids: list[str], qid: str, count: int = RELEVANCE_CONTRASTS) -> list[str]:
    """The `count` questions after `qid` in the set, wrapping around."""
    i = qids.index(qid)
    return [qids[(i + j) % len(qids)] for j in range(1, min(count, len(qids) - 1) + 1)]


class RelevanceScorer:
    """Scores first sentences against questions with the loaded model: each question's
    prompt is run once, and every sentence scored under it reuses its KV cache."""

    def __init__(self, lm, questions: dict[str, str]):
        self.lm = lm.told(SYSTEM_PROMPT)  # one ruler, whatever the robot was told
        self.questions = questions

    def logprobs_under(self, qid: str, sentences: set[str]) -> dict[str, float]:
        """Mean token log-probability of each sentence given question `qid` alone."""
        state = KVState(self.lm)
        prompt = self.lm.prompt_ids(self.questions[qid])
        state.append(prompt)
        after_prompt = state.next_logits
        scores = {}
        for sentence in sentences:
            ids = self.lm.encode_reply(sentence)
            rows = log_softmax(np.vstack([after_prompt[None], state.append(ids)[:-1]]))
            scores[sentence] = float(rows[np.arange(len(ids)), ids].mean())
            state.crop(len(prompt))
        return scores

    def score(self, answers: list[tuple[str, str]], progress=None) -> list[float | None]:
        """Relevance of each (qid, first sentence): None for an empty sentence or a set
        of one question (nothing to contrast)."""
        qids = list(self.questions)
        needed: dict[str, set[str]] = {}
        for qid, sentence in answers:
            if sentence.strip():
                for other in [qid, *contrast_questions(qids, qid)]:
                    needed.setdefault(other, set()).add(sentence)
        logprob = {}
        for qid, sentences in needed.items():
            logprob.update({(qid, s): v for s, v in self.logprobs_under(qid, sentences).items()})
            if progress:
                progress()
        return [self._relevance(logprob, qid, sentence) for qid, sentence in answers]

    def _relevance(self, logprob: dict, qid: str, sentence: str) -> float | None:
        others = contrast_questions(list(self.questions), qid)
        if not sentence.strip() or not others:
            return None
        return logprob[qid, sentence] - statistics.fmean(logprob[other, sentence] for other in others)


def score_answers(records: list, questions: dict[str, str], lm, progress=None) -> None:
    """Repeated openings, common starts, history copies and relevance of every answered record (`questions`:
    text by qid, in the order they were asked; `progress` is called once per question scored under)."""
    mark_repeated_openings(records)
    mark_common_starts(records)
    mark_history_copies(records, lm.encode_reply)
    answered = [r for r in records if r.answered]
    scores = RelevanceScorer(lm, questions).score([(r.qid, r.first_sentence) for r in answered], progress)
    for r, score in zip(answered, scores):
        r.relevance = score
