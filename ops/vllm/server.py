"""How to talk to vLLM: the HTTP client of the server's operational endpoints (`/health`, `/version`,
`/v1/models`, `/metrics`), and who answers on its port (`server_identity`). Where it is, is
`ops.vllm.endpoint`.

The server's HTTP facts (see docs/vllm.md §1):
- `GET /health` has an empty body: 200 when the engine is healthy, 503 when it is dead
  (`vllm/entrypoints/serve/instrumentator/health.py`). There is no "warming up" status: uvicorn starts
  listening only once the engine is initialized, so a booting server refuses connections.
- `GET /version` returns `{"version": "<vllm version>"}` (`show_version()` in `api_server.py`).
- `GET /v1/models` returns `{"object": "list", "data": [ModelCard, ...]}`
  (`vllm/entrypoints/openai/protocol.py`).
- Error bodies are flat `{"object": "error", "message": ...}` in older builds and nested
  `{"error": {"message": ...}}` in newer ones; the `--api-key` middleware answers `{"error": "Unauthorized"}`.

Chat completions are not here: see `llm.client.GemmaClient`.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import httpx

from ops.errors import BackendTimeout, BackendUnavailable, OpsError, PermissionDenied
from ops.vllm.container import ContainerStatus, served_names
from ops.vllm.metrics import MetricsSummary, samples_by_name, summarize

__all__ = [
    "WEDGED",
    "HealthCheck",
    "ModelCard",
    "ServerIdentity",
    "ServingSample",
    "VllmClient",
    "error_message",
    "server_identity",
    "server_start_time",
    "serving_problem",
]

# -- how to talk to it ------------------------------------------------------------------------------------

_tls: ssl.SSLContext | None = None
_tls_lock = threading.Lock()


def _tls_context() -> ssl.SSLContext:
    """One default TLS context (CA bundle, verification on) for every client of the process: httpx.Client
    builds a new one otherwise, loading the CA bundle each time (milliseconds of CPU under the interpreter
    lock, per client, and a command makes several)."""
    global _tls
    with _tls_lock:
        if _tls is None:
            _tls = httpx.create_ssl_context()
        return _tls


NOT_LISTENING_HINT = (
    "nothing listens on vLLM's port: it is still loading the model or it is stopped; /vllm status reads its "
    "container and says which"
)
"""Where the container cannot be read here: "booting" is said only where it is (`bot.shared.serving`)."""
TIMEOUT_HINT = "the server may be overloaded or the network slow: try /vllm health, or raise HTTP_TIMEOUT_S"
SERVER_ERROR_HINT = "check /vllm health; if the engine is dead, restart the vLLM container"
AUTH_HINT = "set VLLM_API_KEY to the server's --api-key value"


NOT_VLLM = "not a vLLM server (no /health, /metrics): health from a one-token completion"
NOT_VLLM_HINT = "an OpenAI-compatible server without vLLM's metrics: /vllm health probes it with a completion"


@dataclass(frozen=True)
class HealthCheck:
    """Result of `GET /health`.

    Attributes:
        state: "ready" (HTTP 200), "engine-dead" (HTTP 503: restart the container), "refused" (connection
            refused: nothing listens, the server is loading the model or stopped), "timeout" (no answer
            within the client timeout), "not-vllm" (HTTP 404: an OpenAI-compatible server without vLLM's
            /health, e.g. llama.cpp's; judge it by a one-token completion), or "error" (any other status or
            transport failure).
        status: the HTTP status, or None when no response arrived.
        latency_s: wall time of the request in seconds.
        detail: one line for humans.
    """

    state: str
    status: int | None
    latency_s: float
    detail: str


WEDGED = "vLLM answers /health but generates nothing"
"""The words of the wedged-engine verdict (also a wording of the `engine-wedged` catalogue family)."""


@dataclass(frozen=True)
class ServingSample:
    """One look at the serving engine, from a `/metrics` scrape (`ops.vllm.metrics.MetricsSummary` fields).

    Attributes:
        at_s: when it was taken, seconds on any clock that is the same for all samples compared.
        running: `vllm:num_requests_running` (requests), None if the scrape lacks it.
        waiting: `vllm:num_requests_waiting` (requests).
        generation_tokens: `vllm:generation_tokens` counter since start (tokens).
    """

    at_s: float
    running: float | None
    waiting: float | None
    generation_tokens: float | None


def serving_problem(
    samples: list[ServingSample], *, health_ready: bool, probe_timed_out: bool | None = None
) -> str | None:
    """Whether a server whose `/health` says 200 is in fact wedged: requests wait, none runs, and no token
    was generated between the samples, or a one-token probe timed out. Several signals, because /health
    only reports that the API process and the engine's heartbeat live (vLLM `/health`,
    vllm/entrypoints/serve/instrumentator/health.py), not that the engine makes progress.

    Args:
        samples: oldest first; the last one is the current state.
        health_ready: /health answered 200.
        probe_timed_out: True when a one-token chat completion timed out, False when it answered, None
            when no probe was made.

    Returns:
        One line starting with `WEDGED` ("vLLM answers /health but generates nothing: 7 requests waiting,
        none running, no new tokens in 120 s, a one-token probe timed out"), or None when the signals do not
        all agree (an answering probe always means not wedged).
    """
    if not health_ready or not samples or probe_timed_out is False:
        return None
    last = samples[-1]
    if not last.waiting or last.running != 0:
        return None
    first = samples[0]
    stalled = (
        len(samples) > 1
        and first.generation_tokens is not None
        and last.generation_tokens is not None
        and last.generation_tokens <= first.generation_tokens
    )
    if not stalled and not probe_timed_out:
        return None
    parts = [f"{last.waiting:.0f} requests waiting", "none running"]
    if stalled:
        parts.append(f"no new tokens in {last.at_s - first.at_s:.0f} s")
    if probe_timed_out:
        parts.append("a one-token probe timed out")
    return f"{WEDGED}: " + ", ".join(parts)


def serving_verdict(
    vllm: VllmClient, probe: Callable[[], object], health: HealthCheck, first: MetricsSummary
) -> str:
    """ "vLLM answers /health but generates nothing: ..." when every signal agrees, else "".

    Only when /health is ready and the scrape `first` shows requests waiting with none running does it look
    further: `probe`, a one-token chat completion (its BackendTimeout is a signal; another OpsError says
    nothing about progress), and a second `/metrics` scrape through `vllm` after it (no new generated
    tokens is the other); see `serving_problem`.
    """
    if health.state != "ready" or not first.waiting or first.running != 0:
        return ""
    start = time.monotonic()
    timed_out: bool | None = None
    try:
        probe()
        timed_out = False
    except BackendTimeout:
        timed_out = True
    except OpsError:
        timed_out = None
    samples = [ServingSample(0.0, first.running, first.waiting, first.generation_tokens)]
    try:
        second = vllm.metrics()
        samples.append(
            ServingSample(time.monotonic() - start, second.running, second.waiting, second.generation_tokens)
        )
    except OpsError:
        pass
    return serving_problem(samples, health_ready=True, probe_timed_out=timed_out) or ""


@dataclass(frozen=True)
class ModelCard:
    """One entry of `GET /v1/models` (vLLM's `ModelCard`).

    Attributes:
        id: the served model name (`--served-model-name`, else the model path); also the `model_name`
            metrics label.
        root: the base model path, or None.
        parent: the base model id for a LoRA adapter card, None for the base model.
        max_model_len: the effective context window in tokens, or None if the server does not say.
        owned_by: normally "vllm".
        created: unix time in seconds, or None.
    """

    id: str
    root: str | None
    parent: str | None
    max_model_len: int | None
    owned_by: str | None
    created: int | None


def error_message(body: object) -> str | None:
    """The human message of a vLLM error body, or None.

    Accepts the flat shape `{"object": "error", "message": ..., "type": ..., "code": ...}` (older vLLM), the
    nested shape `{"error": {"message": ..., ...}}` (newer vLLM), `{"error": "Unauthorized"}` (the `--api-key`
    middleware) and FastAPI's `{"detail": ...}`.
    """
    if not isinstance(body, dict):
        return None
    inner = body.get("error")
    if isinstance(inner, dict) and isinstance(inner.get("message"), str):
        return str(inner["message"])
    if isinstance(inner, str):
        return inner
    if isinstance(body.get("message"), str):
        return str(body["message"])
    if isinstance(body.get("detail"), str):
        return str(body["detail"])
    return None


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class VllmClient:
    """Client for one vLLM server. Thread-safe: one shared `httpx.Client`; call `close()` (or use `with`).

    Args:
        base_url: the server root without `/v1`, e.g. "http://10.0.0.5:8000".
        api_key: the server's `--api-key`; sent as `Authorization: Bearer <key>` only when set. It never
            appears in messages or logs.
        timeout_s: timeout of each request in seconds (connect, read, write and pool).
    """

    def __init__(self, base_url: str, *, api_key: str | None = None, timeout_s: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=timeout_s, verify=_tls_context()
        )

    def __repr__(self) -> str:
        return f"VllmClient({self.base_url!r})"

    def close(self) -> None:
        """Close the connection pool. The client cannot be used afterwards."""
        self._http.close()

    def __enter__(self) -> VllmClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- endpoints -----------------------------------------------------------------------------------------

    def health(self) -> HealthCheck:
        """`GET /health`. Never raises.

        Returns:
            A HealthCheck; see its `state` for the mapping (200 ready, 503 engine-dead, connection refused,
            timeout, anything else error).
        """
        url = f"{self.base_url}/health"
        start = time.monotonic()

        def elapsed() -> float:
            return time.monotonic() - start

        try:
            response = self._http.get("/health")
        except httpx.TimeoutException:
            detail = f"no answer from {url} within {self.timeout_s:g} s"
            return HealthCheck("timeout", None, elapsed(), detail)
        except httpx.ConnectError:
            return HealthCheck(
                "refused",
                None,
                elapsed(),
                f"cannot connect to {url}: nothing listens there (vLLM loading the model, or stopped)",
            )
        except Exception as exc:  # health must never raise
            detail = f"{url}: {type(exc).__name__}: {_one_line(str(exc))}"
            return HealthCheck("error", None, elapsed(), detail)
        latency = elapsed()
        status = response.status_code
        if status == 200:
            detail = f"vLLM is ready (HTTP 200 in {latency * 1000:.0f} ms)"
            return HealthCheck("ready", status, latency, detail)
        if status == 503:
            return HealthCheck(
                "engine-dead", status, latency, "vLLM engine is dead (HTTP 503): restart the vLLM container"
            )
        if status == 404:  # /health is vLLM's own route; other OpenAI-compatible servers may lack it
            return HealthCheck("not-vllm", status, latency, NOT_VLLM)
        return HealthCheck("error", status, latency, f"{url} answered HTTP {status}")

    def version(self) -> str:
        """`GET /version`.

        Returns:
            The vLLM version string, e.g. "0.19.1".

        Raises:
            BackendUnavailable: connection refused, 5xx, or a malformed body.
            BackendTimeout: no answer within the timeout.
            PermissionDenied: 401/403.
            OpsError: other 4xx.
        """
        body = self._get_json("/version")
        version = body.get("version") if isinstance(body, dict) else None
        if not isinstance(version, str):
            raise self._malformed("/version")
        return version

    def models(self) -> list[ModelCard]:
        """`GET /v1/models`.

        Returns:
            The model cards: the base model first, then any LoRA adapters (with `parent` set).

        Raises:
            Same as `version`.
        """
        body = self._get_json("/v1/models")
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise self._malformed("/v1/models")
        cards = []
        for item in data:
            if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                raise self._malformed("/v1/models")
            cards.append(
                ModelCard(
                    id=item["id"],
                    root=_opt_str(item.get("root")),
                    parent=_opt_str(item.get("parent")),
                    max_model_len=_opt_int(item.get("max_model_len")),
                    owned_by=_opt_str(item.get("owned_by")),
                    created=_opt_int(item.get("created")),
                )
            )
        return cards

    def metrics_text(self) -> str:
        """`GET /metrics`.

        Returns:
            The Prometheus text exposition, unparsed.

        Raises:
            Same as `version` (except the malformed-body case).
        """
        return self._get("/metrics").text

    def metrics(self, families: Iterable[str] | None = None) -> MetricsSummary:
        """`GET /metrics`, summarized with `ops.vllm.metrics.summarize` (only `families`, when given).

        Raises:
            Same as `version`; BackendUnavailable when the body is not Prometheus text format.
        """
        text = self.metrics_text()
        try:
            return summarize(text, families)
        except ValueError as exc:
            raise self._malformed("/metrics") from exc

    # -- plumbing ------------------------------------------------------------------------------------------

    def _malformed(self, path: str) -> BackendUnavailable:
        return BackendUnavailable(
            f"vLLM returned a malformed {path} body ({self.base_url})",
            "is this URL really a vLLM server? check VLLM_BASE_URL",
            backend="vllm",
        )

    def _get_json(self, path: str) -> Any:
        response = self._get(path)
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise self._malformed(path) from exc

    def _get(self, path: str) -> httpx.Response:
        """GET `path`; return a 2xx response or raise the matching `ops.errors` error."""
        url = f"{self.base_url}{path}"
        try:
            response = self._http.get(path)
        except httpx.TimeoutException as exc:
            raise BackendTimeout(
                f"vLLM at {url} did not answer within {self.timeout_s:g} s", TIMEOUT_HINT, backend="vllm"
            ) from exc
        except httpx.ConnectError as exc:
            message = f"cannot connect to vLLM at {url}"
            raise BackendUnavailable(message, NOT_LISTENING_HINT, backend="vllm") from exc
        except httpx.HTTPError as exc:
            message = f"vLLM at {url}: {type(exc).__name__}: {_one_line(str(exc))}"
            raise BackendUnavailable(message, SERVER_ERROR_HINT, backend="vllm") from exc
        status = response.status_code
        if status < 400:
            return response
        try:
            detail = error_message(response.json())
        except (json.JSONDecodeError, UnicodeDecodeError):
            detail = None
        reason = f"HTTP {status}" + (f": {_one_line(detail)}" if detail else "")
        message = f"vLLM {path} failed ({reason})"
        if status >= 500:
            raise BackendUnavailable(message, SERVER_ERROR_HINT, backend="vllm")
        if status in (401, 403):
            raise PermissionDenied(message, AUTH_HINT, backend="vllm")
        if status == 404 and path in ("/metrics", "/version"):  # vLLM's own routes
            raise OpsError(
                f"{NOT_VLLM.split(':')[0]}: {path} answered HTTP 404", NOT_VLLM_HINT, backend="vllm"
            )
        raise OpsError(message, "check VLLM_BASE_URL points at a vLLM server", backend="vllm")


# -- who answers on the vLLM port -------------------------------------------------------------------------

START_SKEW = timedelta(seconds=5)
"""How much earlier than its container the server may seem to have started: both times come from the VM's
one clock (docker's State.StartedAt, the process's own start time), so only rounding separates them."""


@dataclass(frozen=True)
class ServerIdentity:
    """Whether the server answering on the vLLM port is the container the bot runs there.

    Attributes:
        verdict: "same" (every check that could be made agrees), "other" (something else answers: see
            `reasons`), "unknown" (the container could not be read: nothing is claimed either way),
            "silent" (nothing answers on the port: the container's state says the rest).
        reasons: one clause per disagreement, for people, e.g. "the vLLM container `vllm` exited at 12:03
            UTC (address already in use)".
        checked: what was compared when the verdict is "same" ("container running", "model", "start time").
        container: the container's docker state, None when it could not be read.
        port: the vLLM port (of the endpoint).
        served: the model ids of `/v1/models`, () when unknown.
        expected: the names the container's `vllm serve` command serves under, () when unknown.
        server_started: the server process's start (`process_start_time_seconds`), None when not exposed.
        exit_reason: why the container's process ended ("address already in use"), "" when unknown.
        note: why the verdict is "unknown" ("" otherwise).
    """

    verdict: Literal["same", "other", "unknown", "silent"]
    reasons: tuple[str, ...] = ()
    checked: tuple[str, ...] = ()
    container: ContainerStatus | None = None
    port: int | None = None
    served: tuple[str, ...] = ()
    expected: tuple[str, ...] = ()
    server_started: datetime | None = None
    exit_reason: str = ""
    note: str = ""

    @property
    def other(self) -> bool:
        """Something that is not the bot's container answers on the port."""
        return self.verdict == "other"

    def line(self) -> str:
        """One sentence for a verdict "other" ("" otherwise): the disagreements, then who answers, e.g.
        "the vLLM container `vllm` exited at 12:03 UTC (address already in use); something else answers on
        :8000 (serving `google/gemma-3-27b-it`)"."""
        if not self.other:
            return ""
        port = f":{self.port}" if self.port else "the vLLM port"
        serving = f" (serving {', '.join(f'`{m}`' for m in self.served)})" if self.served else ""
        return "; ".join(self.reasons) + f"; something else answers on {port}{serving}"


def server_identity(
    container: ContainerStatus | None,
    *,
    answered: bool,
    port: int | None,
    served: tuple[str, ...] = (),
    server_started: datetime | None = None,
    exit_reason: str = "",
    note: str = "",
) -> ServerIdentity:
    """Compare what answers on the vLLM port with the container the bot runs there. Pure.

    Checks, each only when both sides are known: the container exists and runs; the `--port` of its
    command is the endpoint's port; the ids of `/v1/models` include a name its command serves under
    (`ops.vllm.container.served_names`); the server process did not start before the container (allowing
    START_SKEW). A server older than its container, or serving another model, or a container that is not
    running, means the answers come from something else (a stale process, another container, a server
    started by hand).

    Args:
        container: `docker inspect` of the bot's container (None: it could not be read; then `note` says
            why and the verdict is "unknown").
        answered: something answered on the port (`/health` got an HTTP status).
        port: the endpoint's port.
        served: the ids of `/v1/models` (() when unknown).
        server_started: `process_start_time_seconds` of `/metrics` (None when not exposed).
        exit_reason: why the container's process ended, from its log (`ops.vllm.container.exit_reason`).

    Returns:
        ServerIdentity.
    """
    expected = served_names(container.command) if container is not None else ()
    seen = ServerIdentity(
        "same",
        container=container,
        port=port,
        served=served,
        expected=expected,
        server_started=server_started,
        exit_reason=exit_reason,
    )
    if not answered:
        return replace(seen, verdict="silent")
    if container is None:
        return replace(seen, verdict="unknown", note=note or "the container could not be read")
    reasons: list[str] = []
    checked: list[str] = []
    name = "the vLLM container"
    if not container.exists:
        reasons.append(f"{name} does not exist")
    elif not container.running:
        when = f" at {container.finished_at:%H:%M} UTC" if container.finished_at else ""
        why = f" ({exit_reason})" if exit_reason else ""
        reasons.append(f"{name} {container.state}{when}{why}")
    else:
        checked.append("container running")
        own_port = container.flag("--port")
        if own_port is not None and port is not None and own_port != str(port):
            reasons.append(f"{name} listens on :{own_port}, not :{port}")
        if served and expected:
            if set(served) & set(expected):
                checked.append("model")
            else:
                listed = ", ".join(f"`{m}`" for m in expected)
                reasons.append(f"{name} serves {listed}")
        if server_started is not None and container.started_at is not None:
            if server_started < container.started_at - START_SKEW:
                reasons.append(
                    f"the server on the port started at {server_started:%H:%M} UTC, before {name} started at "
                    f"{container.started_at:%H:%M} UTC"
                )
            else:
                checked.append("start time")
    return replace(
        seen, verdict="other" if reasons else "same", reasons=tuple(reasons), checked=tuple(checked)
    )


def server_start_time(metrics_text: str) -> datetime | None:
    """The server process's start, from `process_start_time_seconds` (unix seconds) of a `/metrics` text:
    prometheus_client's process collector exports it on Linux from the default registry, which vLLM's
    `/metrics` serves when it runs one API server (with several, the multiprocess registry has no process
    metrics: None). None also for text that is not the Prometheus format."""
    try:
        series = samples_by_name(metrics_text).get("process_start_time_seconds")
    except ValueError:
        return None
    return datetime.fromtimestamp(series[0][1], UTC) if series else None
