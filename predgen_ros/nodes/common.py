"""What every predgen_ros node shares: parameters, QoS, diagnostics, the lifecycle, startup."""

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
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from threadpoolctl import threadpool_limits

from ..cpu_meter import METER
from ..os_threads import name_thread
from .matching import matched_endpoints

# Text topics: reliable and deep enough that a reply's sentences are never dropped.
TEXT_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
# robot_speaking is a state, offered transient local: a late joiner that asks for it (a
# monitor) hears the latest value at once.  asr_node and predgen_node read it volatile, so
# that a volatile publisher (another TTS node) still reaches them.  Depth 10: asr_node
# counts replies by their true -> false, and a short reply's pair must not be squashed.
STATE_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
AUDIO_QOS = qos_profile_sensor_data

OK, WARN, ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR  # bytes, as the message wants

# Parameters every rclpy node accepts; they are never typos.
_ROS_BUILTIN = ("use_sim_time", "start_type_description_service", "qos_overrides.")


class StartupError(RuntimeError):
    """A node cannot start; the message names the parameter and the value at fault."""


# Where a parameter has a natural range, its descriptor carries it (ros2 param describe shows it).
RANGES = {
    "verifier.min_p": (0.0, 1.0),
    "asr.endpoint.audio_threshold": (0.0, 1.0),
    "asr.endpoint.text_threshold": (0.0, 1.0),
    "asr.vad_mode": (0, 3),
    "asr.chunk_ms": (10, 1000),
    "asr.whisper.threads": (0, 64),
    "asr.whisper.beam": (1, 10),
    "tts.chunk_ms": (10, 1000),
    "tts.first_words": (0, 64),
    "tts.threads": (0, 64),
}

MANAGED_PARAMS = {
    "autostart": (True, "configure and activate at startup; false: wait for lifecycle transitions (ros2 lifecycle set)"),
}


def descriptor_for(name: str, default: Any, description: str) -> ParameterDescriptor:
    """Read-only: a node reads its parameters once, so a change at run time would be silently
    ignored; ros2 param set is refused instead.  With the parameter's range, if it has one."""
    descriptor = ParameterDescriptor(description=description, read_only=True)
    if name in RANGES:
        low, high = RANGES[name]
        if isinstance(default, int):
            descriptor.integer_range = [IntegerRange(from_value=low, to_value=high, step=1)]
        else:
            descriptor.floating_point_range = [FloatingPointRange(from_value=float(low), to_value=float(high), step=0.0)]
    return descriptor


def declare_parameters(node: Node, table: dict[str, tuple[Any, str]]) -> dict[str, Any]:
    """Declare every (default, description) of `table`; return the values in effect.

    An override that names no declared parameter (a typo in the YAML or on the
    command line) stops the node instead of being ignored, and so does a value
    outside the parameter's range.
    """
    from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException

    values = {}
    for name, (default, description) in table.items():
        try:
            values[name] = node.declare_parameter(name, default, descriptor_for(name, default, description)).value
        except InvalidParameterValueException:
            low, high = RANGES[name]
            given = node._parameter_overrides[name].value
            raise StartupError(f"{name}: {given!r} lies outside its range {low} to {high}") from None
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

    name_thread(name)  # the executor's thread: the node's callbacks (the CPU budget reads it by name)
    # numpy's work in a node is small (Whisper's and Smart Turn's features, Piper's audio): a
    # second OpenBLAS thread only spins, and doubled Whisper's CPU (docs/results/cpu-budget.md)
    threadpool_limits(1, "blas")
    rclpy.init(args=args)
    # The executor first: a stop signal that lands while the node starts (a launch or
    # bringup stopping right after "ready") then ends it like one that lands while it spins.
    executor = SingleThreadedExecutor()
    node = None
    try:
        node = make_node()
        if isinstance(node, ManagedNode):
            node.start()
        executor.add_node(node)
        executor.spin()
    except StartupError as err:
        print(f"{name}: error: {err}", file=sys.stderr, flush=True)
        return 2
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        if rclpy.ok():
            raise
        # SIGTERM/SIGINT shut the context down while the node started or the executor waited: a normal stop
    finally:
        if node is not None:
            node.close()
            node.destroy_node()
        executor.shutdown()
        rclpy.try_shutdown()
    return 0


class ManagedNode(LifecycleNode):
    """A ROS 2 managed node: parameters when made, resources at configure, work at activate.

    A subclass loads its model or voice in configure() (a StartupError names the
    parameter at fault; the node stays unconfigured), starts listening and working in
    activate(), stops both in deactivate() without unloading, and frees the memory in
    cleanup().  Diagnostics run in every state and name it.
    """

    def __init__(self, name: str, parameters: dict[str, tuple[Any, str]]):
        super().__init__(name)
        self.p = declare_parameters(self, {**parameters, **MANAGED_PARAMS})
        self.failure = ""  # why the last configure failed
        self._autostarting = False  # its failure is the process's one-line error, not a log line
        Diagnostics(self, self._report)

    @property
    def lifecycle_state(self) -> str:
        return self._state_machine.current_state[1]

    # the lifecycle, as a subclass fills it in
    def configure(self) -> None: ...
    def activate(self) -> None: ...
    def deactivate(self) -> None: ...
    def cleanup(self) -> None: ...

    def health(self) -> tuple[int, str, dict[str, Any]]:
        """(level, message, key-values) of a configured node."""
        return OK, self.lifecycle_state, {}

    def _report(self) -> tuple[int, str, dict[str, Any]]:
        if self.lifecycle_state == "active":
            level, message, values = self.health()
            return level, message, values | matched_endpoints(self) | METER.figures()
        if self.lifecycle_state == "inactive":
            level, message, values = self.health()
            return level, f"inactive ({message})", values
        if self.failure:
            return ERROR, f"unconfigured: {self.failure}", {}
        return OK, self.lifecycle_state, {}

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self.configure()
        except StartupError as err:
            self.failure = str(err)
            if not self._autostarting:
                self.get_logger().error(f"configure failed: {self.failure}")
            self.cleanup()  # whatever configure() had made before it failed
            return TransitionCallbackReturn.FAILURE
        self.failure = ""
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.activate()
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.deactivate()
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.cleanup()
        release_free_memory()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.close()
        return TransitionCallbackReturn.SUCCESS

    def start(self) -> None:
        """autostart: configure and activate now; a failed configure is a StartupError."""
        if not self.p["autostart"]:
            self.get_logger().info("unconfigured; waiting for lifecycle transitions (autostart is false)")
            return
        self._autostarting = True
        try:
            configured = self.trigger_configure() == TransitionCallbackReturn.SUCCESS
        finally:
            self._autostarting = False
        if not configured:
            raise StartupError(self.failure)
        self.trigger_activate()

    def close(self) -> None:
        """Leave whatever state the node is in: stop the work, free the resources."""
        if self.lifecycle_state == "active":
            self.deactivate()
        if self.lifecycle_state in ("active", "inactive"):
            self.cleanup()
