"""predgen_node in this process: its callbacks and its worker thread side by side."""

from __future__ import annotations

import sys
import threading
import time

import pytest
import rclpy
from std_msgs.msg import Header

from predgen_ros.engine.turn import TurnStats
from predgen_ros.nodes.common import stamp
from predgen_ros.nodes.predgen_node import PendingReport, PredgenNode

pytestmark = pytest.mark.graph


@pytest.fixture(scope="module")
def node():
    rclpy.init()
    node = PredgenNode()
    node.start()  # configure and activate, as autostart does
    yield node
    node.close()
    node.destroy_node()
    rclpy.try_shutdown()


def test_reports_go_out_while_speech_end_stamps_keep_arriving(node):
    """asr/speech_end callbacks (executor thread) and latency reports (worker thread)
    run at the same time; no stamp store may be read while it is written."""
    stop = threading.Event()
    errors = []

    def flood_speech_ends():
        i = 0
        while not stop.is_set():
            node._on_speech_end(Header(stamp=stamp(time.time()), frame_id=str(i)))
            i += 1

    now = time.time()
    turn = TurnStats(user_text="hi", t_first_partial=now - 2, t_final=now, t_commit=now + 0.1, first_sentence="Hi.")
    turn.t_speech_end = now - 0.5
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    flood = threading.Thread(target=flood_speech_ends)
    flood.start()
    try:
        for n in range(2000):
            try:
                node._publish_report(PendingReport(n, turn, now + 0.3))
            except RuntimeError as err:
                errors.append(err)
                break
    finally:
        stop.set()
        flood.join()
        sys.setswitchinterval(switch)
    assert not errors, errors[0]
