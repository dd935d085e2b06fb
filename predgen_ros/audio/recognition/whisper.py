"""Whisper through CTranslate2 (faster-whisper's model format): one transcription of a
piece of audio, with the guards a live robot needs.

faster-whisper's own `transcribe` pads every window to 30 s, so a call costs the same
0.4 s on a 2-core CPU whatever the utterance's length.  Whisper's encoder reads a
shorter window too, but with too little silence after the speech it stops predicting
the end of the text and loops.  Measured on 60 Piper utterances (tiny.en, int8, one
thread, scripts/whisper_window.py, docs/results/asr-whisper.md): a 10 s window gives
2.6 % WER at 0.07 s a call, the 30 s window 2.1 % at 0.32 s, a 5 s window 25 %; so
the window is the audio plus `TAIL_S`, at least `MIN_WINDOW_S`.

Guards: a window Whisper thinks holds no speech (a cough, a door) gives no words
(its no-speech probability with a low average log-probability, faster-whisper's
rule), the tokens are capped at a rate no speaker reaches, a phrase repeated
three times or more in a row is kept once (Whisper's loops on noise and silence), and
a short utterance that Whisper writes twice over ("Where did I leave my keys? Where
did I leave") is kept once (seen in a 10 s window, not in 15 s or more).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...os_threads import named_threads
from ..pcm import SAMPLE_RATE, AsrError
from .whisper_models import check_model_name, embedded_model_path

WINDOW_S = 30.0  # Whisper's window: longer audio is transcribed in pieces (whisper_stream.py)
MIN_WINDOW_S = 10.0
TAIL_S = 2.0  # silence after the speech, so that Whisper hears the utterance end
MAX_TOKENS_PER_S = 8.0  # fast speech is ~4 words (~5 tokens) a second
MAX_LENGTH = 448  # Whisper's decoder positions: prompt and text together
PROMPT_TOKENS = 223  # at most half of them for the words before the window (as Whisper was trained)
NO_SPEECH_PROBABILITY = 0.6  # with AVG_LOGPROB_FLOOR: the window holds no speech
AVG_LOGPROB_FLOOR = -1.0
COMPUTE_TYPES = ("default", "auto", "int8", "int8_float32", "int8_float16", "int8_bfloat16", "float16", "bfloat16", "float32")
DEVICES = ("cpu", "cuda", "auto")


@dataclass(frozen=True)
class WhisperSettings:
    model: str = "tiny.en"  # an embedded model (whisper_models.py), when model_path is empty
    model_path: str = ""  # a CTranslate2 Whisper folder; wins over `model`
    device: str = "cpu"
    compute_type: str = "int8"
    threads: int = 1  # the LLM takes the other core of a 2-core robot
    beam: int = 1
    language: str = "en"  # for multilingual models; English-only ones ignore it

    def __post_init__(self):
        if not self.model_path:
            check_model_name(self.model)
        if self.device not in DEVICES:
            raise AsrError(f"asr.whisper.device: unknown device {self.device!r} (choose one of {', '.join(DEVICES)})")
        if self.compute_type not in COMPUTE_TYPES:
            raise AsrError(
                f"asr.whisper.compute_type: unknown type {self.compute_type!r} (choose one of {', '.join(COMPUTE_TYPES)})"
            )
        if not 0 <= self.threads <= 64:
            raise AsrError(f"asr.whisper.threads must lie in 0..64 (0: CTranslate2's default), got {self.threads}")
        if not 1 <= self.beam <= 10:
            raise AsrError(f"asr.whisper.beam must lie in 1..10, got {self.beam}")


@dataclass(frozen=True)
class Transcript:
    text: str
    no_speech_probability: float
    avg_logprob: float


def check_model_folder(path: Path) -> None:
    """One line naming what is wrong with a CTranslate2 Whisper folder."""
    if not path.is_dir():
        raise AsrError(f"asr.whisper.model_path: no such folder: {path}")
    missing = [name for name in ("model.bin", "config.json") if not (path / name).is_file()]
    if not (path / "tokenizer.json").is_file() and not (path / "vocabulary.txt").is_file():
        missing.append("tokenizer.json")
    if missing:
        raise AsrError(
            f"asr.whisper.model_path: {path} is not a CTranslate2 Whisper folder (missing {', '.join(missing)}); "
            "convert one with ct2-transformers-converter"
        )


class WhisperTranscriber:
    """Loads a CTranslate2 Whisper model; `transcribe` turns up to 30 s of audio into text."""

    def __init__(self, settings: WhisperSettings | None = None):
        settings = settings or WhisperSettings()
        path = Path(settings.model_path) if settings.model_path else embedded_model_path(settings.model)
        check_model_folder(path)
        from faster_whisper import WhisperModel
        from faster_whisper.tokenizer import Tokenizer

        try:
            with named_threads("whisper"):  # CTranslate2's workers, started here, do the transcriptions
                model = WhisperModel(
                    str(path), device=settings.device, compute_type=settings.compute_type, cpu_threads=settings.threads
                )
        except (RuntimeError, ValueError) as err:  # CTranslate2: a corrupt model.bin, no CUDA, an unsupported type
            raise AsrError(f"asr.whisper: cannot load {path}: {str(err).splitlines()[0]}") from None
        self.settings = settings
        self.path = path
        self._model = model.model
        self._features = model.feature_extractor
        self._tokenizer = Tokenizer(
            model.hf_tokenizer, model.model.is_multilingual, task="transcribe", language=settings.language
        )

    def transcribe(self, pcm: bytes, prompt: str = "") -> Transcript:
        """The text of `pcm` (16 kHz int16, at most WINDOW_S - TAIL_S); `prompt`: the
        words just before it (the committed text of a long utterance)."""
        import ctranslate2

        audio = np.frombuffer(pcm, dtype=np.int16).astype(np.float32) / 32768.0
        seconds = len(audio) / SAMPLE_RATE
        if seconds > WINDOW_S - TAIL_S:
            raise ValueError(f"{seconds:.1f} s of audio is over one Whisper window")
        window = min(WINDOW_S, max(MIN_WINDOW_S, seconds + TAIL_S))
        padded = np.zeros(int(window * SAMPLE_RATE), dtype=np.float32)
        padded[: len(audio)] = audio
        features = self._features(padded)
        features = features[:, : features.shape[-1] - features.shape[-1] % 2]  # the encoder halves the frames
        tokenizer = self._tokenizer
        previous = tokenizer.encode(" " + prompt.strip())[-PROMPT_TOKENS:] if prompt.strip() else []
        sequence = ([tokenizer.sot_prev, *previous] if previous else []) + [*tokenizer.sot_sequence, tokenizer.no_timestamps]
        result = self._model.generate(
            ctranslate2.StorageView.from_array(np.ascontiguousarray(features[None])),
            [sequence],
            beam_size=self.settings.beam,
            max_length=min(MAX_LENGTH, len(sequence) + int(seconds * MAX_TOKENS_PER_S) + 8),  # the prompt counts
            return_scores=True,
            return_no_speech_prob=True,
            suppress_blank=True,
        )[0]
        tokens = [t for t in result.sequences_ids[0] if t < tokenizer.eot]
        avg_logprob = result.scores[0] if result.scores else 0.0
        text = without_doubling(without_loops(tokenizer.decode(tokens)))
        if result.no_speech_prob > NO_SPEECH_PROBABILITY and avg_logprob < AVG_LOGPROB_FLOOR:
            text = ""
        return Transcript(" ".join(text.split()), result.no_speech_prob, avg_logprob)


def without_loops(text: str, repeats: int = 3) -> str:
    """`text` with any phrase said `repeats` or more times in a row kept once."""
    words = text.split()
    for size in range(1, len(words) // repeats + 1):
        i = 0
        while i + size * repeats <= len(words):
            phrase = [_plain(w) for w in words[i : i + size]]
            run = 1
            while (
                words[i + run * size : i + (run + 1) * size]
                and [_plain(w) for w in words[i + run * size : i + (run + 1) * size]] == phrase
            ):
                run += 1
            if run >= repeats:
                del words[i + size : i + run * size]
            i += 1
    return " ".join(words)


def without_doubling(text: str, min_words: int = 3) -> str:
    """`text` without a second copy of its own opening after a sentence's end, when that
    copy (at least `min_words` long, possibly cut short) runs to the end of the text."""
    words = text.split()
    plain = [_plain(w) for w in words]
    for end in range(1, len(words)):
        rest = plain[end:]
        if words[end - 1][-1] in ".?!" and len(rest) >= min_words and rest == plain[: len(rest)]:
            return " ".join(words[:end])
    return text


def _plain(word: str) -> str:
    return re.sub(r"[^\w']", "", word.lower())
