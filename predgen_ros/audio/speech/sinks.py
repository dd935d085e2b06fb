"""Where the robot's speech goes: a speaker, WAV files, a callback, or nowhere.

A sink receives one reply at a time: `begin(name, rate)`, int16 chunks through
`play`, then `end()`.  Only the speaker paces itself (its writes block while
the device plays); the caller paces the others when it wants real time.
"""

from __future__ import annotations

import wave
from collections.abc import Callable
from pathlib import Path

import numpy as np

SINKS = ("speaker", "wav", "topic", "none")


class SinkError(RuntimeError):
    """An audio sink that cannot be opened or written; the message says how to fix it."""


class NullSink:
    paced = False

    def begin(self, name: str, sample_rate: int) -> None:
        pass

    def play(self, chunk: np.ndarray) -> None:
        pass

    def end(self) -> None:
        pass


class WavSink(NullSink):
    """One WAV file per reply in `folder`, named after the reply."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise SinkError(f"tts.wav_dir: cannot create {self.folder} ({err.strerror})") from None
        self._file: wave.Wave_write | None = None
        self._raw = None  # the open file under _file
        self.written: list[Path] = []

    def begin(self, name: str, sample_rate: int) -> None:
        path = self.folder / f"{name}.wav"
        try:
            raw = open(path, "wb")  # noqa: SIM115 (open across write() calls; end() closes it)
        except OSError as err:  # opened here, not by wave.open, whose half-made writer fails again in __del__
            raise SinkError(f"cannot write {path} ({err.strerror})") from None
        self._raw, self._file = raw, wave.open(raw, "wb")  # noqa: SIM115 (end() closes both)
        self._file.setnchannels(1)
        self._file.setsampwidth(2)
        self._file.setframerate(sample_rate)
        self.written.append(path)

    def play(self, chunk: np.ndarray) -> None:
        self._file.writeframes(chunk.astype(np.int16).tobytes())

    def end(self) -> None:
        if self._file is not None:
            self._file.close()  # writes the header; the file object stays ours to close
            self._raw.close()
            self._file = self._raw = None


class CallbackSink(NullSink):
    """Hands each chunk and its sample rate to `send` (the node publishes them)."""

    def __init__(self, send: Callable[[np.ndarray, int], None]):
        self.send = send
        self.sample_rate = 0

    def begin(self, name: str, sample_rate: int) -> None:
        self.sample_rate = sample_rate

    def play(self, chunk: np.ndarray) -> None:
        self.send(chunk, self.sample_rate)


class SpeakerSink(NullSink):
    """The default PortAudio output device; writes block in real time."""

    paced = True

    def __init__(self, device: str = ""):
        try:
            import sounddevice
        except OSError as err:
            raise SinkError(f"no audio output: {err} (apt-get install libportaudio2)") from None
        self.sounddevice = sounddevice
        self.device = device or None
        try:
            sounddevice.check_output_settings(device=self.device, channels=1, dtype="int16")
        except (sounddevice.PortAudioError, ValueError) as err:
            raise SinkError(f"no audio output device ({err}); use tts.sink: wav, topic or none") from None
        self._stream = None

    def begin(self, name: str, sample_rate: int) -> None:
        self._stream = self.sounddevice.RawOutputStream(samplerate=sample_rate, channels=1, dtype="int16", device=self.device)
        self._stream.start()

    def play(self, chunk: np.ndarray) -> None:
        self._stream.write(chunk.astype(np.int16).tobytes())

    def end(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None


def make_sink(kind: str, wav_dir: str = "", send: Callable[[np.ndarray, int], None] | None = None, device: str = "") -> NullSink:
    if kind == "none":
        return NullSink()
    if kind == "wav":
        if not wav_dir:
            raise SinkError("tts.sink is wav but tts.wav_dir is empty: set a folder for the WAV files")
        return WavSink(wav_dir)
    if kind == "topic":
        return CallbackSink(send)
    if kind == "speaker":
        return SpeakerSink(device)
    raise SinkError(f"unknown tts.sink {kind!r}: choose one of {', '.join(SINKS)}")
