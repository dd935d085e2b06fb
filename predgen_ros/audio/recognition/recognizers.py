"""The speech recognizers asr_node can run, in one registry.

Every tool that starts a recognizer (asr_node, the bag maker, the endpoint and
replay evaluations, the CLI) reads its names and default from `RECOGNIZERS`, and
`make_recognizer` makes one from its entry: a new recognizer is its class and one
entry (test_recognizer_registry.py adds one).

- whisper: Whisper through CTranslate2, tiny.en embedded (whisper.py), streaming
  on a thread of its own (whisper_stream.py); the default: it hears far better.
- pocketsphinx: pocketsphinx 5 with the US English model in its wheel; cheap.
- vosk: any vosk (Kaldi) model folder.

(A user without audio, typing texts, is not a recognizer: the text_user node, eval/graph/text_user.py.)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..pcm import SAMPLE_RATE, AsrError
from .whisper import WhisperSettings


@dataclass(frozen=True)
class RecognizerKind:
    """One registry entry: a recognizer is its class and this line."""

    summary: str
    # (asr.vosk.model_path, Whisper's settings) -> a recognizer for StreamingAsr
    make: Callable[[str, WhisperSettings], object]


DEFAULT_RECOGNIZER = "whisper"  # hears 3x fewer words wrong, answers sooner (docs/results/asr-whisper.md)


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


def _whisper(vosk_model_path: str, settings: WhisperSettings):
    from .whisper import WhisperTranscriber
    from .whisper_stream import WhisperStreamingRecognizer

    return WhisperStreamingRecognizer(WhisperTranscriber(settings))


RECOGNIZERS = {
    "whisper": RecognizerKind("Whisper (CTranslate2; embedded tiny.en or asr.whisper.model_path)", _whisper),
    "pocketsphinx": RecognizerKind("pocketsphinx 5, US English model from its wheel", lambda _, __: PocketsphinxRecognizer()),
    "vosk": RecognizerKind("vosk (Kaldi), the model folder asr.vosk.model_path", lambda path, _: VoskRecognizer(path)),
}


def make_recognizer(backend: str, vosk_model_path: str = "", whisper: WhisperSettings | None = None):
    """The recognizer `backend` names, ready for StreamingAsr; AsrError names a bad setting."""
    kind = RECOGNIZERS.get(backend)
    if kind is None:
        raise AsrError(f"unknown ASR backend {backend!r}: choose one of {', '.join(RECOGNIZERS)}")
    return kind.make(vosk_model_path, whisper or WhisperSettings())
