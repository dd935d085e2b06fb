"""The voice activity detectors StreamingAsr can cut utterances with (`asr.vad`).

A detector, as StreamingAsr reads it: `frame_bytes`, `is_speech(frame)` judged frame by
frame, and `voice_run_s`, how long it has heard a voice it has not counted yet (one that
counts every voice at once: 0; the echo-guarded detector, audio/echo/double_talk.py, holds a
voice over the robot's echo until it is sustained).
"""

from __future__ import annotations

from ..pcm import SAMPLE_RATE, AsrError

VADS = ("webrtc", "silero")


class WebRtcVad:
    """WebRTC's detector as pocketsphinx ships it, per 30 ms frame."""

    voice_run_s = 0.0  # it counts every voice it hears at once

    def __init__(self, mode: int = 2):
        import pocketsphinx

        vad = pocketsphinx.Vad(mode, SAMPLE_RATE)
        self.frame_bytes = vad.frame_bytes
        self.is_speech = vad.is_speech


def make_vad(kind: str = "webrtc", mode: int = 2):
    """A voice activity detector (see the module's note)."""
    if kind == "webrtc":
        return WebRtcVad(mode)
    if kind == "silero":
        from .turn_models import SileroVad

        return SileroVad()
    raise AsrError(f"unknown VAD {kind!r}: choose one of {', '.join(VADS)}")
