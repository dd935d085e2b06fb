"""Whether the graph's writers and readers have matched each other, on both sides.

DDS matches a writer and a reader on each side on its own.  Until the reader's side has
matched, what the writer sends is lost to it, though the writer already counts the reader:
a demo beside a busy CPU lost its first question so.  Each node reports, on /diagnostics,
how many endpoints each of its publishers and subscriptions has matched; a probe
(probe.GraphProbe.wait_connected) compares them with the endpoints the graph has.
"""

from __future__ import annotations

from collections import Counter

# ROS 2's own topics, and the diagnostics these counts travel on
NOT_COUNTED = ("/rosout", "/parameter_events", "/diagnostics")


def _counted(node, topic: str) -> bool:
    return topic not in NOT_COUNTED and not topic.startswith(f"/{node.get_name()}/")


def matched_endpoints(node) -> dict[str, str]:
    """`node`'s diagnostics keys: per topic, the readers its publisher matched and the
    writers its subscription matched, as "topic=count topic=count"."""

    def counts(endpoints, matched) -> str:
        return " ".join(sorted(f"{e.topic_name}={matched(e)}" for e in endpoints if _counted(node, e.topic_name)))

    return {
        "readers_matched": counts(node.publishers, lambda p: p.get_subscription_count()),
        "writers_matched": counts(node.subscriptions, lambda s: s.get_publisher_count()),
    }


def parse_counts(text: str) -> dict[str, int]:
    return {topic: int(n) for topic, n in (item.rsplit("=", 1) for item in text.split())}


def unmatched(reports: dict[str, dict[str, str]], own) -> str:
    """The first endpoint that has not yet matched all of the graph's, in words; "" when
    every one has.  `reports`: each node's diagnostics values; `own`: the caller's rclpy
    node, whose publishers and subscriptions are part of the graph too."""
    ends = {name: (parse_counts(v["readers_matched"]), parse_counts(v["writers_matched"])) for name, v in reports.items()}
    mine = (
        {p.topic_name: p.get_subscription_count() for p in own.publishers if _counted(own, p.topic_name)},
        {s.topic_name: s.get_publisher_count() for s in own.subscriptions if _counted(own, s.topic_name)},
    )
    writers, readers = Counter(), Counter()
    for published, subscribed in [*ends.values(), mine]:
        writers.update(published.keys())
        readers.update(subscribed.keys())
    for name, (published, subscribed) in [*ends.items(), (own.get_name(), mine)]:
        for topic, n in published.items():
            if n < readers[topic]:
                return f"{name}'s {topic} to reach its {readers[topic]} reader(s) ({n} so far)"
        for topic, n in subscribed.items():
            if n < writers[topic]:
                return f"{name} to hear the {writers[topic]} writer(s) of {topic} ({n} so far)"
    return ""
