"""The served backend: the weights on an inference server that several robots share.

predgen_node keeps PredGen (speculate, verify, commit); each forward pass of the engine
becomes one request (engine/backends/serving_api.py).  The robot's "cache" is the token
list the server has seen; the server's prefix cache holds the states, so a pass that
extends the sequence pays for its new tokens only (SGLang; llama-cpp-python's server
keeps its one longest prefix; vLLM recomputes prompts it is asked to score).

The server answers the top `top_k` choices at each position, not whole rows of logits:
the engine gets rows with those choices and -inf elsewhere.  The greedy choice (what the
exact verifier and the decoder read) is the same; the copy ban picks the best choice it
allows among the top k; the end-of-user probability is renormalized over the top k.
"""

from __future__ import annotations

import json
import os
import ssl
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..config import ModelError
from .serving_api import OpenAiCompletionsApi, ResponseError, Scored, SglangApi

APIS = ("sglang", "openai")


class ServerError(ModelError):
    """The server cannot be reached, did not answer in time, or answered an error."""


@dataclass(frozen=True)
class ServerSettings:
    url: str
    api: str = "sglang"  # sglang | openai
    model: str = ""  # the served model's name (openai: the request's `model`)
    token_ids: bool = True  # openai: the prompt as token ids (vLLM); false: as text (llama-cpp-python's server)
    timeout_s: float = 5.0  # a robot waits no longer for a pass: then the fallback
    top_k: int = 20
    api_key_env: str = ""  # the environment variable that holds the API key
    api_key_file: str = ""  # or a file that does (its first line)
    ca_file: str = ""  # https: the certificate authority to trust besides the system's

    def __post_init__(self):
        if self.api not in APIS:
            raise ModelError(f"model.server.api: unknown API {self.api!r} (choose one of {', '.join(APIS)})")
        if not self.url.startswith(("http://", "https://")):
            raise ModelError(f"model.server.url: {self.url!r} is no http:// or https:// address")
        if self.timeout_s <= 0 or self.top_k < 1:
            raise ModelError("model.server.timeout_s must be > 0 and model.server.top_k >= 1")


def read_api_key(settings: ServerSettings) -> str | None:
    """The API key from the environment variable or the file named, else None; the key
    itself never appears in an error or a log line."""
    if settings.api_key_env:
        key = os.environ.get(settings.api_key_env, "").strip()
        if not key:
            raise ModelError(f"model.server.api_key_env: the environment variable {settings.api_key_env} is empty or unset")
        return key
    if settings.api_key_file:
        path = Path(settings.api_key_file).expanduser()
        try:
            key = path.read_text().splitlines()[0].strip() if path.stat().st_size else ""
        except OSError as err:
            raise ModelError(f"model.server.api_key_file: cannot read {path} ({err.strerror})") from None
        if not key:
            raise ModelError(f"model.server.api_key_file: {path} holds no key on its first line")
        return key
    return None


class Transport:
    """JSON POSTs to one server, each bounded by the timeout; errors name the address and
    the reason in one line."""

    def __init__(self, settings: ServerSettings):
        self.base = settings.url.rstrip("/")
        self.timeout_s = settings.timeout_s
        self.sent_bytes = self.received_bytes = 0  # what crossed the network, bodies only
        self._headers = {"Content-Type": "application/json"}
        if (key := read_api_key(settings)) is not None:
            self._headers["Authorization"] = f"Bearer {key}"
        self._context = ssl.create_default_context(cafile=settings.ca_file or None) if self.base.startswith("https") else None

    def post(self, path: str, body: dict, timeout_s: float | None = None) -> dict:
        data = json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data, self._headers, method="POST")
        self.sent_bytes += len(data)
        try:
            with urllib.request.urlopen(request, timeout=timeout_s or self.timeout_s, context=self._context) as reply:
                answer = reply.read()
                self.received_bytes += len(answer)
                return json.loads(answer)
        except urllib.error.HTTPError as err:
            detail = err.read(300).decode("utf-8", "replace").strip().replace("\n", " ")
            raise ServerError(f"{self.base}{path}: HTTP {err.code} {err.reason}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
            reason = getattr(err, "reason", err)
            if isinstance(reason, TimeoutError):
                raise ServerError(f"{self.base}{path}: no answer within {timeout_s or self.timeout_s:g} s") from None
            raise ServerError(f"{self.base}{path}: unreachable ({reason})") from None
        except json.JSONDecodeError:
            raise ServerError(f"{self.base}{path}: the answer is not JSON") from None


class ServedCache:
    """The tokens the server has been sent for one sequence; each `extend` is one request."""

    def __init__(self, backend: ServedBackend):
        self.backend = backend
        self.tokens: list[int] = []

    def __len__(self) -> int:
        return len(self.tokens)

    def extend(self, ids: list[int]) -> np.ndarray:
        sequence = self.tokens + list(ids)
        scored = self.backend.score(sequence, len(self.tokens))
        self.tokens = sequence
        return self.backend.dense(scored)

    def crop(self, length: int) -> None:
        del self.tokens[length:]


@dataclass
class RequestLog:
    """What the server cost: each request's seconds and the tokens its cache served."""

    seconds: list[float] = field(default_factory=list)
    cached_tokens: list[int] = field(default_factory=list)


class ServedBackend:
    """A model on an inference server, seen through `tokenizer` (the served model's)."""

    def __init__(self, settings: ServerSettings, tokenizer, context_length: int = 4096):
        self.settings = settings
        self.name = settings.api
        self.context_length = context_length
        self.vocab_size = len(tokenizer)
        self.stop_ids = frozenset(t for t in [tokenizer.eos_token_id] if t is not None)
        self.transport = Transport(settings)
        self.log = RequestLog()
        if settings.api == "sglang":
            self.api = SglangApi(settings.top_k)
        else:
            vocab = None if settings.token_ids else token_texts(tokenizer)
            decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=False)  # noqa: E731
            self.api = OpenAiCompletionsApi(
                settings.top_k, settings.model, settings.token_ids, decode, vocab, tokenizer.bos_token_id
            )

    def score(self, sequence: list[int], start: int) -> Scored:
        """One request: the top choices after each token of `sequence[start:]`."""
        start_at = time.perf_counter()
        rid = uuid.uuid4().hex
        response = self.transport.post(self.api.path, self.api.body(sequence, start, rid))
        try:
            scored = self.api.parse(response, sequence, start)
        except ResponseError as err:
            raise ServerError(f"{self.transport.base}{self.api.path}: {err}") from None
        self.log.seconds.append(time.perf_counter() - start_at)
        if scored.cached_tokens is not None:
            self.log.cached_tokens.append(int(scored.cached_tokens))
        return scored

    def dense(self, scored: Scored) -> np.ndarray:
        """The engine's rows of logits: the top choices' log-probabilities, -inf elsewhere."""
        logits = np.full((len(scored.rows), self.vocab_size), -np.inf, dtype=np.float32)
        for i, row in enumerate(scored.rows):
            if row:
                logits[i, list(row)] = list(row.values())
        return logits

    def new_cache(self) -> ServedCache:
        return ServedCache(self)

    def check_tokenizer(self, tokenizer, probe: str) -> None:
        """One request at start-up: the server is reachable and reads token ids as the
        robot's tokenizer writes them (a ServerError says which is not so)."""
        ids = tokenizer(probe, add_special_tokens=False)["input_ids"]
        if self.name == "sglang":
            response = self.transport.post(
                self.api.path, {**self.api.body(ids, 1, uuid.uuid4().hex), "return_text_in_logprobs": True}
            )
            named = [
                (int(t), text)
                for entries in response.get("meta_info", {}).get("output_top_logprobs", [])
                for _, t, text in entries
            ]
        elif self.settings.token_ids:  # vLLM's /tokenize
            served = self.transport.post(
                "/tokenize", {"model": self.settings.model, "prompt": probe, "add_special_tokens": False}
            )
            named = [] if served.get("tokens") == ids else [(-1, f"{served.get('tokens')!r} for {ids!r}")]
        else:  # llama-cpp-python's server: the prompt goes as text, so its token count is checked on every request
            served = self.transport.post("/extras/tokenize", {"input": probe})["tokens"]
            self.api.bos = served[:1] == [tokenizer.bos_token_id] and served[1:] == ids
            named = [] if self.api.bos or served == ids else [(-1, f"{served!r} for {ids!r}")]
        wrong = [(t, text) for t, text in named if t < 0 or tokenizer.decode([t], skip_special_tokens=False) != text]
        if wrong:
            raise ServerError(
                f"{self.transport.base}: the server's tokenizer is not the robot's ({wrong[0][1]!r}): "
                "model.path must name the served model's tokenizer"
            )

    def describe(self) -> dict[str, str]:
        served = {"model": self.settings.model} if self.settings.model else {}
        return {"backend": self.name, "server": self.transport.base, **served, "top_k": str(self.settings.top_k)}


def token_texts(tokenizer) -> dict[int, str]:
    """Each token id's text as a server that names tokens by their text writes it."""
    return {token: tokenizer.decode([token], skip_special_tokens=False) for token in range(len(tokenizer))}
