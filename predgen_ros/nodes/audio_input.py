"""Where asr_node's audio comes from (`asr.input`): the microphone, the `audio/user` topic
or a WAV file, as an iterable of 16 kHz int16 chunks."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from ..audio.pcm import chunks, microphone_chunks, read_wav


class TopicAudio:
    """The chunks that arrive on `audio/user`, in order, as they come, until stopped."""

    def __init__(self, stopping: threading.Event):
        self._arrived: queue.Queue[bytes] = queue.Queue()
        self._stopping = stopping

    def put(self, pcm: bytes) -> None:
        self._arrived.put(pcm)

    def __iter__(self) -> Iterator[bytes]:
        while not self._stopping.is_set():
            try:
                yield self._arrived.get(timeout=0.1)
            except queue.Empty:
                continue


@dataclass
class AudioInput:
    chunks: Iterable[bytes]
    live: bool  # arrives at real time (a microphone, the topic); a file is paced by its reader
    close: Callable[[], None] | None = None
    topic: TopicAudio | None = None  # asr.input topic: where the subscription puts the chunks


def open_audio_input(name: str, device: str, chunk_s: float, stopping: threading.Event) -> AudioInput:
    """`asr.input` opened now, so a missing device or file is reported at configure (AsrError)."""
    if name == "microphone":
        stream = microphone_chunks(chunk_s, device)
        return AudioInput(stream, live=True, close=stream.close)
    if name == "topic":
        topic = TopicAudio(stopping)
        return AudioInput(topic, live=True, topic=topic)
    return AudioInput(chunks(read_wav(name), chunk_s), live=False)
