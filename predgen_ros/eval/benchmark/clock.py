"""A virtual clock: compute advances time by its real duration, idle gaps are skipped."""

from __future__ import annotations

import time


class VirtualClock:
    def __init__(self):
        self._offset = -time.perf_counter()

    def __call__(self) -> float:
        return time.perf_counter() + self._offset

    def skip_to(self, t: float) -> None:
        """Jump forward to `t` (never backwards): nothing happened in between."""
        now = self()
        if t > now:
            self._offset += t - now
