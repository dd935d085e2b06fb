"""Streaming speech recognition: audio chunks in, partial and final transcripts out.

`StreamingAsr` cuts the audio into utterances with a voice activity detector
(an utterance ends after `endpoint_silence` seconds without speech) and asks a
recognizer backend for the current hypothesis after every chunk.  Backends:
pocketsphinx (English model shipped in its wheel) and vosk (any vosk model
folder).  Audio is 16 kHz mono int16 throughout.
"""
from __future__ import annotations

import json
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Protocol

import numpy as np

SAMPLE_RATE = 16000
BACKENDS = ("pocketsphinx", "vosk", "text")


class AsrError(RuntimeError):
    """An ASR model or audio source that cannot be used; the message says how to fix it."""


@dataclass(frozen=True)
class AsrEvent:
    kind: str          # "partial" | "final"
    text: str
    t: float           # stream time of the chunk that produced it (s)
    t_speech_end: float | None = None  # finals: end of the last voiced audio


class Recognizer(Protocol):
    def start(self) -> None: ...
    def accept(self, pcm: bytes) -> str: ...
    def finish(self) -> str: ...


class PocketsphinxRecognizer:
    """pocketsphinx 5 with the US English model embedded in its wheel."""

    def __init__(self):
        import pocketsphinx

        self.decoder = pocketsphinx.Decoder(samprate=SAMPLE_RATE, loglevel="FATAL")

    def start(self) -> None:
        self.decoder.start_utt()

    def accept(self, pcm: bytes) -> str:
        self.decoder.process_raw(pcm, False, False)
        hyp = self.decoder.hyp()
        return hyp.hypstr if hyp else ""

    def finish(self) -> str:
        self.decoder.end_utt()
        hyp = self.decoder.hyp()
        return hyp.hypstr if hyp else ""


class VoskRecognizer:
    """vosk (Kaldi) with the model folder at `model_path`.

    vosk closes segments by itself inside long utterances; closed segments are
    kept so the hypothesis always covers the whole utterance.
    """

    def __init__(self, model_path: str):
        if not model_path:
            raise AsrError("asr.vosk.model_path is empty: set it to a vosk model folder (e.g. vosk-model-small-en-us-0.15)")
        path = Path(model_path)
        if not (path / "am").is_dir() and not (path / "conf").is_dir():
            raise AsrError(f"asr.vosk.model_path: not a vosk model folder: {path}")
        import vosk

        vosk.SetLogLevel(-1)
        self.model = vosk.Model(str(path))
        self._closed: list[str] = []

    def start(self) -> None:
        import vosk

        self.recognizer = vosk.KaldiRecognizer(self.model, SAMPLE_RATE)
        self._closed = []

    def _text(self, current: str) -> str:
        return " ".join([*self._closed, current]).strip()

    def accept(self, pcm: bytes) -> str:
        if self.recognizer.AcceptWaveform(pcm):
            self._closed.append(json.loads(self.recognizer.Result())["text"])
            return self._text("")
        return self._text(json.loads(self.recognizer.PartialResult())["partial"])

    def finish(self) -> str:
        return self._text(json.loads(self.recognizer.FinalResult())["text"])


def make_recognizer(backend: str, vosk_model_path: str = "") -> Recognizer:
    if backend == "pocketsphinx":
        return PocketsphinxRecognizer()
    if backend == "vosk":
        return VoskRecognizer(vosk_model_path)
    raise AsrError(f"unknown ASR backend {backend!r}: choose one of {', '.join(BACKENDS)}")


class StreamingAsr:
    """Utterance segmentation by voice activity, and transcripts on change."""

    def __init__(self, recognizer: Recognizer, endpoint_silence: float = 0.5, vad_mode: int = 2, redecode_final: bool = True):
        """`redecode_final` False: the final is the last hypothesis, published at the
        endpoint; the recognizer's closing pass runs when the next utterance starts."""
        import pocketsphinx

        self.recognizer = recognizer
        self.redecode_final = redecode_final
        self._closing = False
        self.endpoint_silence = endpoint_silence
        self.vad = pocketsphinx.Vad(vad_mode, SAMPLE_RATE)
        self._frame = self.vad.frame_bytes
        self._buffer = b""
        self._t = 0.0                 # stream time at the end of the audio seen so far
        self._in_utterance = False
        self._last_voiced = 0.0
        self._hypothesis = ""

    @property
    def in_utterance(self) -> bool:
        return self._in_utterance

    def feed(self, pcm: bytes) -> list[AsrEvent]:
        """One chunk of 16 kHz int16 audio; events it produced."""
        self._t += len(pcm) / (2 * SAMPLE_RATE)
        voiced = self._voiced_end(pcm)
        events: list[AsrEvent] = []
        if voiced is not None:
            self._last_voiced = voiced
            if not self._in_utterance:
                self._in_utterance = True
                self._hypothesis = ""
                self._close_recognizer()
                self.recognizer.start()
        if not self._in_utterance:
            return events
        text = " ".join(self.recognizer.accept(pcm).split())
        if text and text != self._hypothesis:
            self._hypothesis = text
            events.append(AsrEvent("partial", text, self._t))
        if self._t - self._last_voiced >= self.endpoint_silence:
            events += self.flush()
        return events

    def skip(self, pcm: bytes) -> list[AsrEvent]:
        """Audio that is not listened to (the robot is speaking): the stream clock
        still advances by its length.  An utterance half heard when the skipping
        starts ends there: its final is what was heard so far, and its speech end
        the last voiced audio before it."""
        events = self.flush()
        self._t += len(pcm) / (2 * SAMPLE_RATE)
        self._buffer = b""  # an unfinished VAD frame does not join later audio
        return events

    def flush(self) -> list[AsrEvent]:
        """End the current utterance now (end of input, or the mute switch)."""
        if not self._in_utterance:
            return []
        self._in_utterance = False
        self._closing = True
        text = self._close_recognizer() if self.redecode_final else ""
        text = text or self._hypothesis
        if not text:
            return []  # noise that never became words
        return [AsrEvent("final", text, self._t, self._last_voiced)]

    def _close_recognizer(self) -> str:
        """The recognizer's final hypothesis of the utterance it still has open, if any."""
        if not self._closing:
            return ""
        self._closing = False
        return " ".join(self.recognizer.finish().split())

    def _voiced_end(self, pcm: bytes) -> float | None:
        """Stream time of the end of the last voiced VAD frame in `pcm`, if any."""
        self._buffer += pcm
        usable = len(self._buffer) - len(self._buffer) % self._frame
        frames, self._buffer = self._buffer[:usable], self._buffer[usable:]
        t_frames_end = self._t - len(self._buffer) / (2 * SAMPLE_RATE)
        last = None
        count = len(frames) // self._frame
        for i in range(count):
            if self.vad.is_speech(frames[i * self._frame:(i + 1) * self._frame]):
                last = t_frames_end - (count - 1 - i) * self._frame / (2 * SAMPLE_RATE)
        return last


def to_pcm16k(samples: np.ndarray, rate: int) -> bytes:
    """Mono int16 samples at any rate as 16 kHz int16 bytes (linear interpolation)."""
    if rate != SAMPLE_RATE:
        n = int(round(len(samples) * SAMPLE_RATE / rate))
        samples = np.interp(np.arange(n) * rate / SAMPLE_RATE, np.arange(len(samples)), samples.astype(np.float64))
    return np.asarray(np.round(samples), dtype=np.int16).tobytes()


def read_wav(path: str | Path) -> bytes:
    """A mono 16-bit WAV file as 16 kHz int16 bytes."""
    path = Path(path)
    try:
        with wave.open(str(path), "rb") as wav:
            if wav.getsampwidth() != 2:
                raise AsrError(f"{path}: needs 16-bit PCM, got {8 * wav.getsampwidth()}-bit (convert: sox IN -b 16 OUT)")
            frames = np.frombuffer(wav.readframes(wav.getnframes()), dtype=np.int16)
            channels, rate = wav.getnchannels(), wav.getframerate()
    except FileNotFoundError:
        raise AsrError(f"WAV file not found: {path}") from None
    except (wave.Error, EOFError) as err:
        raise AsrError(f"{path}: not a readable WAV file ({err})") from None
    mono = frames.reshape(-1, channels)[:, 0] if channels > 1 else frames
    return to_pcm16k(mono, rate)


def chunks(pcm: bytes, chunk_s: float = 0.1) -> Iterator[bytes]:
    size = 2 * int(SAMPLE_RATE * chunk_s)
    for start in range(0, len(pcm), size):
        yield pcm[start:start + size]


def microphone_chunks(chunk_s: float = 0.1, device: str | None = None) -> Iterator[bytes]:
    """Live 16 kHz capture through PortAudio, one chunk at a time.

    The device is opened here, so a missing one is reported before any audio is awaited.
    """
    try:
        import sounddevice
    except OSError as err:  # the PortAudio library itself is missing
        raise AsrError(f"no audio capture: {err} (apt-get install libportaudio2)") from None
    try:
        stream = sounddevice.RawInputStream(samplerate=SAMPLE_RATE, channels=1, dtype="int16",
                                            blocksize=int(SAMPLE_RATE * chunk_s), device=device or None)
    except (sounddevice.PortAudioError, ValueError) as err:
        raise AsrError(f"no audio capture device ({err}); use asr.input: a WAV file, or asr.backend: text") from None
    return _read_forever(stream, int(SAMPLE_RATE * chunk_s))


def _read_forever(stream, frames: int) -> Iterator[bytes]:
    with stream:
        while True:
            data, _overflowed = stream.read(frames)
            yield bytes(data)
