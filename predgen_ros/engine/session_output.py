"""What a session says: its reply read as sentences and the emissions each step makes
(a candidate and its beginning while the user speaks, the committed first sentence,
the following sentences, the whole reply, the end-of-turn probabilities).

A part of Session (engine/session.py), kept apart because it only reads the turn's
state: the cache's reply tokens, the phase, the end of turn and whether the user went
on after an early final; committing and closing are the only changes it makes.
"""

from __future__ import annotations

import re

from ..events import Emission
from .reply import ReplyTokens
from .turn import Phase


class SessionOutput:
    """Session's emissions; it uses the Session's attributes (a mixin, not used alone)."""

    def _reply_text(self, with_pending: bool = False) -> str:
        return self.lm.decode(self._reply_ids + (self.state.pending() if with_pending else []))

    def _reply(self) -> ReplyTokens:
        return ReplyTokens(self._reply_ids, self.state.pending(), self._reply_complete)

    def _first_sentence(self) -> tuple[str, int] | None:
        """(first sentence, its end in the reply text) if complete, else None."""
        if self._prompt_changed or not self._synced_prompt:
            return None
        return self._reader.first(self._version, self._reply)

    def _sentence_ids(self, end: int) -> list[int]:
        return self._reader.ids_to(self._version, end, self._reply)

    def _emissions(self) -> list[tuple[str, str]]:
        out = []
        if self._end_scores.known():  # its value: the last entry of `turn.end_probabilities`
            self.turn.end_probabilities.append(self._end_scores.take())
            out.append((Emission.END_PROBABILITY, self.turn.end_probabilities[-1][0]))
        if self.phase is Phase.SPECULATING:
            split = self._first_sentence()
            if split is None:
                return out + self._beginning()
            if not self._may_speak():
                if split[0] != self._candidate:
                    self._candidate = split[0]
                    out.append((Emission.CANDIDATE, split[0]))
                return out
            self._commit_first_sentence(*split)
            out.append((Emission.COMMIT, split[0]))
        return out + self._continue_reply()

    def _beginning(self) -> list[tuple[str, str]]:
        """The first sentence's whole words so far while it is being decoded, before or after
        the end of turn, each time a word is added: the TTS synthesizes its opening while the
        rest of the sentence is decoded, so a commit of the same words plays it at once."""
        if self._prompt_changed or not self._synced_prompt:
            return []
        words = _whole_words(self._reply_text())
        if not words or words == self._begun:
            return []
        self._begun = words
        return [(Emission.BEGINNING, words)]

    def _commit_first_sentence(self, sentence: str, end: int) -> None:
        self.phase = Phase.SPEAKING
        self.turn.t_commit = self.clock()
        self.turn.first_sentence = sentence
        self.turn.first_sentence_ids = self._sentence_ids(end)
        self._reader.said_first(end)

    def _continue_reply(self) -> list[tuple[str, str]]:
        """Sentences after the first, as they complete; then the whole reply (it ends
        early after `max_sentences` sentences)."""
        if self.config.max_new_tokens == 0 or self.config.max_sentences == 1:
            return self._close_turn(self.turn.first_sentence)
        text = self._reply_text(with_pending=not self._reply_complete)
        sentences, whole = self._reader.following(text, self._reply_complete)
        out = [(Emission.SENTENCE, sentence) for sentence in sentences]
        return out + (self._close_turn(whole) if whole is not None else [])

    def _close_turn(self, reply: str) -> list[tuple[str, str]]:
        self.turn.reply = reply
        self.phase = Phase.DONE
        self._keep_exchange(reply)
        return [(Emission.DONE, reply)]


def _whole_words(text: str) -> str:
    """`text` without its last word, which may still be growing token by token."""
    return _LAST_WORD.sub("", text.strip())


_LAST_WORD = re.compile(r"\s*\S+$")
