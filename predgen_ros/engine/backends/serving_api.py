"""What PredGen asks of a serving engine, in each engine's own words.

A verification pass over `ids` appended to a sequence the server has seen (the robot's
cache holds only the token list; the server's prefix cache holds the states) needs, for
every position j, the model's top choices for the token after ids[j], the last of them
being the greedy continuation.  One request gives them all:

- SGLang's native `POST /generate` takes the token ids, `return_logprob`,
  `logprob_start_len` and `top_logprobs_num`: `meta_info.input_top_logprobs[i]` is the
  distribution that predicts the token at position `logprob_start_len + i` (None at
  position 0), as `[logprob, token_id, text]` triples, and `output_top_logprobs[0]`
  predicts the first generated token; the radix cache serves every position before
  `logprob_start_len` (`meta_info.cached_tokens`).  A stale request is dropped by its
  `rid` (`POST /abort_request`).
- OpenAI-style `POST /v1/completions` with `echo` and `logprobs` (vLLM;
  llama-cpp-python's server): `choices[0].logprobs.top_logprobs[i]` is a dict of token ->
  logprob for the prompt's tokens, then the generated one.  vLLM takes the prompt as
  token ids and names the tokens `token_id:N` with `return_tokens_as_token_ids`;
  llama-cpp-python takes text only and names them by their text, and without a
  beginning-of-sequence token its entry i predicts the token at i + 1 (its `echo` pairs
  each token with the row after it), with one the token at i.

Each dialect builds the request body and turns the response into `TopRows`: for each
position asked, {token id: logprob} of the top choices.
"""

from __future__ import annotations

from dataclasses import dataclass

TopRow = dict[int, float]


class ResponseError(ValueError):
    """A response without the fields the request asked for: the server is not the engine
    the configuration names, or an older version of it."""


@dataclass(frozen=True)
class Scored:
    rows: list[TopRow]  # one per id passed: the top choices for the token after it
    cached_tokens: int | None = None  # what the server's prefix cache served, where it says


def _triples(entries, where: str) -> TopRow:
    try:
        return {int(token): float(logprob) for logprob, token, *_ in entries}
    except (TypeError, ValueError) as err:
        raise ResponseError(f"{where}: expected [logprob, token_id, text] triples ({err})") from None


class SglangApi:
    """SGLang's native API."""

    path = "/generate"
    name = "sglang"

    def __init__(self, top_k: int):
        self.top_k = top_k

    def body(self, tokens: list[int], start: int, rid: str) -> dict:
        """Score `tokens[start:]` (start >= 1 unless the sequence is new): the rows from
        position `start` on are asked, and one greedy token after the last."""
        return {
            "input_ids": tokens,
            "sampling_params": {"temperature": 0.0, "max_new_tokens": 1},
            "return_logprob": True,
            "logprob_start_len": start,
            "top_logprobs_num": self.top_k,
            "rid": rid,
        }

    def parse(self, response: dict, tokens: list[int], start: int) -> Scored:
        meta = response.get("meta_info")
        if not isinstance(meta, dict) or "input_top_logprobs" not in meta or "output_top_logprobs" not in meta:
            raise ResponseError("SGLang /generate answered without meta_info.input_top_logprobs / output_top_logprobs")
        inputs, outputs = meta["input_top_logprobs"], meta["output_top_logprobs"]
        if len(inputs) != len(tokens) - start or not outputs:
            raise ResponseError(f"SGLang /generate: {len(inputs)} input rows for {len(tokens) - start} positions asked")
        # entry i predicts position start + i; the row after ids[j] is position start + j + 1
        rows = [_triples(entries, f"input_top_logprobs[{i}]") for i, entries in enumerate(inputs[1:], 1)]
        rows.append(_triples(outputs[0], "output_top_logprobs[0]"))
        return Scored(rows, meta.get("cached_tokens"))

    @staticmethod
    def abort_body(rid: str) -> tuple[str, dict]:
        return "/abort_request", {"rid": rid}


class OpenAiCompletionsApi:
    """`/v1/completions` with echo and logprobs.  `token_ids`: the prompt as ids and the
    answer's tokens as `token_id:N` (vLLM); else text both ways (llama-cpp-python), with
    `vocab` (token id -> its text) to map the answer back, `bos_id` the model's
    beginning-of-sequence token and `bos` whether the server puts one before the prompt."""

    path = "/v1/completions"
    name = "openai"

    def __init__(
        self,
        top_k: int,
        model: str,
        token_ids: bool,
        decode=None,
        vocab: dict[int, str] | None = None,
        bos_id: int | None = None,
    ):
        self.top_k, self.model, self.token_ids = top_k, model, token_ids
        self.decode, self.bos_id = decode, bos_id
        self.bos = False  # text: the server adds a BOS before the prompt (check_tokenizer finds out)
        self._ids_of: dict[str, list[int]] = {}
        for token, text in (vocab or {}).items():
            self._ids_of.setdefault(text, []).append(token)

    def body(self, tokens: list[int], start: int, rid: str) -> dict:
        """`echo` only when more than the next token's row is asked: llama-cpp-python's server
        ranks the whole vocabulary in Python for every echoed token (60-70 ms each here:
        docs/results/served.md), so a decoding step asks for the generated token's row alone."""
        body = {
            "model": self.model,
            "prompt": tokens if self.token_ids else self.decode(tokens),
            "max_tokens": 1,
            "temperature": 0.0,
            "echo": start < len(tokens) - 1,
            "logprobs": self.top_k,
        }
        if self.token_ids:
            body["return_tokens_as_token_ids"] = True
        return body

    def parse(self, response: dict, tokens: list[int], start: int) -> Scored:
        try:
            tops = response["choices"][0]["logprobs"]["top_logprobs"]
        except (KeyError, IndexError, TypeError):
            raise ResponseError("/v1/completions answered without choices[0].logprobs.top_logprobs (echo and logprobs)") from None
        bos = self.bos and not self.token_ids
        seen = (response.get("usage") or {}).get("prompt_tokens")
        if seen is not None and seen != len(tokens) + bos:
            raise ResponseError(
                f"/v1/completions read the prompt as {seen} tokens, the robot's tokenizer as {len(tokens) + bos}: "
                "the server runs another tokenizer (model.path must name the served model's)"
            )
        if start == len(tokens) - 1:  # no echo: the one entry is the generated token's, the row after the prompt
            if tops and tops[0] is not None:
                return Scored([self._row(tops[0])])
            return Scored([self._generated_bos()])
        rows_at = self._rows_by_position(tops, tokens)
        rows = []
        for position in range(start + 1, len(tokens) + 1):
            entry = rows_at.get(position)
            if entry is None and position == len(tokens):
                rows.append(self._generated_bos())
                continue
            rows.append(self._row(entry or {}))  # none at the first token or around a BOS: nothing reads those
        return Scored(rows)

    def _rows_by_position(self, tops: list, tokens: list[int]) -> dict[int, dict | None]:
        """Each entry's position in `tokens` (the position whose token it predicts).

        vLLM: entry p predicts token p.  llama-cpp-python pairs the prompt (with the BOS
        it adds, if it adds one) and the generated token with the rows of logits: a
        leading BOS is dropped from the pairs, each row predicts the token after the one
        it was computed at (so pair i's row predicts prompt position i + 1), and every pair
        whose token is the BOS id is left out (SmolLM2's BOS is its <|im_start|>, in the
        chat template three times)."""
        if self.token_ids:
            return dict(enumerate(tops))
        prompt = ([self.bos_id] if self.bos else []) + tokens
        paired = prompt[1:] if prompt[:1] == [self.bos_id] else prompt
        kept = [i for i, token in enumerate([*paired, None]) if token != self.bos_id]
        if len(kept) != len(tops):
            raise ResponseError(f"/v1/completions: {len(tops)} token rows for {len(kept)} tokens: the server tokenized otherwise")
        offset = 1 if self.bos else 0
        return {i + 1 - offset: entry for i, entry in zip(kept, tops)}

    def _generated_bos(self) -> TopRow:
        """The row after the prompt when the server left it out: llama-cpp-python leaves out
        a generated token whose id is the BOS (SmolLM2's <|im_start|>, the next message's
        start), so that token was the top choice; its runners-up are unknown."""
        if self.token_ids or self.bos_id is None:
            raise ResponseError("/v1/completions: no top_logprobs for the token after the prompt")
        return {self.bos_id: 0.0}

    def _row(self, entry: dict) -> TopRow:
        row: TopRow = {}
        for key, logprob in entry.items():
            for token in self._token_ids(key):
                row[token] = max(float(logprob), row.get(token, float("-inf")))
        return row

    def _token_ids(self, key: str) -> list[int]:
        if self.token_ids:
            if not key.startswith("token_id:"):
                raise ResponseError(f"/v1/completions named a token {key!r}, not token_id:N (return_tokens_as_token_ids)")
            return [int(key.removeprefix("token_id:"))]
        return self._ids_of.get(key, [])
