"""The model behind the engine: a backend owns the KV state, the engine owns the text.

The engine relies on one contract, whatever runs the weights:

- `Backend.new_cache()` gives an empty `KVCache` for one sequence;
- `KVCache.extend(ids)` runs ONE forward pass over `ids` appended to what the cache
  holds and returns float32 logits [len(ids), vocab] as a numpy array (row j
  predicts the token after ids[j]), every row, so a verifier reads them all;
- `KVCache.crop(length)` forgets every token from `length` on;
- `len(cache)` is the number of tokens it holds.

Logits are numpy so that verify.py, decode.py and copy_ban.py need no torch: a
backend without torch (llama.cpp) runs the whole engine without it.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class KVCache(Protocol):
    def __len__(self) -> int: ...

    def extend(self, ids: list[int]) -> np.ndarray: ...

    def crop(self, length: int) -> None: ...


class Backend(Protocol):
    name: str  # "transformers" | "llama_cpp"
    context_length: int  # the most tokens one cache may hold
    stop_ids: frozenset[int]  # end-of-sequence tokens the weights declare

    def new_cache(self) -> KVCache: ...

    def describe(self) -> dict[str, str]: ...
