"""A reply's tokens read as sentences: the first sentence and the tokens that cover
it, then the sentences that follow, each once (sentences.py says where one ends)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .sentences import SentenceRules, split_first_sentence


@dataclass(frozen=True)
class ReplyTokens:
    """The reply as the cache holds it."""

    ids: list[int]
    pending: list[int]  # the greedy next token, known without a pass ([] after a stop token)
    complete: bool  # a stop token or the length cap was reached


class SentenceReader:
    """One turn's reader.  The first sentence and its tokens are memoized per cache
    version (the session bumps it with every change of the cache), because the
    worker asks for them between every two passes."""

    def __init__(self, decode: Callable[[list[int]], str], rules: SentenceRules, max_sentences: int):
        self.decode = decode
        self.rules = rules
        self.max_sentences = max_sentences
        self._first: tuple[int, tuple[str, int] | None] | None = None  # (cache version, first sentence)
        self._ids: tuple[int, int, list[int]] | None = None  # (cache version, end, its tokens)
        self._spoken = 0  # characters of the reply already emitted as sentences
        self._count = 0  # sentences of the reply emitted

    def first(self, version: int, reply: Callable[[], ReplyTokens]) -> tuple[str, int] | None:
        """(first sentence, its end in the reply text) if complete, else None."""
        if self._first is None or self._first[0] != version:
            self._first = (version, self._split_first(reply()))
        return self._first[1]

    def _split_first(self, reply: ReplyTokens) -> tuple[str, int] | None:
        # Look at most one token past the cap, so the cut never depends on how
        # far a policy happened to speculate.
        cap = self.rules.max_tokens
        ids = (reply.ids if reply.complete else reply.ids + reply.pending)[: cap + 1]
        text = self.decode(ids)
        whole = reply.complete and len(ids) == len(reply.ids)
        split = split_first_sentence(text, self.rules, finished=whole)
        if split is not None:
            return split[0], len(text) - len(split[1])
        if len(ids) > cap:  # no sentence within the cap: its first `cap` tokens are one
            head = self.decode(ids[:cap])
            return head.strip(), len(head)
        if reply.complete and not text.strip():
            return "", len(text)  # the model ended its reply at once
        return None

    def ids_to(self, version: int, end: int, reply: Callable[[], ReplyTokens]) -> list[int]:
        """Shortest prefix of the reply tokens (plus the pending one) covering text[:end]."""
        if self._ids is None or self._ids[:2] != (version, end):
            tokens = reply()
            ids = tokens.ids + tokens.pending
            n = next((n for n in range(1, len(ids) + 1) if len(self.decode(ids[:n])) >= end), len(ids))
            self._ids = (version, end, ids[:n])
        return self._ids[2]

    def said_first(self, end: int) -> None:
        """The first sentence, text[:end], was committed."""
        self._spoken, self._count = end, 1

    def following(self, text: str, complete: bool) -> tuple[list[str], str | None]:
        """The sentences of the reply `text` completed since the last call, and the
        whole reply once it is done (None while it goes on): after `max_sentences`
        sentences, or when `complete`."""
        out = []
        while split := split_first_sentence(text[self._spoken :], self.rules, finished=complete):
            if not split[0]:
                break
            out.append(split[0])
            self._spoken = len(text) - len(split[1])
            self._count += 1
            if self._count == self.max_sentences:
                return out, text[: self._spoken].strip()
        return out, text.strip() if complete else None
