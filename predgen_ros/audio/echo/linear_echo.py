"""Speex's adaptive echo filter alone: the robot's voice subtracted, the user's words kept.

AEC3 (audio/echo/canceller.py) follows its linear filter with a suppressor, and in double talk the
suppressor takes the user's first words out with the robot's voice: the user, 8–10 dB
under the loudspeaker at the microphone, adds under 1 dB to it (docs/results/echo.md).
Speex's filter (libspeexdsp's multidelay block frequency-domain filter) only subtracts
the echo it predicts from the reference, and slows its own learning while the residue
does not follow the reference (someone else is speaking), so over the robot the user
stays whole, with the robot's voice 15–20 dB lower under them.  That is what the
recognizer needs; the voice detector, which must not take the robot's residue for a
user, keeps AEC3's suppressed output.

libspeexdsp (BSD) comes as the copy the `speex-py` wheel bundles (no system package), or
the system's `libspeexdsp.so.1` (`apt install libspeexdsp1`) where that wheel does not
install.
"""

from __future__ import annotations

import ctypes
import importlib.util
from pathlib import Path

import numpy as np

from ..pcm import SAMPLE_RATE, AsrError

TAIL_S = 0.2  # the echo path the filter models: the loudspeaker's delay and the room's strongest reflections
SET_SAMPLING_RATE = 24  # speex_echo.h: SPEEX_ECHO_SET_SAMPLING_RATE

_INT16_P = ctypes.POINTER(ctypes.c_int16)


def _library_candidates() -> list[str]:
    found = []
    spec = importlib.util.find_spec("speex_py")
    if spec is not None and spec.submodule_search_locations:
        bundled = Path(next(iter(spec.submodule_search_locations))).parent / "speex_py.libs"
        found += sorted(str(p) for p in bundled.glob("libspeexdsp*.so*"))
    return [*found, "libspeexdsp.so.1"]


def load_speexdsp() -> ctypes.CDLL:
    for path in _library_candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        lib.speex_echo_state_init.restype = ctypes.c_void_p
        lib.speex_echo_state_init.argtypes = [ctypes.c_int, ctypes.c_int]
        lib.speex_echo_cancellation.restype = None
        lib.speex_echo_cancellation.argtypes = [ctypes.c_void_p, _INT16_P, _INT16_P, _INT16_P]
        lib.speex_echo_ctl.restype = ctypes.c_int
        lib.speex_echo_ctl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        lib.speex_echo_state_destroy.restype = None
        lib.speex_echo_state_destroy.argtypes = [ctypes.c_void_p]
        return lib
    raise AsrError(
        "asr.echo_cancel: webrtc needs libspeexdsp for the recognizer's audio: run `make venv` "
        "(the speex-py wheel bundles it) or `apt install libspeexdsp1`, or set asr.echo_cancel to none"
    )


class LinearEchoFilter:
    """`process(mic, reference)`: one frame of `frame` int16 samples each, the reference
    played no later than its echo and less than TAIL_S before it; returns the microphone's
    frame less the echo the filter predicts."""

    def __init__(self, frame: int, tail_s: float = TAIL_S):
        self._lib = load_speexdsp()
        self.frame = frame
        self._state = self._lib.speex_echo_state_init(frame, int(tail_s * SAMPLE_RATE))
        rate = ctypes.c_int(SAMPLE_RATE)
        self._lib.speex_echo_ctl(self._state, SET_SAMPLING_RATE, ctypes.byref(rate))

    def process(self, mic: np.ndarray, reference: np.ndarray) -> np.ndarray:
        if len(mic) != self.frame or len(reference) != self.frame:
            raise ValueError(f"LinearEchoFilter: frames of {self.frame} samples, got {len(mic)} and {len(reference)}")
        mic = np.ascontiguousarray(mic, dtype=np.int16)
        reference = np.ascontiguousarray(reference, dtype=np.int16)
        out = np.empty(self.frame, dtype=np.int16)
        self._lib.speex_echo_cancellation(
            self._state, mic.ctypes.data_as(_INT16_P), reference.ctypes.data_as(_INT16_P), out.ctypes.data_as(_INT16_P)
        )
        return out

    def __del__(self):
        state, self._state = getattr(self, "_state", None), None
        if state:
            self._lib.speex_echo_state_destroy(state)
