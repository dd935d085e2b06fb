"""The voice activity detectors StreamingAsr can cut utterances with (`asr.vad`)."""

from __future__ import annotations

from .pcm import SAMPLE_RATE, AsrError

VADS = ("webrtc", "silero")


def make_vad(kind: str = "webrtc", mode: int = 2):
    """A voice activity detector with `frame_bytes` and `is_speech(frame)`."""
    if kind == "webrtc":
        import pocketsphinx

        return pocketsphinx.Vad(mode, SAMPLE_RATE)
    if kind == "silero":
        from .turn_models import SileroVad

        return SileroVad()
    raise AsrError(f"unknown VAD {kind!r}: choose one of {', '.join(VADS)}")
