"""The conversation's earlier turns, and the one place that decides which a prompt holds.

Three limits apply, each dropping the oldest turns first: `max_turns` and
`max_tokens` (the turns' user and reply tokens) when a turn is added, and the
model's context when a prompt is built (lm.fit_prompt: the templated prompt within
`prompt_budget`).  A turn dropped for any of them is gone for good, so it is
never templated again and the copy rules stop covering its reply.
"""

from __future__ import annotations

from .lm import LanguageModel


class History:
    """(user text, reply) turns, oldest first, with each reply's token ids."""

    def __init__(self, lm: LanguageModel, max_turns: int, max_tokens: int):
        self.lm = lm
        self.max_turns = max_turns  # 0: no limit but max_tokens
        self.max_tokens = max_tokens
        self.turns: list[tuple[str, str]] = []
        self.reply_ids: list[list[int]] = []  # each turn's reply, tokenized as the prompt holds it
        self._sizes: list[int] = []  # each turn's user and reply tokens

    def __len__(self) -> int:
        return len(self.turns)

    def add(self, user_text: str, reply: str) -> None:
        reply_ids = self.lm.encode_reply(reply)
        self.turns.append((user_text, reply))
        self.reply_ids.append(reply_ids)
        self._sizes.append(len(self.lm.encode_reply(user_text)) + len(reply_ids))
        if self.max_turns:
            self._drop_oldest(max(0, len(self.turns) - self.max_turns))
        while self.turns and sum(self._sizes) > self.max_tokens:
            self._drop_oldest(1)

    def hear_last(self, heard: str) -> None:
        """The newest reply as the user heard it (they cut it off)."""
        if self.turns:
            user_text, reply = self.turns[-1]
            reply_ids = self.lm.encode_reply(heard)
            self._sizes[-1] += len(reply_ids) - len(self.reply_ids[-1])
            self.turns[-1], self.reply_ids[-1] = (user_text, heard), reply_ids

    def drop_last(self) -> None:
        """Forget the newest turn (a reply withdrawn before the user heard any of it)."""
        for kept in (self.turns, self.reply_ids, self._sizes):
            del kept[-1:]

    def clear(self) -> None:
        self._drop_oldest(len(self.turns))

    def prompt_ids(self, user_text: str) -> list[int]:
        """The prompt for `user_text` after the turns; the oldest turns the model's
        context cannot hold are dropped."""
        prompt, dropped = self.lm.fit_prompt(user_text, self.turns)
        self._drop_oldest(dropped)
        return prompt

    def open_turn_ids(self, user_text: str) -> list[int]:
        """The prompt with the user's message still open (anticipation); drops nothing."""
        return self.lm.open_turn_ids(user_text, self.turns)

    def _drop_oldest(self, count: int) -> None:
        for kept in (self.turns, self.reply_ids, self._sizes):
            del kept[:count]
