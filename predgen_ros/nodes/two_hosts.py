"""Two hosts on one machine: network namespaces `robot` and `workstation` joined by a veth pair.

The robot/workstation split (asr_node and tts_node on the robot, predgen_node
where the GPU is) is tested here without two machines: each side gets a
network namespace of its own, the two are joined by one veth pair with the two
addresses of a private /30, and DDS discovers across it (unicast to the peer's
address, `ROS_STATIC_PEERS`, plus a multicast route on the veth).  Nothing else
is reachable from inside: traffic goes only to the two veth addresses.

The namespaces and the link are removed on exit, after an error, on SIGTERM
and on Ctrl-C; `ip netns list` is empty of them afterwards.  Making them needs
root and iproute2; where that fails, `TwoHostsError` says why in one line.
The link can be taken down and up, and limited in rate with the `tbf`
queueing discipline (this kernel has no netem).
"""

from __future__ import annotations

import os
import signal
import subprocess

SUBNET = "10.213.{}.{}"  # a /30 of 10.213.0.0/16, chosen per process so that two harnesses never share one
HOSTS = ("robot", "workstation")
CLONE_NEWNET = 0x40000000  # setns(2): join a network namespace


class TwoHostsError(RuntimeError):
    """The namespaces or the link cannot be made here; the message says why."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    try:
        result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
    except FileNotFoundError:
        raise TwoHostsError("iproute2's `ip` is not installed (apt-get install iproute2)") from None
    if check and result.returncode != 0:
        raise TwoHostsError(f"ip {' '.join(args)}: {result.stderr.strip() or 'failed'}")
    return result


class TwoHosts:
    """The two namespaces, their veth pair and addresses; a context manager that removes them."""

    def __init__(self, tag: str | None = None):
        tag = tag or str(os.getpid())
        block = int(tag) % 16000 if tag.isdigit() else abs(hash(tag)) % 16000
        self.namespace = {host: f"pgr-{host[:2]}-{tag}" for host in HOSTS}
        self.interface = {host: f"pgr{host[0]}{tag}"[:15] for host in HOSTS}  # a Linux interface name has at most 15 bytes
        third, fourth = divmod(block * 4, 256)
        self.address = {"robot": SUBNET.format(third, fourth + 1), "workstation": SUBNET.format(third, fourth + 2)}
        self._made: list[str] = []
        self._previous_handler = None

    # ------------------------------------------------------------ set-up
    def __enter__(self) -> TwoHosts:
        if os.geteuid() != 0:
            raise TwoHostsError("network namespaces need root (run as root, or skip the two-host harness)")
        self._previous_handler = signal.signal(signal.SIGTERM, self._on_sigterm)
        try:
            for host in HOSTS:
                _ip("netns", "add", self.namespace[host])
                self._made.append(self.namespace[host])
            robot, workstation = self.interface["robot"], self.interface["workstation"]
            _ip("link", "add", robot, "type", "veth", "peer", "name", workstation)
            for host in HOSTS:
                ns, dev = self.namespace[host], self.interface[host]
                _ip("link", "set", dev, "netns", ns)
                self.exec(host, "ip", "addr", "add", f"{self.address[host]}/30", "dev", dev)
                self.exec(host, "ip", "link", "set", "lo", "up")
                self.exec(host, "ip", "link", "set", dev, "up")
                self.exec(host, "ip", "route", "add", "224.0.0.0/4", "dev", dev)  # DDS discovery's multicast
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _on_sigterm(self, signum, frame) -> None:
        self.close()
        raise SystemExit(128 + signum)

    def close(self) -> None:
        """Remove the namespaces (the veth pair goes with them); safe to call twice."""
        while self._made:
            _ip("netns", "del", self._made.pop(), check=False)
        if self._previous_handler is not None:
            signal.signal(signal.SIGTERM, self._previous_handler)
            self._previous_handler = None

    # ------------------------------------------------------------- using
    def prefix(self, host: str) -> list[str]:
        """The command prefix that runs a program on `host`."""
        return ["ip", "netns", "exec", self.namespace[host]]

    def enter(self, host: str) -> None:
        """Move this process's network into `host` (setns), for a program that plays a part
        of that host (a robot-side probe).  Call it before rclpy starts DDS's threads; the
        process stays there, so give it a process of its own."""
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/var/run/netns/{self.namespace[host]}", os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise TwoHostsError(f"cannot enter {self.namespace[host]}: {os.strerror(ctypes.get_errno())}")
        finally:
            os.close(fd)

    def exec(self, host: str, *command: str) -> subprocess.CompletedProcess:
        result = subprocess.run([*self.prefix(host), *command], capture_output=True, text=True, timeout=10)
        if result.returncode != 0:
            raise TwoHostsError(f"{host}: {' '.join(command)}: {result.stderr.strip() or 'failed'}")
        return result

    def ros_env(self, host: str, domain_id: int) -> dict[str, str]:
        """DDS settings for a node on `host`: discovery across the link to the other host only."""
        other = next(h for h in HOSTS if h != host)
        return {
            "ROS_DOMAIN_ID": str(domain_id),
            "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET",
            "ROS_STATIC_PEERS": self.address[other],
            "ROS_LOCALHOST_ONLY": "0",
        }

    def link(self, up: bool) -> None:
        """Take the link down (both ends) or bring it back up."""
        for host in HOSTS:
            self.exec(host, "ip", "link", "set", self.interface[host], "up" if up else "down")

    def limit(self, rate: str | None) -> None:
        """Limit the link to `rate` each way (tbf, e.g. "1mbit"); None removes the limit."""
        for host in HOSTS:
            dev = self.interface[host]
            if rate is None:
                subprocess.run([*self.prefix(host), "tc", "qdisc", "del", "dev", dev, "root"], capture_output=True, timeout=10)
            else:
                self.exec(
                    host, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst", "32kbit", "latency", "400ms"
                )

    def leftovers(self) -> list[str]:
        """The harness's namespaces still listed by `ip netns list` (none after close)."""
        listed = _ip("netns", "list", check=False).stdout
        return [ns for ns in self.namespace.values() if ns in listed.split()]
