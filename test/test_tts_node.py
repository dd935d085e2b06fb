"""tts_node alone, told by a stand-in turn owner what to do: real-time speech, barge-in within a chunk,
pauses that resume, pre-synthesis, audio on a topic."""

from __future__ import annotations

import time
import wave

import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from std_msgs.msg import Bool, Header, Int16MultiArray, String

from predgen_ros.nodes.bringup import Graph, default_params_file
from predgen_ros.nodes.common import AUDIO_QOS, TEXT_QOS, seconds, stamp
from predgen_ros.nodes.messages import sentence_of, turn_decision, turn_event
from predgen_ros.nodes.probe import GraphProbe
from predgen_ros.turn_events import TurnEventWriter
from predgen_ros.turn_taking import CUT_OFF_MARK

pytestmark = [pytest.mark.graph, pytest.mark.e2e]  # the nodes load the real models

LONG = (
    "Robots that listen while you speak can prepare an answer early, "
    "and this sentence is long enough to take several seconds to say out loud."
)


class Listener:
    def __init__(self):
        self.probe = GraphProbe("test_tts_listener")
        self.node = self.probe.node
        self.say = self.node.create_publisher(String, "tts/say", TEXT_QOS)
        self.candidate = self.node.create_publisher(String, "predgen/candidate", TEXT_QOS)
        self.decision = self.node.create_publisher(Header, "turn/decision", TEXT_QOS)  # as asr_node's turn owner
        self.turn_events = self.node.create_publisher(String, "turn/events", TEXT_QOS)  # the user's turns
        self.played: list[str] = []
        self.interruptions: list[tuple[float, str]] = []
        self.node.create_subscription(String, "tts/played", lambda m: self.played.append(m.data), TEXT_QOS)
        self.node.create_subscription(
            Header, "tts/interruption", lambda m: self.interruptions.append((seconds(m.stamp), m.frame_id)), TEXT_QOS
        )
        self.speaking: list[tuple[float, bool]] = []
        self.first_audio: list[str] = []
        self.chunks: list[int] = []
        self.health: list[dict[str, str]] = []
        self.node.create_subscription(Bool, "robot_speaking", lambda m: self.speaking.append((time.time(), m.data)), TEXT_QOS)
        self.node.create_subscription(Header, "tts/first_audio", lambda m: self.first_audio.append(sentence_of(m)), TEXT_QOS)
        self.node.create_subscription(Int16MultiArray, "tts/audio", lambda m: self.chunks.append(len(m.data)), AUDIO_QOS)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_health, 10)

    def _on_health(self, msg):
        self.health += [{kv.key: kv.value for kv in s.values} for s in msg.status if s.name == "/predgen_ros/tts_node"]

    def spin_until(self, condition, timeout=60.0, graph=None):
        self.probe.graph = graph
        assert self.probe.wait_for(condition, timeout), "timed out"

    def is_speaking(self):
        return bool(self.speaking) and self.speaking[-1][1]

    def decide(self, what: str, heard: str = "") -> None:
        self.decision.publish(turn_decision(stamp(time.time()), what, heard))


@pytest.fixture
def tts(tmp_path, request):
    overrides = {"tts.sink": request.param, "tts.wav_dir": str(tmp_path / "wav"), "tts.realtime": True, "tts.chunk_ms": 100}
    rclpy.init()
    with open(tmp_path / "tts.log", "w") as log, Graph(default_params_file(), overrides, nodes=("tts_node",), log=log) as graph:
        listener = Listener()
        listener.probe.graph = graph
        listener.probe.wait_active(["tts_node"])
        listener.probe.wait_connected(["tts_node"])
        listener.spin_until(lambda: listener.health, graph=graph)
        yield graph, listener, tmp_path / "wav"
        listener.node.destroy_node()
    rclpy.try_shutdown()


def barge_in_after_a_second(listener, graph) -> float:
    """Speak LONG, talk over it once a second of it has gone out on tts/audio, wait for
    the voice to stop; returns when the user spoke (wall clock)."""
    listener.say.publish(String(data=LONG))
    listener.spin_until(lambda: listener.is_speaking() and sum(listener.chunks) >= 22050, graph=graph)
    listener.decision.publish(Header(frame_id="mute"))  # a bad decision is ignored and counted
    t_user = time.time()
    listener.decide("stop", "wait what is")
    listener.spin_until(lambda: not listener.is_speaking() and listener.played, graph=graph)
    return t_user


@pytest.mark.parametrize("tts", ["topic"], indirect=True)
def test_barge_in_stops_speech_mid_sentence(tts):
    from predgen_ros.audio.speech.tts import PiperSynthesizer

    graph, listener, _ = tts
    barge_in_after_a_second(listener, graph)
    assert listener.first_audio[-1] == LONG
    listener.say.publish(String(data=""))  # predgen_node ends the interrupted reply
    played = sum(listener.chunks) / 22050
    whole = PiperSynthesizer().synthesize(LONG).seconds
    assert 1.0 <= played < whole - 1.0, (played, whole)  # it stopped well before the sentence's end
    # what the user heard: the sentence's first words, marked as cut off
    heard = listener.played[-1]
    assert heard.endswith(CUT_OFF_MARK) and LONG.startswith(heard[: -len(CUT_OFF_MARK)]), heard
    assert 2 <= len(heard.split()) < len(LONG.split()), heard
    assert [what for _, what in listener.interruptions] == ["stop"]

    # the next reply is spoken in full
    listener.chunks.clear()
    listener.say.publish(String(data="Of course."))
    listener.say.publish(String(data=""))
    listener.spin_until(lambda: [s for _, s in listener.speaking].count(True) >= 2 and not listener.is_speaking(), graph=graph)
    assert sum(listener.chunks) / 22050 > 0.4
    # /diagnostics comes once a second: wait for a report made after the barge-in
    listener.spin_until(lambda: int(listener.health[-1]["barge_ins"]) == 1, graph=graph)
    assert listener.health[-1]["bad_turn_decisions"] == "1"


@pytest.mark.timing
@pytest.mark.parametrize("tts", ["topic"], indirect=True)
def test_barge_in_stops_speech_within_a_chunk(tts):
    graph, listener, _ = tts
    t_user = barge_in_after_a_second(listener, graph)
    stopped_after = listener.speaking[-1][0] - t_user
    assert stopped_after < 0.35, stopped_after  # one 100 ms chunk, plus DDS delivery both ways


@pytest.mark.parametrize("tts", ["wav"], indirect=True)
def test_a_pause_that_resumes_plays_the_rest_of_the_sentence_and_nothing_twice(tts):
    """The same reply twice, the second time paused and resumed twice (a cough, then an
    acknowledgement): both replies' audio is the same, sample for sample (the second
    comes from the cache), and nothing of it was cut or repeated."""
    graph, listener, wav_dir = tts

    def speak(during=None):
        replies = [s for _, s in listener.speaking].count(True)
        listener.say.publish(String(data=LONG))
        listener.say.publish(String(data=""))
        listener.spin_until(lambda: [s for _, s in listener.speaking].count(True) > replies, graph=graph)
        if during:
            during()
        listener.spin_until(lambda: not listener.is_speaking(), graph=graph)

    def cough_and_acknowledge():
        for number in (1, 3):
            listener.decide("pause")
            listener.spin_until(lambda number=number: len(listener.interruptions) == number, graph=graph)
            listener.decide("resume")
            listener.spin_until(lambda number=number: len(listener.interruptions) == number + 1, graph=graph)

    speak()
    speak(cough_and_acknowledge)
    events = [what for _, what in listener.interruptions]
    assert events == ["pause", "resume", "pause", "resume"], events
    assert listener.played == [] and listener.first_audio == [LONG, LONG]
    with wave.open(str(wav_dir / "reply_001.wav")) as plain, wave.open(str(wav_dir / "reply_002.wav")) as paused:
        assert paused.readframes(paused.getnframes()) == plain.readframes(plain.getnframes())


@pytest.mark.parametrize("tts", ["topic"], indirect=True)
def test_candidates_are_presynthesized_and_audio_goes_out_on_a_topic(tts):
    graph, listener, _ = tts
    listener.candidate.publish(String(data="The capital of France is Paris."))
    listener.spin_until(lambda: int(listener.health[-1]["cached_sentences"]) == 1, graph=graph)
    assert listener.health[-1]["cache_hits"] == "0"
    listener.say.publish(String(data="The capital of France is Paris."))
    listener.say.publish(String(data=""))
    listener.spin_until(lambda: any(s for _, s in listener.speaking) and not listener.is_speaking(), graph=graph)
    listener.health.clear()
    listener.spin_until(lambda: listener.health, graph=graph)
    assert listener.health[-1]["cache_hits"] == "1"  # spoken from the cache, not synthesized again
    assert sum(listener.chunks) > 22050 * 0.8 and max(listener.chunks) <= 2205


@pytest.mark.parametrize("tts", ["wav"], indirect=True)
def test_only_a_candidates_opening_is_presynthesized(tts):
    """A commit that comes while a candidate is prepared waits for that work, so only
    the opening is prepared: the committed sentence's opening is a cache hit, its rest
    is synthesized after the commit (the cache holds both then)."""
    graph, listener, _ = tts
    listener.candidate.publish(String(data=LONG))
    listener.spin_until(lambda: int(listener.health[-1]["cached_sentences"]) == 1, graph=graph)
    listener.say.publish(String(data=LONG))
    listener.say.publish(String(data=""))
    listener.spin_until(lambda: listener.speaking and not listener.is_speaking() and listener.first_audio, graph=graph)
    listener.health.clear()
    listener.spin_until(lambda: listener.health, graph=graph)
    assert (listener.health[-1]["cache_hits"], listener.health[-1]["cached_sentences"]) == ("1", "2")


@pytest.mark.parametrize("tts", ["wav"], indirect=True)
def test_a_long_first_sentence_starts_after_its_opening_and_plays_whole_once(tts):
    """The opening ("Robots that listen while you speak") is synthesized alone, the rest
    while it plays; the reply's audio is both pieces, once, and one first audio."""
    from predgen_ros.audio.speech.tts import PiperSynthesizer

    graph, listener, wav_dir = tts
    listener.say.publish(String(data=LONG))
    listener.say.publish(String(data=""))
    listener.spin_until(lambda: listener.speaking and not listener.is_speaking() and listener.first_audio, graph=graph)
    assert listener.first_audio == [LONG]
    with wave.open(str(wav_dir / "reply_001.wav")) as f:
        played = f.getnframes() / f.getframerate()
    synth = PiperSynthesizer()
    opening, rest = synth.pieces(LONG)
    pieces_s = synth.synthesize(opening).seconds + synth.synthesize(rest).seconds
    # Piper's durations carry noise, so the same text lasts a little longer or shorter each
    # time (the WAV holds the samples played, so this does not depend on the machine's speed)
    assert 0.85 * pieces_s < played < 1.15 * pieces_s, (played, pieces_s)
    assert played > 1.5 * synth.synthesize(opening).seconds  # the rest was played, not only the opening
    listener.health.clear()
    listener.spin_until(lambda: listener.health, graph=graph)
    assert listener.health[-1]["sentences"] == "1"


@pytest.mark.parametrize("tts", ["none"], indirect=True)
def test_a_reply_whose_predgen_node_went_away_ends_and_its_late_rest_is_not_spoken(tts):
    """predgen_node's heartbeat stops in the middle of a reply (its host or the link went
    away): the robot falls silent instead of waiting for an end that may never come, and
    the rest of that reply, arriving later (a link that came back), is not spoken."""
    graph, listener, _ = tts
    beating = [True]
    heartbeat = listener.node.create_publisher(DiagnosticArray, "/diagnostics", 10)
    beat = DiagnosticArray(status=[DiagnosticStatus(name="/predgen_ros/predgen_node")])
    listener.node.create_timer(0.5, lambda: beating[0] and heartbeat.publish(beat))
    report = lambda key: listener.health[-1].get(key) if listener.health else None  # noqa: E731
    listener.spin_until(lambda: report("predgen_reachable") == "True", graph=graph)  # heard

    listener.say.publish(String(data="Of course."))  # a first sentence; the reply's end never comes
    listener.spin_until(listener.is_speaking, graph=graph)
    beating[0] = False
    listener.spin_until(lambda: not listener.is_speaking(), graph=graph)
    listener.spin_until(lambda: report("dropping_stale") == "True", graph=graph)

    beating[0] = True  # the link is back, with what was still on its way
    listener.say.publish(String(data="The rest of that old reply."))
    listener.say.publish(String(data=""))
    listener.spin_until(lambda: report("stale_dropped") == "2", graph=graph)
    for event in TurnEventWriter().words("hello", time.time()):  # the user speaks: what comes next answers them
        listener.turn_events.publish(turn_event(event))
    listener.spin_until(lambda: report("dropping_stale") == "False", graph=graph)
    listener.say.publish(String(data="Hello again."))
    listener.say.publish(String(data=""))
    listener.spin_until(lambda: len(listener.first_audio) == 2 and not listener.is_speaking(), graph=graph)
    assert listener.first_audio == ["Of course.", "Hello again."]
