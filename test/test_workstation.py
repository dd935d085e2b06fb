"""The two-host harness: namespaces `robot` and `workstation` joined by one veth pair, removed after every run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from predgen_ros.nodes.two_hosts import HOSTS, TwoHosts, TwoHostsError

# the harness makes network namespaces as root: the graph tier, never make test-fast
pytestmark = pytest.mark.graph


@pytest.fixture(scope="module", autouse=True)
def namespaces_possible():
    """Skip the module, at its first test (never at collection), where the harness cannot run."""
    try:
        with TwoHosts("probe"):
            pass
    except TwoHostsError as err:
        pytest.skip(f"no network namespaces here: {err}")


SEND = "import socket, sys; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'hello', (sys.argv[1], 7400))"
RECEIVE = (
    "import socket, sys; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('0.0.0.0', 7400)); "
    "s.settimeout(float(sys.argv[1])); print(s.recvfrom(16)[0].decode())"
)


def harness_objects(hosts: TwoHosts) -> list[str]:
    """The harness's namespaces and interfaces that `ip netns list` and `ip link` still show."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return [ns for ns in hosts.namespace.values() if ns in listed] + [dev for dev in hosts.interface.values() if dev in links]


def udp_arrives(hosts: TwoHosts, wait_s: float = 2.0) -> bool:
    """A datagram from the robot reaches the workstation's address."""
    receiver = subprocess.Popen(
        [*hosts.prefix("workstation"), sys.executable, "-c", RECEIVE, str(wait_s)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        for _ in range(10):  # until the receiver is bound: a datagram before that is lost
            subprocess.run(
                [*hosts.prefix("robot"), sys.executable, "-c", SEND, hosts.address["workstation"]], capture_output=True
            )
            if receiver.poll() is not None:
                break
            try:
                return receiver.communicate(timeout=0.2)[0].strip() == "hello"
            except subprocess.TimeoutExpired:
                continue
        return receiver.wait() == 0 and receiver.stdout.read().strip() == "hello"
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait()


def test_the_hosts_reach_each_other_only_over_their_link_and_leave_nothing_behind():
    with TwoHosts() as hosts:
        assert harness_objects(hosts)  # made
        for host in HOSTS:
            routes = hosts.exec(host, "ip", "route").stdout
            assert "default" not in routes  # nothing beyond the link is reachable
        assert udp_arrives(hosts)
        hosts.link(False)
        assert not udp_arrives(hosts, wait_s=0.5)
        hosts.link(True)
        hosts.limit("1mbit")
        assert "tbf" in hosts.exec("robot", "tc", "qdisc", "show").stdout
        assert udp_arrives(hosts)
    assert harness_objects(hosts) == []


def test_a_failed_run_leaves_nothing_behind():
    with pytest.raises(RuntimeError, match="the run failed"), TwoHosts() as hosts:
        raise RuntimeError("the run failed")
    assert harness_objects(hosts) == []


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    """One run of the split graph through the three faults (eval/graph/split.py), in a process of
    its own: it joins the robot's namespace.  Bounded: it stops by itself within 15 min."""
    out = tmp_path_factory.mktemp("split")
    proc = subprocess.run(
        [sys.executable, "-m", "predgen_ros.cli", "split", "faults", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    log = (out / "graph.log").read_text() if (out / "graph.log").exists() else ""
    assert proc.returncode == 0, proc.stderr[-3000:] + log[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.e2e  # the robot's and the workstation's nodes load the real models
def test_the_split_leaves_no_namespace_or_link_behind(faults):
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert faults["harness"]["namespaces"] and not set(faults["harness"]["namespaces"]) & set(listed)
    assert not [dev for dev in faults["harness"]["interfaces"] if dev in links]


@pytest.mark.e2e  # the robot's and the workstation's nodes load the real models
def test_a_link_down_mid_question_is_reported_and_the_question_answered_when_it_returns(faults):
    outcome = faults["link_down"]
    assert outcome["outage_s"] >= 3.0
    assert outcome["unreachable_reported"]  # asr_node's /diagnostics on the robot
    assert outcome["partials_while_down"] > 0  # asr_node kept listening
    assert outcome["answered_after_recovery"] and outcome["reachable_again"], outcome


@pytest.mark.e2e  # the robot's and the workstation's nodes load the real models
def test_a_restarted_predgen_node_leaves_nothing_stale_and_answers_the_next_question(faults):
    outcome = faults["predgen_restart"]
    assert outcome["reply_began"] and outcome["fell_silent"], outcome
    assert outcome["stale_spoken"] == 0
    assert outcome["reachable_after_restart"] and outcome["next_answered"], outcome


@pytest.mark.e2e  # the robot's and the workstation's nodes load the real models
def test_a_workstation_gone_for_good_is_reported_and_the_robot_keeps_listening(faults):
    outcome = faults["workstation_gone"]
    assert outcome["unreachable_reported"] and "PredGen node unreachable" in outcome["asr_message"], outcome
    assert outcome["asr_level"] == 1  # WARN: the robot still works, it cannot answer
    assert outcome["partials_heard"] > 0 and not outcome["spoken"]
    assert outcome["robot_nodes_running"]
