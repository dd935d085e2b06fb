"""The llama.cpp backend keeps the engine's contract: every row's logits, crops that
forget, long passes split into batches, and errors where llama.cpp would abort."""

import numpy as np
import pytest

from predgen_ros.engine.backends import llama
from predgen_ros.engine.config import ModelError
from predgen_ros.engine.models import embedded_gguf, gguf_tokenizer, load_language_model, pick_backend
from predgen_ros.engine.params import ModelParams

pytestmark = pytest.mark.e2e  # the real weights


@pytest.fixture(scope="module")
def backend():
    return llama.LlamaCppBackend(embedded_gguf("f16"), threads=2)


def test_every_row_of_a_pass_has_logits_that_predict_the_next_token(backend):
    ids = [1, 9690, 198, 2683, 359, 253, 5356, 30, 2]
    cache = backend.new_cache()
    rows = cache.extend(ids)
    assert rows.shape == (len(ids), backend.vocab_size) and rows.dtype == np.float32
    assert np.isfinite(rows).all() and len(cache) == len(ids)
    one_by_one = backend.new_cache()
    for j, token in enumerate(ids):
        row = one_by_one.extend([token])[0]
        assert int(row.argmax()) == int(rows[j].argmax()) or np.sort(rows[j])[-1] - np.sort(rows[j])[-2] < 0.01


def test_a_crop_forgets_what_followed(backend):
    cache = backend.new_cache()
    cache.extend([1, 9690, 198, 2683])
    cache.extend([359, 253, 5356])
    cache.crop(3)
    assert len(cache) == 3
    fresh = backend.new_cache()
    fresh.extend([1, 9690, 198, 2683])
    fresh.crop(3)  # the same passes, so the same rounding
    np.testing.assert_array_equal(cache.extend([2683]), fresh.extend([2683]))


def test_a_prefill_longer_than_a_batch_is_split_not_aborted(backend):
    ids = ([1, 9690, 198] * 300)[: llama.N_BATCH + 40]
    cache = backend.new_cache()
    rows = cache.extend(ids)
    assert rows.shape[0] == len(ids) and len(cache) == len(ids)


def test_a_sequence_past_the_context_raises_instead_of_aborting(backend):
    cache = backend.new_cache()
    cache.extend([1] * 8)
    with pytest.raises(ModelError, match="exceed the llama.cpp context"):
        cache.extend([198] * llama.N_CTX)
    assert len(cache) == 8  # nothing was decoded


def test_a_released_context_returns_to_the_pool_empty(backend):
    cache = backend.new_cache()
    cache.extend([1, 9690, 198])
    ctx = cache.ctx
    del cache
    reused = backend.new_cache()
    assert reused.ctx == ctx and len(reused) == 0
    fresh = llama.LlamaCppBackend(embedded_gguf("f16"), threads=2).new_cache()
    np.testing.assert_allclose(reused.extend([1, 9690])[-1], fresh.extend([1, 9690])[-1], rtol=1e-4, atol=1e-4)


def test_the_chat_template_and_stop_tokens_come_from_the_gguf(backend):
    tokenizer = gguf_tokenizer(embedded_gguf("f16"))
    assert "im_start" in tokenizer.chat_template
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in backend.stop_ids
    assert "smollm2" in (backend.metadata("general.name") or "").lower()


def test_the_default_backend_is_llama_cpp_on_a_cpu_and_transformers_for_a_folder(tmp_path):
    assert pick_backend("auto", "cpu", None) == "llama_cpp"
    assert pick_backend("auto", "auto", "/models/x.gguf") == "llama_cpp"
    assert pick_backend("auto", "cpu", str(tmp_path)) == "transformers"
    assert pick_backend("transformers", "cpu", None) == "transformers"


def test_a_file_that_is_no_gguf_is_named(tmp_path):
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"not a gguf")
    with pytest.raises(ModelError, match="model.gguf"):
        load_language_model(ModelParams(str(bogus), backend="llama_cpp"))
    with pytest.raises(ModelError, match="not found"):
        load_language_model(ModelParams(str(tmp_path / "missing.gguf")))
