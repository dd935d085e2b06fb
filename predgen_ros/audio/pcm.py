"""16 kHz mono int16 audio, the one format of every audio path, and the error an
unusable model or audio source raises: shared by the recognizers, the turn models
and the bag tools."""

from __future__ import annotations

import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np

SAMPLE_RATE = 16000
# The microphone's chunk (asr.chunk_ms) and the eval's replay chunk: a policy's
# silence is seen when the chunk that completes it arrives, so a 100 ms chunk ends an
# utterance 50 ms late on average; voice agents read 10-20 ms frames.
AUDIO_CHUNK_MS = 20


class AsrError(RuntimeError):
    """An ASR model or audio source that cannot be used; the message says how to fix it."""


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
        yield pcm[start : start + size]


def microphone_chunks(chunk_s: float = 0.1, device: str | None = None) -> Iterator[bytes]:
    """Live 16 kHz capture through PortAudio, one chunk at a time.

    The device is opened here, so a missing one is reported before any audio is awaited.
    """
    try:
        import sounddevice
    except OSError as err:  # the PortAudio library itself is missing
        raise AsrError(f"no audio capture: {err} (apt-get install libportaudio2)") from None
    try:
        stream = sounddevice.RawInputStream(
            samplerate=SAMPLE_RATE, channels=1, dtype="int16", blocksize=int(SAMPLE_RATE * chunk_s), device=device or None
        )
    except (sounddevice.PortAudioError, ValueError) as err:
        raise AsrError(f"no audio capture device ({err}); use asr.input: a WAV file, or asr.backend: text") from None
    return _read_forever(stream, int(SAMPLE_RATE * chunk_s))


def _read_forever(stream, frames: int) -> Iterator[bytes]:
    with stream:
        while True:
            data, _overflowed = stream.read(frames)
            yield bytes(data)
