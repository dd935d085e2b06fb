"""A recognizer is one class and one registry entry: a new one, added here in a test, is
heard through the ear as asr_node builds it (audio/ear.py) with nothing else changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from predgen_ros.audio.ear import EarSettings, build_ear
from predgen_ros.audio.pcm import AsrError, chunks, read_wav
from predgen_ros.audio.recognition.recognizers import RECOGNIZERS, RecognizerKind, make_recognizer
from predgen_ros.events import Heard

DATA = Path(__file__).parent / "data"
SILENCE_1S = b"\0" * 32000


class WordPerSecond:
    """Hears one word, "word", per second of audio it was given (the words are not the point:
    that StreamingAsr drives it as it drives pocketsphinx)."""

    def start(self) -> None:
        self.bytes = 0

    def accept(self, pcm: bytes) -> str:
        self.bytes += len(pcm)
        return " ".join(["word"] * (self.bytes // 32000))

    def finish(self) -> str:
        return self.accept(b"") or "word"


def test_a_recognizer_added_to_the_registry_is_heard_through_the_ear(monkeypatch):
    monkeypatch.setitem(RECOGNIZERS, "word-per-second", RecognizerKind("a test's", lambda _, __: WordPerSecond()))
    ear = build_ear(EarSettings(recognizer="word-per-second", echo_cancel="none"))
    speech = read_wav(DATA / "piper_question_1.wav")
    events = [e for chunk in chunks(SILENCE_1S + speech + SILENCE_1S * 2, 0.02) for e in ear.asr.feed(chunk)]
    events += ear.asr.finish_stream()
    ear.close()
    finals = [e.text for e in events if e.kind is Heard.FINAL]
    assert len(finals) == 1 and set(finals[0].split()) == {"word"}, events
    assert any(e.kind is Heard.PARTIAL for e in events)


def test_a_name_the_registry_lacks_is_refused_with_the_choices():
    with pytest.raises(AsrError, match=r"asr.backend: unknown backend 'nemo' \(choose one of whisper, pocketsphinx, vosk\)"):
        EarSettings(recognizer="nemo")
    with pytest.raises(AsrError, match=r"asr.backend: text is no recognizer: .* start the text_user node"):
        EarSettings(recognizer="text")  # a user typing texts replaces asr_node: eval/graph/text_user.py
    with pytest.raises(AsrError, match=r"unknown ASR backend 'text': choose one of whisper, pocketsphinx, vosk"):
        make_recognizer("text")
