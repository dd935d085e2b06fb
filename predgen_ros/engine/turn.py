"""One turn of a dialogue: its phase and what happened in it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Phase(Enum):
    SPECULATING = "speculating"  # no sentence said yet: the candidate is verified and extended
    SPEAKING = "speaking"  # the first sentence is committed; the rest of the reply is decoded
    DONE = "done"  # the whole reply is out


@dataclass
class TurnStats:
    """What happened in one turn, with times from the session's clock."""

    user_text: str = ""
    utterance: str | None = None  # the ASR's utterance number, when it gives one
    t_first_partial: float | None = None
    t_final: float | None = None
    t_speech_end: float | None = None  # the ASR's end of the user's voiced audio, when it gives one
    t_end_of_turn: float | None = None
    t_commit: float | None = None
    passes: list[tuple[float, float]] = field(default_factory=list)  # (start, stop) of each forward pass
    rounds: int = 0  # verifications (predgen) or restarts (preemptive, baseline)
    guess_passes: int = 0  # passes spent guessing how the user's sentence ends (anticipation)
    anticipated: str = ""  # the latest anticipated user text
    end_probabilities: list[tuple[str, float]] = field(default_factory=list)  # (partial, P(the user is done))
    final_accepted: int | None = None  # candidate tokens kept by the verification against the final
    final_candidate: int | None = None
    decode_tokens: int = 0
    decode_seconds: float = 0.0
    jacobi_passes: int = 0
    jacobi_tokens: int = 0
    prompt_ids: list[int] = field(default_factory=list)
    history_turns: int = 0  # earlier turns in the prompt
    previous_reply: str = ""  # the newest earlier reply as the prompt holds it (after a barge-in: what was heard)
    heard_reply: str | None = None  # the user cut this turn's reply off and heard only this much
    first_sentence: str = ""
    first_sentence_ids: list[int] = field(default_factory=list)
    reply: str = ""

    def passes_between(self, start: float, stop: float) -> list[tuple[float, float]]:
        return [p for p in self.passes if p[1] > start and p[0] < stop]

    @property
    def nfe_tfs(self) -> int:
        """Forward passes from the final transcript to the commit (1 = verification alone)."""
        return len(self.passes_between(self.t_final, self.t_commit))

    def input_passes(self, t_end: float) -> list[tuple[float, float]]:
        """Forward passes that started while the user was still speaking."""
        return [p for p in self.passes if p[0] < t_end]
