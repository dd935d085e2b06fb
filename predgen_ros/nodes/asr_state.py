"""What asr_node's source is doing; the graph tools wait on it (probe.py)."""

from __future__ import annotations

from enum import Enum

from .common import ERROR, OK, WARN


class AsrState(Enum):
    """The value is what /diagnostics reports."""

    IDLE = "idle"  # not active
    STARTING = "starting"
    WAITING_FOR_PREDGEN = "waiting for predgen_node"
    WAITING_FOR_TTS = "waiting for tts_node"
    LISTENING = "listening"
    MUTED = "muted"  # the robot speaks: its voice is not the user's
    INPUT_FINISHED = "input finished"
    ERROR = "error"

    @property
    def level(self) -> int:
        waiting = self in (AsrState.WAITING_FOR_PREDGEN, AsrState.WAITING_FOR_TTS)
        return ERROR if self is AsrState.ERROR else WARN if waiting else OK
