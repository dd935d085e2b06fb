"""GraphProbe: an rclpy node in the calling process that watches the running graph.

The graph tools (demo, eval, stress) and the tests wait on it for events, never for
a fixed time: a condition becomes true, or a node of the graph exits, or the
deadline passes (a GraphError that says which).  It follows /diagnostics and
drives the nodes' lifecycles through their standard services.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState

from .asr_state import AsrState
from .bringup import Graph, GraphError
from .matching import unmatched

ASK_AGAIN_S = 5.0  # a lifecycle state asked for and not answered within this is asked again
TRANSITIONS = {
    "configure": Transition.TRANSITION_CONFIGURE,
    "activate": Transition.TRANSITION_ACTIVATE,
    "deactivate": Transition.TRANSITION_DEACTIVATE,
    "cleanup": Transition.TRANSITION_CLEANUP,
}


class GraphProbe:
    def __init__(self, name: str = "predgen_probe", graph: Graph | None = None):
        self.node = rclpy.create_node(name)
        self.graph = graph
        self.health: dict[str, tuple[int, str, dict[str, str]]] = {}  # node -> (level, message, values)
        self.health_count: dict[str, int] = {}  # node -> /diagnostics messages heard from it
        self.health_at: dict[str, float] = {}  # node -> when its latest /diagnostics arrived
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_health, 10)
        self._clients: dict[tuple[str, str], Any] = {}

    def _on_health(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            node = status.name.rsplit("/", 1)[-1]
            self.health[node] = (
                int.from_bytes(status.level, "little"),
                status.message,
                {kv.key: kv.value for kv in status.values},
            )
            self.health_count[node] = self.health_count.get(node, 0) + 1
            self.health_at[node] = time.time()

    def value(self, node: str, key: str, default: str = "") -> str:
        """The latest diagnostics value `key` of `node`."""
        return self.health.get(node, (0, "", {}))[2].get(key, default)

    def fresh_values(self, node: str, timeout: float) -> dict[str, str]:
        """`node`'s diagnostics values from a message sent after this call (what it counted up to now)."""
        seen = self.health_count.get(node, 0)
        if not self.wait_for(lambda: self.health_count.get(node, 0) > seen + 1, timeout):
            raise GraphError(f"no /diagnostics from {node} within {timeout:g} s")
        return dict(self.health[node][2])

    # ------------------------------------------------------------ waiting
    def wait_for(self, condition: Callable[[], bool], timeout: float) -> bool:
        """Spin until `condition()`; False after `timeout` s.  A node that exits is a GraphError."""
        deadline = time.time() + timeout
        while not condition():
            if self.graph is not None and (exited := self.graph.exited()) is not None:
                raise GraphError(f"{exited[0]} exited with code {exited[1]}")
            remaining = deadline - time.time()
            if remaining <= 0:
                return False
            rclpy.spin_once(self.node, timeout_sec=min(0.05, remaining))
        return True

    def spin_for(self, seconds: float) -> None:
        """Let callbacks run for `seconds` (pacing, or draining what is in flight)."""
        self.wait_for(lambda: False, seconds)

    def spin_until(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        """As wait_for, but a timeout is a GraphError naming `what` was awaited."""
        if not self.wait_for(condition, timeout):
            raise GraphError(f"timed out after {timeout:g} s waiting for {what}")

    # ---------------------------------------------------------- lifecycle
    def _call(self, node: str, service: str, kind, request, timeout: float):
        key = (node, service)
        if key not in self._clients:
            self._clients[key] = self.node.create_client(kind, f"/{node}/{service}")
        client = self._clients[key]
        self.spin_until(client.service_is_ready, timeout, f"/{node}/{service}")
        future = client.call_async(request)
        self.spin_until(future.done, timeout, f"the answer of /{node}/{service}")
        return future.result()

    def state(self, node: str, timeout: float = 120.0) -> str:
        """`node`'s lifecycle state: unconfigured, inactive, active or finalized.  A request
        left unanswered is sent again every ASK_AGAIN_S (asking is harmless): a service is
        "ready" once its request reader matched, and the first answer can be lost while the
        answer's own reader is still being matched (seen after a previous graph's shutdown)."""
        deadline = time.time() + timeout
        while True:
            wait = max(0.1, min(ASK_AGAIN_S, deadline - time.time()))
            try:
                return self._call(node, "get_state", GetState, GetState.Request(), wait).current_state.label
            except GraphError:
                if time.time() >= deadline:
                    raise

    def change_state(self, node: str, transition: str, timeout: float = 300.0) -> bool:
        """Ask `node` for a lifecycle transition (configure, activate, deactivate, cleanup); True if it made it."""
        request = ChangeState.Request()
        request.transition.id = TRANSITIONS[transition]
        return self._call(node, "change_state", ChangeState, request, timeout).success

    def wait_active(self, nodes, timeout: float = 300.0) -> None:
        """Until every node of `nodes` reports the active state.  An autostarting node answers
        once it is active; one that does not answer yet (loading, or a stale endpoint of a
        killed process) is asked again."""
        deadline = time.time() + timeout

        def active(node: str) -> bool:
            try:
                return self.state(node, min(ASK_AGAIN_S, max(0.1, deadline - time.time()))) == "active"
            except GraphError:
                if self.graph is not None and self.graph.exited() is not None:
                    raise
                return False

        for node in nodes:
            self.spin_until(lambda node=node: active(node), max(0.0, deadline - time.time()), f"{node} to become active")

    def wait_connected(self, nodes, timeout: float = 120.0) -> None:
        """Until every writer of this process and of `nodes` has matched every reader of
        its topic, on both sides (matching.py), and an asr_node fed from here listens.
        Only reports sent from now on count: an earlier one may predate a re-activation."""
        for node in nodes:
            self.health.pop(node, None)
        awaited = ""

        def connected() -> bool:
            nonlocal awaited
            awaited = self._not_connected(nodes)
            return not awaited

        if not self.wait_for(connected, timeout):
            raise GraphError(f"timed out after {timeout:g} s waiting for {awaited}")

    def _not_connected(self, nodes) -> str:
        """What wait_connected still waits for, in words; "" when nothing."""
        reports = {node: self.health.get(node, (0, "", {}))[2] for node in nodes}
        if waiting := [node for node, values in reports.items() if "writers_matched" not in values]:
            return f"the diagnostics of {', '.join(waiting)} while active"
        if awaited := unmatched(reports, self.node):
            return awaited
        fed = "/audio/user=" in reports.get("asr_node", {}).get("writers_matched", "")
        if fed and self.value("asr_node", "state") not in (AsrState.LISTENING.value, AsrState.MUTED.value):
            return "asr_node to listen (it does once predgen_node hears it)"
        return ""

    def close(self) -> None:
        self.node.destroy_node()
