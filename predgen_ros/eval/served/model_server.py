"""An inference server on this machine: llama-cpp-python's OpenAI-style server with a GGUF
(the embedded model by default), as `make serve-model`, the served tests and the fleet
measurements start it.

It scores prompt tokens (`echo` + `logprobs` with `logits_all`), takes prompts as text,
answers one request at a time and reuses its longest cached prefix: what the served
backend's `openai` API with `model.server.token_ids: false` speaks (engine/backends/served.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from ...engine.config import ModelError

N_CTX = 4096  # as the robot's own llama.cpp context (engine/backends/llama.py)


class ModelServer:
    """The server as a child process; `with ModelServer(...) as server:` gives `server.url`
    once it answers, and stops it after."""

    def __init__(
        self,
        gguf: Path,
        port: int,
        threads: int = 1,
        api_key: str | None = None,
        certificate: tuple[Path, Path] | None = None,
        log: Path | None = None,
    ):
        self.gguf, self.port, self.threads = gguf, port, threads
        self.api_key, self.certificate, self.log = api_key, certificate, log
        scheme = "https" if certificate else "http"
        self.url = f"{scheme}://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None

    def command(self) -> list[str]:
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(self.gguf), "--host", "127.0.0.1"]
        command += ["--port", str(self.port), "--n_ctx", str(N_CTX), "--n_threads", str(self.threads)]
        command += ["--n_threads_batch", str(self.threads), "--logits_all", "true", "--verbose", "false"]
        if self.api_key:
            command += ["--api_key", self.api_key]
        if self.certificate:
            command += ["--ssl_certfile", str(self.certificate[0]), "--ssl_keyfile", str(self.certificate[1])]
        return command

    def start(self, timeout_s: float = 120.0) -> ModelServer:
        try:
            import fastapi  # noqa: F401  the server's web stack, installed by `make venv`
        except ImportError:
            raise ModelError(
                "llama-cpp-python's server needs its web stack: run `make venv` (fastapi, uvicorn, sse-starlette)"
            ) from None
        output = open(self.log, "w") if self.log else subprocess.DEVNULL  # noqa: SIM115  the child writes it until stop()
        self.proc = subprocess.Popen(self.command(), stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + timeout_s
        while not self.answers():
            if self.proc.poll() is not None:
                raise ModelError(f"the model server exited with code {self.proc.returncode} at start (log: {self.log})")
            if time.time() > deadline:
                self.stop()
                raise ModelError(f"the model server did not answer on {self.url} within {timeout_s:g} s (log: {self.log})")
            time.sleep(0.2)
        return self

    def answers(self) -> bool:
        """GET /v1/models answered (the model is loaded)."""
        import ssl

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        context = ssl.create_default_context(cafile=str(self.certificate[0])) if self.certificate else None
        try:
            with urllib.request.urlopen(
                urllib.request.Request(f"{self.url}/v1/models", headers=headers), timeout=2, context=context
            ) as r:
                return bool(json.loads(r.read()).get("data"))
        except (OSError, ValueError):
            return False

    def kill(self) -> None:
        """As a crash would end it (the served tests' fault)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> ModelServer:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc) -> None:
        self.stop()
