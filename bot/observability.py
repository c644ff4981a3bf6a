"""The bot's own observability: Prometheus metrics, readiness, and logs Cloud Logging understands.

Metrics live in a per-app `CollectorRegistry` (so two bots in one process, as in tests, do not share
counters) and are served at `/metrics` by `bot.slack.app.wsgi`:

    tpu_chatops_commands_total{command, outcome}       finished: ok, error, denied, limited, exception
    tpu_chatops_ack_latency_seconds                    request arrival to Bolt's response on /slack/events
    tpu_chatops_backend_call_seconds{backend}          backend call latency
    tpu_chatops_backend_errors_total{backend}          OpsErrors, by `OpsError.backend`
    tpu_chatops_alerts_sent_total{kind}                alerts posted to Slack (`Metrics.alerts_sent`)
    tpu_chatops_alert_tick_seconds                     wall time of one deployment's alert tick
    tpu_chatops_alert_tick_cpu_seconds                 CPU time the tick's thread used (`time.thread_time`)

Logs: `setup_logging()` writes one JSON object per line (`severity`, `message`, `logging.googleapis.com/trace`
when the request's trace is known) on Cloud Run (`K_SERVICE` is set) or with `LOG_FORMAT=json`, and readable
lines otherwise. Every message goes through `llm.redact.redact`, so tokens and secrets never reach the log;
that happens in a handler filter, before the handler's lock (`RenderFilter`), on a message cut to
MAX_LOG_MESSAGE_CHARS. A text log line cannot be forged from request data: control characters in a
message are escaped and traceback lines are indented (`ConsoleFormatter`).
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import IO, Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

from llm.redact import redact

__all__ = [
    "Metrics",
    "Readiness",
    "setup_logging",
    "trace_from_headers",
    "use_trace",
]

ACK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0)
TICK_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
BACKEND_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 180.0, 600.0, 1800.0)


class Metrics:
    """The bot's metrics, registered on their own `CollectorRegistry`.

    `alerts_sent` is a Counter labelled by `kind`: `metrics.alerts_sent.labels(kind="hbm").inc()`
    (or `metrics.alert_sent("hbm")`).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.commands = Counter(
            "tpu_chatops_commands",
            "Commands finished, by command name and outcome (ok, error, denied, limited, exception).",
            ["command", "outcome"],
            registry=self.registry,
        )
        self.ack_latency = Histogram(
            "tpu_chatops_ack_latency_seconds",
            "Time from a request's arrival at /slack/events to Bolt's response (Slack wants < 3 s).",
            buckets=ACK_BUCKETS,
            registry=self.registry,
        )
        self.backend_latency = Histogram(
            "tpu_chatops_backend_call_seconds",
            "Backend call latency, by backend.",
            ["backend"],
            buckets=BACKEND_BUCKETS,
            registry=self.registry,
        )
        self.backend_errors = Counter(
            "tpu_chatops_backend_errors",
            "Backend errors (OpsError), by backend.",
            ["backend"],
            registry=self.registry,
        )
        self.alerts_sent = Counter(
            "tpu_chatops_alerts_sent",
            "Alerts posted to Slack, by kind.",
            ["kind"],
            registry=self.registry,
        )
        self.alert_tick = Histogram(
            "tpu_chatops_alert_tick_seconds",
            "Wall time of one deployment's alert tick (listing, evaluation, ledger, posts).",
            buckets=TICK_BUCKETS,
            registry=self.registry,
        )
        self.alert_tick_cpu = Histogram(
            "tpu_chatops_alert_tick_cpu_seconds",
            "CPU time of the thread that ran one deployment's alert tick (time.thread_time).",
            buckets=TICK_BUCKETS,
            registry=self.registry,
        )

    def command_finished(self, command: str, outcome: str) -> None:
        self.commands.labels(command=command, outcome=outcome).inc()

    def backend_call_finished(self, backend: str, seconds: float, *, failed: bool = False) -> None:
        self.backend_latency.labels(backend=backend).observe(seconds)
        if failed:
            self.backend_errors.labels(backend=backend).inc()

    @contextmanager
    def backend_call(self, backend: str) -> Iterator[None]:
        """Time a block as one call to `backend`; an exception counts as an error (and is re-raised)."""
        started = time.monotonic()
        try:
            yield
        except Exception:
            self.backend_call_finished(backend, time.monotonic() - started, failed=True)
            raise
        self.backend_call_finished(backend, time.monotonic() - started)

    def alert_sent(self, kind: str) -> None:
        self.alerts_sent.labels(kind=kind).inc()

    def alert_tick_finished(self, wall_s: float, cpu_s: float) -> None:
        """Record one alert tick: `wall_s` seconds of wall time, `cpu_s` seconds of its thread's CPU."""
        self.alert_tick.observe(wall_s)
        self.alert_tick_cpu.observe(cpu_s)

    def exposition(self) -> tuple[bytes, str]:
        """The text exposition format and its content type, for `/metrics`."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class Readiness:
    """What `/readyz` checks: Slack accepted the bot token (at start, or within `auth_max_age_s`; an older
    success is re-checked by calling `auth_check`), the state database answers (`db_check`), and in Socket
    Mode the websocket is connected (`connection_check` returns a problem or None). Until `warmed` is set
    (`bot.slack.app.warm_up`), it answers "warming up" without running any check.

    `/readyz` never waits on a check: each runs in at most one request at a time, and a request that finds
    one running answers with the last result at once. So a slow Slack or database cannot pile up server
    threads on /readyz and starve `/slack/events` (no lock is held during a check).

    Both checks raise on failure. `problem()` returns None when ready, else a one-line reason.
    """

    def __init__(
        self,
        auth_check: Callable[[], object],
        db_check: Callable[[], object],
        *,
        auth_ok: bool = False,
        auth_max_age_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        connection_check: Callable[[], str | None] | None = None,
        warmed: threading.Event | None = None,
    ) -> None:
        self._warmed = warmed  # set once the process has warmed up (`bot.slack.app.warm_up`); None: no wait
        self._auth_check = auth_check
        self._db_check = db_check
        self._max_age = auth_max_age_s
        self._clock = clock
        self._auth_ok_at: float | None = clock() if auth_ok else None
        self._auth_problem: str | None = None if auth_ok else "Slack auth.test not checked yet"
        self._db_problem: str | None = None
        self._auth_running = threading.Lock()
        self._db_running = threading.Lock()
        self.connection_check = connection_check

    def mark_auth_ok(self) -> None:
        self._auth_ok_at = self._clock()
        self._auth_problem = None

    def problem(self) -> str | None:
        if self._warmed is not None and not self._warmed.is_set():
            return "warming up (worker processes, thread pools, API clients)"
        if self.connection_check is not None:
            reason = self.connection_check()
            if reason is not None:
                return _one_line(reason)
        reason = self._slack_problem()
        if reason is not None:
            return reason
        return self._database_problem()

    def _slack_problem(self) -> str | None:
        checked = self._auth_ok_at
        if checked is not None and self._clock() - checked <= self._max_age:
            return None
        if not self._auth_running.acquire(blocking=False):
            return self._auth_problem  # another request is checking: answer with the last result
        try:
            self._auth_check()
        except Exception as exc:
            error = getattr(getattr(exc, "response", None), "get", lambda _k: None)("error")
            self._auth_problem = _one_line(f"Slack auth.test failed: {error or type(exc).__name__}")
        else:
            self.mark_auth_ok()
        finally:
            self._auth_running.release()
        return self._auth_problem

    def _database_problem(self) -> str | None:
        if not self._db_running.acquire(blocking=False):
            return self._db_problem
        try:
            self._db_check()
            self._db_problem = None
        except Exception as exc:
            self._db_problem = _one_line(f"state database unreachable: {type(exc).__name__}: {exc}")
        finally:
            self._db_running.release()
        return self._db_problem


def _one_line(text: str) -> str:
    return redact(" ".join(text.split()))[:300]


# ---- trace context

_trace: contextvars.ContextVar[str | None] = contextvars.ContextVar("tpu_chatops_trace", default=None)


def trace_from_headers(environ: Mapping[str, Any], project: str | None = None) -> str | None:
    """The Cloud Logging trace name (`projects/P/traces/T`) for a WSGI request, from Google's
    `X-Cloud-Trace-Context: T/SPAN;o=1` or W3C `traceparent: 00-T-SPAN-01`. None when either the trace or
    the project (argument, else `GOOGLE_CLOUD_PROJECT` / `GCP_PROJECT`) is unknown."""
    project = project or os.environ.get("GOOGLE_CLOUD_PROJECT") or os.environ.get("GCP_PROJECT")
    trace_id = ""
    header = str(environ.get("HTTP_X_CLOUD_TRACE_CONTEXT") or "")
    if header:
        trace_id = header.split("/", 1)[0].split(";", 1)[0].strip()
    else:
        parts = str(environ.get("HTTP_TRACEPARENT") or "").split("-")
        if len(parts) >= 3:
            trace_id = parts[1]
    if not project or not trace_id or not all(c in "0123456789abcdefABCDEF" for c in trace_id):
        return None
    return f"projects/{project}/traces/{trace_id}"


@contextmanager
def use_trace(trace: str | None) -> Iterator[None]:
    """Log records made inside this block (on this thread) carry `trace`."""
    token = _trace.set(trace)
    try:
        yield
    finally:
        _trace.reset(token)


# ---- logging


# A log message longer than this is cut (marked) before it is redacted: a request body or a model answer
# logged whole would otherwise make every log call pay for its size.
MAX_LOG_MESSAGE_CHARS = 8_000
_RENDERED = "_tpu_chatops_rendered"


def _cut(text: str, limit: int) -> str:
    """`text`, at most about `limit` characters: cut at the last whitespace before the limit (so no secret
    is cut into a prefix the redaction no longer recognises) and marked with how much was left out."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    space = max(head.rfind(" "), head.rfind("\n"))
    head = head[:space] if space > limit // 2 else head[: limit // 2]
    return f"{head} … [cut: {len(text) - len(head):,} more characters]"


def render_record(record: logging.LogRecord, formatter: logging.Formatter) -> None:
    """Give `record` its final, redacted message (and traceback text), once: `record.msg` becomes the
    message (its `args` merged in), cut to MAX_LOG_MESSAGE_CHARS; `record.exc_text` the redacted traceback.

    Redaction costs time linear in the text; done here, by `RenderFilter` before the handler takes its lock,
    it never makes another thread wait to log.
    """
    if getattr(record, _RENDERED, False):
        return
    record.msg = redact(_cut(record.getMessage(), MAX_LOG_MESSAGE_CHARS))
    record.args = None
    if record.exc_info and not record.exc_text:
        record.exc_text = formatter.formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redact(_cut(record.exc_text, 4 * MAX_LOG_MESSAGE_CHARS))
    if record.stack_info:
        record.stack_info = redact(_cut(record.stack_info, 4 * MAX_LOG_MESSAGE_CHARS))
    setattr(record, _RENDERED, True)


class RenderFilter(logging.Filter):
    """A handler filter that renders each record (`render_record`): `logging.Handler.handle` runs filters
    before it takes the handler's lock, so redaction runs outside it."""

    def __init__(self, formatter: logging.Formatter) -> None:
        super().__init__()
        self._formatter = formatter

    def filter(self, record: logging.LogRecord) -> bool:
        render_record(record, self._formatter)
        return True


# Characters that could start a new line, move the cursor or hide text on a terminal: C0 and C1 controls
# (tab kept), DEL, and Unicode's line and paragraph separators (str.splitlines splits on them).
_CONTROL_ESCAPES = {
    code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    for code in [*range(0x00, 0x09), *range(0x0A, 0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029]
}
_CONTROL_ESCAPES.update({ord("\n"): "\\n", ord("\r"): "\\r"})


def escape_controls(text: str) -> str:
    """`text` on one line: CR, LF and other control characters written as escapes (`\\n`, `\\x1b`), so
    a value from a request cannot start a line of its own in the text log."""
    return text.translate(_CONTROL_ESCAPES)


class JsonFormatter(logging.Formatter):
    """One JSON object per line, in the shape Cloud Logging's agent parses (structured logging). JSON
    escapes every control character, so a message cannot add a line."""

    def format(self, record: logging.LogRecord) -> str:
        render_record(record, self)
        message = record.getMessage()
        if record.exc_text:
            message = f"{message}\n{record.exc_text}"
        elif record.stack_info:
            message = f"{message}\n{record.stack_info}"
        entry: dict[str, Any] = {
            "severity": "CRITICAL" if record.levelno >= logging.CRITICAL else record.levelname,
            "message": message,
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "logger": record.name,
            "logging.googleapis.com/sourceLocation": {
                "file": record.pathname,
                "line": record.lineno,
                "function": record.funcName,
            },
        }
        trace = getattr(record, "trace", None) or _trace.get()
        if trace:
            entry["logging.googleapis.com/trace"] = trace
        return json.dumps(entry, ensure_ascii=False, default=str)


class ConsoleFormatter(logging.Formatter):
    """Readable lines, secrets masked. A record is one line starting at column 0; its message is kept on
    that line (control characters escaped), and a traceback follows on lines indented by four spaces, so no
    text from a request can pass for a record of its own."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        render_record(record, self)
        record.message = escape_controls(record.getMessage())
        record.asctime = self.formatTime(record, self.datefmt)
        line = self.formatMessage(record)
        for block in (record.exc_text, record.stack_info):
            if block:
                line += "".join(f"\n    {escape_controls(part)}" for part in block.splitlines())
        return line


def json_logs_wanted(environ: Mapping[str, str] | None = None) -> bool:
    """JSON on Cloud Run (`K_SERVICE` is set) or when `LOG_FORMAT=json`; `LOG_FORMAT=text` forces lines."""
    env = os.environ if environ is None else environ
    fmt = env.get("LOG_FORMAT", "").strip().lower()
    if fmt in ("json", "text", "console"):
        return fmt == "json"
    return bool(env.get("K_SERVICE"))


def setup_logging(
    level: int = logging.INFO, *, json_format: bool | None = None, stream: IO[str] | None = None
) -> logging.Handler:
    """Configure the root logger with one handler (replacing any earlier ones) and return it.

    Args:
        level: the root level.
        json_format: force JSON (True) or lines (False); None detects (`json_logs_wanted`).
        stream: where to write (default: stderr).
    """
    use_json = json_logs_wanted() if json_format is None else json_format
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    formatter = JsonFormatter() if use_json else ConsoleFormatter()
    handler.setFormatter(formatter)
    handler.addFilter(RenderFilter(formatter))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # httpx logs every request at INFO ("HTTP Request: GET ..."): a line per vLLM and Slack call, rendered and
    # redacted like any line, is CPU under the interpreter lock (a /fleet of 50 deployments wrote 100) and
    # says nothing the audit trail and the error lines do not. Its warnings still show, and at DEBUG all.
    logging.getLogger("httpx").setLevel(level if level < logging.INFO else max(level, logging.WARNING))
    return handler
