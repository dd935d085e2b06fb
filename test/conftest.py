"""Shared fixtures: the real tokenizer with a tiny random model (fast, exact
arithmetic in float64), and the real SmolLM2 for end-to-end tests."""

from __future__ import annotations

import os

import pytest
import torch

# DDS stays on loopback, in a domain of this test run's own: never another graph's.  The
# domain lies in 44..101, inside the 0..101 that ROS 2 documents as safe on Linux (higher
# ids collide with ephemeral ports) and above `make demo`'s 42 and `make stress`'s 43.
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ["ROS_LOCALHOST_ONLY"] = "1"
os.environ["ROS_DOMAIN_ID"] = str(44 + os.getpid() % 58)

from predgen_ros.engine.backends.hf import TransformersBackend
from predgen_ros.engine.lm import LanguageModel
from predgen_ros.engine.models import embedded_tokenizer, load_language_model
from predgen_ros.engine.params import ModelParams
from predgen_ros.engine.session import EngineConfig, Session


@pytest.fixture(scope="session")
def tokenizer():
    return embedded_tokenizer()


@pytest.fixture(scope="session")
def tiny_lm(tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=48,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    model = LlamaForCausalLM(config).to(torch.float64).eval()
    # Random weights give near-uniform logits; scale the output layer so the
    # greedy choice is well separated and float64 passes agree exactly.
    with torch.no_grad():
        model.lm_head.weight.mul_(40.0)
    return LanguageModel(TransformersBackend(model), tokenizer)


@pytest.fixture(scope="session")
def llama_lm(tokenizer):
    """The real SmolLM2 (F16) in llama.cpp, each pass evaluated token by token
    (n_ubatch 1): a batched pass then rounds as 1-token passes do, so the property
    tests check the engine's bookkeeping exactly (the near-ties of batched passes
    are measured by bench, docs/results/passes.md).  One thread: llama.cpp's threads
    wait for each other after every layer, and beside two CPU-bound processes on two
    cores each of those waits can last a time slice (one property test took over 15
    minutes on 2 threads)."""
    from predgen_ros.engine.backends.llama import LlamaCppBackend
    from predgen_ros.engine.models import embedded_gguf

    return LanguageModel(LlamaCppBackend(embedded_gguf("f16"), threads=1, ubatch=1), tokenizer)


def _loads_real_model(item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return "smollm" in getattr(item, "fixturenames", ()) or "llama_lm" in params.values()


def pytest_addoption(parser):
    parser.addoption(
        "--property-examples",
        type=float,
        default=1.0,
        help="scale the examples of the engine's property tests (make test-fast: 0.3; make test: all of them)",
    )


@pytest.fixture
def property_examples(request):
    """Hypothesis settings for an engine property test: `count` examples on the tiny model
    (the real one in llama.cpp costs ~100x a pass: a fifth), scaled by --property-examples."""
    from hypothesis import settings

    scale = request.config.getoption("--property-examples")

    def examples(backend: str, count: int):
        count = count if backend == "tiny_lm" else max(4, count // 5)
        return settings(max_examples=max(3, round(count * scale)), deadline=None)

    return examples


def pytest_collection_modifyitems(items):
    """A test that loads the real SmolLM2 belongs to the end-to-end tier (make test-fast skips it)."""
    for item in items:
        if _loads_real_model(item):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def smollm():
    """The real SmolLM2 on the default backend (llama.cpp, F16 weights)."""
    return load_language_model(ModelParams(None))


class StepClock:
    """A clock that advances one unit per reading: deterministic times for tests."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        self.t += 0.001
        return self.t


@pytest.fixture
def make_session():
    def make(lm, **overrides):
        return Session(lm, EngineConfig(**overrides), StepClock())

    return make


@pytest.fixture(scope="session")
def piper_voice():
    """Piper's embedded voice saying a text, as 16 kHz int16 samples (a user's clip)."""
    import numpy as np

    from predgen_ros.audio.pcm import to_pcm16k
    from predgen_ros.audio.speech.tts import PiperSynthesizer

    synth = PiperSynthesizer(reproducible=True)

    def say(text):
        speech = synth.synthesize(text)
        return np.frombuffer(to_pcm16k(speech.samples, speech.sample_rate), dtype=np.int16)

    return say
