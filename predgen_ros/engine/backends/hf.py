"""The transformers backend: Hugging Face folders, CUDA, and exact float64 tests."""

from __future__ import annotations

import numpy as np
import torch
from transformers import DynamicCache


class TransformersCache:
    """A DynamicCache and the number of tokens in it."""

    def __init__(self, backend: TransformersBackend):
        self.backend = backend
        self.kv = DynamicCache()

    def __len__(self) -> int:
        return self.kv.get_seq_length()

    @torch.inference_mode()
    def extend(self, ids: list[int]) -> np.ndarray:
        past = len(self)
        device = self.backend.device
        inputs = torch.tensor([ids], device=device)
        positions = torch.arange(past, past + len(ids), device=device).unsqueeze(0)
        out = self.backend.model(input_ids=inputs, past_key_values=self.kv, position_ids=positions, use_cache=True)
        return out.logits[0].float().cpu().numpy()  # .cpu() waits for CUDA: the pass is done

    def crop(self, length: int) -> None:
        drop = len(self) - length
        if drop <= 0:
            return
        if length == 0:
            self.kv = DynamicCache()
        else:
            self.kv.crop(-drop)  # transformers 5: the number of tokens to REMOVE, negative


class TransformersBackend:
    """A transformers causal LM in eval mode, on whichever device it sits."""

    name = "transformers"

    def __init__(self, model):
        self.model = model
        self.device = next(model.parameters()).device
        self.context_length = getattr(model.config, "max_position_embeddings", None) or 2048
        ids = model.generation_config.eos_token_id
        self.stop_ids = frozenset([ids] if isinstance(ids, int) else list(ids or []))

    def new_cache(self) -> TransformersCache:
        return TransformersCache(self)

    def describe(self) -> dict[str, str]:
        return {"backend": self.name, "device": str(self.device), "dtype": str(self.model.dtype).removeprefix("torch.")}
