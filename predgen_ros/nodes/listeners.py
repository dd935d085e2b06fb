"""Waiting until predgen_node hears asr_node's turn/events: what is published before its
reader matches is lost to it."""

from __future__ import annotations

from .peer_watch import PEER, PeerWatch
from .waiting import Waits

UNKNOWN_NODE = "_NODE_NAME_UNKNOWN_"  # rmw's name for an endpoint whose node it has not heard of yet
# reads turn/events only to know that the user spoke: no listener to wait for
SPEAKER = "tts_node"


def wait_for_predgen(node, waits: Waits, publishers, predgen: PeerWatch) -> bool:
    """Until each of `publishers` (topics predgen_node reads) has a matched reader, and
    predgen_node's readers have matched them too; False when stopped."""
    if not waits.until(lambda: all(pub.get_subscription_count() > 0 for pub in publishers)):
        return False
    # Our writers matched a reader, but DDS matches each side on its own: until predgen_node's
    # readers have matched these writers, what we publish is lost to it (a soak once lost its
    # first question so).  Its heartbeat counts the writers its readers matched: wait until
    # that is every writer of these topics this node sees (its own among them).
    if not waits.until(lambda: subscriber_nodes(node, publishers[0]) - {SPEAKER}):
        return False
    if PEER in subscriber_nodes(node, publishers[0]):
        writers = lambda: min(node.count_publishers(pub.topic_name) for pub in publishers)  # noqa: E731
        return waits.until(lambda: int(predgen.values.get("turn_writers_matched", "0")) >= writers())
    return True


def subscriber_nodes(node, publisher) -> set[str]:
    """The nodes of `publisher`'s topic's subscriptions; empty until each one's name is known
    (the graph names an endpoint some time after DDS matched it)."""
    names = {info.node_name for info in node.get_subscriptions_info_by_topic(publisher.topic_name)}
    return set() if UNKNOWN_NODE in names else names
