"""Engine settings from dotted parameter names (`verifier.k`, `model.device`, ...).

One mapping serves the ROS node (its declared parameters) and the CLI (the
same YAML file), so a parameter travels from the YAML to the decode loop here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import BACKENDS, SYSTEM_PROMPT, WEIGHTS, ConfigError, EngineConfig, VerifierRule
from .sentences import SentenceRules

ENGINE_PARAMS: dict[str, tuple[Any, str]] = {
    "policy": ("predgen", "baseline | preemptive | predgen"),
    "endpoint_delay": (0.0, "seconds from the final transcript until the robot may speak (extra endpointing)"),
    "model.path": ("", "a .gguf file or a local Hugging Face model folder; empty = embedded SmolLM2-135M-Instruct"),
    "model.backend": ("auto", "auto (llama_cpp on a CPU, transformers on CUDA) | llama_cpp | transformers"),
    "model.weights": ("f16", "llama_cpp, embedded model: f16 | q8_0 | q4_1 (as shipped)"),
    "model.threads": (
        0,
        "llama_cpp: threads per forward pass; 0 = every core but one in predgen_node (ASR and TTS share the CPU), every core in bench",
    ),
    "model.device": ("auto", "transformers: auto | cpu | cuda[:N]"),
    "model.dtype": ("auto", "transformers: auto | float32 | float16 | bfloat16"),
    "model.system_prompt": (SYSTEM_PROMPT, "what the model is told before the conversation (the robot's role)"),
    "verifier.kind": ("exact", "exact (lossless, the default) | topk (the paper's setting) | margin | minp"),
    "verifier.k": (3, "K of the top-K verifier"),
    "verifier.max_gap": (1.0, "top-K: a kept token's log-probability lies at most this many nats below the top token's"),
    "verifier.margin": (0.25, "margin: a kept token (any rank) lies at most this many nats below the top token"),
    "verifier.min_p": (0.5, "minp: a kept token has at least this share of the top token's probability"),
    "verifier.exact_head": (1, "all but exact: the reply's first N tokens must be the most likely one"),
    "verifier.copy_guard": (True, "all but exact: a runner-up token may not copy an earlier reply of the conversation"),
    "decoder.kind": ("ar", "ar | jacobi"),
    "decoder.jacobi_block": (8, "tokens per Jacobi iteration"),
    "decoder.copy_ban": (
        4,
        "a reply never completes a run of this many tokens of an earlier reply in the prompt; 0 = plain greedy",
    ),
    "decoder.copy_ban_opening": (
        2,
        "a reply does not begin with the first N tokens an earlier reply in the prompt began with; 0 = off",
    ),
    "decoder.copy_ban_user": (False, "the copy ban also covers the user's words: the reply does not echo the request"),
    "generation.margin_tokens": (2, "speculate this many tokens past the first sentence"),
    "generation.max_new_tokens": (256, "reply length in tokens; 0 = first sentence only"),
    "generation.max_sentences": (2, "the reply ends after this many sentences; 0 = no limit"),
    "generation.history_tokens": (1024, "earlier turns kept in the prompt, in tokens; the oldest go first"),
    "generation.history_turns": (1, "at most this many earlier turns kept in the prompt; 0 = as many as history_tokens holds"),
    "generation.anticipate": (True, "predgen: also speculate on the model's guess of how the user's sentence ends"),
    "generation.anticipate_tokens": (12, "anticipation: at most this many tokens of guessed user text"),
    "sentence.min_chars": (20, "shorter first sentences are merged with the next"),
    "sentence.fallback_chars": (160, "unpunctuated replies are cut at a word boundary here"),
    "sentence.max_tokens": (64, "at most this many tokens before a first sentence is forced"),
}


@dataclass(frozen=True)
class ModelParams:
    path: str | None
    device: str = "auto"
    dtype: str = "auto"
    system_prompt: str = SYSTEM_PROMPT
    backend: str = "auto"
    weights: str = "f16"
    threads: int = 0

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ConfigError(f"unknown model.backend {self.backend!r}: choose one of {', '.join(BACKENDS)}")
        if self.weights not in WEIGHTS:
            raise ConfigError(f"unknown model.weights {self.weights!r}: choose one of {', '.join(WEIGHTS)}")
        if self.threads < 0:
            raise ConfigError(f"model.threads must be >= 0 (0: every core), got {self.threads}")


def _flatten(tree: dict, prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        flat.update(_flatten(value, name + ".") if isinstance(value, dict) else {name: value})
    return flat


# The node's own lifecycle switch: in predgen_node's YAML section, not an engine setting.
NODE_LEVEL_PARAMS = ("autostart",)


def node_section(tree: Any, node: str) -> dict[str, Any] | None:
    """`node`'s ros__parameters in a parsed parameter file: under `node`, `/node` or
    `/**/node` (the form that matches the node in any namespace)."""
    if not isinstance(tree, dict):
        return None
    for key in (node, f"/{node}", f"/**/{node}"):
        if isinstance(tree.get(key), dict):
            return tree[key].get("ros__parameters")
    return None


def read_params_file(path: str | Path, node: str = "predgen_node") -> dict[str, Any]:
    """The dotted parameters of `node` in a ROS 2 parameter YAML file."""
    import yaml

    path = Path(path)
    try:
        tree = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"parameter file not found: {path}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    section = node_section(tree, node)
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: no '/**/{node}: ros__parameters:' section")
    params = {name: value for name, value in _flatten(section).items() if name not in NODE_LEVEL_PARAMS}
    unknown = sorted(set(params) - set(ENGINE_PARAMS))
    if unknown:
        raise ConfigError(f"{path}: unknown parameter {', '.join(unknown)} (known: {', '.join(ENGINE_PARAMS)})")
    return params


def _system_prompt(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ConfigError("model.system_prompt must be a non-empty string (it tells the model it is a robot)")
    return text.strip()


def engine_config(params: dict[str, Any]) -> tuple[EngineConfig, ModelParams]:
    """EngineConfig and model choice from dotted parameters (defaults for missing ones)."""
    p = {name: params.get(name, default) for name, (default, _) in ENGINE_PARAMS.items()}
    config = EngineConfig(
        policy=p["policy"],
        verifier=VerifierRule(
            p["verifier.kind"],
            int(p["verifier.k"]),
            float(p["verifier.max_gap"]),
            float(p["verifier.margin"]),
            float(p["verifier.min_p"]),
            int(p["verifier.exact_head"]),
            bool(p["verifier.copy_guard"]),
        ),
        decoder=p["decoder.kind"],
        jacobi_block=int(p["decoder.jacobi_block"]),
        copy_ban=int(p["decoder.copy_ban"]),
        copy_ban_opening=int(p["decoder.copy_ban_opening"]),
        copy_ban_user=bool(p["decoder.copy_ban_user"]),
        margin_tokens=int(p["generation.margin_tokens"]),
        max_new_tokens=int(p["generation.max_new_tokens"]),
        max_sentences=int(p["generation.max_sentences"]),
        history_tokens=int(p["generation.history_tokens"]),
        history_turns=int(p["generation.history_turns"]),
        anticipate=bool(p["generation.anticipate"]),
        anticipate_tokens=int(p["generation.anticipate_tokens"]),
        sentence=SentenceRules(int(p["sentence.min_chars"]), int(p["sentence.fallback_chars"]), int(p["sentence.max_tokens"])),
    )
    return config, ModelParams(
        p["model.path"] or None,
        p["model.device"],
        p["model.dtype"],
        _system_prompt(p["model.system_prompt"]),
        p["model.backend"],
        p["model.weights"],
        int(p["model.threads"]),
    )
