"""matching.unmatched: a graph is connected only when every side of every match is counted."""

from __future__ import annotations

from dataclasses import dataclass, field

from predgen_ros.nodes.matching import matched_endpoints, parse_counts, unmatched


@dataclass
class Endpoint:
    topic_name: str
    matched: int

    def get_subscription_count(self) -> int:
        return self.matched

    def get_publisher_count(self) -> int:
        return self.matched


@dataclass
class Node:
    """What matching reads of an rclpy node."""

    name: str
    publishers: list[Endpoint] = field(default_factory=list)
    subscriptions: list[Endpoint] = field(default_factory=list)

    def get_name(self) -> str:
        return self.name


def test_counts_leave_out_ros_own_topics_and_the_node_private_ones():
    node = Node(
        "tts_node",
        publishers=[Endpoint("/robot_speaking", 2), Endpoint("/rosout", 1), Endpoint("/tts_node/transition_event", 0)],
        subscriptions=[Endpoint("/tts/say", 1), Endpoint("/parameter_events", 3)],
    )
    values = matched_endpoints(node)
    assert parse_counts(values["readers_matched"]) == {"/robot_speaking": 2}
    assert parse_counts(values["writers_matched"]) == {"/tts/say": 1}


def test_a_reader_that_has_not_matched_its_writer_is_named():
    # the user's writer already counts predgen_node's reader; predgen_node's reader not yet the writer
    user = Node("user", publishers=[Endpoint("/asr/final", 1)])
    predgen = Node("predgen_node", subscriptions=[Endpoint("/asr/final", 0)])
    assert (
        unmatched({"predgen_node": matched_endpoints(predgen)}, user)
        == "predgen_node to hear the 1 writer(s) of /asr/final (0 so far)"
    )
    predgen.subscriptions[0].matched = 1
    assert unmatched({"predgen_node": matched_endpoints(predgen)}, user) == ""


def test_a_writer_between_two_nodes_must_reach_every_reader():
    predgen = Node("predgen_node", publishers=[Endpoint("/tts/say", 1)])
    tts = Node("tts_node", subscriptions=[Endpoint("/tts/say", 1)])
    user = Node("user", subscriptions=[Endpoint("/tts/say", 0)])  # a second reader, not yet matched on its side
    reports = {"predgen_node": matched_endpoints(predgen), "tts_node": matched_endpoints(tts)}
    assert unmatched(reports, user) == "predgen_node's /tts/say to reach its 2 reader(s) (1 so far)"
    predgen.publishers[0].matched = 2
    assert (
        unmatched({"predgen_node": matched_endpoints(predgen), "tts_node": matched_endpoints(tts)}, user)
        == "user to hear the 1 writer(s) of /tts/say (0 so far)"
    )
    user.subscriptions[0].matched = 1
    assert unmatched({"predgen_node": matched_endpoints(predgen), "tts_node": matched_endpoints(tts)}, user) == ""


def test_a_topic_nobody_writes_waits_for_nothing():
    tts = Node("tts_node", subscriptions=[Endpoint("/predgen/candidate", 0)])
    assert unmatched({"tts_node": matched_endpoints(tts)}, Node("user")) == ""
