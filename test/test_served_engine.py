"""The served backend against a real inference server: llama-cpp-python's server with the
embedded model (F16, as the robot's own), started here; its key, https, its death mid-
sequence with the local model behind it, and a turn told when nothing stands behind it."""

from __future__ import annotations

import socket
import subprocess

import numpy as np
import pytest

from predgen_ros.engine.backends.fallback import FallbackBackend
from predgen_ros.engine.backends.llama import LlamaCppBackend
from predgen_ros.engine.backends.served import ServedBackend, ServerError, ServerSettings
from predgen_ros.engine.models import SERVED_PROBE, embedded_gguf
from predgen_ros.eval.served.model_server import ModelServer

pytestmark = pytest.mark.e2e  # the real model, in a server process


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("server") / "server.log"
    with ModelServer(embedded_gguf("f16"), free_port(), log=log) as running:
        yield running


def served(server, tokenizer, **settings) -> ServedBackend:
    backend = ServedBackend(ServerSettings(server.url, api="openai", token_ids=False, **settings), tokenizer)
    backend.check_tokenizer(tokenizer, SERVED_PROBE)
    return backend


def prompt(tokenizer) -> list[int]:
    messages = [{"role": "user", "content": "Please bring me a glass of water from the kitchen."}]
    return tokenizer(
        tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True), add_special_tokens=False
    )["input_ids"]


def greedy(backend, ids: list[int], tokens: int) -> list[int]:
    """`tokens` greedy tokens after `ids`, one pass each, from a fresh cache."""
    cache, out = backend.new_cache(), []
    logits = cache.extend(ids)
    for _ in range(tokens):
        out.append(int(logits[-1].argmax()))
        logits = cache.extend(out[-1:])
    return out


def test_the_served_model_decodes_what_the_robots_own_decodes(server, tokenizer):
    remote, local = served(server, tokenizer), LlamaCppBackend(embedded_gguf("f16"), threads=1)
    ids = prompt(tokenizer)
    assert greedy(remote, ids, 16) == greedy(local, ids, 16)
    assert len(remote.log.seconds) == 17  # one request a pass


def test_a_verification_pass_gives_the_top_choice_after_every_candidate_token(server, tokenizer):
    remote, local = served(server, tokenizer), LlamaCppBackend(embedded_gguf("f16"), threads=1)
    ids = prompt(tokenizer)
    candidate = greedy(local, ids, 8)
    rows = []
    for backend in (remote, local):
        cache = backend.new_cache()
        cache.extend(ids)
        rows.append(cache.extend(candidate).argmax(axis=1))  # one pass over the whole candidate
    assert np.array_equal(rows[0], rows[1])
    assert rows[0][:-1].tolist() == candidate[1:]  # the candidate verifies itself, token for token


def test_a_server_with_a_key_refuses_a_robot_without_it_and_never_shows_it(tokenizer, tmp_path, monkeypatch):
    with ModelServer(embedded_gguf("f16"), free_port(), api_key="k-123", log=tmp_path / "log") as keyed:
        with pytest.raises(ServerError) as refused:
            served(keyed, tokenizer)
        assert "HTTP 401" in str(refused.value) and "k-123" not in str(refused.value)
        monkeypatch.setenv("PREDGEN_TEST_SERVER_KEY", "k-123")
        assert greedy(served(keyed, tokenizer, api_key_env="PREDGEN_TEST_SERVER_KEY"), prompt(tokenizer), 2)


def test_https_with_the_servers_own_certificate_authority(tokenizer, tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    with ModelServer(embedded_gguf("f16"), free_port(), certificate=(cert, key), log=tmp_path / "log") as secure:
        assert secure.url.startswith("https://")
        with pytest.raises(ServerError, match="CERTIFICATE_VERIFY_FAILED"):
            served(secure, tokenizer)  # the system's authorities do not know it
        assert greedy(served(secure, tokenizer, ca_file=str(cert)), prompt(tokenizer), 2)


def test_a_server_killed_mid_sequence_hands_the_sequence_to_the_local_model(tokenizer, tmp_path):
    local = LlamaCppBackend(embedded_gguf("f16"), threads=1)
    ids = prompt(tokenizer)
    expected = greedy(local, ids, 12)
    with ModelServer(embedded_gguf("f16"), free_port(), log=tmp_path / "log") as dying:
        backend = FallbackBackend(served(dying, tokenizer, timeout_s=5), local)
        cache, out = backend.new_cache(), []
        logits = cache.extend(ids)
        for step in range(12):
            if step == 5:
                dying.kill()
            out.append(int(logits[-1].argmax()))
            logits = cache.extend(out[-1:])
    assert out == expected and backend.failures == 1
    assert not backend.server_usable()  # new sequences stay local for a while


def test_a_frozen_server_is_a_timeout_not_a_hang(tokenizer, tmp_path):
    import os
    import signal

    with ModelServer(embedded_gguf("f16"), free_port(), log=tmp_path / "log") as frozen:
        backend = served(frozen, tokenizer, timeout_s=1.5)
        os.kill(frozen.proc.pid, signal.SIGSTOP)
        try:
            with pytest.raises(ServerError, match="no answer within 1.5 s"):
                backend.new_cache().extend(prompt(tokenizer))
        finally:
            os.kill(frozen.proc.pid, signal.SIGCONT)
