"""launch/predgen.launch.py: loaded by ROS 2 launch where it is installed; checked statically everywhere."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from predgen_ros.engine.params import ENGINE_PARAMS
from predgen_ros.nodes import bringup
from predgen_ros.nodes.asr_params import ASR_PARAMS
from predgen_ros.nodes.tts_node import TTS_PARAMS

LAUNCH_FILE = Path(__file__).resolve().parents[1] / "launch" / "predgen.launch.py"
DECLARED = {"asr_node": ASR_PARAMS, "predgen_node": ENGINE_PARAMS, "tts_node": TTS_PARAMS}
ARGUMENTS = {"params_file", "namespace", "half", "policy", "model", "backend", "device", "asr_backend", "sink"}


def ros2_launch_available() -> bool:
    try:
        import launch_ros  # noqa: F401

        from launch import LaunchDescription  # noqa: F401  (the repo's launch/ folder has no such name)
    except ImportError:
        return False
    return True


def launch_constants():
    """NODES and OVERRIDES as written in the launch file, without importing launch."""
    tree = ast.parse(LAUNCH_FILE.read_text())
    constants = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in ("NODES", "OVERRIDES", "HALVES")
        ):
            constants[node.targets[0].id] = ast.literal_eval(node.value)
    return constants


def test_launch_file_starts_the_same_nodes_and_overrides_declared_parameters():
    constants = launch_constants()
    assert tuple(constants["NODES"]) == bringup.NODES
    for argument, (parameter, node, _) in constants["OVERRIDES"].items():
        assert parameter in DECLARED[node], f"launch argument {argument} sets {parameter}, which {node} does not declare"
        assert bringup.node_for(parameter) == node  # bringup routes it to the same node
    assert set(constants["OVERRIDES"]) | {"params_file", "namespace", "half"} == ARGUMENTS


def test_the_robot_half_and_the_workstation_half_are_the_graph_split_in_two():
    halves = launch_constants()["HALVES"]
    assert set(halves) == {"robot", "workstation"}
    assert set(halves["robot"]) == {"asr_node", "tts_node"}  # microphone and speaker stay on the robot
    assert set(halves["workstation"]) == {"predgen_node"}  # the LLM goes where the GPU is
    assert sorted(halves["robot"] + halves["workstation"]) == sorted(bringup.NODES)  # together, the whole graph, once
    assert halves == {half: tuple(nodes) for half, nodes in bringup.HALVES.items()}  # `bringup --half` starts the same


def test_one_node_exiting_shuts_the_launch_down_as_bringup_does():
    tree = ast.parse(LAUNCH_FILE.read_text())
    # keyword sets built as `name = dict(...)` and handed to a node as **name
    shared = {
        n.targets[0].id: n.value.keywords
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and getattr(n.value.func, "id", "") == "dict"
    }
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") in ("Node", "LifecycleNode")]
    assert {call.func.id for call in calls} == {"LifecycleNode"}, "launch_ros' LifecycleNode for each of the three"
    for call in calls:
        keywords = list(call.keywords)
        for k in call.keywords:
            if k.arg is None and isinstance(k.value, ast.Name):
                keywords += shared.get(k.value.id, [])
        on_exit = next((k.value for k in keywords if k.arg == "on_exit"), None)
        assert isinstance(on_exit, ast.Call) and on_exit.func.id == "Shutdown", "every node shuts the launch down when it exits"


@pytest.mark.skipif(
    not ros2_launch_available(), reason="ROS 2 `launch` / `launch_ros` are not installed (not on PyPI; source a ROS 2 distro)"
)
def test_ros2_launch_loads_the_launch_file():
    from launch.actions import DeclareLaunchArgument

    from launch import LaunchDescription

    spec = importlib.util.spec_from_file_location("predgen_launch", LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    assert isinstance(description, LaunchDescription)
    declared = {entity.name for entity in description.entities if isinstance(entity, DeclareLaunchArgument)}
    assert declared == ARGUMENTS
