"""The eager end of turn through the real graph (Whisper, Smart Turn, the embedded LLM, Piper in
real time), the user alone at the microphone (no canceller): the robot answers at a short
pause, and either the user stays silent (asr/voice "confirmed": the reply stands, answered
once) or goes on ("resumed": the reply stops, the whole utterance is answered once, and the
history keeps only what was played).  test_eager_end_echo_graph: the same over the robot's
own voice, on the default canceller."""

from __future__ import annotations

import pytest
import rclpy
from eager_user import EAGER, User, confirmation_answered_once, continuation_answered_once

from predgen_ros.eval.barge_in.interruptions import GRAPH_OVERRIDES, NODES, USER_ALONE, Recorder
from predgen_ros.nodes.bringup import Graph, default_params_file

pytestmark = [pytest.mark.graph, pytest.mark.e2e]  # the nodes load the real models


@pytest.fixture(scope="module")
def eager(tmp_path_factory):
    out = tmp_path_factory.mktemp("eager")
    rclpy.init()
    with (
        open(out / "graph.log", "w") as log,
        Graph(default_params_file(), {**GRAPH_OVERRIDES, **USER_ALONE, **EAGER}, nodes=NODES, log=log) as graph,
    ):
        rec = Recorder()
        rec.graph = graph
        rec.wait_active(NODES)
        user = User(rec)
        rec.spin_until(lambda: rec.reset.service_is_ready(), 120, "predgen_node's reset service")
        rec.wait_connected(NODES)
        yield rec, user
        rec.close()
    rclpy.try_shutdown()


def test_more_words_after_an_eager_start_stop_the_reply_and_the_whole_is_answered_once(eager, piper_voice):
    continuation_answered_once(*eager, piper_voice)


def test_an_eager_start_confirmed_is_answered_once(eager, piper_voice):
    confirmation_answered_once(*eager, piper_voice)
