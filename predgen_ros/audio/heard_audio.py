"""What the robot heard, kept for listening: each utterance's audio as the recognizer read
it, with its final (asr_node's `asr.record_dir`).

A robot that answers the wrong question is understood by listening to what reached its
recognizer: the microphone after the echo canceller, from the pre-roll before the voice
to the endpoint.  Each utterance becomes `NNNN.wav` (16 kHz mono int16) and one line of
`heard.jsonl`: {"file", "final" ("" when it made no word), "speech_end" (wall time of its
last voiced audio), "seconds"}.  An utterance that continues an early final holds its own
audio and the whole turn's words.
"""

from __future__ import annotations

import json
import wave
from pathlib import Path

from .pcm import SAMPLE_RATE, AsrError

INDEX = "heard.jsonl"


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
