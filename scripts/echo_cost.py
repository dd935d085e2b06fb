"""What scoring prompt tokens costs on llama-cpp-python's server: one /v1/completions
request with `echo` and 20 logprobs against one without echo, for prompts of 20, 80 and
160 tokens.  The server is started here (the embedded model, F16, one thread).

    python scripts/echo_cost.py [PORT]
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request

from predgen_ros.engine.models import embedded_gguf
from predgen_ros.eval.served.model_server import ModelServer


def seconds(url: str, words: int, echo: bool) -> tuple[int, float]:
    body = {"prompt": " ".join(["robot"] * words), "max_tokens": 1, "temperature": 0, "echo": echo, "logprobs": 20}
    request = urllib.request.Request(f"{url}/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=600) as reply:
        tokens = json.loads(reply.read())["usage"]["prompt_tokens"]
    return tokens, time.perf_counter() - start


def main(port: int = 8089) -> int:
    with ModelServer(embedded_gguf("f16"), port) as server:
        for words in (20, 80, 160):
            for echo in (True, False):
                tokens, took = seconds(server.url, words, echo)
                print(f"{tokens:4d} prompt tokens, {'echo + logprobs' if echo else 'no echo       '}: {took:6.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:])))
