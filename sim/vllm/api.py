"""The HTTP API of the SIMULATED vLLM server, in the shapes of `vllm serve` (vLLM's OpenAI-compatible
server, vllm/entrypoints/openai/): /health, /version, /v1/models, /tokenize, /v1/completions,
/v1/chat/completions (plain and streamed) and /metrics, with vLLM's error bodies and status codes."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import time
from collections.abc import Generator
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol

from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from sim.vllm.metrics import EngineMetrics
from sim.vllm.model import HTTPError
from sim.vllm.tokens import BOS_TOKENS, count_chat_tokens, count_text_tokens

log = logging.getLogger(__name__)


class Aborted(Exception):
    """The client went away in the middle of a response."""


def error_body(config: dict[str, Any], status: int, message: str, kind: str) -> dict[str, Any]:
    """A vLLM error body in the configured shape ("nested" or "flat")."""
    if config["error_shape"] == "flat":
        return {"object": "error", "message": message, "type": kind, "param": None, "code": status}
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}


def openai_usage(prompt: int, completion: int) -> dict[str, Any]:
    """An OpenAI `usage` object."""
    return {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": None,
    }


def _kind(status: int) -> str:
    """The `type` vLLM puts in an error body for a status."""
    return {
        400: "BadRequestError",
        401: "AuthenticationError",
        403: "PermissionDeniedError",
        404: "NotFoundError",
        429: "RateLimitError",
    }.get(status, "InternalServerError" if status >= 500 else "Error")


class Engine(Protocol):
    """What the HTTP layer needs of the simulated server (`sim.vllm.server.VllmSimulator`)."""

    config: dict[str, Any]
    metrics: EngineMetrics

    @property
    def mode(self) -> str: ...
    def connection_opened(self, connection: socket.socket) -> None: ...
    def connection_closed(self, connection: socket.socket) -> None: ...
    def delay(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...
    def injected_failure(self, path: str) -> int | None: ...
    def model_list(self) -> dict[str, Any]: ...
    def process_metrics(self) -> bytes: ...
    def serve_background(self) -> None: ...
    def prepare_chat(self, body: Any) -> dict[str, Any]: ...
    def generate(self, plan: dict[str, Any], started: float) -> Generator[tuple[str, float], None, None]: ...


def make_handler(sim: Engine) -> type[BaseHTTPRequestHandler]:
    """The HTTP request handler class serving `sim` (one class per simulator, for ThreadingHTTPServer)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "uvicorn"
        sys_version = ""

        def setup(self) -> None:
            super().setup()
            sim.connection_opened(self.connection)

        def finish(self) -> None:
            sim.connection_closed(self.connection)
            with contextlib.suppress(OSError):
                super().finish()

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("vllm-sim %s " + format, self.address_string(), *args)

        # -- plumbing --

        def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, status: int, obj: Any) -> None:
            self._send(status, json.dumps(obj).encode())

        def _error(self, status: int, message: str, kind: str) -> None:
            self._json(status, error_body(sim.config, status, message, kind))

        def _read_body(self) -> Any:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                return json.loads(raw or b"null")
            except ValueError as exc:
                raise HTTPError(400, f"invalid JSON body: {exc}", "BadRequestError") from exc

        def _chunk(self, data: bytes) -> None:
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            except OSError as exc:
                raise Aborted from exc

        def _dispatch(self, method: str) -> None:
            path = self.path.split("?", 1)[0]
            started = time.monotonic()
            body: Any = None
            if method == "POST":
                try:
                    body = self._read_body()
                except HTTPError as exc:
                    body = exc
            sim.sleep(sim.delay())
            try:
                failure = sim.injected_failure(path)
                if failure is not None:
                    if path == "/health":
                        self._send(failure, b"")
                    else:
                        self._error(failure, f"simulated failure (HTTP {failure})", _kind(failure))
                    return
                key = sim.config.get("api_key")
                if key and path.startswith("/v1") and self.headers.get("authorization") != f"Bearer {key}":
                    self._json(401, {"error": "Unauthorized"})
                    return
                routes = {
                    ("GET", "/health"): self._health,
                    ("GET", "/version"): lambda: self._json(200, {"version": str(sim.config["version"])}),
                    ("GET", "/v1/models"): lambda: self._json(200, sim.model_list()),
                    ("GET", "/metrics"): self._metrics,
                    ("POST", "/v1/chat/completions"): lambda: self._chat(body, started),
                    ("POST", "/tokenize"): lambda: self._tokenize(body),
                }
                handler = routes.get((method, path))
                if handler is not None:
                    handler()
                elif any(p == path for _, p in routes):
                    self._json(405, {"detail": "Method Not Allowed"})
                else:
                    self._json(404, {"detail": "Not Found"})
            except HTTPError as exc:
                self._error(exc.status, exc.message, exc.kind)
            except (Aborted, BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def do_GET(self) -> None:
            self._dispatch("GET")

        def do_POST(self) -> None:
            self._dispatch("POST")

        # -- endpoints --

        def _health(self) -> None:
            self._send(503 if sim.mode == "engine-dead" else 200, b"")

        def _tokenize(self, body: Any) -> None:
            """vLLM's `POST /tokenize` (vllm/entrypoints/openai/protocol.py: TokenizeCompletionRequest with
            `prompt`, TokenizeChatRequest with `messages`, `tools`, `add_generation_prompt`; the answer is
            TokenizeResponse `{count, max_model_len, tokens, token_strs}`). The token ids are made up."""
            if isinstance(body, HTTPError):
                raise body
            if not isinstance(body, dict) or not ("prompt" in body or isinstance(body.get("messages"), list)):
                raise HTTPError(400, "either prompt or messages is required", "BadRequestError")
            if "prompt" in body:
                count = BOS_TOKENS + count_text_tokens(str(body["prompt"]))
            else:
                count = count_chat_tokens(
                    body["messages"],
                    body.get("tools"),
                    add_generation_prompt=bool(body.get("add_generation_prompt", True)),
                )
            self._json(
                200,
                {
                    "count": count,
                    "max_model_len": int(sim.config["max_model_len"]),
                    "tokens": list(range(count)),
                    "token_strs": None,
                },
            )

        def _metrics(self) -> None:
            sim.serve_background()
            self._send(
                200, sim.process_metrics() + generate_latest(sim.metrics.registry), CONTENT_TYPE_PLAIN_0_0_4
            )

        def _chat(self, body: Any, started: float) -> None:
            if isinstance(body, HTTPError):
                raise body
            plan = sim.prepare_chat(body)
            if plan["stream"]:
                self._chat_stream(plan, started)
                return
            text = "".join(token for token, _ in sim.generate(plan, started))
            completion = len(plan["tokens"])
            tool_call = plan["tool_call"]
            self._json(
                200,
                {
                    "id": plan["id"],
                    "object": "chat.completion",
                    "created": plan["created"],
                    "model": plan["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {
                                "role": "assistant",
                                "content": None if tool_call else text,
                                "refusal": None,
                                "annotations": None,
                                "audio": None,
                                "function_call": None,
                                "tool_calls": [tool_call] if tool_call else [],
                                "reasoning_content": None,
                            },
                            "logprobs": None,
                            "finish_reason": "tool_calls" if tool_call else plan["finish"],
                            "stop_reason": None,
                            "token_ids": None,
                        }
                    ],
                    "service_tier": None,
                    "system_fingerprint": None,
                    "usage": openai_usage(plan["prompt"], completion),
                    "prompt_logprobs": None,
                    "prompt_token_ids": None,
                    "kv_transfer_params": None,
                },
            )

        def _chat_stream(self, plan: dict[str, Any], started: float) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream; charset=utf-8")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            emitted = 0

            def event(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> None:
                chunk: dict[str, Any] = {
                    "id": plan["id"],
                    "object": "chat.completion.chunk",
                    "created": plan["created"],
                    "model": plan["model"],
                    "choices": choices,
                }
                if usage is not None:
                    chunk["usage"] = usage
                elif plan["continuous_usage"]:
                    chunk["usage"] = openai_usage(plan["prompt"], emitted)
                self._chunk(b"data: " + json.dumps(chunk).encode() + b"\n\n")

            def choice(delta: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
                return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]

            event(choice({"role": "assistant", "content": ""}))
            generator = sim.generate(plan, started)
            tool_call = plan["tool_call"]
            try:
                for token, _ in generator:
                    emitted += 1
                    if tool_call:  # the whole call in one delta (vLLM streams argument fragments)
                        event(choice({"tool_calls": [{"index": 0, **tool_call}]}))
                    else:
                        event(choice({"content": token}))
            finally:
                generator.close()
            event(choice({"content": ""}, "tool_calls" if tool_call else plan["finish"]))
            if plan["include_usage"]:
                event([], openai_usage(plan["prompt"], emitted))
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")

    return Handler
