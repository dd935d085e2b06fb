"""The real nodes as separate processes, driven over DDS like an ASR would drive them."""

from __future__ import annotations

import time
import wave

import numpy as np
import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from std_msgs.msg import Bool, Header, String
from std_srvs.srv import Trigger

from predgen_ros.nodes.bringup import Graph, default_params_file
from predgen_ros.nodes.common import TEXT_QOS, stamp
from predgen_ros.nodes.messages import turn_decision, turn_event
from predgen_ros.nodes.predgen_node import REPORT_KEYS
from predgen_ros.nodes.probe import GraphProbe
from predgen_ros.turn_events import TurnEventWriter
from predgen_ros.turn_taking import CUT_OFF_MARK

pytestmark = [pytest.mark.graph, pytest.mark.e2e]  # the nodes load the real models


class FakeUser:
    """Publishes what asr_node would (its turn owner's decisions too); records what the graph answers."""

    def __init__(self):
        self.probe = GraphProbe("test_user")
        self.node = self.probe.node
        self.turn_events = self.node.create_publisher(String, "turn/events", TEXT_QOS)
        self.user = TurnEventWriter()  # numbers the utterances as asr_node's turn owner does
        self.decision = self.node.create_publisher(Header, "turn/decision", TEXT_QOS)
        self.reset = self.node.create_client(Trigger, "/predgen_node/reset")
        self.reports: list[dict[str, str]] = []
        self.replies_spoken = 0
        self.health: dict[str, list] = {}
        self._speaking = False
        self.latency_sub = self.node.create_subscription(DiagnosticArray, "predgen/latency", self._on_report, TEXT_QOS)
        self.speaking_sub = self.node.create_subscription(Bool, "robot_speaking", self._on_speaking, TEXT_QOS)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_health, 10)
        self.played: list[str] = []  # tts/played: what the user heard of a reply they cut off
        self.node.create_subscription(String, "tts/played", lambda msg: self.played.append(msg.data), TEXT_QOS)

    def _on_report(self, msg):
        self.reports += [{kv.key: kv.value for kv in s.values} for s in msg.status]

    def _on_speaking(self, msg):
        self.replies_spoken += self._speaking and not msg.data
        self._speaking = msg.data

    def _on_health(self, msg):
        for s in msg.status:
            self.health.setdefault(s.name, []).append(s)

    def spin_until(self, condition, timeout=90.0, graph=None):
        self.probe.graph = graph
        assert self.probe.wait_for(condition, timeout), "timed out"

    def send(self, events) -> None:
        for event in events:
            self.turn_events.publish(turn_event(event))

    def say(self, text, graph, gap=0.1, final=True):
        """The words one more at a time, then the ending."""
        words = text.split()
        for n in range(1, len(words) + 1):
            self.send(self.user.words(" ".join(words[:n]), time.time()))
            self.spin_until(lambda: True)
            time.sleep(gap)
        if final:
            self.end(text)

    def end(self, text) -> list:
        """The utterance's ending (the whole turn, when no words came before it); the events sent."""
        events = self.user.final(text, time.time(), may_continue=False, handed_on=True)
        self.send(events)
        return events

    def talk_over(self, words: str) -> None:
        """A turn over the robot, as asr_node's owner rules it: stop the voice, hand on the words."""
        self.decision.publish(turn_decision(stamp(time.time()), "stop", words))
        self.send(self.user.words(words, time.time()))

    def turn(self, text, graph):
        """Say `text` to a silent robot and wait for its latency report and the end of its
        audio (said over a reply, the words would be judged as an interruption; and the end
        of that reply would pass for the end of this one)."""
        self.spin_until(lambda: not self._speaking, graph=graph)
        reports, spoken = len(self.reports), self.replies_spoken
        self.say(text, graph)
        self.spin_until(lambda: len(self.reports) > reports and self.replies_spoken > spoken, graph=graph)
        return self.reports[-1]


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    out = tmp_path_factory.mktemp("graph")
    overrides = {
        "policy": "predgen",
        "generation.max_new_tokens": 40,
        "tts.sink": "wav",
        "tts.wav_dir": str(out / "wav"),
        "tts.realtime": True,  # speech lasts: barge-in can happen
    }
    rclpy.init()
    with (
        open(out / "graph.log", "w") as log,
        Graph(default_params_file(), overrides, nodes=("predgen_node", "tts_node"), log=log) as g,
    ):
        user = FakeUser()
        user.probe.graph = g
        user.probe.wait_active(["predgen_node", "tts_node"])
        user.spin_until(user.reset.service_is_ready, timeout=60, graph=g)
        user.probe.wait_connected(g.nodes)  # no first message lost, the user's or a node's
        yield g, user, out
        user.node.destroy_node()
    rclpy.try_shutdown()


def predgen_health(user) -> dict[str, str]:
    return {kv.key: kv.value for kv in user.health["/predgen_ros/predgen_node"][-1].values}


def ignored_messages(user, graph) -> int:
    """predgen_node's count of ignored messages now, from its next 1 Hz health report."""
    user.health.pop("/predgen_ros/predgen_node", None)
    user.spin_until(lambda: "/predgen_ros/predgen_node" in user.health, graph=graph)
    return int(predgen_health(user)["ignored_messages"])


def wav_seconds_and_rms(path):
    with wave.open(str(path)) as f:
        samples = np.frombuffer(f.readframes(f.getnframes()), dtype=np.int16).astype(np.float64)
        return len(samples) / f.getframerate(), float(np.sqrt(np.mean(samples**2))) if len(samples) else 0.0


def test_turns_produce_speech_reports_and_use_history(graph):
    g, user, out = graph
    first = user.turn("What is the capital of France?", g)
    assert set(REPORT_KEYS) <= set(first), set(REPORT_KEYS) - set(first)
    assert first["policy"] == "predgen" and first["transcript"] == "What is the capital of France?"
    assert first["history_turns"] == "0"
    assert first["first_sentence"], "a first sentence was committed"
    assert float(first["audio_latency_s"]) > 0  # no upper bound: a slow machine is slow, not wrong
    assert (
        float(first["t_end_of_speech"])
        <= float(first["t_final_transcript"])
        <= float(first["t_commit"])
        <= float(first["t_first_audio"])
    )
    # passes after the final may be 0: a fast backend has the first sentence verified before it
    assert int(first["nfe_tfs"]) + int(first["rounds"]) >= 1

    # the committed first sentence was spoken: a WAV with speech-length, non-silent audio
    seconds, rms = wav_seconds_and_rms(out / "wav" / "reply_001.wav")
    assert seconds > 0.04 * len(first["first_sentence"]), (seconds, first["first_sentence"])
    assert rms > 100

    second = user.turn("And what about Germany?", g)
    assert second["history_turns"] == "1"
    # the prompt carries turn one (question and reply), not just the new question
    assert int(second["prompt_tokens"]) > int(first["prompt_tokens"]) + 10

    future = user.reset.call_async(Trigger.Request())
    user.spin_until(future.done)
    assert future.result().success
    third = user.turn("And what about Germany?", g)
    assert third["history_turns"] == "0"
    assert int(third["prompt_tokens"]) < int(second["prompt_tokens"])


def test_bad_input_is_survived_and_the_next_turn_answered(graph):
    g, user, _ = graph
    reports, ignored = len(user.reports), ignored_messages(user, g)
    user.turn_events.publish(String(data="what is the capital"))  # not a turn event: words from a plain ASR
    user.turn_events.publish(String(data='{"kind": "partial", "utterance": 1, "stream": "x", "text": "hi", "stamp": 0}'))
    user.spin_until(lambda: int(predgen_health(user)["ignored_messages"]) >= ignored + 2, graph=g)
    user.send(user.user.words("   ", time.time()))  # a hypothesis of whitespace: no words, nothing to answer
    user.say("🤖 مرحبا 你好 \u202eevil\u202c \x07bell", g, final=False)  # any Unicode, control characters
    user.end("🤖 مرحبا 你好")
    user.spin_until(lambda: len(user.reports) > reports, graph=g)
    assert [r["transcript"] for r in user.reports[reports:]] == ["🤖 مرحبا 你好"]  # answered like any other turn
    next_turn = user.turn("Name a colour of the sky.", g)  # served after all of that
    assert next_turn["transcript"] == "Name a colour of the sky."
    assert next_turn["first_sentence"]

    # a final without any partial before it is a complete turn of its own (three words: a turn even over the robot)
    reports = len(user.reports)
    user.end("Please say hello.")
    user.spin_until(lambda: len(user.reports) > reports, graph=g)
    assert user.reports[-1]["transcript"] == "Please say hello."

    # the nodes kept publishing 1 Hz health, and predgen_node counted no engine error
    user.health.clear()
    user.spin_until(lambda: {"/predgen_ros/predgen_node", "/predgen_ros/tts_node"} <= set(user.health))
    assert predgen_health(user)["engine_errors"] == "0"
    assert g.exited() is None


def test_barge_in_stops_the_reply_and_the_new_utterance_is_answered(graph):
    g, user, _ = graph
    future = user.reset.call_async(Trigger.Request())
    user.spin_until(future.done)
    user.spin_until(lambda: not user._speaking, graph=g)  # the previous test's reply has ended
    before = len(user.reports)
    user.say("Tell me a long story about a robot who learns to paint.", g)
    user.spin_until(lambda: user._speaking and len(user.reports) > before, graph=g)
    reports = len(user.reports)
    user.talk_over("Stop, stop, what")
    user.spin_until(lambda: not user._speaking, graph=g)  # how soon: `predgen-ros eval-interruptions`
    report = user.turn("Stop, stop, what is two plus two?", g)
    assert report["transcript"] == "Stop, stop, what is two plus two?" and report["first_sentence"]
    assert [r["transcript"] for r in user.reports[reports:]] == ["Stop, stop, what is two plus two?"]
    assert report["history_turns"] == "1"  # what the user heard before the barge-in stays in the history
    first_reply = user.reports[reports - 1]["first_sentence"]
    heard = report["previous_reply"]
    assert heard == user.played[-1]  # the history's reply is exactly what tts_node played
    assert heard.endswith(CUT_OFF_MARK) and first_reply.startswith(heard[: -len(CUT_OFF_MARK)]), (heard, first_reply)


def test_the_same_words_twice_are_two_turns_and_a_redelivered_final_one(graph):
    g, user, _ = graph
    future = user.reset.call_async(Trigger.Request())
    user.spin_until(future.done)
    user.spin_until(lambda: not user._speaking, graph=g)  # the previous test's reply has ended
    before = len(user.reports)
    user.turn("yes", g)  # the robot asked something; the user said "yes"
    user.turn("yes", g)  # ...and again, to the next question: however soon, a new utterance
    assert [r["transcript"] for r in user.reports[before:]] == ["yes", "yes"]
    assert user.reports[-1]["first_sentence"] and user.reports[-1]["history_turns"] == "1"

    def finals_not_taken():
        statuses = user.health.get("/predgen_ros/predgen_node", [])
        return int({kv.key: kv.value for kv in statuses[-1].values}["finals_not_taken"]) if statuses else 0

    # an ending delivered twice, at once and late: one turn
    before = len(user.reports)
    user.say("thank you", g, final=False)
    ending = user.end("thank you")[-1]
    user.send([ending])
    user.spin_until(lambda: len(user.reports) > before and not user._speaking, graph=g)
    user.health.clear()
    user.spin_until(lambda: "/predgen_ros/predgen_node" in user.health, graph=g)
    not_taken = finals_not_taken()
    user.send([ending])
    user.spin_until(lambda: finals_not_taken() > not_taken, graph=g)  # the engine took it for a re-delivery
    user.end("ok then")  # a new number is a new turn
    user.spin_until(lambda: any(r["transcript"] == "ok then" for r in user.reports[before:]), graph=g)
    assert [r["transcript"] for r in user.reports[before:]] == ["thank you", "ok then"]


def test_a_barge_in_that_repeats_the_question_is_answered(graph):
    g, user, _ = graph
    future = user.reset.call_async(Trigger.Request())
    user.spin_until(future.done)
    question = "Tell me a long story about a robot who learns to paint."
    user.spin_until(lambda: not user._speaking, graph=g)
    before = len(user.reports)
    user.say(question, g)
    user.spin_until(lambda: user._speaking and len(user.reports) > before, graph=g)
    reports = len(user.reports)  # the same words again at once: a new utterance, not a copy of the last
    user.talk_over(question)
    report = user.turn(question, g)
    assert [r["transcript"] for r in user.reports[reports:]] == [question]
    assert report["history_turns"] == "1" and report["first_sentence"]  # the interrupted reply is in the history
