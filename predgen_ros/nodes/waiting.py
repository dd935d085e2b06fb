"""Waits that a node's deactivation cuts short: for a condition, or until a wall time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

POLL_S = 0.05  # how often a condition of the ROS graph (which has no event of its own) is read


class Waits:
    def __init__(self, stopping: threading.Event):
        self.stopping = stopping

    def until(self, condition: Callable[[], bool], timeout: float | None = None) -> bool:
        """True once `condition` holds; False when stopped, or after `timeout` s."""
        deadline = None if timeout is None else time.time() + timeout
        while not condition():
            if self.stopping.wait(POLL_S) or (deadline is not None and time.time() > deadline):
                return False
        return True

    def sleep_until(self, t: float) -> bool:
        """Sleep until wall time `t`; True when stopped meanwhile."""
        return self.stopping.wait(max(0.0, t - time.time()))
