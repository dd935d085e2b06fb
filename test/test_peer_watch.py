"""PeerWatch: predgen_node is reachable while its /diagnostics heartbeat keeps coming."""

from __future__ import annotations

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

from predgen_ros.nodes.peer_watch import TIMEOUT_S, PeerWatch


class Clock:
    t = 100.0

    def __call__(self):
        return self.t


class Subscriber:
    """Stands in for the node: keeps the /diagnostics callback to call it by hand."""

    def create_subscription(self, kind, topic, callback, depth):
        assert (kind, topic) == (DiagnosticArray, "/diagnostics")
        self.callback = callback


def heartbeat(name: str) -> DiagnosticArray:
    return DiagnosticArray(status=[DiagnosticStatus(name=name)])


def test_the_heartbeat_keeps_the_peer_reachable_and_its_absence_is_said_in_one_line():
    clock, node = Clock(), Subscriber()
    watch = PeerWatch(node, clock=clock)
    assert not watch.reachable()  # not heard yet
    clock.t += TIMEOUT_S
    assert watch.describe() == "PredGen node unreachable (predgen_node: never heard)"
    assert not watch.lost()  # never there: a graph without predgen_node is not a fault
    node.callback(heartbeat("/predgen_ros/predgen_node"))
    assert watch.reachable()
    clock.t += TIMEOUT_S - 0.5
    node.callback(heartbeat("/predgen_ros/tts_node"))  # another node's report is no heartbeat of predgen_node
    assert watch.reachable()
    clock.t += 1.0
    assert not watch.reachable() and watch.lost()
    assert watch.describe() == "PredGen node unreachable (predgen_node: no heartbeat for 4 s)"
