"""The llama.cpp backend: GGUF weights at the CPU's speed, through llama-cpp-python's
low-level API (pinned in the Makefile: its ctypes structs belong to one release).

Three facts of that API shape this file (DESIGN.md §10):
- only the positions flagged in `batch.logits` get logits, so every one is flagged
  (a verifier reads them all);
- llama.cpp aborts the process, it does not raise, on a batch over `n_batch` or a
  context over `n_ctx`: passes are split into N_BATCH pieces and the length is
  checked first;
- one context holds one sequence here; contexts are pooled, because making one
  allocates its whole KV buffer.
"""

from __future__ import annotations

import ctypes
import os
import threading
import weakref
from pathlib import Path

import numpy as np

from ..config import ModelError

# Tokens per llama_decode call.  Every position asks for logits, and a context keeps an
# output buffer for the most rows one call asked for (49,152 floats a row): with 512,
# llama.cpp's default, predgen_node grew 75 MB in a soak once prompts passed 512 tokens;
# 128 bounds it early, at the same prompt speed (docs/results/stress.md).
N_BATCH = 128
ALL_LAYERS = 999  # n_gpu_layers that offloads every layer of any model
N_CTX = 4096  # tokens per context: prompts stay under generation.history_tokens (1024) plus the reply

_LOG_LEVEL_ERROR = 4  # ggml_log_level: messages below it are dropped
_lib = None


def _llama():
    """llama_cpp, imported and initialised once, its chatter below errors silenced."""
    global _lib
    if _lib is None:
        try:
            import llama_cpp
        except ImportError as err:
            raise ModelError(
                f"the llama_cpp backend needs llama-cpp-python ({err}): run `make venv`, or set model.backend: transformers"
            ) from None

        @llama_cpp.llama_log_callback
        def quiet(level, text, _user):
            if level >= _LOG_LEVEL_ERROR:
                os.write(2, text)

        llama_cpp.llama_log_set(quiet, ctypes.c_void_p())
        llama_cpp.llama_backend_init()
        _lib = llama_cpp
        _lib._predgen_quiet = quiet  # the C side keeps only a pointer: hold the callback
    return _lib


def quantize(source: Path, target: Path, ftype: int) -> None:
    """Write `source` in llama_ftype `ftype` to `target` with llama.cpp's own quantizer
    (atomically: a crash mid-way never leaves a half file)."""
    lib = _llama()
    params = lib.llama_model_quantize_default_params()
    params.ftype, params.allow_requantize = ftype, True
    partial = target.with_name(target.name + ".partial")
    if lib.llama_model_quantize(str(source).encode(), str(partial).encode(), ctypes.byref(params)) != 0:
        raise ModelError(f"llama.cpp could not make {target.name} from {source}")
    partial.rename(target)


def default_threads() -> int:
    return len(os.sched_getaffinity(0))


def threads_beside_speech() -> int:
    """Threads for an LLM that shares the CPU with the ASR and the TTS: every core but one.

    llama.cpp's threads wait for each other after every layer, so one core taken by
    another process stalls them all: beside one busy core on a 2-core EPYC, F16 decoded
    24 tokens/s on 2 threads and 70 on 1 (docs/results/passes.md).
    """
    return max(1, default_threads() - 1)


class LlamaCache:
    """One llama.cpp context from the backend's pool and the tokens it holds."""

    def __init__(self, backend: LlamaCppBackend):
        self.backend = backend
        self.ctx = backend._take_context()
        self.length = 0
        weakref.finalize(self, backend._return_context, self.ctx)

    def __len__(self) -> int:
        return self.length

    def extend(self, ids: list[int]) -> np.ndarray:
        if self.length + len(ids) > N_CTX:
            raise ModelError(f"{self.length + len(ids)} tokens exceed the llama.cpp context of {N_CTX}")
        rows = [self.backend._decode(self.ctx, ids[i : i + N_BATCH], self.length + i) for i in range(0, len(ids), N_BATCH)]
        self.length += len(ids)
        return rows[0] if len(rows) == 1 else np.vstack(rows)

    def crop(self, length: int) -> None:
        if length >= self.length:
            return
        lib = self.backend.lib
        if not lib.llama_memory_seq_rm(lib.llama_get_memory(self.ctx), 0, length, -1):
            raise ModelError("llama.cpp could not crop its KV cache")
        self.length = length


class LlamaCppBackend:
    """A GGUF model in llama.cpp, `threads` threads for every pass."""

    name = "llama_cpp"
    context_length = N_CTX

    def __init__(self, gguf: Path, threads: int = 0, ubatch: int = N_BATCH, gpu_layers: int = -1):
        """`gpu_layers`: layers offloaded to the GPU, -1 all; none where this llama.cpp was
        built without GPU offload (the CPU wheel `make venv` builds)."""
        self.lib = lib = _llama()
        self.path = Path(gguf)
        self.threads = threads or default_threads()
        self.ubatch = ubatch
        self.gpu_layers = (ALL_LAYERS if gpu_layers < 0 else gpu_layers) if lib.llama_supports_gpu_offload() else 0
        params = lib.llama_model_default_params()
        params.n_gpu_layers = self.gpu_layers
        params.use_extra_bufts = False  # the AMX repack aborts on some Xeons (llama.cpp #20824)
        self.model = lib.llama_model_load_from_file(str(self.path).encode(), params)
        if not self.model:
            raise ModelError(f"llama.cpp cannot load {self.path}: is it a GGUF file of a supported architecture?")
        vocab = lib.llama_model_get_vocab(self.model)
        self.vocab_size = lib.llama_vocab_n_tokens(vocab)
        self.stop_ids = frozenset(t for t in (lib.llama_vocab_eos(vocab), lib.llama_vocab_eot(vocab)) if t >= 0)
        self._free: list = []
        self._lock = threading.Lock()  # caches die in any thread (garbage collection)
        self._decoding = threading.Lock()  # one batch buffer for every context
        self._batch = lib.llama_batch_init(N_BATCH, 0, 1)
        weakref.finalize(self, self._release, lib, self.model, self._batch, self._free)

    @staticmethod
    def _release(lib, model, batch, free) -> None:
        for ctx in free:
            lib.llama_free(ctx)
        lib.llama_batch_free(batch)
        lib.llama_model_free(model)

    def _take_context(self):
        with self._lock:
            if self._free:
                return self._free.pop()
        params = self.lib.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch = N_CTX, N_BATCH, self.ubatch
        params.n_threads = params.n_threads_batch = self.threads
        params.no_perf = True
        ctx = self.lib.llama_init_from_model(self.model, params)
        if not ctx:
            raise ModelError(f"llama.cpp cannot make a context of {N_CTX} tokens for {self.path.name} (out of memory?)")
        return ctx

    def _return_context(self, ctx) -> None:
        self.lib.llama_memory_clear(self.lib.llama_get_memory(ctx), True)
        with self._lock:
            self._free.append(ctx)

    def _decode(self, ctx, ids: list[int], start: int) -> np.ndarray:
        """One llama_decode of at most N_BATCH tokens from position `start`: logits of each."""
        batch, n = self._batch, len(ids)
        with self._decoding:
            for i, token in enumerate(ids):
                batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, start + i, 1
                batch.seq_id[i][0], batch.logits[i] = 0, 1
            batch.n_tokens = n
            status = self.lib.llama_decode(ctx, batch)
            if status != 0:
                raise ModelError(f"llama_decode failed with status {status} at position {start}")
            rows = self.lib.llama_get_logits(ctx)
            return np.ctypeslib.as_array(rows, shape=(n, self.vocab_size)).copy()

    def new_cache(self) -> LlamaCache:
        return LlamaCache(self)

    def metadata(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(1 << 16)
        size = self.lib.llama_model_meta_val_str(self.model, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", "replace") if size >= 0 else None

    def weight_bytes(self) -> int:
        return self.lib.llama_model_size(self.model)

    def describe(self) -> dict[str, str]:
        n_layers = self.lib.llama_model_n_layer(self.model)
        device = f"gpu ({min(self.gpu_layers, n_layers)} of {n_layers} layers)" if self.gpu_layers else "cpu"
        return {"backend": self.name, "device": device, "weights": self.path.name, "threads": str(self.threads)}
