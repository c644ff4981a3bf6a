"""A container of the SIMULATED TPU VM (`sim.host`) and the log lines a healthy vLLM container prints."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta


def log_stamp(when: datetime) -> str:
    """vLLM's log timestamp: "MM-DD HH:MM:SS"."""
    return when.strftime("%m-%d %H:%M:%S")


def healthy_startup_lines(
    started: datetime,
    *,
    model: str = "google/gemma-4-31B-it",
    max_model_len: int = 16384,
    tensor_parallel_size: int = 8,
    port: int = 8000,
    version: str = "0.19.1",
    boot_s: float = 600.0,
) -> list[tuple[datetime, str]]:
    """Realistic (SIMULATED) vLLM start-up log lines with their times, ending with
    `Application startup complete.`

    Line formats follow real vLLM V1 logs on TPU (process prefixes `(APIServer pid=1)` and
    `(EngineCore_DP0 pid=N)`, docs/vllm.md §2.4). The first half is stamped at `started`, the rest at
    `started + boot_s`.
    """
    ready = started + timedelta(seconds=boot_s)
    api, core = "(APIServer pid=1)", "(EngineCore_DP0 pid=281)"
    kv_tokens = 262144
    early = [
        f"INFO {log_stamp(started)} [__init__.py:241] Automatically detected platform tpu.",
        f"{api} INFO {log_stamp(started)} [api_server.py:1839] vLLM API server version {version}",
        f"{api} INFO {log_stamp(started)} [utils.py:328] non-default args: {{'model_tag': '{model}', 'host': "
        f"'0.0.0.0', 'port': {port}, 'enable_auto_tool_choice': True, 'tool_call_parser': 'gemma4', 'model': "
        f"'{model}', 'max_model_len': {max_model_len}, 'reasoning_parser': 'gemma4', 'tensor_parallel_size': "
        f"{tensor_parallel_size}, 'disable_chunked_mm_input': True}}",
        f"{api} INFO {log_stamp(started)} [model.py:547] Resolved architecture: "
        "Gemma4ForConditionalGeneration",
        f"{api} INFO {log_stamp(started)} [model.py:1510] Using max model len {max_model_len}",
        f"{core} INFO {log_stamp(started)} [core.py:654] Waiting for init message from front-end.",
        f"{core} INFO {log_stamp(started)} [core.py:76] Initializing a V1 LLM engine (v{version}) with "
        "config: "
        f"model='{model}', tensor_parallel_size={tensor_parallel_size}, max_seq_len={max_model_len}, "
        "device_config=tpu, enable_prefix_caching=True",
        f"{core} INFO {log_stamp(started)} [tpu_worker.py:221] Init worker | rank=0 | node_id=0 | "
        "is_driver_worker=True",
        f"{core} INFO {log_stamp(started)} [tpu_model_runner.py:1401] Loading model from scratch...",
    ]
    late = [
        f"{core} INFO {log_stamp(ready)} [default_loader.py:267] Loading weights took 92.41 seconds",
        f"{core} INFO {log_stamp(ready)} [kv_cache_utils.py:1087] GPU KV cache size: {kv_tokens:,} tokens",
        f"{core} INFO {log_stamp(ready)} [kv_cache_utils.py:1091] Maximum concurrency for "
        f"{max_model_len:,} tokens per request: {kv_tokens / max_model_len:.2f}x",
        f"{core} INFO {log_stamp(ready)} [tpu_model_runner.py:1712] Compilation finished in 371.55 [secs].",
        f"{core} INFO {log_stamp(ready)} [core.py:214] init engine (profile, create kv cache, warmup model) "
        "took 486.12 seconds",
        f"{api} INFO {log_stamp(ready)} [api_server.py:1634] Supported_tasks: ['generate']",
        f"{api} INFO {log_stamp(ready)} [api_server.py:1912] Starting vLLM API server 0 on http://0.0.0.0:{port}",
        f"{api} INFO {log_stamp(ready)} [launcher.py:34] Available routes are:",
        f"{api} INFO {log_stamp(ready)} [launcher.py:42] Route: /health, Methods: GET",
        f"{api} INFO {log_stamp(ready)} [launcher.py:42] Route: /v1/chat/completions, Methods: POST",
        f"{api} INFO:     Started server process [1]",
        f"{api} INFO:     Waiting for application startup.",
        f"{api} INFO:     Application startup complete.",
    ]
    return [(started, line) for line in early] + [(ready, line) for line in late]


_TRACEBACK = re.compile(r"^(Traceback \(most recent call last\):|  File \"|    \S)")


def is_traceback(line: str) -> bool:
    """A line of a Python traceback (what the interpreter prints to stderr), not of vLLM's logger."""
    return bool(_TRACEBACK.match(line))


def docker_time(when: datetime | None) -> str:
    """A time as `docker inspect` prints it (nanoseconds, "Z"); Go's zero time for None."""
    if when is None:
        return "0001-01-01T00:00:00Z"
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"


@dataclass
class Container:
    """One docker container of the simulated VM (the fields `docker inspect` shows, its logs, its timers,
    its log driver). `log_sink` receives every line it prints (`write`) when its log driver sends them
    somewhere: gcplogs, to a linked Cloud Logging (`sim.host.docker.DockerEngine`)."""

    name: str
    image: str
    state: str = "created"
    id: str = field(default_factory=lambda: secrets.token_hex(32))
    created: datetime = field(default_factory=lambda: datetime.now(UTC))
    started: datetime | None = None
    finished: datetime | None = None
    exit_code: int = 0
    restart_count: int = 0
    model: str = "google/gemma-4-31B-it"
    max_model_len: int = 16384
    tensor_parallel_size: int = 8
    port: int = 8000
    failing_log: str | None = None
    has_token: bool = True
    api_key: str | None = None
    command: list[str] = field(default_factory=list)
    logs: list[tuple[datetime, str]] = field(default_factory=list)
    pending: list[tuple[float, datetime, str]] = field(default_factory=list)
    fail_at: float | None = None
    ready_at: float | None = None  # monotonic time when startup completes (healthy containers)
    log_driver: str = "json-file"  # docker run --log-driver
    log_opts: dict[str, str] = field(default_factory=dict)  # docker run --log-opt KEY=VALUE
    labels: dict[str, str] = field(default_factory=dict)  # docker run --label KEY=VALUE
    log_sink: Callable[[list[tuple[datetime, str]]], None] | None = None

    def write(self, lines: Iterable[tuple[datetime, str]]) -> None:
        """The container prints `lines` ((time, text) each): kept for `docker logs` (with gcplogs, Docker's
        local copy: dual logging) and handed to `log_sink`."""
        printed = list(lines)
        self.logs.extend(printed)
        if printed and self.log_sink is not None:
            self.log_sink(printed)

    @property
    def running(self) -> bool:
        """Running or restarting (docker counts both as up)."""
        return self.state in ("running", "restarting")
