"""Whether predgen_node is still there, seen from the robot: its /diagnostics heartbeat.

Every predgen_ros node reports on /diagnostics once a second.  When predgen_node
runs on another host, DDS notices it gone only when its lease runs out (many
seconds), and never while a link is down and comes back; the heartbeat says so
within `timeout_s`.  asr_node reports it on /diagnostics, and tts_node ends a
reply that predgen_node can no longer finish.  The heartbeat's key-values are kept
(`values`): asr_node reads there whether predgen_node hears its topics yet.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from diagnostic_msgs.msg import DiagnosticArray

PEER = "predgen_node"
TIMEOUT_S = 3.0  # three missed heartbeats


class PeerWatch:
    def __init__(self, node, peer: str = PEER, timeout_s: float = TIMEOUT_S, clock: Callable[[], float] = time.time):
        self.peer = peer
        self.timeout_s = timeout_s
        self.clock = clock
        self._status_name = f"/predgen_ros/{peer}"
        self._last = clock()  # for a peer that never reported: silent since the watcher's start
        self.seen = False
        self.values: dict[str, str] = {}  # the peer's latest diagnostics key-values
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 10)

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name == self._status_name:
                self._last, self.seen = self.clock(), True
                self.values = {kv.key: kv.value for kv in status.values}

    def silent_s(self) -> float:
        return self.clock() - self._last

    def reachable(self) -> bool:
        """Heard within `timeout_s`."""
        return self.seen and self.silent_s() < self.timeout_s

    def lost(self) -> bool:
        """It was there and is gone (never heard: a graph without predgen_node, e.g. another LLM node on tts/say)."""
        return self.seen and self.silent_s() >= self.timeout_s

    def describe(self) -> str:
        """One line for a diagnostics message when the peer is unreachable."""
        heard = f"no heartbeat for {self.silent_s():.0f} s" if self.seen else "never heard"
        return f"PredGen node unreachable ({self.peer}: {heard})"
