"""predgen_ros: speculative LLM replies for ROS 2 voice dialogue (PredGen)."""

__version__ = "0.1.0"
