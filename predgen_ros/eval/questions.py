"""Questions and how a user "speaks" them as a stream of partial transcripts."""
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


@dataclass(frozen=True)
class TimedEvent:
    t: float
    kind: str  # "partial" | "final" | "end_of_turn"
    text: str = ""


def default_question_file() -> Path:
    return Path(str(files("predgen_ros") / "data" / "mt_bench" / "question.jsonl"))


def load_questions(path: str | Path | None = None, limit: int | None = None) -> list[Question]:
    """MT-Bench style JSONL (turn 1 of each line), or plain text, one question a line."""
    path = Path(path) if path else default_question_file()
    if not path.is_file():
        raise QuestionError(f"question file not found: {path}")
    questions = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        if path.suffix == ".jsonl":
            try:
                record = json.loads(line)
                text = record["turns"][0]
                qid = str(record.get("question_id", number))
            except (json.JSONDecodeError, KeyError, IndexError, TypeError) as err:
                raise QuestionError(f"{path}:{number}: not an MT-Bench question line ({err.__class__.__name__}: {err})") from None
        else:
            text, qid = line, str(number)
        if not isinstance(text, str) or not text.strip():
            raise QuestionError(f"{path}:{number}: empty question")
        questions.append(Question(qid, " ".join(text.split())))
    if not questions:
        raise QuestionError(f"{path} holds no questions")
    return questions[:limit] if limit else questions


def partial_at(text: str, chars: int) -> str:
    """What the user has said after `chars` characters: the trailing incomplete word is dropped."""
    said = text[:chars]
    if chars < len(text) and not text[chars].isspace():
        said = said[: said.rfind(" ") + 1] if " " in said else ""
    return said.strip()


def speak(text: str, chars_per_second: float = 10.0, endpoint_delay: float = 0.0) -> tuple[list[TimedEvent], float]:
    """Timed events for `text` spoken at `chars_per_second` from t=0, and t_end.

    A partial whenever the visible transcript changes; the final at t_end (the
    last character); the end of turn `endpoint_delay` seconds later.
    """
    events, last = [], ""
    for chars in range(1, len(text) + 1):
        said = partial_at(text, chars)
        if said and said != last:
            events.append(TimedEvent(chars / chars_per_second, "partial", said))
            last = said
    t_end = len(text) / chars_per_second
    events.append(TimedEvent(t_end, "final", text))
    events.append(TimedEvent(t_end + endpoint_delay, "end_of_turn"))
    return events, t_end
