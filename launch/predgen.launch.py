"""Start asr_node, predgen_node and tts_node from one parameter file.

    ros2 launch predgen_ros predgen.launch.py
    ros2 launch predgen_ros predgen.launch.py policy:=baseline asr_backend:=text sink:=wav   # a typing user
    ros2 launch predgen_ros predgen.launch.py params_file:=/path/robot.yaml model:=/models/Qwen2.5-0.5B-Instruct
    ros2 launch predgen_ros predgen.launch.py half:=robot         # on the robot: microphone, ASR, TTS, speaker
    ros2 launch predgen_ros predgen.launch.py half:=workstation   # on the GPU host: predgen_node only

A launch argument left empty keeps the value of the parameter file.  When one
node exits (a bad model path, a crash), the whole launch shuts down, as
`predgen-ros bringup` does on installs without `ros2 launch`.

The three nodes are managed (lifecycle) nodes: launch configures them (the
recognizer, the model and the voice load) and activates each once it is
inactive.  After that, `ros2 lifecycle set /predgen_node deactivate` stops
replies without unloading the model, and `ros2 lifecycle set /asr_node
deactivate` stops hearing.  `namespace:=robot1` puts the three nodes and their topics
under /robot1; the parameter file's `/**/<node>` keys match in any namespace.
"""

from launch.actions import DeclareLaunchArgument, EmitEvent, OpaqueFunction, RegisterEventHandler, Shutdown
from launch.events import matches_action
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import LifecycleNode
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState
from launch_ros.substitutions import FindPackageShare
from lifecycle_msgs.msg import Transition

from launch import LaunchDescription

NODES = ("asr_node", "predgen_node", "tts_node")  # all three are lifecycle nodes
# half:=robot or half:=workstation starts one side of a two-host graph; empty: all three
HALVES = {"robot": ("asr_node", "tts_node"), "workstation": ("predgen_node",)}

# launch argument -> (parameter, the node that declares it, description)
OVERRIDES = {
    "policy": ("policy", "predgen_node", "baseline | preemptive | predgen"),
    "model": (
        "model.path",
        "predgen_node",
        "a .gguf file or a local Hugging Face model folder; empty = embedded SmolLM2-135M-Instruct",
    ),
    "backend": ("model.backend", "predgen_node", "auto | llama_cpp | transformers"),
    "device": ("model.device", "predgen_node", "transformers: auto | cpu | cuda[:N]"),
    "asr_backend": ("asr.backend", "asr_node", "whisper | pocketsphinx | vosk | text (text_user types, in asr_node's place)"),
    "sink": ("tts.sink", "tts_node", "speaker | wav | topic | none"),
}


def _transition(node, transition_id):
    return EmitEvent(event=ChangeState(lifecycle_node_matcher=matches_action(node), transition_id=transition_id))


def _managed(node):
    """Configure `node` now and activate it once configured (not after a later deactivate)."""
    activate = OnStateTransition(
        target_lifecycle_node=node,
        start_state="configuring",
        goal_state="inactive",
        entities=[_transition(node, Transition.TRANSITION_ACTIVATE)],
    )
    return [node, RegisterEventHandler(activate), _transition(node, Transition.TRANSITION_CONFIGURE)]


def _nodes(context):
    params_file = LaunchConfiguration("params_file").perform(context)
    namespace = LaunchConfiguration("namespace").perform(context)
    half = LaunchConfiguration("half").perform(context)
    if half and half not in HALVES:
        raise ValueError(f"half:={half}: choose robot, workstation, or leave it empty for all three nodes")
    overrides = {node: {} for node in NODES}
    for argument, (parameter, node, _) in OVERRIDES.items():
        value = LaunchConfiguration(argument).perform(context)
        if value:
            overrides[node][parameter] = value
    actions = []
    # asr_backend:=text starts the simulated user (eval/graph/text_user.py, parameters text.*) in asr_node's place
    typed = overrides["asr_node"].get("asr.backend") == "text"
    for node in HALVES.get(half, NODES):
        node = "text_user" if typed and node == "asr_node" else node
        settings = dict(
            package="predgen_ros",
            executable=node,
            name=node,
            namespace=namespace,
            output="screen",
            on_exit=Shutdown(reason=f"{node} exited; stopping the other nodes"),
        )
        # launch drives the lifecycle, so the node does not autostart
        actions += _managed(LifecycleNode(**settings, parameters=[params_file, {**overrides.get(node, {}), "autostart": False}]))
    return actions


def generate_launch_description():
    default_params = PathJoinSubstitution([FindPackageShare("predgen_ros"), "config", "predgen.yaml"])
    arguments = [
        DeclareLaunchArgument(
            "params_file", default_value=default_params, description="ROS 2 parameter file for the three nodes"
        ),
        DeclareLaunchArgument("namespace", default_value="", description="namespace of the nodes and their topics (empty: none)"),
        DeclareLaunchArgument(
            "half",
            default_value="",
            description="robot (asr_node, tts_node) or workstation (predgen_node) for a two-host graph; empty: all three",
        ),
    ]
    arguments += [
        DeclareLaunchArgument(name, default_value="", description=f"{description} (empty: from params_file)")
        for name, (_, _, description) in OVERRIDES.items()
    ]
    return LaunchDescription(arguments + [OpaqueFunction(function=_nodes)])
