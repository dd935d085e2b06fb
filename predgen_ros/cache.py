"""Where predgen_ros keeps what it makes once: converted models, joined Whisper weights, bags."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """PREDGEN_ROS_CACHE, default ~/.cache/predgen_ros."""
    return Path(os.environ.get("PREDGEN_ROS_CACHE") or Path.home() / ".cache" / "predgen_ros")
