"""What the GPU check runs on: its settings, the carried files and the models (SmolLM2's
real weights, random weights of larger models' shapes, a tiny one for the CPU)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

PARTS = ("properties", "passes", "bench")
CARRY = Path(".cuda_carry")  # ignored: the GGUF halves, the tokenizer and wheels travel in it
GGUF_HALVES = ("smollm2.gguf.part1", "smollm2.gguf.part2")
WHEELS = ("gguf==0.19.0", "rouge-score==0.1.2", "nltk==3.9.2")
PASS_TOKENS = (1, 4, 16, 32)
PREFILLS = (100, 1000)
REPEATS = 10
DECODE_TOKENS = 48
WORDS = [
    "what",
    "is",
    "the",
    "capital",
    "of",
    "france",
    "and",
    "why",
    "is",
    "it",
    "so",
    "famous",
    "robot",
    "please",
    "tell",
    "me",
    "about",
    "paris",
    "today",
]
# The shapes of two models a robot team would run on a GPU (their config.json files, abridged).
RANDOM_SHAPES = {
    "qwen2.5-1.5b-shape": dict(
        model_type="qwen2",
        hidden_size=1536,
        intermediate_size=8960,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        vocab_size=151936,
        max_position_embeddings=32768,
        rope_theta=1000000.0,
        tie_word_embeddings=True,
    ),
    "qwen2.5-7b-shape": dict(
        model_type="qwen2",
        hidden_size=3584,
        intermediate_size=18944,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        vocab_size=152064,
        max_position_embeddings=32768,
        rope_theta=1000000.0,
        tie_word_embeddings=False,
    ),
}
TINY_SHAPE = dict(
    model_type="llama",
    hidden_size=48,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=49152,
    max_position_embeddings=4096,
)


@dataclass
class CheckSettings:
    out: Path
    device: str = "cuda"
    parts: tuple[str, ...] = PARTS
    tiny: bool = False  # the CPU test: a tiny random model stands in for every model
    cases: int = 40  # random partial sequences per dtype
    near_tie_prompts: int = 40
    limit: int = 80  # MT-Bench questions in the bench
    models: tuple[str, ...] = ("smollm2", *RANDOM_SHAPES)  # the passes table's rows


# ----------------------------------------------------------------- models
def real_gguf(carry: Path | None = None) -> Path | None:
    """The embedded GGUF joined from its two carried halves, if both arrived."""
    carry = carry or CARRY
    halves = [carry / name for name in GGUF_HALVES]
    if not all(h.is_file() for h in halves):
        return None
    joined = carry / "smollm2.gguf"
    if not joined.is_file() or joined.stat().st_size != sum(h.stat().st_size for h in halves):
        with open(joined, "wb") as out:
            for half in halves:
                out.write(half.read_bytes())
    return joined


def tokenizer(carry: Path = CARRY):
    """SmolLM2's tokenizer and chat template: carried, or read from the embedded GGUF."""
    from transformers import AutoTokenizer

    if (carry / "tokenizer" / "tokenizer_config.json").is_file():
        return AutoTokenizer.from_pretrained(carry / "tokenizer")
    from predgen_ros.engine.models import embedded_tokenizer

    return embedded_tokenizer()


def random_model(shape: dict, device: str, dtype: torch.dtype, seed: int = 0):
    """A model of `shape` with random weights, made on `device` (no hub, no file)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    fields = dict(shape)
    config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    if shape["hidden_size"] <= TINY_SHAPE["hidden_size"]:
        with torch.no_grad():  # near-uniform random logits: separate the greedy choice
            model.lm_head.weight.mul_(40.0)
    return model.eval()


def smollm2(settings: CheckSettings, dtype: torch.dtype):
    """(model, what it is): the real SmolLM2-135M if its GGUF arrived, else a stand-in."""
    if settings.tiny:
        return random_model(TINY_SHAPE, settings.device, dtype), "tiny random model (CPU test)"
    gguf = real_gguf()
    if gguf is None:
        raise FileNotFoundError(f"{CARRY}/{GGUF_HALVES[1]} has not arrived: the real weights need both halves")
    from transformers import AutoModelForCausalLM

    # loaded in float32, transformers dequantizes into plain layers (other dtypes keep the packed GGUF blocks)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    return model.to(settings.device, dtype).eval(), "SmolLM2-135M-Instruct (the embedded Q4_1 GGUF, dequantized)"


def language_model(model, tok):
    from predgen_ros.engine.backends.hf import TransformersBackend
    from predgen_ros.engine.lm import LanguageModel

    return LanguageModel(TransformersBackend(model), tok)


DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# SmolLM2-135M's shape, for the properties when its weights have not arrived
SMOLLM2_SHAPE = dict(TINY_SHAPE, hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                     num_key_value_heads=3)  # fmt: skip


def property_model(settings: CheckSettings, dtype: torch.dtype):
    if settings.tiny or real_gguf():
        return smollm2(settings, dtype)
    return random_model(SMOLLM2_SHAPE, settings.device, dtype), "SmolLM2-135M's shape, random weights"


# ------------------------------------------------------------ 1. properties
