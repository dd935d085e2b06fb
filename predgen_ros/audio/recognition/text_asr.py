"""The text ASR backend: questions or lines of text "spoken" as partial transcripts.

It simulates a user at a fixed speaking rate with the benchmark's partial
rule, so the ROS graph and the benchmark see the same transcript stream.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path


class QuestionError(ValueError):
    """A question file that cannot be used; the message says what is wrong."""


@dataclass(frozen=True)
class Question:
    qid: str
    text: str
    context: tuple[str, ...] = ()  # the user's earlier turns of the same dialogue (MT-Bench turn 2: turn 1)


def default_question_file() -> Path:
    return Path(str(files("predgen_ros") / "data" / "mt_bench" / "question.jsonl"))


def robot_conversation_file() -> Path:
    """40 utterances of one spoken conversation with a home robot (its LICENSE-NOTE beside it)."""
    return Path(str(files("predgen_ros") / "data" / "robot_conversation" / "conversation.txt"))


def load_questions(path: str | Path | None = None, limit: int | None = None, turn: int = 1) -> list[Question]:
    """MT-Bench style JSONL (turn `turn` of each line, the earlier turns as its context),
    or plain text, one question a line (turn 1 only)."""
    path = Path(path) if path else default_question_file()
    if not path.is_file():
        raise QuestionError(f"question file not found: {path}")
    if turn < 1 or (turn > 1 and path.suffix != ".jsonl"):
        raise QuestionError(f"turn {turn}: a text file has turn 1 only, MT-Bench .jsonl turns 1 and 2")
    questions = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        if path.suffix == ".jsonl":
            try:
                record = json.loads(line)
                text, context = record["turns"][turn - 1], tuple(record["turns"][: turn - 1])
                qid = str(record.get("question_id", number))
            except (json.JSONDecodeError, KeyError, IndexError, TypeError) as err:
                raise QuestionError(f"{path}:{number}: not an MT-Bench question line ({err.__class__.__name__}: {err})") from None
        else:
            text, qid, context = line, str(number), ()
        if not isinstance(text, str) or not text.strip():
            raise QuestionError(f"{path}:{number}: empty question")
        questions.append(Question(qid, " ".join(text.split()), tuple(" ".join(t.split()) for t in context)))
    if not questions:
        raise QuestionError(f"{path} holds no questions")
    return questions[:limit] if limit else questions


# The simulated user's speaking rate (bench, the text ASR): 600 characters a minute,
# about 10 characters a second.
CHARS_PER_MINUTE = 600.0


def partial_at(text: str, chars: int) -> str:
    """What the user has said after `chars` characters: the trailing incomplete word is dropped."""
    said = text[:chars]
    if chars < len(text) and not text[chars].isspace():
        said = said[: said.rfind(" ") + 1] if " " in said else ""
    return said.strip()


def text_partials(text: str, chars_per_second: float = CHARS_PER_MINUTE / 60) -> tuple[list[tuple[float, str]], float]:
    """(time, hypothesis) whenever the visible transcript of `text` changes, and t_end.

    Time 0 is the start of speech; t_end is the time of the last character.
    """
    partials, last = [], ""
    for chars in range(1, len(text) + 1):
        said = partial_at(text, chars)
        if said and said != last:
            partials.append((chars / chars_per_second, said))
            last = said
    return partials, len(text) / chars_per_second
