"""What every predgen_ros node shares: parameters, QoS, diagnostics, startup."""

from __future__ import annotations

import ctypes
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import rclpy
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

# Text topics: reliable and deep enough that a reply's sentences are never dropped.
TEXT_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
AUDIO_QOS = qos_profile_sensor_data

OK, WARN, ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR  # bytes, as the message wants

# Parameters every rclpy node accepts; they are never typos.
_ROS_BUILTIN = ("use_sim_time", "start_type_description_service", "qos_overrides.")


class StartupError(RuntimeError):
    """A node cannot start; the message names the parameter and the value at fault."""


def declare_parameters(node: Node, table: dict[str, tuple[Any, str]]) -> dict[str, Any]:
    """Declare every (default, description) of `table`; return the values in effect.

    An override that names no declared parameter (a typo in the YAML or on the
    command line) stops the node instead of being ignored.
    """
    from rclpy.exceptions import InvalidParameterTypeException

    values = {}
    for name, (default, description) in table.items():
        try:
            values[name] = node.declare_parameter(name, default, ParameterDescriptor(description=description)).value
        except InvalidParameterTypeException:
            given = node._parameter_overrides[name].value
            hint = f" (write {float(given)!r})" if isinstance(default, float) and isinstance(given, int) else ""
            kind = {bool: "true or false", int: "an integer", float: "a decimal number"}.get(type(default), "a string")
            raise StartupError(f"{name}: expected {kind} like {default!r}, got {given!r}{hint}") from None
    unknown = sorted(n for n in getattr(node, "_parameter_overrides", {}) if n not in table and not n.startswith(_ROS_BUILTIN))
    if unknown:
        raise StartupError(f"unknown parameter {', '.join(unknown)} for {node.get_name()} (declared: {', '.join(table)})")
    return values


def release_free_memory() -> None:
    """Hand freed heap pages back to the OS.  glibc keeps them after large frees
    (the tensors of a long prompt, a long sentence's audio), so a node's resident
    memory would ratchet up to its largest turn; a no-op on other C libraries."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def stamp(t: float) -> Time:
    """Seconds since the epoch as a ROS time stamp."""
    sec = math.floor(t)
    return Time(sec=int(sec), nanosec=int(round((t - sec) * 1e9)) % 1_000_000_000)


def seconds(time_msg: Time) -> float:
    return time_msg.sec + time_msg.nanosec * 1e-9


def key_values(values: dict[str, Any]) -> list[KeyValue]:
    def text(value):
        if isinstance(value, float):
            return "nan" if math.isnan(value) else f"{value:.6f}"
        return str(value)

    return [KeyValue(key=k, value=text(v)) for k, v in values.items()]


def status(name: str, level: int, message: str, values: dict[str, Any]) -> DiagnosticStatus:
    return DiagnosticStatus(level=level, name=name, message=message, hardware_id="predgen_ros", values=key_values(values))


class Diagnostics:
    """Publishes `report()` -> (level, message, key-values) on /diagnostics at 1 Hz."""

    def __init__(self, node: Node, report: Callable[[], tuple[int, str, dict[str, Any]]], period: float = 1.0):
        self.node = node
        self.name = f"/predgen_ros/{node.get_name()}"
        self.report = report
        self.publisher = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.timer = node.create_timer(period, self.publish)

    def publish(self) -> None:
        level, message, values = self.report()
        msg = DiagnosticArray()
        msg.header.stamp = stamp(time.time())
        msg.status = [status(self.name, level, message, values)]
        self.publisher.publish(msg)


def run_node(name: str, make_node: Callable[[], Node], args: list[str] | None = None) -> int:
    """Start a node, spin until Ctrl-C or shutdown; startup errors are one line, exit 2."""
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

    rclpy.init(args=args)
    try:
        node = make_node()
    except StartupError as err:
        print(f"{name}: error: {err}", file=sys.stderr, flush=True)
        rclpy.try_shutdown()
        return 2
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        if node.context.ok():
            raise
        # SIGTERM/SIGINT shut the context down while the executor built its wait set: a normal stop
    finally:
        close = getattr(node, "close", None)
        if close:
            close()
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0
