"""Language model wrapper: chat prompts, single forward passes, and a KV cache
that always holds exactly the tokens of the text we keep.

Every method that touches the model runs ONE forward pass, so the callers
(verifiers, decoders, policies) can be interrupted between passes.  The weights
run in a backend (engine/backends): this file is the prompt side.
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass, field

import numpy as np

from .backends import Backend, KVCache
from .config import SYSTEM_PROMPT
from .copy_ban import CopyBan

log = logging.getLogger(__name__)

REPLY_RESERVE = 512  # context tokens kept free for the reply and speculation


def common_prefix_len(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


@dataclass
class PassStats:
    """Forward passes and the wall time they took (for NFE and LLM-load metrics)."""

    passes: int = 0
    seconds: float = 0.0


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


class LanguageModel:
    """A backend's weights plus a tokenizer and its chat template."""

    def __init__(self, backend: Backend, tokenizer, system_prompt: str = SYSTEM_PROMPT, reply_reserve: int = REPLY_RESERVE):
        self.backend = backend
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.stop_ids = self._stop_ids()
        self.stats = PassStats()
        self.prompt_budget = max(64, backend.context_length - reply_reserve)
        self._last_warning = ""
        self._turn_end_len, self.end_of_user_id = self._user_turn_end()

    def describe(self) -> str:
        """The backend and its settings, as `key=value` words (logs, summaries)."""
        return " ".join(f"{k}={v}" for k, v in self.backend.describe().items())

    def told(self, system_prompt: str) -> LanguageModel:
        """This model and tokenizer under another system prompt (weights and pass counts shared)."""
        other = copy.copy(self)
        other.system_prompt = system_prompt
        return other

    def _user_turn_end(self) -> tuple[int, int]:
        """How many template tokens follow the user's text, and the first of them
        (the end-of-user-message token: its probability is the model's estimate
        that the user has finished)."""
        probe = "probe"
        text = self._template_text(probe, [])
        full = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        head = self.tokenizer(text[: text.rfind(probe) + len(probe)], add_special_tokens=False)["input_ids"]
        return len(full) - len(head), full[len(head)]

    def _stop_ids(self) -> frozenset[int]:
        ids = set(self.backend.stop_ids)
        if self.tokenizer.eos_token_id is not None:
            ids.add(self.tokenizer.eos_token_id)
        return frozenset(ids)

    def prompt_ids(self, user_text: str, history: list[tuple[str, str]] = ()) -> list[int]:
        """Token ids of the templated conversation, ending with the assistant header."""
        return self.fit_prompt(user_text, history)[0]

    def open_turn_ids(self, user_text: str, history: list[tuple[str, str]] = ()) -> list[int]:
        """The prompt up to the user's last word, the user's message still open:
        what the model reads to continue the user's text (anticipation)."""
        prompt, _ = self.fit_prompt(user_text, history)
        return prompt[: len(prompt) - self._turn_end_len]

    def fit_prompt(self, user_text: str, history: list[tuple[str, str]] = ()) -> tuple[list[int], int]:
        """The prompt's token ids fitted to `prompt_budget`, and how many of the oldest
        history turns it left out: those go first, then the head of the user's text
        (its latest words are what the reply must answer)."""
        history = list(history)
        ids = self._template_ids(user_text, history)
        dropped = 0
        while len(ids) > self.prompt_budget and history:
            history.pop(0)
            dropped += 1
            ids = self._template_ids(user_text, history)
        if dropped:
            self._warn(
                f"prompt over the context budget ({self.prompt_budget} tokens): dropped the {dropped} oldest history turn(s)"
            )
        if len(ids) > self.prompt_budget:
            ids = self._cut_user_head(user_text, len(ids) - self.prompt_budget)
        return ids, dropped

    def _cut_user_head(self, user_text: str, excess: int) -> list[int]:
        """The prompt of the user's text alone, its head cut until the prompt fits."""
        words = self.encode_reply(user_text)
        keep = max(1, len(words) - excess)
        while True:
            ids = self._template_ids(self.decode(words[-keep:]), [])
            if len(ids) <= self.prompt_budget or keep == 1:
                break
            keep = max(1, keep - (len(ids) - self.prompt_budget))
        self._warn(f"user text over the context budget ({self.prompt_budget} tokens): its oldest words are cut")
        return ids

    def _warn(self, message: str) -> None:
        """Log a context warning once, not on every partial that repeats it."""
        if message != self._last_warning:
            self._last_warning = message
            log.warning(message)

    def _template_ids(self, user_text: str, history: list[tuple[str, str]]) -> list[int]:
        return self.tokenizer(self._template_text(user_text, history), add_special_tokens=False)["input_ids"]

    def _template_text(self, user_text: str, history: list[tuple[str, str]]) -> str:
        messages = [{"role": "system", "content": self.system_prompt}]
        for user, assistant in history:
            messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
        messages.append({"role": "user", "content": user_text})
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def user_end(self, prompt: list[int]) -> int:
        """Position of the end-of-user-message token in a full prompt."""
        return len(prompt) - self._turn_end_len

    def end_of_user_probability(self, logits: np.ndarray) -> float:
        """The model's probability that the user's message ends here, from the row of
        logits that predicts the token after the user's last word."""
        return float(np.exp(log_softmax(logits)[self.end_of_user_id]))

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def encode_reply(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def forward(self, ids: list[int], cache: KVCache) -> np.ndarray:
        """One forward pass over `ids` appended to `cache`; float32 logits [len(ids), vocab]."""
        start = time.perf_counter()
        logits = cache.extend(ids)
        self.stats.passes += 1
        self.stats.seconds += time.perf_counter() - start
        return logits

    def token_logits(self, prefix: list[int], continuation: list[int]) -> np.ndarray:
        """Logits predicting each token of `continuation` after `prefix`, from a
        fresh cache (for quality scoring; not counted as engine work)."""
        logits = self.backend.new_cache().extend(prefix + continuation)
        first = len(prefix) - 1
        return logits[first : first + len(continuation)]

    def continuation_scores(self, prefix: list[int], continuation: list[int]) -> tuple[float, float]:
        """Mean log-probability of `continuation`'s tokens given `prefix`, and the share
        of them that were not the model's most likely token there."""
        if not continuation:
            return float("nan"), float("nan")
        logprobs = log_softmax(self.token_logits(prefix, continuation))
        target = np.asarray(continuation)
        picked = logprobs[np.arange(len(continuation)), target]
        not_top = logprobs.argmax(axis=-1) != target
        return float(picked.mean()), float(not_top.mean())


@dataclass
class KVState:
    """A backend's KV cache plus the token ids it holds and the logits after the last one.

    Invariant: the cache holds exactly `tokens`; `next_logits` is the model's
    distribution for the token after them (None before the first pass).
    """

    lm: LanguageModel
    tokens: list[int] = field(default_factory=list)
    cache: KVCache = field(init=False)
    next_logits: np.ndarray | None = None
    watch: int | None = None  # a position whose predicting logits a pass keeps...
    watched: np.ndarray | None = None  # ...here (the end-of-turn signal rides on passes already run)
    reply_start: int | None = None  # where the reply begins in `tokens` (None: no reply, e.g. guessed user words)
    rule: CopyBan | None = None  # the decoding rule applied to every row that predicts a reply token

    def __post_init__(self):
        self.cache = self.lm.backend.new_cache()

    def pending(self) -> list[int]:
        """The greedy next token, known from the last pass without another one ([]
        before any pass, and at a stop token)."""
        if self.next_logits is None:
            return []
        token = int(self.next_logits.argmax())
        return [] if token in self.lm.stop_ids else [token]

    def answer_from(self, reply_start: int | None, rule: CopyBan | None) -> None:
        """Passes from now on predict a reply that starts at `reply_start`, under `rule`."""
        self.reply_start, self.rule = reply_start, rule

    def crop(self, length: int) -> None:
        """Keep only the first `length` tokens (their logits are forgotten)."""
        drop = len(self.tokens) - length
        if drop <= 0:
            return
        self.cache.crop(length)
        del self.tokens[length:]
        self.next_logits = None

    def append(self, ids: list[int]) -> np.ndarray:
        """One forward pass over `ids`; returns their logits (row j predicts ids[j+1]), the
        rows that predict reply tokens under the decoding rule."""
        start = len(self.tokens)
        logits = self.lm.forward(ids, self.cache)
        if self.watch is not None and start < self.watch <= start + len(ids):
            self.watched = logits[self.watch - start - 1].copy()
        self.tokens.extend(ids)
        if self.rule is not None and self.reply_start is not None:
            self.rule.mask(logits, self.tokens[self.reply_start :], start + 1 - self.reply_start)
        self.next_logits = logits[-1]
        return logits

    def sync_prefix(self, target: list[int]) -> int:
        """Crop to the longest common prefix with `target`, keeping at least one
        token of `target` to feed so the next pass yields fresh logits.
        Returns how many tokens are kept."""
        common = common_prefix_len(self.tokens, target)
        if common == len(target) == len(self.tokens) and self.next_logits is not None:
            return common
        keep = min(common, len(target) - 1)
        self.crop(keep)
        return keep
