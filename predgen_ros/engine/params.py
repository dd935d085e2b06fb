"""Engine settings from dotted parameter names (`verifier.k`, `model.device`, ...).

One mapping serves the ROS node (its declared parameters) and the CLI (the
same YAML file), so a parameter travels from the YAML to the decode loop here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .backends.served import ServerSettings
from .config import BACKENDS, FALLBACKS, SYSTEM_PROMPT, WEIGHTS, ConfigError, EngineConfig, ModelError, VerifierRule
from .sentences import SentenceRules


@dataclass(frozen=True)
class ModelParams:
    path: str | None
    device: str = "auto"
    dtype: str = "auto"
    system_prompt: str = SYSTEM_PROMPT
    backend: str = "auto"
    weights: str = "f16"
    threads: int = 0
    gpu_layers: int = -1  # llama_cpp: layers offloaded to the GPU; -1 = all where llama.cpp was built with one
    server: ServerSettings | None = None  # model.backend sglang or openai: the inference server
    fallback: str = "notice"

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ConfigError(f"unknown model.backend {self.backend!r}: choose one of {', '.join(BACKENDS)}")
        if self.weights not in WEIGHTS:
            raise ConfigError(f"unknown model.weights {self.weights!r}: choose one of {', '.join(WEIGHTS)}")
        if self.threads < 0:
            raise ConfigError(f"model.threads must be >= 0 (0: every core), got {self.threads}")
        if self.fallback not in FALLBACKS:
            raise ConfigError(f"unknown model.server.fallback {self.fallback!r}: choose one of {', '.join(FALLBACKS)}")
        if self.gpu_layers < -1:
            raise ConfigError(f"model.gpu_layers must be -1 (all), 0 (CPU only) or a count, got {self.gpu_layers}")


# name -> (default, description); each default is the one its dataclass declares.
ENGINE_PARAMS: dict[str, tuple[Any, str]] = {
    "policy": (EngineConfig.policy, "baseline | preemptive | predgen"),
    "model.path": ("", "a .gguf file or a local Hugging Face model folder; empty = embedded SmolLM2-135M-Instruct"),
    "model.backend": (ModelParams.backend, "auto (llama_cpp on a CPU, transformers on CUDA) | llama_cpp | transformers"),
    "model.weights": (ModelParams.weights, "llama_cpp, embedded model: f16 | q8_0 | q4_1 (as shipped)"),
    "model.threads": (
        ModelParams.threads,
        "llama_cpp: threads per forward pass; 0 = every core but one in predgen_node (ASR and TTS share the CPU), every core in bench",
    ),
    "model.gpu_layers": (
        ModelParams.gpu_layers,
        "llama_cpp: layers offloaded to the GPU; -1 = all where llama.cpp was built with CUDA or Metal, 0 = CPU only",
    ),
    "model.server.url": ("", "sglang / openai: the inference server, http(s)://host:port"),
    "model.server.model": ("", "openai: the served model's name in each request (vLLM: as it serves it)"),
    "model.server.token_ids": (
        ServerSettings.token_ids,
        "openai: the prompt as token ids (vLLM); false: as text (llama-cpp-python's server)",
    ),
    "model.server.timeout_s": (ServerSettings.timeout_s, "sglang / openai: a request unanswered this long has failed"),
    "model.server.top_k": (ServerSettings.top_k, "sglang / openai: top choices returned per position"),
    "model.server.api_key_env": ("", "sglang / openai: the environment variable holding the API key (never logged)"),
    "model.server.api_key_file": ("", "sglang / openai: or a file holding it on its first line"),
    "model.server.ca_file": ("", "https: a certificate authority to trust besides the system's"),
    "model.server.fallback": (
        ModelParams.fallback,
        "a server that fails mid-turn: notice (a short spoken apology) | local (the robot's own model.path, same tokenizer)",
    ),
    "model.device": (ModelParams.device, "transformers: auto | cpu | cuda[:N]"),
    "model.dtype": (ModelParams.dtype, "transformers: auto | float32 | float16 | bfloat16"),
    "model.system_prompt": (SYSTEM_PROMPT, "what the model is told before the conversation (the robot's role)"),
    "verifier.kind": (VerifierRule.kind, "exact (lossless, the default) | topk (the paper's setting) | margin | minp"),
    "verifier.k": (VerifierRule.k, "K of the top-K verifier"),
    "verifier.max_gap": (
        VerifierRule.max_gap,
        "top-K: a kept token's log-probability lies at most this many nats below the top token's",
    ),
    "verifier.margin": (VerifierRule.margin, "margin: a kept token (any rank) lies at most this many nats below the top token"),
    "verifier.min_p": (VerifierRule.min_p, "minp: a kept token has at least this share of the top token's probability"),
    "verifier.exact_head": (VerifierRule.exact_head, "all but exact: the reply's first N tokens must be the most likely one"),
    "verifier.copy_guard": (
        VerifierRule.copy_guard,
        "all but exact: a runner-up token may not copy an earlier reply of the conversation",
    ),
    "decoder.kind": (EngineConfig.decoder, "ar | jacobi"),
    "decoder.jacobi_block": (EngineConfig.jacobi_block, "tokens per Jacobi iteration"),
    "decoder.copy_ban": (
        EngineConfig.copy_ban,
        "a reply never completes a run of this many tokens of an earlier reply in the prompt; 0 = plain greedy",
    ),
    "decoder.copy_ban_opening": (
        EngineConfig.copy_ban_opening,
        "a reply does not begin with the first N tokens an earlier reply in the prompt began with; 0 = off",
    ),
    "decoder.copy_ban_user": (
        EngineConfig.copy_ban_user,
        "the copy ban also covers the user's words: the reply does not echo the request",
    ),
    "generation.margin_tokens": (EngineConfig.margin_tokens, "speculate this many tokens past the first sentence"),
    "generation.max_new_tokens": (EngineConfig.max_new_tokens, "reply length in tokens; 0 = first sentence only"),
    "generation.max_sentences": (EngineConfig.max_sentences, "the reply ends after this many sentences; 0 = no limit"),
    "generation.history_tokens": (
        EngineConfig.history_tokens,
        "earlier turns kept in the prompt, in tokens; the oldest go first",
    ),
    "generation.history_turns": (
        EngineConfig.history_turns,
        "at most this many earlier turns kept in the prompt; 0 = as many as history_tokens holds",
    ),
    "generation.anticipate": (
        EngineConfig.anticipate,
        "predgen: also speculate on the model's guess of how the user's sentence ends",
    ),
    "generation.anticipate_tokens": (
        EngineConfig.anticipate_tokens,
        "anticipation: at most this many tokens of guessed user text",
    ),
    "sentence.min_chars": (SentenceRules.min_chars, "shorter first sentences are merged with the next"),
    "sentence.fallback_chars": (SentenceRules.fallback_chars, "unpunctuated replies are cut at a word boundary here"),
    "sentence.max_tokens": (SentenceRules.max_tokens, "at most this many tokens before a first sentence is forced"),
}


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
    """The engine's dotted parameters of `node` in a ROS 2 parameter YAML file."""
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
        int(p["model.gpu_layers"]),
        _server(p),
        p["model.server.fallback"],
    )


def _server(p: dict[str, Any]) -> ServerSettings | None:
    """The server a served backend names; None for a model in this process."""
    if p["model.backend"] not in ("sglang", "openai"):
        return None
    if not p["model.server.url"]:
        raise ConfigError(f"model.backend {p['model.backend']} needs model.server.url (http(s)://host:port)")
    try:
        return ServerSettings(
            p["model.server.url"],
            p["model.backend"],
            p["model.server.model"],
            bool(p["model.server.token_ids"]),
            float(p["model.server.timeout_s"]),
            int(p["model.server.top_k"]),
            p["model.server.api_key_env"],
            p["model.server.api_key_file"],
            p["model.server.ca_file"],
        )
    except ModelError as err:
        raise ConfigError(str(err)) from None
