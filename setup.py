from glob import glob

from setuptools import find_packages, setup

PACKAGE = "predgen_ros"
NODES = ("asr_node", "predgen_node", "tts_node")

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    package_data={
        PACKAGE: [
            "data/mt_bench/*",
            "data/bags/*.jsonl",
            "data/bags/sample/*",
            "data/robot_questions/*",
            "data/robot_conversation/*",
        ]
    },
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml", "LICENSE"]),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        # where `ros2 run predgen_ros <node>` looks for executables
        (f"lib/{PACKAGE}", [f"scripts/{node}" for node in NODES]),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="Seed 223ebf80 maintainers",
    maintainer_email="maintainers@users.noreply.a-seed-223ebf80.example",
    description="Speculative LLM replies for ROS 2 voice dialogue (PredGen).",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [f"predgen-ros = {PACKAGE}.cli:main"]
        + [f"{node} = {PACKAGE}.nodes.{node}:main" for node in NODES]
        + [f"text_user = {PACKAGE}.eval.graph.text_user:main"],  # the simulated user, in asr_node's place
    },
)
