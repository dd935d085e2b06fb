"""What the robot heard, kept for listening: each utterance's audio as the recognizer read
it, with its final (asr_node's `asr.record_dir`).

A robot that answers the wrong question is understood by listening to what reached its
recognizer: the microphone after the echo canceller, from the pre-roll before the voice
to the endpoint.  Each utterance becomes `NNNN.wav` (16 kHz mono int16) and one line of
`heard.jsonl`: {"file", "final" ("" when it made no word), "speech_end" (wall time of its
last voiced audio), "seconds"}.  An utterance that continues an early final holds its own
audio and the whole turn's words.

With the echo canceller on, `canceller-inputs.wav` (stereo) holds what it was given, 10 ms
frame by frame: the microphone on the left, the robot's reference as paired with it on the
right.  How far the echo lies from its reference there is the graph's timing
(scripts/canceller_lag.py); replayed, the pairs make the canceller's output again.
"""

from __future__ import annotations

import json
import struct
import wave
from pathlib import Path

import numpy as np

from .pcm import SAMPLE_RATE, AsrError

INDEX = "heard.jsonl"
CANCELLER_INPUTS = "canceller-inputs.wav"


class HeardAudio:
    def __init__(self, folder: Path):
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise AsrError(f"asr.record_dir: cannot make {folder}: {err.strerror}") from None
        self.folder = folder
        # a second run into the same folder adds to it
        self.count = sum(1 for _ in (folder / INDEX).open()) if (folder / INDEX).is_file() else 0
        self.failed = 0  # utterances not saved (the disk full, the folder gone): hearing goes on

    def figures(self, inputs: CancellerInputs | None = None) -> dict:
        """What was kept (asr_node's diagnostics); `inputs`: the canceller's, if kept too."""
        kept = {"utterances_saved": self.count, "utterances_not_saved": self.failed}
        return {**kept, "canceller_inputs_s": round(inputs.frames / SAMPLE_RATE, 1)} if inputs else kept

    def utterance(self, pcm: bytes, final: str, speech_end: float) -> None:
        name = f"{self.count:04d}.wav"
        try:
            with wave.open(str(self.folder / name), "wb") as wav:
                wav.setnchannels(1)
                wav.setsampwidth(2)
                wav.setframerate(SAMPLE_RATE)
                wav.writeframes(pcm)
            line = {"file": name, "final": final, "speech_end": round(speech_end, 3), "seconds": len(pcm) / (2 * SAMPLE_RATE)}
            with (self.folder / INDEX).open("a") as index:
                index.write(json.dumps(line) + "\n")
        except OSError:
            self.failed += 1
            return
        self.count += 1


class CancellerInputs:
    """A stereo 16 kHz WAV of the canceller's two inputs, readable while it grows: its
    header is brought up to date every `flush_s` of audio, so a node that is killed leaves
    a valid file.  A failed write stops the recording (`failed`), never the hearing."""

    def __init__(self, folder: Path, flush_s: float = 1.0):
        self.path = folder / CANCELLER_INPUTS  # a second run into the folder replaces it
        try:
            self._file = self.path.open("wb")
            self._file.write(self._header(0))
        except OSError as err:
            raise AsrError(f"asr.record_dir: cannot write {self.path}: {err.strerror}") from None
        self._buffer = bytearray()
        self._flush_bytes = int(flush_s * SAMPLE_RATE) * 4
        self.frames = 0  # stereo samples written
        self.failed = False
        self._closed = False

    def frame(self, mic: np.ndarray, reference: np.ndarray) -> None:
        if self.failed or self._closed:  # a frame in flight as the node cleans up is dropped
            return
        self._buffer += np.column_stack([mic, reference]).astype("<i2").tobytes()
        if len(self._buffer) >= self._flush_bytes:
            self.flush()

    def flush(self) -> None:
        if self.failed or self._closed or not self._buffer:
            return
        try:
            self._file.write(self._buffer)
            self.frames += len(self._buffer) // 4
            self._buffer.clear()
            self._file.seek(0)
            self._file.write(self._header(self.frames * 4))
            self._file.seek(0, 2)
            self._file.flush()
        except OSError:
            self.failed = True

    def close(self) -> None:
        self.flush()
        self._closed = True
        self._file.close()

    @staticmethod
    def _header(data_bytes: int) -> bytes:
        rate, channels, width = SAMPLE_RATE, 2, 2
        return struct.pack(
            "<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + data_bytes, b"WAVE", b"fmt ", 16, 1, channels, rate,
            rate * channels * width, channels * width, 8 * width, b"data", data_bytes,
        )  # fmt: skip
