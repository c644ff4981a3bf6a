"""The SIMULATED vLLM server (`VllmSimulator`): its state, modes and controls, request validation and the
canned generation (see the package docstring of `sim.vllm`)."""

from __future__ import annotations

import contextlib
import fnmatch
import itertools
import random
import re
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Generator
from datetime import UTC, datetime
from typing import Any

from sim.http_server import SimHttpServer
from sim.vllm.api import make_handler
from sim.vllm.metrics import EngineMetrics
from sim.vllm.model import (
    CANNED,
    ENGINE_DEAD_MESSAGE,
    HTTPError,
    gemma_markup,
    plan_tools,
    scripted_turn,
    tool_result_answer,
)
from sim.vllm.tokens import content_text, count_chat_tokens

DEFAULTS: dict[str, Any] = {
    "model": "google/gemma-4-31B-it",
    "max_model_len": 16384,
    "version": "0.19.1",
    "latency_s": 0.02,
    "itl_s": 0.01,
    "slow_latency_s": 2.0,
    "api_key": None,
    "error_shape": "nested",
    "served_requests": 300,
    "prefix_cache_hit_rate": 0.6,
    "background_rps": 0.0,
    "block_size": 16,
    "num_gpu_blocks": 16384,
    "boot_s": 3.0,
    "tool_calling": True,
    "keep_alive_on_engine_death": False,
    "engine_death_exit_s": 5.0,
}

# The "runaway" output fault: 2 MB in 4 KB pieces (one streamed chunk each).
RUNAWAY_CHARS = 2_000_000
RUNAWAY_PIECE = 4_000

MODES = ("ready", "engine-dead", "slow", "booting", "wedged")


class VllmSimulator:
    """A simulated vLLM server on a local port. Everything it says is made up (see `sim.vllm`).

    Args:
        scenario_vllm: the scenario's `vllm` mapping (keys in the docstring of `sim.vllm`; missing keys take
            DEFAULTS).
        host: address to bind.
        port: port to bind; 0 picks a free one (read it back from `url`).
        clock: the time the background traffic (`background_rps`) follows, an aware UTC datetime; the demo
            gives the simulated clock. Defaults to the wall clock.
    """

    def __init__(
        self,
        scenario_vllm: dict[str, Any],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.config: dict[str, Any] = {**DEFAULTS, **(scenario_vllm or {})}
        self.host = host
        self._port = port
        self._lock = threading.Lock()
        self._mode = "ready"
        self._latency_s = float(self.config["latency_s"])
        self._reported_latency_s = 0.0
        self._failures: list[list[Any]] = []  # [pattern, status, remaining]
        self._running = 0
        self._running_tokens: dict[int, int] = {}  # tokens each running request holds in the KV cache
        self._served = 0
        self._prefix_blocks: set[int] = set()
        self._stopping = threading.Event()
        self._output_fault: str | None = None
        self._script: deque[dict[str, Any]] = deque()  # scripted turns, see `script_chat`
        self._unwedged = threading.Event()  # set unless in mode "wedged": wedged requests wait on it
        self._unwedged.set()
        self._released = threading.Event()  # cleared by `hold_chats`: chat completions wait on it
        self._released.set()
        self._connections: set[socket.socket] = set()
        self._server: SimHttpServer | None = None
        self._thread: threading.Thread | None = None
        self._created = int(time.time())
        # When the API server process started: prometheus_client's process collector exposes it as
        # `process_start_time_seconds` in vLLM's /metrics (the default registry, one API server).
        self.process_started = datetime.now(UTC)
        self._boot_timer: threading.Timer | None = None
        self._exit_timer: threading.Timer | None = None
        self.exited = False  # the API server stopped after the engine died
        self.on_exit: list[Any] = []  # callables run when the API server stops after engine death
        # bodies of the last 1,000 chat requests received, oldest first (what a test checks the bot sent)
        self.chat_requests: deque[dict[str, Any]] = deque(maxlen=1000)
        self.metrics = EngineMetrics(self.config)
        self.metrics.seed(int(self.config["served_requests"]), float(self.config["prefix_cache_hit_rate"]))
        # The other clients' traffic (`background_rps`), on `clock`: on the demo's simulated clock, a faster
        # simulated hour serves an hour of it.
        self.clock: Callable[[], datetime] = clock or (lambda: datetime.now(UTC))
        self._traffic_lock = threading.Lock()
        self._traffic_from = self.clock()
        self._traffic_due = 0.0  # requests due but not yet whole
        self._traffic_rng = random.Random(20261206)  # simulated traffic, not security

    # -- lifecycle -----------------------------------------------------------------------------------------

    def start(self) -> VllmSimulator:
        """Start serving in a daemon thread (returns self). After `stop()` it binds the same port again."""
        if self._server is not None:
            return self
        self._stopping.clear()
        server = SimHttpServer((self.host, self._port), make_handler(self))
        self._port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.05,), name=f"vllm-sim-{self._port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port: clients then get connection refused, as with a booting server.

        Also cancels a pending "booting" timer (the server then stays down until `start()`).
        """
        self._cancel_boot()
        self._cancel_exit()
        self._shutdown()

    def _shutdown(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        self._unwedged.set()
        server.shutdown()
        server.server_close()
        # Drop kept-alive connections too, so clients see the server gone (connection refused on reconnect).
        with self._lock:
            connections, self._connections = list(self._connections), set()
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> VllmSimulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL without `/v1`, e.g. "http://127.0.0.1:54321". Raises RuntimeError before `start()`."""
        if not self._port:
            raise RuntimeError("the vLLM simulator has not been started")
        return f"http://{self.host}:{self._port}"

    # -- controls ------------------------------------------------------------------------------------------

    @property
    def mode(self) -> str:
        """The current mode: "ready", "engine-dead", "slow" or "booting"."""
        return self._mode

    def restart_process(self, started: datetime) -> None:
        """The API server process started again at `started` (its container restarted): its Prometheus
        registry is new, so every counter and histogram starts at 0 (prometheus_client keeps them in the
        process), the prefix cache is empty and `process_start_time_seconds` is `started`."""
        with self._lock:
            self.metrics = EngineMetrics(self.config)
            self.process_started = started
            self._traffic_from, self._traffic_due = self.clock(), 0.0
            self._served = 0
            self._prefix_blocks.clear()
            self._running_tokens.clear()
            self._running = 0

    @property
    def listening(self) -> bool:
        """True while the port accepts connections (False when stopped or booting)."""
        return self._server is not None

    @property
    def requests_served(self) -> int:
        """Chat completions finished since start (not counting the seeded history)."""
        return self._served

    def set_mode(self, mode: str, *, boot_s: float | None = None) -> None:
        """Switch behaviour.

        Args:
            mode: "ready" (normal); "engine-dead" (`/health` 503, chat completions HTTP 500 with vLLM's
                EngineDeadError message); "slow" (every response waits `slow_latency_s` more); "booting"
                (stop listening now, so clients get connection refused, then after `boot_s` seconds listen
                again in mode "ready"); "wedged" (`/health` 200, but a chat completion waits, counted in
                `vllm:num_requests_waiting`, until the mode changes or the server stops, and no token is
                generated: the engine-stuck case). Setting another mode while booting ends the boot at once.
            boot_s: seconds of "booting"; None takes the scenario's `boot_s`. Ignored for other modes.

        Raises:
            ValueError: unknown mode.
        """
        if mode not in MODES:
            raise ValueError(f"unknown simulator mode {mode!r}; use one of {', '.join(MODES)}")
        if mode == "booting":
            self._boot(float(self.config["boot_s"]) if boot_s is None else float(boot_s))
            return
        was_booting = self._cancel_boot()
        self._cancel_exit()
        with self._lock:
            self._mode = mode
            exited, self.exited = self.exited, False
            if mode == "wedged":
                self._unwedged.clear()
            else:
                self._unwedged.set()
        if was_booting or (exited and mode != "engine-dead"):
            self.start()
        if mode == "engine-dead" and not self.config["keep_alive_on_engine_death"]:
            timer = threading.Timer(float(self.config["engine_death_exit_s"]), self._api_server_exit)
            timer.daemon = True
            with self._lock:
                self._exit_timer = timer
            timer.start()

    def _api_server_exit(self) -> None:
        """The engine died and nothing keeps the API server up: it stops (connections refused) and the
        process exits (vllm/entrypoints/launcher.py, `VLLM_KEEP_ALIVE_ON_ENGINE_DEATH` unset)."""
        with self._lock:
            if self._mode != "engine-dead" or self._exit_timer is None:
                return
            self._exit_timer = None
            self.exited = True
        # The container exits with the process: run the callbacks (a linked host marks its container
        # exited) before the port closes, so nobody sees the port closed and the container still running.
        for callback in list(self.on_exit):
            callback()
        self._shutdown()

    def _cancel_exit(self) -> None:
        with self._lock:
            timer, self._exit_timer = self._exit_timer, None
        if timer is not None:
            timer.cancel()

    def _boot(self, seconds: float) -> None:
        self._cancel_boot()
        self._shutdown()
        timer = threading.Timer(max(0.0, seconds), self._finish_boot)
        timer.daemon = True
        with self._lock:
            self._mode = "booting"
            self._boot_timer = timer
        timer.args = (timer,)
        timer.start()

    def _finish_boot(self, timer: threading.Timer) -> None:
        with self._lock:
            if self._boot_timer is not timer:
                return
            self._boot_timer = None
            self._mode = "ready"
            self.exited = False
        self.start()

    def _cancel_boot(self) -> bool:
        """Cancel a pending boot; True if one was pending (the mode goes back to "ready")."""
        with self._lock:
            timer, self._boot_timer = self._boot_timer, None
            if timer is None:
                return False
            if self._mode == "booting":
                self._mode = "ready"
        timer.cancel()
        return True

    @property
    def output_fault(self) -> str | None:
        """How completions are spoiled: None, "markup", "empty" or "runaway" (see `set_output_fault`)."""
        return self._output_fault

    def set_output_fault(self, fault: str | None) -> None:
        """Spoil chat completions (streamed or not) as real servers do: "markup" (a tool call left as Gemma 4
        markup in `content`, as without `--tool-call-parser gemma4`), "empty" (no content, no tool calls),
        "runaway" (max_tokens ignored: RUNAWAY_CHARS of text in RUNAWAY_PIECE-character pieces, as a server
        that does not stop), or None (normal).

        Raises:
            ValueError: another value.
        """
        if fault not in (None, "markup", "empty", "runaway"):
            raise ValueError(f"unknown output fault {fault!r}")
        self._output_fault = fault

    def script_chat(self, turns: list[dict[str, Any]]) -> None:
        """Answer the next chat completions with these turns, one each, in order, instead of the keyword
        rules: `{"tool": NAME, "arguments": {...}}` calls that tool (it must be offered), `{"text": TEXT}`
        answers TEXT, in which `{tool_result}` is the last tool message's content and `{tool_result:A:B}`
        its lines A to B (a Python slice). A model that asks for what it was not asked about, or quotes it,
        on cue; once the turns are used up, the keyword rules answer again."""
        with self._lock:
            self._script.extend(turns)

    def _next_turn(self) -> dict[str, Any] | None:
        with self._lock:
            return self._script.popleft() if self._script else None

    def _wait_wedged(self) -> None:
        """Hold a request as a stuck engine would: queued, never scheduled, until the mode changes."""
        self.metrics.waiting.inc()
        try:
            self._unwedged.wait()
        finally:
            self.metrics.waiting.dec()
        raise HTTPError(503, "the engine was restarted while this request waited", "ServiceUnavailableError")

    def hold_chats(self, held: bool) -> None:
        """With `held`, every chat completion received (recorded in `chat_requests`) waits, unseen by the
        metrics, until `hold_chats(False)` or the server stops: a model busy for as long as a test needs."""
        if held:
            self._released.clear()
        else:
            self._released.set()

    def set_latency(self, seconds: float) -> None:
        """Seconds to wait before every response (replaces the scenario's `latency_s`)."""
        with self._lock:
            self._latency_s = max(0.0, float(seconds))

    def set_reported_latency(self, seconds: float) -> None:
        """SIMULATED slowness: add `seconds` to the TTFT (and so the end-to-end latency) that /metrics records
        for each request from now on; responses are not delayed. 0 turns it off."""
        with self._lock:
            self._reported_latency_s = max(0.0, float(seconds))

    def set_waiting(self, requests: int) -> None:
        """SIMULATED queue: `vllm:num_requests_waiting` shows `requests` (no request is actually held)."""
        self.metrics.waiting.set(max(0, int(requests)))

    def fail_next(self, path_pattern: str, status: int, count: int = 1) -> None:
        """Answer the next `count` requests whose path matches with HTTP `status` and a vLLM error body.

        Args:
            path_pattern: shell-style pattern (fnmatch) matched against the path without query string,
                e.g. "/v1/models", "/v1/*", "*".
            status: HTTP status to return (the body is empty for `/health`).
            count: how many requests to fail.
        """
        with self._lock:
            self._failures.append([path_pattern, int(status), int(count)])

    # -- request handling (called from handler threads) ----------------------------------------------------

    def connection_opened(self, connection: socket.socket) -> None:
        """Track a client connection (closed when the API server stops)."""
        with self._lock:
            self._connections.add(connection)

    def connection_closed(self, connection: socket.socket) -> None:
        """Forget a client connection."""
        with self._lock:
            self._connections.discard(connection)

    def delay(self) -> float:
        """Seconds every response waits first: `latency_s`, plus `slow_latency_s` in mode "slow"."""
        with self._lock:
            return self._latency_s + (float(self.config["slow_latency_s"]) if self._mode == "slow" else 0.0)

    def sleep(self, seconds: float) -> None:
        """Wait `seconds`, or less when the simulator stops."""
        if seconds > 0:
            self._stopping.wait(seconds)

    def injected_failure(self, path: str) -> int | None:
        """The HTTP status a `fail_next` rule answers this path with (using up one of its count), or None."""
        with self._lock:
            for rule in self._failures:
                if rule[2] > 0 and fnmatch.fnmatchcase(path, rule[0]):
                    rule[2] -= 1
                    status: int = rule[1]
                    self._failures = [r for r in self._failures if r[2] > 0]
                    return status
        return None

    def serve_background(self) -> None:
        """Record the background requests (`background_rps` per second of `clock`) due since the last call,
        while the server serves (not while it boots, is dead or wedged): its counters grow with the traffic
        its logs show, as a real server's do between two scrapes."""
        rate = float(self.config["background_rps"])
        with self._traffic_lock:
            with self._lock:
                now = self.clock()
                elapsed = max(0.0, (now - self._traffic_from).total_seconds())
                self._traffic_from = now
                if rate <= 0 or self._mode != "ready" or self._server is None:
                    return
                self._traffic_due += elapsed * rate
                count, self._traffic_due = int(self._traffic_due), self._traffic_due % 1
                metrics = self.metrics
            metrics.serve_background(count, float(self.config["prefix_cache_hit_rate"]), self._traffic_rng)

    def process_metrics(self) -> bytes:
        """The process metrics of the `/metrics` text, as prometheus_client's ProcessCollector writes them
        (only the start time: the one the bot reads)."""
        return (
            "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n"
            "# TYPE process_start_time_seconds gauge\n"
            f"process_start_time_seconds {self.process_started.timestamp():.2f}\n"
        ).encode()

    def model_list(self) -> dict[str, Any]:
        """The `/v1/models` body (vLLM's ModelList of ModelCard)."""
        model = str(self.config["model"])
        permission = {
            "id": f"modelperm-{uuid.uuid4().hex}",
            "object": "model_permission",
            "created": self._created,
            "allow_create_engine": False,
            "allow_sampling": True,
            "allow_logprobs": True,
            "allow_search_indices": False,
            "allow_view": True,
            "allow_fine_tuning": False,
            "organization": "*",
            "group": None,
            "is_blocking": False,
        }
        card = {
            "id": model,
            "object": "model",
            "created": self._created,
            "owned_by": "vllm",
            "root": model,
            "parent": None,
            "max_model_len": int(self.config["max_model_len"]),
            "permission": [permission],
        }
        return {"object": "list", "data": [card]}

    def _prefix_hits(self, words: list[str]) -> int:
        """Tokens of this prompt already in the simulated prefix cache (whole blocks), then cache them."""
        block = int(self.config["block_size"])
        hits, matching = 0, True
        with self._lock:
            for end in range(block, len(words) + 1, block):
                key = hash(tuple(words[:end]))
                if matching and key in self._prefix_blocks:
                    hits = end
                else:
                    matching = False
                    if len(self._prefix_blocks) < 100_000:
                        self._prefix_blocks.add(key)
        return hits

    def prepare_chat(self, body: Any) -> dict[str, Any]:
        """Validate a chat request like vLLM does and plan the answer.

        Raises:
            HTTPError: 400 (bad request, context too long), 404 (unknown model), 500 (engine dead).
        """
        if not isinstance(body, dict):
            raise HTTPError(400, "request body must be a JSON object", "BadRequestError")
        model = body.get("model", self.config["model"])
        if model != self.config["model"]:
            raise HTTPError(404, f"The model `{model}` does not exist.", "NotFoundError")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise HTTPError(400, "messages must be a non-empty list", "BadRequestError")
        with self._lock:
            self.chat_requests.append(body)
        while not self._released.wait(0.05) and not self._stopping.is_set():
            pass
        words: list[str] = []
        for message in messages:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                words += content.split()
            elif isinstance(content, list):
                for part in content:
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        words += part["text"].split()
        prompt = count_chat_tokens(messages, body.get("tools"))
        limit = int(self.config["max_model_len"])
        stream = bool(body.get("stream", False))
        if body.get("stream_options") is not None and not stream:
            raise HTTPError(400, "Stream options can only be defined when `stream=True`.", "BadRequestError")
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise HTTPError(400, f"max_tokens must be at least 1, got {max_tokens}.", "BadRequestError")
        if prompt >= limit:
            raise HTTPError(
                400,
                f"This model's maximum context length is {limit} tokens. However, your request has {prompt} "
                "input tokens. Please reduce the length of the input messages.",
                "BadRequestError",
            )
        if max_tokens is None:
            max_tokens = limit - prompt
        if prompt + max_tokens > limit:
            # Wording of vLLM >= 0.11.2 (serving_chat.py), see sim/cases/vllm-request-too-long.log.
            raise HTTPError(
                400,
                f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's maximum "
                f"context length is {limit} tokens and your request has {prompt} input tokens "
                f"({max_tokens} > {limit} - {prompt}).",
                "BadRequestError",
            )
        tool_call = plan_tools(body, messages, tool_calling=bool(self.config.get("tool_calling")))
        turn = self._next_turn()
        scripted = scripted_turn(turn, body, messages) if turn is not None else None
        if self._mode == "engine-dead":
            raise HTTPError(500, ENGINE_DEAD_MESSAGE, "InternalServerError")
        if self._mode == "wedged":
            self._wait_wedged()
        asked = content_text(messages[-1].get("content")) if isinstance(messages[-1], dict) else ""
        answer = ["pong"] if asked.strip().lower().strip("?!.") == "ping" else list(CANNED)
        if scripted is not None:
            tool_call, text = scripted
            answer = [tool_call["function"]["arguments"]] if tool_call else re.split(r"[ \t]+", text.strip())
        elif tool_call is not None:
            answer = [tool_call["function"]["arguments"]]
        elif (
            body.get("tools")
            and messages
            and isinstance(messages[-1], dict)
            and messages[-1].get("role") == "tool"
        ):
            answer = tool_result_answer(str(messages[-1].get("content") or "")).split()
        if self._output_fault == "empty":
            answer, tool_call = [], None
        elif self._output_fault == "markup" and tool_call:  # no tool parser: the call stays in content
            answer, tool_call = [gemma_markup(tool_call["function"])], None
        tokens = answer[:max_tokens]
        if self._output_fault == "runaway":
            piece = ("The engine keeps generating. " * (RUNAWAY_PIECE // 29 + 1))[:RUNAWAY_PIECE]
            tokens = answer = [piece] * (RUNAWAY_CHARS // RUNAWAY_PIECE)
        options = body.get("stream_options") or {}
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "created": int(time.time()),
            "model": model,
            "words": words,
            "prompt": prompt,
            "tokens": [tok if i == 0 else " " + tok for i, tok in enumerate(tokens)],
            "finish": "length" if len(tokens) < len(answer) else "stop",
            "stream": stream,
            "include_usage": bool(isinstance(options, dict) and options.get("include_usage")),
            "continuous_usage": bool(isinstance(options, dict) and options.get("continuous_usage_stats")),
            "tool_call": tool_call,
        }

    def generate(self, plan: dict[str, Any], started: float) -> Generator[tuple[str, float], None, None]:
        """Yield (token text, time since start) with the scenario's inter-token latency, recording metrics.

        Metrics are recorded when the generator finishes or is closed (an abort if tokens remain).
        """
        itl_s = float(self.config["itl_s"])
        key = id(plan)
        metrics = self.metrics  # the process's registry when the request arrived (a restart replaces it)
        self._hold(key, plan["prompt"], metrics, running=1)
        emitted, times = 0, []
        reason = "abort"
        try:
            for i, token in enumerate(plan["tokens"]):
                if i > 0:
                    self.sleep(itl_s)
                times.append(time.monotonic() - started)
                emitted += 1
                self._hold(key, plan["prompt"] + emitted, metrics)
                yield token, times[-1]
            reason = plan["finish"]
        finally:
            self._hold(key, 0, metrics, running=-1)
            with self._lock:
                self._served += 1
            hits = self._prefix_hits(plan["words"])
            metrics.prefix_queries.inc(plan["prompt"])
            metrics.prefix_hits.inc(hits)
            ttft = (times[0] if times else time.monotonic() - started) + self._reported_latency_s
            gaps = [b - a for a, b in itertools.pairwise(times)]
            metrics.observe(plan["prompt"], emitted, ttft, gaps, reason)

    def _hold(self, key: int, tokens: int, metrics: EngineMetrics, *, running: int = 0) -> None:
        """A running request (`key`) now holds `tokens` tokens in the KV cache (0: it finished), `running`
        requests more or fewer run; the load gauges follow (`EngineMetrics.set_load`)."""
        block = int(self.config["block_size"])
        with self._lock:
            if metrics is not self.metrics:  # the process restarted meanwhile: the request died with it
                return
            self._running += running
            if tokens:
                self._running_tokens[key] = tokens
            else:
                self._running_tokens.pop(key, None)
            blocks = sum(-(-held // block) for held in self._running_tokens.values())
            self.metrics.set_load(self._running, blocks, int(self.config["num_gpu_blocks"]))
