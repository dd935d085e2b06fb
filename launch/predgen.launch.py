"""Start asr_node, predgen_node and tts_node from one parameter file.

    ros2 launch predgen_ros predgen.launch.py
    ros2 launch predgen_ros predgen.launch.py policy:=baseline asr_backend:=text sink:=wav
    ros2 launch predgen_ros predgen.launch.py params_file:=/path/robot.yaml model:=/models/Qwen2.5-0.5B-Instruct

A launch argument left empty keeps the value of the parameter file.  When one
node exits (a bad model path, a crash), the whole launch shuts down, as
`predgen-ros bringup` does on installs without `ros2 launch`.
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription

NODES = ("asr_node", "predgen_node", "tts_node")

# launch argument -> (parameter, the node that declares it, description)
OVERRIDES = {
    "policy": ("policy", "predgen_node", "baseline | preemptive | predgen"),
    "model": ("model.path", "predgen_node", "local Hugging Face model folder; empty = embedded SmolLM2-135M-Instruct"),
    "device": ("model.device", "predgen_node", "auto | cpu | cuda[:N]"),
    "asr_backend": ("asr.backend", "asr_node", "pocketsphinx | vosk | text"),
    "sink": ("tts.sink", "tts_node", "speaker | wav | topic | none"),
}


def _nodes(context):
    params_file = LaunchConfiguration("params_file").perform(context)
    overrides = {node: {} for node in NODES}
    for argument, (parameter, node, _) in OVERRIDES.items():
        value = LaunchConfiguration(argument).perform(context)
        if value:
            overrides[node][parameter] = value
    return [
        Node(
            package="predgen_ros",
            executable=node,
            name=node,
            output="screen",
            parameters=[params_file, overrides[node]],
            on_exit=Shutdown(reason=f"{node} exited; stopping the other nodes"),
        )
        for node in NODES
    ]


def generate_launch_description():
    default_params = PathJoinSubstitution([FindPackageShare("predgen_ros"), "config", "predgen.yaml"])
    arguments = [
        DeclareLaunchArgument("params_file", default_value=default_params, description="ROS 2 parameter file for the three nodes")
    ]
    arguments += [
        DeclareLaunchArgument(name, default_value="", description=f"{description} (empty: from params_file)")
        for name, (_, _, description) in OVERRIDES.items()
    ]
    return LaunchDescription(arguments + [OpaqueFunction(function=_nodes)])
