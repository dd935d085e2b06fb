"""How well the recognizer heard a bag: revisions of its partials and the word error
rate of its finals against the questions' text."""

from __future__ import annotations

import re

from ..bag_replay.bags import BagMessage, QuestionMarker, split_by_question

NUMBER_WORDS = {
    word: str(i)
    for i, word in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
} | {word: str(10 * i) for i, word in enumerate(["thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], 3)}


def reference_words(text: str) -> list[str]:
    """Lower-case words for the word error rate, split at punctuation as a recognizer
    hears it ("ice-cream" is two words); unlike `transcripts.words`, which joins them.
    Number words are digits, so "six" and "6" (Whisper writes digits) are one word."""
    return [NUMBER_WORDS.get(w, w) for w in re.sub(r"[^\w\s']", " ", text.lower()).split()]


def revisions(partials: list[str]) -> tuple[int, int]:
    """(updates, revisions) within one utterance: a revision changes a word other
    than the last one of the previous hypothesis."""
    pairs = list(zip(partials, partials[1:]))
    revised = sum(before.split()[:-1] != after.split()[: len(before.split()) - 1] for before, after in pairs)
    return len(pairs), revised


def word_errors(reference: list[str], hypothesis: list[str]) -> int:
    row = list(range(len(hypothesis) + 1))
    for i, ref_word in enumerate(reference, 1):
        previous, row[0] = row[0], i
        for j, hyp_word in enumerate(hypothesis, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (ref_word != hyp_word))
    return row[-1]


def asr_quality(messages: list[BagMessage], markers: list[QuestionMarker]) -> dict[str, float]:
    """Revision rate of the partials and word error rate of the finals against the questions."""
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import String

    utterances, errors, total = [], 0, 0
    for marker, question in zip(markers, split_by_question(messages, markers)):
        current, finals = [], []
        for m in question:
            if m.topic == "asr/partial":
                current.append(deserialize_message(m.raw, String).data)
            elif m.topic == "asr/final":
                finals.append(deserialize_message(m.raw, String).data)
                utterances.append(current)
                current = []
        reference = reference_words(marker.text)
        errors += word_errors(reference, reference_words(" ".join(finals)))
        total += len(reference)
    counts = [revisions(u) for u in utterances]
    changes, revised = sum(c for c, _ in counts), sum(r for _, r in counts)
    return {"revision_rate": revised / changes if changes else 0.0, "wer": errors / total if total else 0.0}
