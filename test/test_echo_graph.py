"""The robot's own voice in its microphone, through the real graph: asr_node (whisper, the
echo canceller) hears a simulated room where tts_node's loudspeaker plays 0.3 m away."""

from __future__ import annotations

import pytest
import rclpy

from predgen_ros.eval.barge_in.interruption_bag import Trial, first_voiced_s
from predgen_ros.eval.barge_in.interruptions import GRAPH_OVERRIDES, HEARING, NODES, ROBOT_IN_MIC, AudioFeed, Recorder, run_trial
from predgen_ros.eval.hearing.echo_mic import RoomMicrophone, probe_speech
from predgen_ros.nodes.asr_params import ASR_PARAMS
from predgen_ros.nodes.bringup import Graph, default_params_file
from predgen_ros.turn_taking import CUT_OFF_MARK, Speech, TurnRules

pytestmark = [pytest.mark.graph, pytest.mark.e2e]  # the nodes load the real models

REQUEST = "What should I pack for a day at the beach?"  # a reply of several seconds


@pytest.fixture(scope="module")
def room_graph(tmp_path_factory):
    out = tmp_path_factory.mktemp("echo_graph")
    room = RoomMicrophone(probe_speech())
    room.enter_room(0)
    overrides = {**GRAPH_OVERRIDES, **ROBOT_IN_MIC}  # the default hearing: the canceller
    assert HEARING["echo"]["asr.echo_cancel"] == ASR_PARAMS["asr.echo_cancel"][0]
    rclpy.init()
    with open(out / "graph.log", "w") as log, Graph(default_params_file(), overrides, nodes=NODES, log=log) as graph:
        rec = Recorder(room)
        rec.graph = graph
        rec.wait_active(NODES)
        rec.spin_until(lambda: rec.reset.service_is_ready() and rec.hears_the_graph(), 120, "the graph")
        feed = AudioFeed(rec.node, room)
        rec.wait_connected(NODES)
        yield rec, feed
        feed.close()
        rec.close()
    rclpy.try_shutdown()


def test_the_robot_hearing_its_own_reply_goes_on_speaking(room_graph, piper_voice):
    rec, feed = room_graph
    for number in range(2):  # the first reply also lets the canceller learn the room
        result = run_trial(rec, feed, "pause", Trial(number, "silence", REQUEST, "", 0.0), piper_voice(REQUEST), None)
        assert result.spoke, result
        # it may pause on the canceller's residue (docs/results/echo.md), but it goes on, and makes no turn of it
        assert not result.stopped and result.new_turn == "", result
        assert result.resumed or not result.paused, result


def test_a_real_question_over_the_reply_stops_it_and_is_answered(room_graph, piper_voice):
    rec, feed = room_graph
    question = "What is the capital of France?"
    audio = piper_voice(question)
    trial = Trial(2, "barge_in", REQUEST, question, 0.6, first_voiced_s(audio))
    result = run_trial(rec, feed, "pause", trial, piper_voice(REQUEST), audio)
    assert result.spoke and result.stopped and result.silence_s is not None, result
    # answered with a turn of the user's words, and the history keeps what was played; which
    # words said over the robot survive varies with timing (docs/results/echo.md), so the
    # check is that a question became the turn, not its spelling
    assert result.answered and TurnRules().kind(result.new_turn) is Speech.TURN, result
    assert result.history == result.played and result.played.endswith(CUT_OFF_MARK), result
