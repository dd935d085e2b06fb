"""The three nodes as managed nodes, driven through their lifecycle services over DDS."""

import time

import psutil
import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from std_msgs.msg import String

from predgen_ros.nodes.bringup import TEXT_USER, Graph, default_params_file
from predgen_ros.nodes.common import TEXT_QOS
from predgen_ros.nodes.messages import turn_event, turn_event_of
from predgen_ros.nodes.probe import GraphProbe
from predgen_ros.turn_events import TurnEventWriter

pytestmark = [pytest.mark.graph, pytest.mark.e2e]  # the nodes load the real models

MANUAL = {"autostart": False, "tts.sink": "none", "generation.max_new_tokens": 16}


class User:
    """Speaks utterances to predgen_node and collects its responses."""

    def __init__(self, probe: GraphProbe):
        self.probe = probe
        self.turn_events = probe.node.create_publisher(String, "turn/events", TEXT_QOS)
        self.user = TurnEventWriter()
        self.responses: list[str] = []
        self.answered: list[str] = []  # the transcripts of the turns predgen_node reported, in order
        probe.node.create_subscription(String, "predgen/response", lambda m: self.responses.append(m.data), TEXT_QOS)
        probe.node.create_subscription(DiagnosticArray, "predgen/latency", self._on_report, TEXT_QOS)

    def _on_report(self, msg: DiagnosticArray) -> None:
        self.answered += [kv.value for status in msg.status for kv in status.values if kv.key == "transcript"]

    def say(self, text: str) -> None:
        events = [e for n in range(1, len(text.split()) + 1) for e in self.user.words(" ".join(text.split()[:n]), time.time())]
        for event in events + self.user.final(text, time.time(), may_continue=False, handed_on=True):
            self.turn_events.publish(turn_event(event))

    def hears_predgen(self) -> bool:
        """predgen_node subscribes to the turn events (it does only while active; tts_node does too)."""
        return any(info.node_name == "predgen_node" for info in self.probe.node.get_subscriptions_info_by_topic("turn/events"))


@pytest.fixture
def managed(tmp_path):
    rclpy.init()
    with (
        open(tmp_path / "graph.log", "w") as log,
        Graph(default_params_file(), MANUAL, nodes=("predgen_node", "tts_node"), log=log) as graph,
    ):
        probe = GraphProbe(graph=graph)
        yield graph, probe, User(probe)
        probe.close()
    rclpy.try_shutdown()


def rss_mb(graph, node):
    return psutil.Process(graph.procs[node].pid).memory_info().rss / 2**20


def test_deactivate_stops_replies_without_unloading_and_activate_answers_again(managed):
    graph, probe, user = managed
    assert probe.state("predgen_node") == probe.state("tts_node") == "unconfigured"
    unloaded = rss_mb(graph, "predgen_node")

    for node in ("tts_node", "predgen_node"):
        assert probe.change_state(node, "configure") and probe.state(node) == "inactive"
        assert probe.change_state(node, "activate") and probe.state(node) == "active"
    probe.wait_connected(("predgen_node", "tts_node"))
    user.say("what is the capital of france")
    probe.spin_until(lambda: len(user.responses) == 1, 120, "the reply to the first question")
    loaded = rss_mb(graph, "predgen_node")
    assert loaded > unloaded + 100, (unloaded, loaded)  # configure loaded the model (135M parameters)

    assert probe.change_state("predgen_node", "deactivate") and probe.state("predgen_node") == "inactive"
    probe.spin_until(lambda: not user.hears_predgen(), 30, "predgen_node to stop listening")
    user.say("tell me a joke about robots")  # nobody listens: never answered
    assert rss_mb(graph, "predgen_node") > 0.9 * loaded  # the model stays loaded

    assert probe.change_state("predgen_node", "activate") and probe.state("predgen_node") == "active"
    probe.wait_connected(("predgen_node", "tts_node"))
    user.say("name one planet")
    probe.spin_until(lambda: "name one planet" in user.answered, 120, "the reply to the question after activate")
    # the engine answers in order, so a reply to the unheard question would have come first
    assert user.answered == ["what is the capital of france", "name one planet"]
    assert len(user.responses) == 2

    assert probe.change_state("predgen_node", "deactivate") and probe.change_state("predgen_node", "cleanup")
    assert probe.state("predgen_node") == "unconfigured"
    assert probe.change_state("predgen_node", "configure") and probe.state("predgen_node") == "inactive"


def test_a_failed_configure_leaves_the_node_unconfigured_and_says_why(tmp_path):
    rclpy.init()
    overrides = {**MANUAL, "model.path": str(tmp_path / "no-model")}
    try:
        with (
            open(tmp_path / "graph.log", "w") as log,
            Graph(default_params_file(), overrides, nodes=("predgen_node",), log=log) as graph,
        ):
            probe = GraphProbe(graph=graph)
            assert not probe.change_state("predgen_node", "configure")
            assert probe.state("predgen_node") == "unconfigured"
            probe.spin_until(lambda: "no-model" in probe.health.get("predgen_node", (0, ""))[1], 30, "the diagnostics")
            assert probe.health["predgen_node"][0] == 2  # ERROR, with the one-line reason
            probe.close()
    finally:
        rclpy.try_shutdown()


def test_ros2_param_set_on_a_read_only_parameter_is_refused(managed):
    graph, probe, _ = managed
    client = probe.node.create_client(SetParameters, "/predgen_node/set_parameters")
    probe.spin_until(client.service_is_ready, 60, "predgen_node's parameter service")
    value = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value="baseline")
    future = client.call_async(SetParameters.Request(parameters=[Parameter(name="policy", value=value)]))
    probe.spin_until(future.done, 60, "the answer to set_parameters")
    result = future.result().results[0]
    assert not result.successful and "read-only" in result.reason


def test_the_text_user_speaks_only_while_active_and_starts_again_on_activate(tmp_path):
    """The text user as a managed node in asr_node's place: nothing before activate, nothing
    after deactivate (its thread is joined before the transition returns), and activated
    again it speaks its first utterance from the beginning."""
    rclpy.init()
    overrides = {
        "autostart": False,
        "text.limit": 2,  # the second is being spoken when the node deactivates
        "text.wait_for_reply": False,
        "text.gap_s": 0.1,
    }
    try:
        with (
            open(tmp_path / "graph.log", "w") as log,
            Graph(default_params_file(), overrides, nodes=(TEXT_USER,), log=log) as graph,
        ):
            probe = GraphProbe(graph=graph)
            said: list = []  # its turn events
            probe.node.create_subscription(String, "turn/events", lambda m: said.append(turn_event_of(m)), TEXT_QOS)
            heard = lambda: [e.text for e in said if e.kind == "text"]  # noqa: E731
            finals = lambda: [e.text for e in said if e.kind == "ended"]  # noqa: E731
            assert probe.state(TEXT_USER) == "unconfigured"
            assert probe.change_state(TEXT_USER, "configure") and probe.state(TEXT_USER) == "inactive"
            assert said == []
            assert probe.change_state(TEXT_USER, "activate")
            probe.spin_until(lambda: len(finals()) == 1, 120, "the first utterance's ending")
            first = heard()
            assert first and first[-1].split() == finals()[0].split()[: len(first[-1].split())]

            assert probe.change_state(TEXT_USER, "deactivate") and probe.state(TEXT_USER) == "inactive"
            quiet = len(heard())
            probe.spin_until(lambda: probe.health.get(TEXT_USER, (0, ""))[1].startswith("inactive"), 30, "the diagnostics")
            assert len(heard()) == quiet and len(finals()) == 1  # inactive: it publishes nothing
            assert probe.change_state(TEXT_USER, "activate")
            probe.spin_until(lambda: len(finals()) == 2, 120, "the utterance again after activate")
            assert heard()[quiet] == first[0] and finals()[1] == finals()[0]  # from the beginning
            assert probe.change_state(TEXT_USER, "deactivate") and probe.change_state(TEXT_USER, "cleanup")
            assert probe.state(TEXT_USER) == "unconfigured"
            probe.close()
    finally:
        rclpy.try_shutdown()
