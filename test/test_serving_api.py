"""The served backend's dialects against each engine's documented request and response
fields (SGLang's native /generate; OpenAI-style /v1/completions with echo and logprobs as
vLLM and llama-cpp-python's server answer it), its settings and its transport.  These
clients have not run against a live SGLang or vLLM here (docs/results/served.md)."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from predgen_ros.engine.backends.served import ServedBackend, ServerError, ServerSettings, Transport, read_api_key
from predgen_ros.engine.backends.serving_api import OpenAiCompletionsApi, ResponseError, SglangApi
from predgen_ros.engine.config import ModelError


def test_sglang_asks_for_the_rows_from_the_cached_length_on_in_one_request():
    body = SglangApi(top_k=5).body([11, 12, 13, 14], start=2, rid="r1")
    assert body == {
        "input_ids": [11, 12, 13, 14],
        "sampling_params": {"temperature": 0.0, "max_new_tokens": 1},
        "return_logprob": True,
        "logprob_start_len": 2,
        "top_logprobs_num": 5,
        "rid": "r1",
    }
    assert SglangApi.abort_body("r1") == ("/abort_request", {"rid": "r1"})


def test_sglang_rows_are_the_distributions_after_each_new_token():
    # tokens 11 12 | 13 14 sent, start 2: input_top_logprobs[i] predicts position 2 + i,
    # output_top_logprobs[0] the token after 14 ([logprob, token_id, text] triples)
    response = {
        "text": " x",
        "meta_info": {
            "input_top_logprobs": [[[-0.1, 13, None], [-2.5, 40, None]], [[-0.3, 14, None], [-1.5, 41, None]]],
            "output_top_logprobs": [[[-0.05, 99, None], [-3.0, 42, None]]],
            "cached_tokens": 2,
        },
    }
    scored = SglangApi(2).parse(response, [11, 12, 13, 14], start=2)
    assert scored.rows == [{14: -0.3, 41: -1.5}, {99: -0.05, 42: -3.0}]  # after 13, after 14
    assert scored.cached_tokens == 2
    with pytest.raises(ResponseError, match="input_top_logprobs"):
        SglangApi(2).parse({"text": ""}, [11, 12, 13, 14], start=2)
    with pytest.raises(ResponseError, match="1 input rows for 2 positions"):
        SglangApi(2).parse({"meta_info": {**response["meta_info"], "input_top_logprobs": [None]}}, [11, 12, 13, 14], 2)


def test_vllm_scores_token_ids_and_names_its_tokens_by_id():
    api = OpenAiCompletionsApi(top_k=2, model="qwen", token_ids=True)
    body = api.body([5, 6, 7], start=1, rid="r")
    assert body["prompt"] == [5, 6, 7] and body["echo"] is True and body["logprobs"] == 2 and body["max_tokens"] == 1
    assert body["return_tokens_as_token_ids"] is True and body["model"] == "qwen"
    response = {
        "choices": [
            {
                "text": "...",
                "logprobs": {
                    "tokens": ["token_id:5", "token_id:6", "token_id:7", "token_id:8"],
                    "token_logprobs": [None, -0.2, -0.4, -0.1],
                    "top_logprobs": [
                        None,
                        {"token_id:6": -0.2, "token_id:9": -2.0},
                        {"token_id:7": -0.4, "token_id:3": -1.2},
                        {"token_id:8": -0.1, "token_id:4": -2.6},
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }
    assert api.parse(response, [5, 6, 7], start=1).rows == [{7: -0.4, 3: -1.2}, {8: -0.1, 4: -2.6}]
    named = {"choices": [{"logprobs": {"top_logprobs": [None, {"six": -0.2}, {"seven": -1.0}, {"eight": -1.0}]}}]}
    with pytest.raises(ResponseError, match="token_id:N"):
        api.parse(named, [5, 6, 7], start=1)


def test_llama_cpp_python_scores_text_and_leaves_out_the_rows_of_its_bos_id():
    # SmolLM2's BOS id is its <|im_start|>: llama-cpp-python drops a leading one from the
    # pairs of token and row, pairs each row with the token it predicts, leaves out every
    # pair whose token is the BOS id, blanks the first, and names tokens by their text
    vocab = {1: "<|im_start|>", 5: "user", 6: " hi", 7: "assistant", 8: " Hello", 9: " Hi"}
    api = OpenAiCompletionsApi(2, "", token_ids=False, decode=lambda ids: "".join(vocab[i] for i in ids), vocab=vocab, bos_id=1)
    tokens = [1, 5, 6, 1, 7]
    assert api.body(tokens, 3, "r")["prompt"] == "<|im_start|>user hi<|im_start|>assistant"
    response = {
        "choices": [{"logprobs": {"top_logprobs": [None, {" hi": -0.5}, {"assistant": -0.1}, {" Hello": -0.4, " Hi": -1.1}]}}],
        "usage": {"prompt_tokens": 5},
    }
    assert api.parse(response, tokens, start=3).rows == [{7: -0.1}, {8: -0.4, 9: -1.1}]  # after the 2nd BOS, after 7
    with pytest.raises(ResponseError, match="another tokenizer"):
        api.parse({**response, "usage": {"prompt_tokens": 6}}, tokens, start=3)
    with pytest.raises(ResponseError, match="tokenized otherwise"):
        api.parse({**response, "choices": [{"logprobs": {"top_logprobs": [None, {}, {}]}}]}, tokens, start=3)
    api.bos = True  # a server that puts its own BOS first: the prompt's positions move by one
    added = {"choices": [{"logprobs": {"top_logprobs": [None, {" hi": -0.5}, {"assistant": -0.1}, {" Hi": -0.3}]}}]}
    assert api.parse(added, tokens, start=3).rows == [{7: -0.1}, {9: -0.3}]


def test_a_served_backend_gives_the_engine_rows_with_the_top_choices_and_minus_infinity_elsewhere():
    class Tokenizer:
        eos_token_id = 2

        def __len__(self):
            return 10

    backend = ServedBackend(ServerSettings("http://127.0.0.1:9"), Tokenizer())
    logits = backend.dense(SglangApi(2).parse(
        {"meta_info": {"input_top_logprobs": [None, [[-0.1, 3, None]]], "output_top_logprobs": [[[-0.2, 4, None], [-1.0, 5, None]]]}},
        [1, 3], start=0,
    ))  # fmt: skip
    assert logits.shape == (2, 10) and logits.dtype == np.float32
    assert logits.argmax(axis=1).tolist() == [3, 4] and logits[1, 5] == np.float32(-1.0) and np.isneginf(logits[0, 4])
    assert backend.describe() == {"backend": "sglang", "server": "http://127.0.0.1:9", "top_k": "20"}


def test_server_settings_say_what_is_wrong():
    with pytest.raises(ModelError, match="unknown API 'tgi'"):
        ServerSettings("http://gpu:30000", api="tgi")
    with pytest.raises(ModelError, match="no http:// or https:// address"):
        ServerSettings("gpu:30000")


def test_the_api_key_comes_from_the_environment_or_a_file_and_no_error_shows_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PREDGEN_TEST_KEY", " s3cret \n")
    assert read_api_key(ServerSettings("https://gpu", api_key_env="PREDGEN_TEST_KEY")) == "s3cret"
    key_file = tmp_path / "key"
    key_file.write_text("filekey\nignored\n")
    assert read_api_key(ServerSettings("https://gpu", api_key_file=str(key_file))) == "filekey"
    assert read_api_key(ServerSettings("https://gpu")) is None
    monkeypatch.setenv("PREDGEN_TEST_KEY", "")
    with pytest.raises(ModelError, match="PREDGEN_TEST_KEY is empty or unset"):
        read_api_key(ServerSettings("https://gpu", api_key_env="PREDGEN_TEST_KEY"))
    with pytest.raises(ModelError, match="cannot read"):
        read_api_key(ServerSettings("https://gpu", api_key_file=str(tmp_path / "missing")))


def test_an_unreachable_server_is_one_line_naming_the_address():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ServerError) as err:
        Transport(ServerSettings(f"http://127.0.0.1:{port}", timeout_s=2)).post("/generate", {})
    assert f"http://127.0.0.1:{port}/generate: unreachable" in str(err.value) and "\n" not in str(err.value)


def test_a_decoding_step_asks_for_the_next_tokens_row_alone_without_echo():
    api = OpenAiCompletionsApi(top_k=2, model="", token_ids=True)
    assert api.body([5, 6, 7], start=2, rid="r")["echo"] is False  # one new token: its row is the generated one's
    response = {
        "choices": [{"logprobs": {"top_logprobs": [{"token_id:8": -0.1, "token_id:4": -2.6}]}}],
        "usage": {"prompt_tokens": 3},
    }
    assert api.parse(response, [5, 6, 7], start=2).rows == [{8: -0.1, 4: -2.6}]


def test_a_generated_bos_id_that_llama_cpp_python_leaves_out_is_the_top_choice():
    vocab = {1: "<|im_start|>", 2: "<|im_end|>", 5: "hi"}
    api = OpenAiCompletionsApi(2, "", token_ids=False, decode=lambda ids: "".join(vocab[i] for i in ids), vocab=vocab, bos_id=1)
    left_out = {"choices": [{"logprobs": {"top_logprobs": []}}], "usage": {"prompt_tokens": 3}}
    assert api.parse(left_out, [1, 5, 2], start=2).rows == [{1: 0.0}]  # after <|im_end|>: the next message's start
