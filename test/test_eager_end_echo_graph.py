"""The eager end of turn through the real graph on the default canceller (asr.echo_cancel:
webrtc): tts_node publishes what it plays on tts/reference, so while the eager reply plays
asr_node hears the user through the echo front-end, the guarded voice detector (a voice
over the echo opens an utterance once sustained, counted late and read back) and the
canceller's output, as on a robot.  The same checks as test_eager_end_graph (no canceller):
words after an eager start stop the reply and the whole is answered once; an eager start
the user lets stand is answered once.

The microphone hears the user alone, as there: with the robot's voice mixed in through a
simulated room (eval/hearing/echo_mic.py) the eager path fails today, the robot's young
canceller letting its own reply through as the user's continuation (docs/results/house.md,
"The eager path on the default canceller")."""

from __future__ import annotations

import numpy as np
import pytest
import rclpy
from eager_user import EAGER, User, confirmation_answered_once, continuation_answered_once

from predgen_ros.audio.recognition.text_asr import robot_conversation_file
from predgen_ros.eval.barge_in.interruptions import GRAPH_OVERRIDES, HEARING, NODES, Recorder
from predgen_ros.nodes.bringup import Graph, default_params_file

pytestmark = [pytest.mark.graph, pytest.mark.e2e]  # the nodes load the real models

# The canceller hears no voice over the robot's first seconds of voice (audio/echo/canceller.py
# LEARNING_S, AEC3 learning the room): the fixture has the robot answer until asr_node reports
# it learned, as a robot that has been talking a while.
WARM_UP = robot_conversation_file().read_text().splitlines()  # the demo's requests


@pytest.fixture(scope="module")
def on_the_canceller(tmp_path_factory, piper_voice):
    out = tmp_path_factory.mktemp("eager-canceller")
    rclpy.init()
    overrides = {**GRAPH_OVERRIDES, **HEARING["echo"], **EAGER}
    with open(out / "graph.log", "w") as log, Graph(default_params_file(), overrides, nodes=NODES, log=log) as graph:
        rec = Recorder()
        rec.graph = graph
        rec.wait_active(NODES)
        user = User(rec)
        rec.spin_until(lambda: rec.reset.service_is_ready(), 120, "predgen_node's reset service")
        rec.wait_connected(NODES)
        for question in WARM_UP:
            if rec.value("asr_node", "echo_learning") == "False":
                break
            answered = len(rec.reports)
            user.say(piper_voice(question), then_until=lambda: user.contract())
            user.say(np.zeros(0), then_until=lambda: len(rec.reports) > answered and not rec.is_speaking)
            rec.wait_quiet()
        assert rec.value("asr_node", "echo_learning") == "False", "the canceller never learned"
        yield rec, user
        rec.close()
    rclpy.try_shutdown()


def test_on_the_canceller_more_words_after_an_eager_start_stop_the_reply_and_the_whole_is_answered_once(
    on_the_canceller, piper_voice
):
    # over the echo the continuation is counted late and read back further: Whisper tiny.en heard
    # "of France?" as "A friend?" or "A France" in two of three runs, so any word that extends the cut
    continuation_answered_once(*on_the_canceller, piper_voice, heard_word=None)


def test_on_the_canceller_an_eager_start_confirmed_is_answered_once(on_the_canceller, piper_voice):
    confirmation_answered_once(*on_the_canceller, piper_voice)
