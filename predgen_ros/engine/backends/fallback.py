"""A served model with the robot's own behind it (`model.server.fallback: local`).

When the server fails in the middle of a pass (gone, too slow, an error), that pass and
the rest of its sequence run on the local model: the cache replays its tokens there in
one pass and goes on, so the engine never sees the failure and the user gets an answer
(the local model's, later).  New sequences try the server again once RETRY_S have passed.
The two must read token ids alike: the local model uses the served model's tokenizer.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from .served import ServedBackend, ServerError

log = logging.getLogger(__name__)

RETRY_S = 10.0  # after a failure, new sequences stay local this long


class FallbackCache:
    def __init__(self, backend: FallbackBackend):
        self.backend = backend
        self.tokens: list[int] = []
        self._local = not backend.server_usable()
        self._cache = backend.local.new_cache() if self._local else backend.served.new_cache()

    def __len__(self) -> int:
        return len(self.tokens)

    def extend(self, ids: list[int]) -> np.ndarray:
        if not self._local:
            try:
                logits = self._cache.extend(ids)
                self.backend.server_answered()
                self.tokens += ids
                return logits
            except ServerError as err:
                self.backend.server_failed(err)
                self._local, self._cache = True, self.backend.local.new_cache()
                if self.tokens:
                    self._cache.extend(self.tokens)  # what the server held, replayed here in one pass
        logits = self._cache.extend(ids)
        self.tokens += ids
        return logits

    def crop(self, length: int) -> None:
        self._cache.crop(length)
        del self.tokens[length:]


class FallbackBackend:
    def __init__(self, served: ServedBackend, local):
        self.served, self.local = served, local
        self.name = f"{served.name}+local"
        self.context_length = min(served.context_length, local.context_length)
        self.stop_ids = served.stop_ids | local.stop_ids
        self.failures = 0
        self._down_since: float | None = None

    def server_usable(self) -> bool:
        return self._down_since is None or time.time() - self._down_since >= RETRY_S

    def server_failed(self, err: ServerError) -> None:
        self.failures += 1
        if self._down_since is None:
            log.warning("%s: answering on the local model; the server is tried again in %g s", err, RETRY_S)
        self._down_since = time.time()

    def server_answered(self) -> None:
        if self._down_since is not None:
            log.warning("the server answers again: %s", self.served.transport.base)
            self._down_since = None

    def new_cache(self) -> FallbackCache:
        return FallbackCache(self)

    def describe(self) -> dict[str, str]:
        return {**self.served.describe(), "fallback": self.local.describe().get("backend", "local")}
