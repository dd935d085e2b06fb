"""PiperSynthesizer: same audio as Piper's own session, bounded sentence cache."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np
import pytest
from piper import PiperVoice

from predgen_ros.audio.speech.tts import PiperSynthesizer, default_voice_path

pytestmark = pytest.mark.e2e

SENTENCE = "The robot answers quickly."


def test_arena_releasing_session_speaks_exactly_like_piper():
    # Both sessions are fresh, so ONNX Runtime's noise generator starts from the same state,
    # and both use ONNX Runtime's default threads (another count sums in another order: 1 LSB).
    ours = PiperSynthesizer(cache_size=0, threads=0).synthesize(SENTENCE)
    piper = PiperVoice.load(str(default_voice_path()))
    reference = np.concatenate([chunk.audio_int16_array for chunk in piper.synthesize(SENTENCE)])
    assert ours.seconds > 1.0
    np.testing.assert_array_equal(ours.samples, reference)


def test_cache_keeps_the_most_recent_sentences_only():
    synth = PiperSynthesizer(cache_size=2)
    first = synth.synthesize("One.")
    synth.synthesize("Two.")
    assert synth.synthesize("One.") is first  # refreshed: now the most recent
    synth.synthesize("Three.")  # evicts "Two.", the least recent
    assert len(synth) == 2 and synth.cached("One.") and synth.cached("Three.") and not synth.cached("Two.")
    assert synth.hits == 1


def test_a_reproducible_synthesizer_speaks_the_same_samples_in_another_process():
    """make-bag's speech: the same bag from the same questions on any run."""
    code = (
        "import hashlib; from predgen_ros.audio.speech.tts import PiperSynthesizer; "
        f"print(hashlib.sha1(PiperSynthesizer(reproducible=True).synthesize({SENTENCE!r}).samples.tobytes()).hexdigest())"
    )
    here = hashlib.sha1(PiperSynthesizer(reproducible=True).synthesize(SENTENCE).samples.tobytes()).hexdigest()
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert here == there
