"""A local SIMULATOR of a vLLM OpenAI-compatible server (no model, no TPU): for the demo and the tests.

It answers on a real TCP port with the same shapes as `vllm serve` (see docs/vllm.md §1
and §2): `GET /health` (empty body, 200 or 503), `GET /version`, `GET /v1/models` (ModelCard with
`max_model_len` and `permission`), `POST /v1/chat/completions` (JSON or SSE stream,
`stream_options.include_usage`, `max_tokens` -> finish_reason "length", HTTP 400 with vLLM's context-length
message) and `GET /metrics` in
vLLM's current metric names (`vllm/v1/metrics/loggers.py`), which advance with the requests it serves.

The simulator has no model and no real tokenizer, but counts prompts the way a real tokenizer and chat
template do (`count_text_tokens`, `count_chat_tokens`): every digit and punctuation mark is a token (Gemma's
SentencePiece splits digits), a word is a token per 6 letters, each message adds its template markers and the
tools' JSON schemas are part of the prompt. `POST /tokenize` returns that count, as vLLM's does. The
generated text is canned.

On engine death the API server stops within `engine_death_exit_s` seconds (connections refused; a linked
HostSimulator's container exits), as vLLM's does unless `VLLM_KEEP_ALIVE_ON_ENGINE_DEATH` is set
(vllm/envs.py; vllm/entrypoints/launcher.py shuts the server down when the engine client has errored;
vLLM's tests/entrypoints/openai/test_shutdown.py expects connection errors). The scenario key
`keep_alive_on_engine_death: true` keeps it answering 503/500 instead.

Scenario keys (the `vllm` section of a scenario file; defaults in `DEFAULTS`):
    model             served model name (the `id` in /v1/models and the `model_name` metrics label)
    max_model_len     context window in tokens
    version           the string `GET /version` returns
    latency_s         seconds added before every response (`set_latency` changes it)
    itl_s             seconds between generated tokens
    slow_latency_s    extra seconds per response in "slow" mode
    api_key           if set, `/v1/...` requires `Authorization: Bearer <key>` (else 401), like `--api-key`
    error_shape       "nested" (`{"error": {...}}`, newer vLLM) or "flat" (`{"object": "error", ...}`, older)
    served_requests   requests already "served" at start, so /metrics starts with plausible history
    kv_cache_usage    base KV-cache usage fraction (0..1) shown by `vllm:kv_cache_usage_perc`
    prefix_cache_hit_rate  hit rate of the pre-start history (0..1)
    block_size, num_gpu_blocks   shown in `vllm:cache_config_info`
    boot_s            seconds the "booting" mode refuses connections before turning ready
    keep_alive_on_engine_death  true: the API server stays up after the engine dies
                      (vLLM's VLLM_KEEP_ALIVE_ON_ENGINE_DEATH)
    engine_death_exit_s  seconds between the engine's death and the API server's exit
    tool_calling      true: the server runs with `--enable-auto-tool-choice --tool-call-parser gemma4`, so a
                      request with `tools` gets OpenAI `tool_calls` (the tool picked by keyword rules, see
                      `TOOL_KEYWORDS`), and once a `tool` message answered it, a final text answer; false:
                      `tool_choice: "auto"` (explicit, or implied by `tools`) is refused with vLLM's HTTP 400
                      `"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set`
                      ("none", "required" and a named tool still work, as in vLLM)

Controls (thread-safe, callable while serving): `set_mode("ready" | "engine-dead" | "slow" | "booting" |
"wedged")`,
`set_latency(seconds)`, `fail_next(path_pattern, status, count=1)`, and two that change only what /metrics
reports (SIMULATED load, nothing waits): `set_reported_latency(seconds)` adds to the TTFT (hence the
end-to-end latency) recorded for each request from then on, as if the engine were that much slower,
without the test having to wait; `set_waiting(n)` shows `n` requests waiting to be scheduled.
"booting" closes the port (connection refused, as a real `vllm serve` that is still loading weights and
compiling) for `boot_s` seconds, then listens again in mode "ready" (docs/vllm.md §1.1: there is no
"warming up" HTTP status).
"""

from __future__ import annotations

import contextlib
import fnmatch
import itertools
import json
import logging
import random
import re
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Generator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

__all__ = ["DEFAULTS", "MODES", "VllmSimulator"]

log = logging.getLogger(__name__)

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
    "kv_cache_usage": 0.3,
    "prefix_cache_hit_rate": 0.6,
    "block_size": 16,
    "num_gpu_blocks": 16384,
    "boot_s": 3.0,
    "tool_calling": True,
    "keep_alive_on_engine_death": False,
    "engine_death_exit_s": 5.0,
}

# vLLM's refusal of tool_choice "auto" without the flags (serving_chat.py; docs/vllm.md §1.6).
AUTO_TOOL_CHOICE_MESSAGE = (
    '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
)

# Keyword rules of the simulated tool-calling model: the first tool (in this order) that the request offers
# and whose keywords appear in the last user message is called.
TOOL_KEYWORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "suggest_command",
        ("delete", "remove", "destroy", "stop", "start", "restart", "reset", "create", "recreate", "kill"),
    ),
    ("logs", ("log", "logs", "error", "errors", "crash", "crashed", "fail", "failed", "failing", "oom")),
    ("metrics", ("metric", "metrics", "throughput", "latency", "ttft", "tpot", "kv", "cache", "load")),
    ("cost", ("cost", "costs", "price", "spend", "spent", "bill", "burn")),
    ("describe", ("describe", "detail", "details")),
    ("list", ("list", "queued", "resources", "which", "nodes")),
    ("status", ("status", "down", "up", "health", "healthy", "running", "ready", "alive", "state")),
)
_CHANGE_VERBS = TOOL_KEYWORDS[0][1]

MODES = ("ready", "engine-dead", "slow", "booting", "wedged")

# Histogram buckets as in vllm/v1/metrics/loggers.py (PrometheusStatLogger).
TTFT_BUCKETS = [
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
]
ITL_BUCKETS = [
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
]
REQUEST_LATENCY_BUCKETS = [
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
]
FINISH_REASONS = ("stop", "length", "abort", "error")

# vLLM's EngineDeadError text, returned with HTTP 500 by completions while the engine is dead.
ENGINE_DEAD_MESSAGE = "EngineCore encountered an issue. See stack trace (above) for the root cause."

_CANNED_TEXT = (
    "This is a simulated answer from the local vLLM simulator. No model ran: the words are canned, "
    "but the protocol, the token accounting and the metrics behave like a real vLLM server serving Gemma 4."
)
_CANNED = _CANNED_TEXT.split()


def gemma_markup(function: dict[str, Any]) -> str:
    """A tool call as Gemma 4 writes it before a tool parser reads it: `<|tool_call>call:NAME{key:<|"|>
    text<|"|>,n:3}<tool_call|>` (Gemma 4 prompt format: strings between `<|"|>` delimiters)."""
    arguments = json.loads(function.get("arguments") or "{}")
    inner = ",".join(
        f'{key}:<|"|>{value}<|"|>' if isinstance(value, str) else f"{key}:{json.dumps(value)}"
        for key, value in arguments.items()
    )
    return f"<|tool_call>call:{function['name']}{{{inner}}}<tool_call|>"


def build_1_2_5_buckets(max_value: int) -> list[float]:
    """1, 2, 5, 10, 20, 50, ... up to max_value (vLLM's `build_1_2_5_buckets`, vllm/v1/metrics/loggers.py)."""
    buckets: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return buckets
            buckets.append(float(value))
        exponent += 1


def count_tokens(text: str) -> int:
    """Whitespace-separated words (the generated text's tokens)."""
    return len(text.split())


# A stand-in for Gemma's SentencePiece: split digits, punctuation alone, up to 6 letters per piece.
_PIECE = re.compile(r"\d|[^\W\d_]{1,6}|[^\w\s]|_|\n")
# Gemma's chat template: <bos>, then per message "<start_of_turn>{role}\n{content}<end_of_turn>\n", then
# "<start_of_turn>model\n" as the generation prompt (the chat_template in the model's tokenizer_config.json).
BOS_TOKENS = 1
TURN_TOKENS = 5
GENERATION_PROMPT_TOKENS = 3


def count_text_tokens(text: str) -> int:
    """Tokens of `text` by the simulator's stand-in tokenizer (see the module docstring)."""
    return len(_PIECE.findall(text))


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def count_chat_tokens(messages: list[Any], tools: Any = None, *, add_generation_prompt: bool = True) -> int:
    """Prompt tokens of a chat request: the template's markers, every message's content and tool calls,
    and the tools' JSON (a chat template renders the tool schemas into the prompt)."""
    total = BOS_TOKENS + (GENERATION_PROMPT_TOKENS if add_generation_prompt else 0)
    if tools:
        total += TURN_TOKENS + count_text_tokens(json.dumps(tools))
    for message in messages:
        if not isinstance(message, dict):
            continue
        total += TURN_TOKENS + count_text_tokens(_content_text(message.get("content")))
        if message.get("tool_calls"):
            total += count_text_tokens(json.dumps(message["tool_calls"]))
    return total


class _Metrics:
    """vLLM's Prometheus metrics for one engine ("0"), in a registry of their own."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.registry = CollectorRegistry()
        reg = self.registry
        names = ["model_name", "engine"]
        labels = (str(cfg["model"]), "0")
        self.base_kv_usage = float(cfg["kv_cache_usage"])
        token_buckets = build_1_2_5_buckets(int(cfg["max_model_len"]))

        def gauge(name: str, doc: str) -> Any:
            return Gauge(name, doc, names, registry=reg).labels(*labels)

        def counter(name: str, doc: str) -> Any:
            return Counter(name, doc, names, registry=reg).labels(*labels)

        def histogram(name: str, doc: str, buckets: list[float]) -> Any:
            return Histogram(name, doc, names, buckets=buckets, registry=reg).labels(*labels)

        self.running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
        self.waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        self.kv_usage = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
        self.prefix_queries = counter(
            "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."
        )
        self.prefix_hits = counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."
        )
        self.preemptions = counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter("vllm:generation_tokens", "Number of generation tokens processed.")
        success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            [*names, "finished_reason"],
            registry=reg,
        )
        self.success = {reason: success.labels(*labels, reason) for reason in FINISH_REASONS}
        self.req_prompt_tokens = histogram(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", token_buckets
        )
        self.req_generation_tokens = histogram(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", token_buckets
        )
        self.ttft = histogram(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS
        )
        self.itl = histogram(
            "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS
        )
        self.tpot = histogram(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            ITL_BUCKETS,
        )
        self.e2e = histogram(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.queue = histogram(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        block_size, blocks = int(cfg["block_size"]), int(cfg["num_gpu_blocks"])
        info = {
            "block_size": str(block_size),
            "cache_dtype": "auto",
            "enable_prefix_caching": "True",
            "engine": "0",
            "gpu_memory_utilization": "0.9",
            "kv_cache_size_tokens": str(block_size * blocks),
            "num_cpu_blocks": "0",
            "num_gpu_blocks": str(blocks),
        }
        Gauge(
            "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", list(info), registry=reg
        ).labels(**info).set(1)
        self.kv_usage.set(self.base_kv_usage)

    def seed(self, requests: int, hit_rate: float) -> None:
        """Record `requests` plausible past requests (deterministic), so a fresh simulator has history."""
        rng = random.Random(20260402)  # simulated numbers, not security
        queries = 0
        for i in range(requests):
            prompt = rng.randint(200, 1500)
            generated = rng.randint(20, 300)
            ttft = rng.lognormvariate(-1.9, 0.5)  # median about 0.15 s
            itl = rng.uniform(0.02, 0.045)
            reason = "length" if i % 13 == 0 else "abort" if i % 97 == 0 else "stop"
            queue_s = rng.uniform(0, 0.05)
            self.observe(prompt, generated, ttft, [itl] * (generated - 1), reason, queue_s=queue_s)
            queries += prompt
        self.prefix_queries.inc(queries)
        self.prefix_hits.inc(round(queries * hit_rate))
        self.preemptions.inc(2)

    def observe(
        self,
        prompt: int,
        generated: int,
        ttft: float,
        itls: list[float],
        reason: str,
        *,
        queue_s: float = 0.0,
    ) -> None:
        """Record one finished request like PrometheusStatLogger.record does."""
        self.prompt_tokens.inc(prompt)
        self.generation_tokens.inc(generated)
        self.success[reason].inc()
        self.req_prompt_tokens.observe(prompt)
        self.req_generation_tokens.observe(generated)
        if generated > 0:
            self.ttft.observe(ttft)
        for gap in itls:
            self.itl.observe(gap)
        if generated > 1:
            self.tpot.observe(sum(itls) / len(itls) if itls else 0.0)
        self.e2e.observe(queue_s + ttft + sum(itls))
        self.queue.observe(queue_s)

    def set_running(self, running: int) -> None:
        self.running.set(running)
        self.kv_usage.set(min(1.0, self.base_kv_usage + 0.02 * running))


class _Aborted(Exception):
    """The client went away in the middle of a response."""


class _HTTPError(Exception):
    def __init__(self, status: int, message: str, kind: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind


class VllmSimulator:
    """A simulated vLLM server on a local port. Everything it says is made up; see the module docstring.

    Args:
        scenario_vllm: the scenario's `vllm` mapping (keys in the module docstring; missing keys take
            DEFAULTS).
        host: address to bind.
        port: port to bind; 0 picks a free one (read it back from `url`).
    """

    def __init__(self, scenario_vllm: dict[str, Any], *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.config: dict[str, Any] = {**DEFAULTS, **(scenario_vllm or {})}
        self.host = host
        self._port = port
        self._lock = threading.Lock()
        self._mode = "ready"
        self._latency_s = float(self.config["latency_s"])
        self._reported_latency_s = 0.0
        self._failures: list[list[Any]] = []  # [pattern, status, remaining]
        self._running = 0
        self._served = 0
        self._prefix_blocks: set[int] = set()
        self._stopping = threading.Event()
        self._output_fault: str | None = None
        self._unwedged = threading.Event()  # set unless in mode "wedged": wedged requests wait on it
        self._unwedged.set()
        self._connections: set[socket.socket] = set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._created = int(time.time())
        self._boot_timer: threading.Timer | None = None
        self._exit_timer: threading.Timer | None = None
        self.exited = False  # the API server stopped after the engine died
        self.on_exit: list[Any] = []  # callables run when the API server stops after engine death
        # bodies of the last 1,000 chat requests received, oldest first (what a test checks the bot sent)
        self.chat_requests: deque[dict[str, Any]] = deque(maxlen=1000)
        self.metrics = _Metrics(self.config)
        self.metrics.seed(int(self.config["served_requests"]), float(self.config["prefix_cache_hit_rate"]))

    # -- lifecycle -----------------------------------------------------------------------------------------

    def start(self) -> VllmSimulator:
        """Start serving in a daemon thread (returns self). After `stop()` it binds the same port again."""
        if self._server is not None:
            return self
        self._stopping.clear()
        server = ThreadingHTTPServer((self.host, self._port), _make_handler(self))
        server.daemon_threads = True
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
        """How completions are spoiled: None, "markup" or "empty" (see `set_output_fault`)."""
        return self._output_fault

    def set_output_fault(self, fault: str | None) -> None:
        """Spoil chat completions (streamed or not) as real servers do: "markup" (a tool call left as Gemma 4
        markup in `content`, as without `--tool-call-parser gemma4`), "empty" (no content, no tool calls),
        or None (normal).

        Raises:
            ValueError: another value.
        """
        if fault not in (None, "markup", "empty"):
            raise ValueError(f"unknown output fault {fault!r}")
        self._output_fault = fault

    def _wait_wedged(self) -> None:
        """Hold a request as a stuck engine would: queued, never scheduled, until the mode changes."""
        self.metrics.waiting.inc()
        try:
            self._unwedged.wait()
        finally:
            self.metrics.waiting.dec()
        raise _HTTPError(503, "the engine was restarted while this request waited", "ServiceUnavailableError")

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

    def _delay(self) -> float:
        with self._lock:
            return self._latency_s + (float(self.config["slow_latency_s"]) if self._mode == "slow" else 0.0)

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)

    def _injected_failure(self, path: str) -> int | None:
        with self._lock:
            for rule in self._failures:
                if rule[2] > 0 and fnmatch.fnmatchcase(path, rule[0]):
                    rule[2] -= 1
                    status: int = rule[1]
                    self._failures = [r for r in self._failures if r[2] > 0]
                    return status
        return None

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        """A vLLM error body in the configured shape ("nested" or "flat")."""
        if self.config["error_shape"] == "flat":
            return {"object": "error", "message": message, "type": kind, "param": None, "code": status}
        return {"error": {"message": message, "type": kind, "param": None, "code": status}}

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
            _HTTPError: 400 (bad request, context too long), 404 (unknown model), 500 (engine dead).
        """
        if not isinstance(body, dict):
            raise _HTTPError(400, "request body must be a JSON object", "BadRequestError")
        model = body.get("model", self.config["model"])
        if model != self.config["model"]:
            raise _HTTPError(404, f"The model `{model}` does not exist.", "NotFoundError")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _HTTPError(400, "messages must be a non-empty list", "BadRequestError")
        with self._lock:
            self.chat_requests.append(body)
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
            raise _HTTPError(400, "Stream options can only be defined when `stream=True`.", "BadRequestError")
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise _HTTPError(400, f"max_tokens must be at least 1, got {max_tokens}.", "BadRequestError")
        if prompt >= limit:
            raise _HTTPError(
                400,
                f"This model's maximum context length is {limit} tokens. However, your request has {prompt} "
                "input tokens. Please reduce the length of the input messages.",
                "BadRequestError",
            )
        if max_tokens is None:
            max_tokens = limit - prompt
        if prompt + max_tokens > limit:
            # Wording of vLLM >= 0.11.2 (serving_chat.py), see sim/cases/vllm-request-too-long.log.
            raise _HTTPError(
                400,
                f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's maximum "
                f"context length is {limit} tokens and your request has {prompt} input tokens "
                f"({max_tokens} > {limit} - {prompt}).",
                "BadRequestError",
            )
        tool_call = self._plan_tools(body, messages)
        if self._mode == "engine-dead":
            raise _HTTPError(500, ENGINE_DEAD_MESSAGE, "InternalServerError")
        if self._mode == "wedged":
            self._wait_wedged()
        asked = _content_text(messages[-1].get("content")) if isinstance(messages[-1], dict) else ""
        answer = ["pong"] if asked.strip().lower().strip("?!.") == "ping" else list(_CANNED)
        if tool_call is not None:
            answer = [tool_call["function"]["arguments"]]
        elif (
            body.get("tools")
            and messages
            and isinstance(messages[-1], dict)
            and messages[-1].get("role") == "tool"
        ):
            result = re.split(r"[ \t]+", str(messages[-1].get("content") or "").strip())  # keeps line breaks
            answer = ["Based", "on", "the", "tool", "result:", *result[:40]]
        if self._output_fault == "empty":
            answer, tool_call = [], None
        elif self._output_fault == "markup" and tool_call:  # no tool parser: the call stays in content
            answer, tool_call = [gemma_markup(tool_call["function"])], None
        tokens = answer[:max_tokens]
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

    def _plan_tools(self, body: dict[str, Any], messages: list[Any]) -> dict[str, Any] | None:
        """The tool call to answer with (OpenAI `tool_calls[0]` shape), or None for a text answer.

        Raises:
            _HTTPError: 400 for malformed `tools`, an unknown named tool, or `tool_choice: "auto"` while the
                scenario's `tool_calling` is false (vLLM's exact message).
        """
        tools = body.get("tools")
        if not tools:
            return None
        if not isinstance(tools, list) or not all(
            isinstance(t, dict) and isinstance(t.get("function"), dict) and t["function"].get("name")
            for t in tools
        ):
            raise _HTTPError(
                400, "tools must be a list of {type: function, function: {name, ...}}", "BadRequestError"
            )
        choice = body.get("tool_choice", "auto")
        if choice == "auto" and not self.config.get("tool_calling"):
            raise _HTTPError(400, AUTO_TOOL_CHOICE_MESSAGE, "BadRequestError")
        if choice == "none":
            return None
        offered = {str(t["function"]["name"]): t["function"] for t in tools}
        last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
        question = next(
            (
                str(m.get("content") or "")
                for m in reversed(messages)
                if isinstance(m, dict) and m.get("role") == "user"
            ),
            "",
        )
        if isinstance(choice, dict):
            name = str((choice.get("function") or {}).get("name", ""))
            if name not in offered:
                raise _HTTPError(400, f"Tool '{name}' has not been passed in `tools`.", "BadRequestError")
        else:
            if choice == "auto" and last.get("role") == "tool":
                return None  # the tool answered: now the final text answer
            words = {w.strip("?!.,:;'\"()").lower() for w in question.split()}
            name = next((n for n, keys in TOOL_KEYWORDS if n in offered and words & set(keys)), "")
            if not name:
                if choice != "required":
                    return None
                name = next(iter(offered))
        return {
            "id": f"chatcmpl-tool-{uuid.uuid4().hex}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(_tool_arguments(offered[name], question))},
        }

    def generate(self, plan: dict[str, Any], started: float) -> Generator[tuple[str, float], None, None]:
        """Yield (token text, time since start) with the scenario's inter-token latency, recording metrics.

        Metrics are recorded when the generator finishes or is closed (an abort if tokens remain).
        """
        itl_s = float(self.config["itl_s"])
        with self._lock:
            self._running += 1
            self.metrics.set_running(self._running)
        emitted, times = 0, []
        reason = "abort"
        try:
            for i, token in enumerate(plan["tokens"]):
                if i > 0:
                    self._sleep(itl_s)
                times.append(time.monotonic() - started)
                emitted += 1
                yield token, times[-1]
            reason = plan["finish"]
        finally:
            with self._lock:
                self._running -= 1
                self._served += 1
                self.metrics.set_running(self._running)
            hits = self._prefix_hits(plan["words"])
            self.metrics.prefix_queries.inc(plan["prompt"])
            self.metrics.prefix_hits.inc(hits)
            ttft = (times[0] if times else time.monotonic() - started) + self._reported_latency_s
            gaps = [b - a for a, b in itertools.pairwise(times)]
            self.metrics.observe(plan["prompt"], emitted, ttft, gaps, reason)

    @staticmethod
    def usage(prompt: int, completion: int) -> dict[str, Any]:
        """An OpenAI `usage` object."""
        return {
            "prompt_tokens": prompt,
            "total_tokens": prompt + completion,
            "completion_tokens": completion,
            "prompt_tokens_details": None,
        }


def _make_handler(sim: VllmSimulator) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "uvicorn"
        sys_version = ""

        def setup(self) -> None:
            super().setup()
            with sim._lock:
                sim._connections.add(self.connection)

        def finish(self) -> None:
            with sim._lock:
                sim._connections.discard(self.connection)
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
            self._json(status, sim.error_body(status, message, kind))

        def _read_body(self) -> Any:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                return json.loads(raw or b"null")
            except ValueError as exc:
                raise _HTTPError(400, f"invalid JSON body: {exc}", "BadRequestError") from exc

        def _chunk(self, data: bytes) -> None:
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            except OSError as exc:
                raise _Aborted from exc

        def _dispatch(self, method: str) -> None:
            path = self.path.split("?", 1)[0]
            started = time.monotonic()
            body: Any = None
            if method == "POST":
                try:
                    body = self._read_body()
                except _HTTPError as exc:
                    body = exc
            sim._sleep(sim._delay())
            try:
                failure = sim._injected_failure(path)
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
            except _HTTPError as exc:
                self._error(exc.status, exc.message, exc.kind)
            except (_Aborted, BrokenPipeError, ConnectionResetError):
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
            if isinstance(body, _HTTPError):
                raise body
            if not isinstance(body, dict) or not ("prompt" in body or isinstance(body.get("messages"), list)):
                raise _HTTPError(400, "either prompt or messages is required", "BadRequestError")
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
            self._send(200, generate_latest(sim.metrics.registry), CONTENT_TYPE_PLAIN_0_0_4)

        def _chat(self, body: Any, started: float) -> None:
            if isinstance(body, _HTTPError):
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
                    "usage": sim.usage(plan["prompt"], completion),
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
                    chunk["usage"] = sim.usage(plan["prompt"], emitted)
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
                event([], sim.usage(plan["prompt"], emitted))
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")

    return Handler


def _tool_arguments(function: dict[str, Any], question: str) -> dict[str, Any]:
    """Arguments for a simulated tool call: each required string parameter gets a value from the question
    (a command for `command`, else the first resource-like word with a hyphen, else "")."""
    params = function.get("parameters") or {}
    properties = params.get("properties") or {}
    words = [w.strip("?!.,:;'\"()`") for w in question.split()]
    lowered = [w.lower() for w in words]
    resource = next((w for w in words if re.match(r"^[a-z][a-z0-9]*(-[a-z0-9]+)+$", w)), "")
    args: dict[str, Any] = {}
    for name in params.get("required") or []:
        if (properties.get(name) or {}).get("type", "string") != "string":
            continue
        if name == "command":
            verb = next((w for w in lowered if w in _CHANGE_VERBS), "status")
            args[name] = f"/tpu {verb} {resource}".strip() if resource else f"/vllm {verb}"
        else:
            args[name] = resource
    return args


def _kind(status: int) -> str:
    """The `type` vLLM puts in an error body for a status."""
    return {
        400: "BadRequestError",
        401: "AuthenticationError",
        403: "PermissionDeniedError",
        404: "NotFoundError",
        429: "RateLimitError",
    }.get(status, "InternalServerError" if status >= 500 else "Error")
