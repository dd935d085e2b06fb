"""What a streaming recognizer hands out (AsrEvent, in asr_node's order) and the two kinds
of recognizer StreamingAsr drives (audio/recognition/asr.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ...events import Heard


@dataclass(frozen=True)
class AsrEvent:
    kind: Heard  # PARTIAL or FINAL
    text: str
    t: float  # stream time of the chunk that produced it (s)
    t_speech_end: float | None = None  # finals: end of the last voiced audio
    may_continue: bool = False  # finals: a pause ended it early and the user may still go on ("resumed")


class Recognizer(Protocol):
    """Decodes in the audio loop: each call returns when its audio is heard."""

    def start(self) -> None: ...
    def accept(self, pcm: bytes) -> str: ...
    def finish(self) -> str: ...


@runtime_checkable
class BackgroundRecognizer(Protocol):
    """Decodes on a thread of its own (whisper_stream.py): `accept` never waits and
    returns the newest hypothesis; a closed utterance's final is read with `final`.  Its
    load, for asr_node's diagnostics: `lags` (s from an audio's arrival to its words),
    `calls` (s per transcription) and `failures`."""

    lags: Sequence[float]
    calls: Sequence[float]
    failures: int

    def start(self) -> None: ...
    def accept(self, pcm: bytes) -> str: ...
    def voice_ended(self) -> None: ...
    def voice_resumed(self) -> None: ...
    def close(self, silent_tail_s: float) -> None: ...
    def final(self, timeout: float = 0.0) -> str | None: ...
    def stop(self) -> None: ...


def in_order(events: list[AsrEvent], changes: list[tuple[str, float]]) -> list[AsrEvent | tuple[str, float]]:
    """One chunk's events (feed) and voice changes (voice_changes) in the order asr_node
    publishes them: up to the last final, the closed utterances' words; then the voice (a
    confirmation follows its final, a "resumed" the final it continues, and the voice may
    pause the robot before the new words); then the open utterance's partials."""
    closed = max((i + 1 for i, event in enumerate(events) if event.kind is Heard.FINAL), default=0)
    return [*events[:closed], *changes, *events[closed:]]
