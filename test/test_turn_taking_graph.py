"""Speech over the robot through the real graph: the user's audio into asr_node (pocketsphinx),
predgen_node with the embedded model, tts_node speaking in real time."""

from __future__ import annotations

import numpy as np
import pytest
import rclpy

from predgen_ros.eval.barge_in.interruption_bag import Trial, burst, first_voiced_s
from predgen_ros.eval.barge_in.interruptions import GRAPH_OVERRIDES, NODES, USER_ALONE, AudioFeed, Recorder, run_trial
from predgen_ros.nodes.bringup import Graph, default_params_file
from predgen_ros.turn_taking import CUT_OFF_MARK

pytestmark = [pytest.mark.graph, pytest.mark.e2e]  # the nodes load the real models

QUESTION = "What should I pack for a day at the beach?"  # a reply of several seconds


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    out = tmp_path_factory.mktemp("turn_taking")
    rclpy.init()
    with (
        open(out / "graph.log", "w") as log,
        Graph(default_params_file(), {**GRAPH_OVERRIDES, **USER_ALONE}, nodes=NODES, log=log) as graph,
    ):
        rec = Recorder()
        rec.graph = graph
        rec.wait_active(NODES)
        rec.spin_until(lambda: rec.reset.service_is_ready() and rec.node.count_subscribers("audio/user") > 0, 120, "the graph")
        feed = AudioFeed(rec.node)
        rec.wait_connected(NODES)
        yield rec, feed
        feed.close()
        rec.close()
    rclpy.try_shutdown()


def trial(kind, event, event_audio, number):
    return Trial(number, kind, QUESTION, event, 0.4, first_voiced_s(event_audio))  # early in the reply


@pytest.mark.parametrize("event", ["cough", "Mm-hmm."])
def test_a_cough_or_an_acknowledgement_over_the_reply_does_not_end_it(live, piper_voice, event):
    rec, feed = live
    audio = burst("cough", np.random.default_rng(0)) if event == "cough" else piper_voice(event)
    kind = "burst" if event == "cough" else "backchannel"
    result = run_trial(rec, feed, "pause", trial(kind, event, audio, 0), piper_voice(QUESTION), audio)
    assert result.spoke and result.event_over_speech, result
    assert not result.stopped and result.new_turn == "", result  # the reply went on, and no turn was made of it
    assert result.resumed or not result.paused, result  # a pause, if any, resumed


def test_a_real_question_over_the_reply_stops_it_and_is_answered(live, piper_voice):
    rec, feed = live
    question = "What is the capital of France?"
    audio = piper_voice(question)
    result = run_trial(rec, feed, "pause", trial("barge_in", question, audio, 1), piper_voice(QUESTION), audio)
    assert result.spoke and result.stopped and result.silence_s is not None, result
    assert result.answered and "capital" in result.new_turn, result
    # the history holds what was heard, as tts_node said it: the played text, marked cut off
    assert result.played.endswith(CUT_OFF_MARK) and result.history == result.played, result
