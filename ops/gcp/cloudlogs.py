"""Read TPU VM logs from Cloud Logging: the bot's one reader (REST, through the real
`google.cloud.logging` client, its public API only).

TPU VMs log under the monitored resource `resource.type="tpu_worker"` with the labels `project_id`,
`zone`, `node_id` and `worker_id` (docs/google-apis.md §4). vLLM's own output comes from its container
through Docker's gcplogs driver (the startup script, `ops.vllm.deploy`): log `gcplogs-docker-driver`, resource
`gce_instance`, the line in `jsonPayload.message`, the container's `tpu_node` / `tpu_worker_id` labels in
`jsonPayload.container.metadata`, and no severity (docs/google-apis.md §4), so the level is read from the
line (`container_severity`) and the severity restrictions say the same in the query (`severity_clause`).
`build_filter` writes a Logging query for both, ALWAYS with an explicit `timestamp>="..."` bound: the
client library appends `AND timestamp>="<now - 24 h>"` to any filter that lacks the word "timestamp" (§1
item 7 there), which would silently hide older entries.

Every read, `fetch`'s (`/logs`, chat, the alerts) and the planned read of a large window
(`ops.gcp.logplan.read_window`, `/logs analyze`), goes through `LogReader.page`: at most N entries taken
(`itertools.islice`) from the generator of `Client.list_entries`, kept for the next page. That generator
hides the page token and fetches next pages by itself, so the reader counts, paces (`ReadQuota`) and
budgets every HTTP request where the client's session sends it; after a 429 it resumes by the query
(`Listing.query`), not a token (docs/google-apis.md §1 item 9). Google errors become `ops.errors`.

User-supplied filter text (`/vllm logs --filter ...`) is checked by `validate_filter` (printable, at most
500 characters, balanced quotes and parentheses) and passed to the API as data inside the JSON request
body; it is never interpolated into a shell command or anything else.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import islice
from typing import Any

from google.auth.credentials import Credentials
from google.cloud.logging import DESCENDING

from ops.errors import BadInput, QuotaExceeded
from ops.gcp import google
from ops.gcp.google import map_error
from ops.linear import linear
from ops.times import parse_rfc3339, rfc3339
from ops.tpu.model import check_zone

__all__ = [
    "CONTAINER_LOG_ID",
    "MAX_FILTER_CHARS",
    "NODE_LABEL",
    "PAGE_SIZE",
    "RESOURCE_TYPE",
    "SEVERITIES",
    "WORKER_LABEL",
    "Listing",
    "LogEntry",
    "LogReader",
    "ReadQuota",
    "ReadStopped",
    "build_filter",
    "container_log_name",
    "container_severity",
    "entry_from_api",
    "fetch",
    "has_time_bound",
    "severity_clause",
    "severity_rank",
    "validate_filter",
]

RESOURCE_TYPE = "tpu_worker"
MAX_FILTER_CHARS = 500
SEVERITIES = ("DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY")
"""Cloud Logging's LogSeverity names, least severe first (numeric values 0, 100, ..., 800)."""

_SEVERITY_RANK = {name: i for i, name in enumerate(SEVERITIES)}

CONTAINER_LOG_ID = "gcplogs-docker-driver"
"""The log Docker's gcplogs driver writes every container line to (moby daemon/logger/gcplogs/gcplogging.go:
`c.Logger("gcplogs-docker-driver")`; https://docs.docker.com/engine/logging/drivers/gcplogs/)."""
NODE_LABEL = "tpu_node"
"""The vLLM container's label (docker run --label) holding its TPU node id; gcplogs copies the labels named
by `--log-opt labels=` into `jsonPayload.container.metadata` (moby daemon/logger/loginfo.go
ExtraAttributes)."""
WORKER_LABEL = "tpu_worker_id"
"""The vLLM container's label holding the TPU VM's worker number (0 on a single-host slice)."""
_METADATA = "jsonPayload.container.metadata"

# The level a container line carries, by the prefix of the program that wrote it: vLLM's logger
# ("INFO 12-03 10:00:00 [file.py:12] ...", maybe after "(APIServer pid=1) "; vllm/logger.py _FORMAT and
# _DATE_FORMAT), uvicorn's ("INFO:     127.0.0.1:5000 - ..."), glog's as libtpu writes it ("I1203
# 10:00:00.123456  1234 file.cc:12] ..."). Each pattern is valid RE2 (the query's =~) and Python re.
_LEVEL_PATTERNS = {
    "DEBUG": r"\bDEBUG \d\d-\d\d \d\d:\d\d:\d\d|^DEBUG:\s",
    "INFO": r"\bINFO \d\d-\d\d \d\d:\d\d:\d\d|^INFO:\s|^I\d{4} \d\d:\d\d:\d\d\.\d+ ",
    "WARNING": r"\bWARNING \d\d-\d\d \d\d:\d\d:\d\d|^WARNING:\s|^W\d{4} \d\d:\d\d:\d\d\.\d+ ",
}
_LEVEL_RES = {name: linear(pattern) for name, pattern in _LEVEL_PATTERNS.items()}
_ERROR_RANK = _SEVERITY_RANK["ERROR"]


def container_log_name(project: str) -> str:
    """The full log name of the container lines, e.g. "projects/p/logs/gcplogs-docker-driver"."""
    return f"projects/{project}/logs/{CONTAINER_LOG_ID}"


def container_severity(message: str) -> str:
    """The severity of one container line, which gcplogs sends without any (every entry is DEFAULT):
    DEBUG, INFO or WARNING when the line starts with that level (`_LEVEL_PATTERNS`), else ERROR. A line
    without a level is a traceback, an exception or a crash report on stderr: the lines the diagnosis
    needs; progress bars and prints are rarer, and shown among the errors rather than lost.

    Args:
        message: the line, e.g. "(EngineCore pid=7) ERROR 12-03 10:00:00 [core.py:1] EngineCore failed".

    Returns:
        "DEBUG", "INFO", "WARNING" or "ERROR".
    """
    for name, pattern in _LEVEL_RES.items():
        if pattern.search(message):
            return name
    return "ERROR"


def _container(project: str) -> str:
    """The entries of the bot's vLLM containers: the gcplogs log, with the node label present."""
    return f"logName={_quote(container_log_name(project))} AND {_METADATA}.{NODE_LABEL}:*"


def severity_clause(severity: str, project: str) -> str:
    """The Logging query restriction "at least `severity`", for the TPU VMs' entries (their severity) and
    the container's (no severity: the level of the line, as `container_severity` reads it).

    Args:
        severity: a LogSeverity name, e.g. "ERROR" (case-insensitive).
        project: the project id (the container log's name holds it).

    Returns:
        e.g. '(severity>=ERROR OR (logName="projects/p/logs/gcplogs-docker-driver" AND
        jsonPayload.container.metadata.tpu_node:* AND jsonPayload.message!~"..."))' (on one line);
        "severity>=CRITICAL" above ERROR (no container line is read as worse than ERROR).

    Raises:
        BadInput: not a LogSeverity name.
    """
    name = severity.upper()
    if name not in _SEVERITY_RANK:
        raise BadInput(
            f"unknown log severity {severity!r}", f"use one of {', '.join(SEVERITIES)}", backend="logging"
        )
    rank = _SEVERITY_RANK[name]
    native = f"severity>={name}"
    if rank == 0 or rank > _ERROR_RANK:
        return native
    lower = [pattern for level, pattern in _LEVEL_PATTERNS.items() if _SEVERITY_RANK[level] < rank]
    container = _container(project)
    if lower:
        container += f" AND jsonPayload.message!~{_quote('|'.join(lower))}"
    return f"({native} OR ({container}))"


_NODE = linear(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_MESSAGE_MAX = 20_000  # characters of one entry's message kept (a whole traceback fits)


def severity_rank(severity: str | None) -> int:
    """0 (DEFAULT) .. 8 (EMERGENCY) for a LogSeverity name (case-insensitive); unknown or None -> 0."""
    return _SEVERITY_RANK.get((severity or "DEFAULT").upper(), 0)


@dataclass(frozen=True)
class LogEntry:
    """One Cloud Logging entry, reduced to what the bot shows and summarizes.

    Attributes:
        timestamp: when the event happened, an aware UTC datetime.
        severity: LogSeverity name ("DEFAULT" when the entry has none), e.g. "ERROR".
        message: the text: `textPayload`; else `jsonPayload.message` (or the whole JSON payload compacted);
            else for `protoPayload` (audit logs) "<methodName> <resourceName>[: <status.message>]".
        node_id, zone, worker_id: the `tpu_worker` resource labels ("" when absent).
        log_name: the full log name, e.g. "projects/p/logs/tpu.googleapis.com%2Fruntime_monitor".
        resource_type: the monitored resource type, e.g. "tpu_worker".
        insert_id: the entry's insertId ("" when absent).
    """

    timestamp: datetime
    severity: str
    message: str
    node_id: str = ""
    zone: str = ""
    worker_id: str = ""
    log_name: str = ""
    resource_type: str = ""
    insert_id: str = ""

    @property
    def severity_rank(self) -> int:
        """0 (DEFAULT) .. 8 (EMERGENCY); see `severity_rank()`."""
        return severity_rank(self.severity)


def _quote(value: str) -> str:
    """A Logging query string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


# A double-quoted string of the Logging query language, backslash escapes honoured; the closing quote may
# be missing at the end of the text (https://cloud.google.com/logging/docs/view/logging-query-language).
_QUOTED = linear(r'(?s)"(?:[^"\\]|\\.|\\\z)*("?)')


def _quote_runs(text: str) -> Iterator[tuple[str, bool]]:
    """`text` cut into runs outside and inside double quotes, in order: (run, quoted). A quoted run keeps
    its quotes; an unclosed one runs to the end of the text."""
    start = 0
    for match in _QUOTED.finditer(text):
        if match.start() > start:
            yield text[start : match.start()], False
        yield match.group(), True
        start = match.end()
    if start < len(text):
        yield text[start:], False


def _unclosed_quote(text: str) -> bool:
    """True when the last double-quoted string of `text` is never closed."""
    return any(not match.group(1) for match in _QUOTED.finditer(text))


def validate_filter(text: str) -> str:
    """Check user-supplied Logging query text before it is added to a filter.

    The text goes to the API as data (a JSON string field), so this is about giving the user a clear error
    early, not about escaping: it must be printable (no newlines or control characters), at most
    MAX_FILTER_CHARS characters, with balanced double quotes (backslash escapes honoured) and balanced
    parentheses outside quotes.

    Args:
        text: the query, e.g. 'jsonPayload.message:"HBM" OR textPayload:"RESOURCE_EXHAUSTED"'.

    Returns:
        The text stripped of surrounding whitespace.

    Raises:
        BadInput: empty, too long, not printable, or unbalanced.
    """
    text = text.strip()
    hint = 'use Logging query syntax, e.g. textPayload:"RESOURCE_EXHAUSTED"'
    if not text:
        raise BadInput("the log filter is empty", hint, backend="logging")
    if len(text) > MAX_FILTER_CHARS:
        raise BadInput(
            f"the log filter is {len(text)} characters long (at most {MAX_FILTER_CHARS})",
            hint,
            backend="logging",
        )
    if not text.isprintable():
        raise BadInput("the log filter has control characters or line breaks", hint, backend="logging")
    depth = 0
    for run, quoted in _quote_runs(text):
        for char in "" if quoted else run:
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth < 0:
                raise BadInput("the log filter has unbalanced parentheses", hint, backend="logging")
    if _unclosed_quote(text):
        raise BadInput("the log filter has an unclosed double quote", hint, backend="logging")
    if depth != 0:
        raise BadInput("the log filter has unbalanced parentheses", hint, backend="logging")
    return text


def build_filter(
    since: timedelta,
    *,
    project: str,
    severity: str | None = None,
    node: str | None = None,
    zone: str | None = None,
    extra: str | None = None,
    now: datetime | None = None,
) -> str:
    """A Logging query for the logs of the TPU VMs and their vLLM containers newer than `since`.

    Always contains `timestamp>="<now - since>"`, so the client library's 24 h default never applies.

    Args:
        since: how far back to read (> 0), e.g. timedelta(hours=6).
        project: the project id (the container log's name holds it), e.g. "demo-project".
        severity: minimum LogSeverity name, e.g. "ERROR" (-> `severity_clause`); None for all.
        node: a TPU node id (-> `resource.labels.node_id="..."`, or the container's `tpu_node` label);
            None for every node.
        zone: a zone (-> `resource.labels.zone="..."`: `tpu_worker` and `gce_instance` both have it); None
            for every zone.
        extra: user query text, checked by `validate_filter` and ANDed in parentheses.
        now: the current time (aware); None for the wall clock.

    Returns:
        e.g. '(resource.type="tpu_worker" OR (logName="projects/p/logs/gcplogs-docker-driver" AND
        jsonPayload.container.metadata.tpu_node:*)) AND timestamp>="2026-11-29T06:00:00.000000Z" AND
        (resource.labels.node_id="gemma4-qr-node" OR
        jsonPayload.container.metadata.tpu_node="gemma4-qr-node")' (on one line).

    Raises:
        BadInput: `since` not positive, unknown severity, malformed node or zone, or bad `extra`.
    """
    if since <= timedelta(0):
        raise BadInput(f"the log window must be positive, got {since}", "e.g. --since 6h", backend="logging")
    current = now or datetime.now(UTC)
    if current.tzinfo is None:
        raise BadInput("build_filter needs an aware `now`", "pass a UTC datetime", backend="logging")
    parts = [
        f"(resource.type={_quote(RESOURCE_TYPE)} OR ({_container(project)}))",
        f'timestamp>="{rfc3339(current - since, micros=True)}"',
    ]
    if severity is not None:
        parts.append(severity_clause(severity, project))
    if node is not None:
        if not _NODE.match(node):
            raise BadInput(
                f"{node!r} is not a TPU node id", "lowercase letters, digits, hyphens", backend="logging"
            )
        parts.append(f"(resource.labels.node_id={_quote(node)} OR {_METADATA}.{NODE_LABEL}={_quote(node)})")
    if zone is not None:
        check_zone(zone, backend="logging")
        parts.append(f"resource.labels.zone={_quote(zone)}")
    if extra is not None:
        parts.append(f"({validate_filter(extra)})")
    return " AND ".join(parts)


_TIME_BOUND = linear(r'^timestamp\s*(?:>=|>)\s*(?:"[^"]+"|[^\s()"]+)$')


def _top_level_terms(text: str) -> list[str] | None:
    """The restrictions ANDed at the top level of a Logging query (explicit AND or juxtaposition), or None
    when the top level is a disjunction (an OR outside parentheses). Quotes and parentheses are honoured;
    a parenthesised group is one term."""
    terms: list[str] = []
    current: list[str] = []
    depth = 0
    for run, quoted in _quote_runs(text):
        if quoted:
            current.append(run)
            continue
        for char in run:
            depth += {"(": 1, ")": -1}.get(char, 0)
            if char.isspace() and depth == 0:
                if current:
                    terms.append("".join(current))
                    current = []
            else:
                current.append(char)
    if current:
        terms.append("".join(current))
    if "OR" in terms:
        return None
    # Rejoin `field OP value` written with spaces around the operator into one term.
    joined: list[str] = []
    for term in terms:
        if term == "AND":
            continue
        if joined and (term[:1] in "<>=!:" or joined[-1][-1:] in "<>=!:~"):
            joined[-1] += term
        else:
            joined.append(term)
    return joined


def has_time_bound(filter_: str) -> bool:
    """True when the Logging query restricts `timestamp` from below at its top level: a term
    `timestamp>="..."` (or `>`) ANDed with the rest, not inside OR, NOT or parentheses.

    The client library only looks for the substring "timestamp" before adding its 24 h default
    (google-cloud-logging `_helpers._add_defaults_to_filter`), so `jsonPayload.timestamp_ms>0` or
    `NOT timestamp>="..."` would pass it and read without any bound.

    Args:
        filter_: a Logging query, e.g. 'resource.type="tpu_worker" AND timestamp>="2026-11-29T06:00:00Z"'.

    Returns:
        Whether such a lower bound is present.
    """
    terms = _top_level_terms(filter_)
    if terms is None:
        return False
    return any(_TIME_BOUND.match(term) and terms[i - 1 : i] != ["NOT"] for i, term in enumerate(terms))


def _message(payload: Any, kind: str) -> str:
    if kind == "text":
        text = str(payload)
    elif kind == "json" and isinstance(payload, Mapping):
        message = payload.get("message")
        text = str(message) if message is not None else json.dumps(payload, sort_keys=True, default=str)
    elif kind == "proto" and isinstance(payload, Mapping):
        method = str(payload.get("methodName", ""))
        resource = str(payload.get("resourceName", ""))
        status = payload.get("status") or {}
        text = " ".join(p for p in (method, resource) if p)
        text = text or json.dumps(payload, sort_keys=True, default=str)
        if isinstance(status, Mapping) and status.get("message"):
            text += f": {status['message']}"
    elif payload is None:
        text = ""
    else:
        text = json.dumps(payload, sort_keys=True, default=str)
    return text[:_MESSAGE_MAX]


def _parse_time(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    return parse_rfc3339(str(value or "")) or datetime.fromtimestamp(0, UTC)


def entry_from_api(raw: Mapping[str, Any]) -> LogEntry:
    """A `LogEntry` from one raw JSON entry of `entries.list` (logging.v2 LogEntry shape).

    Args:
        raw: e.g. {"logName": ..., "resource": {"type": "tpu_worker", "labels": {...}}, "timestamp": ...,
            "severity": "ERROR", "textPayload": "..."}.

    Returns:
        The entry (missing fields become "", a missing timestamp the epoch).
    """
    resource = raw.get("resource") or {}
    labels = dict(resource.get("labels") or {})
    if "textPayload" in raw:
        message = _message(raw["textPayload"], "text")
    elif "jsonPayload" in raw:
        message = _message(raw["jsonPayload"], "json")
    elif "protoPayload" in raw:
        message = _message(raw["protoPayload"], "proto")
    else:
        message = ""
    return _entry(
        timestamp=_parse_time(raw.get("timestamp")),
        severity=str(raw.get("severity") or "DEFAULT"),
        message=message,
        labels=labels,
        payload=raw.get("jsonPayload"),
        log_name=str(raw.get("logName", "")),
        resource_type=str(resource.get("type", "")),
        insert_id=str(raw.get("insertId", "")),
    )


def _entry(
    *,
    timestamp: datetime,
    severity: str,
    message: str,
    labels: Mapping[str, Any],
    payload: Any,
    log_name: str,
    resource_type: str,
    insert_id: str,
) -> LogEntry:
    """A LogEntry; a container line (the gcplogs log) gets its node and worker from the container's labels
    and its severity from the line (`container_severity`), gcplogs having sent none."""
    node, worker = labels.get("node_id", ""), labels.get("worker_id", "")
    if log_name.endswith(f"/logs/{CONTAINER_LOG_ID}") and isinstance(payload, Mapping):
        container = payload.get("container")
        metadata = container.get("metadata") if isinstance(container, Mapping) else None
        if isinstance(metadata, Mapping):
            node, worker = metadata.get(NODE_LABEL, node), metadata.get(WORKER_LABEL, worker)
        if severity == "DEFAULT":
            severity = container_severity(message)
    return LogEntry(
        timestamp=timestamp,
        severity=severity,
        message=message,
        node_id=str(node),
        zone=str(labels.get("zone", "")),
        worker_id=str(worker),
        log_name=log_name,
        resource_type=resource_type,
        insert_id=insert_id,
    )


def _from_client_entry(entry: Any) -> LogEntry:
    """A `LogEntry` from a google.cloud.logging TextEntry / StructEntry / ProtobufEntry / LogEntry."""
    kind = type(entry).__name__
    payload = entry.payload
    if kind == "TextEntry":
        message = _message(payload, "text")
    elif kind == "StructEntry":
        message = _message(payload, "json")
    elif kind == "ProtobufEntry":
        message = _message(payload if isinstance(payload, Mapping) else entry.payload_json, "proto")
    else:
        message = _message(payload, "other")
    resource = entry.resource
    labels = dict(getattr(resource, "labels", None) or {})
    timestamp = entry.timestamp or datetime.fromtimestamp(0, UTC)
    return _entry(
        timestamp=_parse_time(timestamp),
        severity=str(entry.severity or "DEFAULT"),
        message=message,
        labels=labels,
        payload=payload if kind == "StructEntry" else None,
        log_name=str(entry.log_name or ""),
        resource_type=str(getattr(resource, "type", "") or ""),
        insert_id=str(entry.insert_id or ""),
    )


PAGE_SIZE = 1000
"""The most entries `entries.list` returns per call (LogEntries pageSize maximum)."""
BACKOFF_FIRST_S = 2.0
BACKOFF_MAX_S = 60.0
"""A 429's back-off doubles from the first to the most (the quota error carries no Retry-After)."""


class ReadQuota:
    """Paces `entries.list` calls of one project: at most `per_minute` in any 60 s, and none while a 429's
    back-off runs. Thread-safe; share one per project across the process.

    Args:
        per_minute: calls allowed per minute (Logging's default read quota: 60,
            https://cloud.google.com/logging/quotas#api-limits).
        clock: seconds, monotonic (default `time.monotonic`; the benchmark passes simulated time).
        sleep: waits that many seconds (default `time.sleep`).
    """

    def __init__(
        self,
        per_minute: int = 60,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if per_minute < 1:
            raise BadInput(f"per_minute must be at least 1, got {per_minute}", "", backend="logging")
        self.per_minute, self.clock, self.sleep = per_minute, clock, sleep
        self._calls: deque[float] = deque()  # when the calls of the last minute were sent
        self._blocked_until = 0.0
        self._lock = threading.Lock()

    def acquire(self, deadline: float) -> bool:
        """Wait for a free slot and take it. Returns False (nothing taken) if none frees before `deadline`
        (a `clock` value)."""
        while True:
            with self._lock:
                now = self.clock()
                while self._calls and self._calls[0] <= now - 60:
                    self._calls.popleft()
                wait = max(self._blocked_until - now, 0.0)
                if len(self._calls) >= self.per_minute:
                    wait = max(wait, self._calls[0] + 60 - now)
                if wait <= 0:
                    self._calls.append(now)
                    return True
            if now + wait > deadline:
                return False
            self.sleep(wait)

    def throttled(self, backoff_s: float) -> None:
        """A 429 arrived: no call for `backoff_s` seconds."""
        with self._lock:
            self._blocked_until = max(self._blocked_until, self.clock() + backoff_s)


class ReadStopped(Exception):
    """The read budget, the deadline or a cancel came before a `LogReader`'s next request (not sent)."""


class Listing:
    """The entries of one Logging query, newest first, as far as a `LogReader` has read them: the client's
    generator while it lasts, and where to resume by the query itself when it does not.

    Args:
        filter_: the query, with a time bound (`build_filter`).
        page_size: entries per `entries.list` call, 1..PAGE_SIZE.
        sample: read `sample(insertId, sample)` of the entries only (0 < sample < 1); None: all of them.

    Attributes:
        done: every entry of the query was read (the client's generator ended).
    """

    def __init__(self, filter_: str, page_size: int = PAGE_SIZE, sample: float | None = None) -> None:
        self.filter_, self.page_size, self.sample = filter_, page_size, sample
        self.done = False
        self._oldest: datetime | None = None  # the oldest entry's timestamp read, to the microsecond
        self._at_oldest: set[str] = set()  # the insertIds read at `_oldest`
        self._entries: Iterator[Any] | None = None  # the client's generator, None once it ended or failed

    def remaining(self, sample: float | None = None) -> Listing:
        """A new listing of the entries of this query not read here yet (`sample` of them)."""
        rest = Listing(self.filter_, self.page_size, sample)
        rest._oldest, rest._at_oldest = self._oldest, set(self._at_oldest)
        return rest

    def query(self) -> str:
        """The filter to send to read on: the query, below the microsecond after the oldest entry read
        (the client's timestamps stop at microseconds; the entries of that microsecond already read are
        skipped by `take`: entries of one timestamp are told apart by their insertId,
        https://cloud.google.com/logging/docs/reference/v2/rest/v2/LogEntry), then the sample clause last,
        e.g. '... AND timestamp<"2026-11-29T11:59:07.000124Z" AND sample(insertId, 0.01802)'."""
        parts = [self.filter_]
        if self._oldest is not None:
            parts.append(f'timestamp<"{rfc3339(self._oldest + timedelta(microseconds=1), micros=True)}"')
        if self.sample is not None:
            parts.append(f"sample(insertId, {self.sample:.6g})")
        return " AND ".join(parts)

    def take(self, entry: LogEntry) -> bool:
        """Note `entry` as read. False when it was already: one of the oldest microsecond's entries, sent
        again by a query that resumes there."""
        if self._oldest is None or entry.timestamp < self._oldest:
            self._oldest, self._at_oldest = entry.timestamp, {entry.insert_id}
            return True
        if entry.insert_id in self._at_oldest:
            return False
        self._at_oldest.add(entry.insert_id)
        return True


class LogReader:
    """Every `entries.list` request of one read (`fetch`, `ops.gcp.logplan.read_window`), through one
    `google.cloud.logging.Client`: counted, paced, kept within a budget where it is sent (the client's
    session calls `_before_request`), a 429 backed off and the read resumed by its query, Google's errors
    mapped, entries parsed (`LogEntry`). Close it when done (`close`).

    Args:
        project: the project id; entries of "projects/<project>" are read.
        quota: the project's `ReadQuota`: every request waits for a slot, a 429 is backed off and the read
            resumed. None: nothing paced, and a 429 raises QuotaExceeded (an interactive read answers now).
        max_reads: the most requests answered (429s apart); None for no limit.
        deadline_s: no request after this many seconds of `quota.clock` (with a quota; default none).
        api_endpoint: e.g. "http://127.0.0.1:43121" (the simulator); None for the real API.
        credentials: google-auth credentials; None: anonymous for an endpoint, else ADC.
        cancel: set it to send no further request.

    Attributes:
        requests: HTTP requests the client sent (the generator's own next pages and 429s included).
        throttled: of them, answered 429.

    Raises:
        PermissionDenied: no credentials given and no Application Default Credentials found.
    """

    def __init__(
        self,
        project: str,
        *,
        quota: ReadQuota | None = None,
        max_reads: int | None = None,
        deadline_s: float = float("inf"),
        api_endpoint: str | None = None,
        credentials: Credentials | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        self.project, self.quota, self.max_reads, self.cancel = project, quota, max_reads, cancel
        self.deadline = quota.clock() + deadline_s if quota is not None else deadline_s
        self.requests = self.throttled = 0
        self._stopped = False  # a page returned what it had when the budget came: the next one raises
        self.what = f"Cloud Logging entries.list projects/{project}"
        self.client = google.cloud_logging(
            project, api_endpoint, credentials, before_request=self._before_request
        )

    @property
    def reads(self) -> int:
        """`entries.list` requests answered (the 429s apart)."""
        return self.requests - self.throttled

    def _before_request(self) -> None:
        """Every HTTP request of the client, before it is sent: refused (ReadStopped) past the budget, the
        deadline or a cancel, else paced by the quota, then counted."""
        cancelled = self.cancel is not None and self.cancel.is_set()
        if cancelled or (self.max_reads is not None and self.reads >= self.max_reads):
            raise ReadStopped
        quota = self.quota
        if quota is not None and (quota.clock() >= self.deadline or not quota.acquire(self.deadline)):
            raise ReadStopped
        self.requests += 1

    def page(self, listing: Listing, size: int | None = None) -> list[LogEntry]:
        """The next entries of `listing`, newest first, at most `size` (default its page size): one
        `entries.list` request, more when the API cut a page short (the client's generator asks for the
        next), after a 429 (backed off, the read resumed by the query) or a page only of entries read
        before such a resume. `listing.done` tells whether more remain.

        Raises:
            ReadStopped: the budget, the deadline or the cancel came before a request, and nothing was
                read yet (else what was read is returned, and the next call raises).
            BadInput (400), PermissionDenied (401/403), NotFound (404), QuotaExceeded (429, without a
            quota), BackendUnavailable (5xx, connection refused), BackendTimeout (timeouts, 504): from
                `ops.gcp.google.map_error`.
        """
        if self._stopped:
            raise ReadStopped
        size = listing.page_size if size is None else size
        want, got = size, []
        backoff = BACKOFF_FIRST_S
        while want > 0 and not listing.done:
            if listing._entries is None:
                listing._entries = iter(
                    self.client.list_entries(
                        resource_names=[f"projects/{self.project}"],
                        filter_=listing.query(),
                        order_by=DESCENDING,
                        page_size=listing.page_size,
                    )
                )
            asked, taken = want, 0
            try:
                for item in islice(listing._entries, asked):
                    taken += 1
                    entry = _from_client_entry(item)
                    if listing.take(entry):
                        got.append(entry)
            except ReadStopped:
                listing._entries = None
                if not got:
                    raise
                self._stopped = True
                return got
            except Exception as exc:
                listing._entries = None  # the generator ended with the error: resume by the query
                error = map_error(exc, self.what, backend="logging", api="Cloud Logging")
                if not isinstance(error, QuotaExceeded) or self.quota is None:
                    raise error from exc
                self.throttled += 1
                self.quota.throttled(backoff)
                backoff = min(BACKOFF_MAX_S, backoff * 2)
                want -= taken
                continue
            want -= taken
            if taken < asked:
                listing.done = True
            elif want == 0 and not got:
                want = size
        return got

    def close(self) -> None:
        """Close the client's HTTP session."""
        self.client.close()


def fetch(
    project: str,
    filter_: str,
    *,
    limit: int | None = None,
    page_size: int = 1000,
    api_endpoint: str | None = None,
    credentials: Credentials | None = None,
) -> Iterator[LogEntry]:
    """Read log entries matching a filter, newest first, page by page (lazily), through a `LogReader`
    without a quota: `google.cloud.logging.Client.list_entries`, i.e. `POST /v2/entries:list` with
    `orderBy: "timestamp desc"`.

    Args:
        project: the project id; entries of "projects/<project>" are read.
        filter_: a Logging query that MUST contain a timestamp restriction (use `build_filter`): without
            one the library would silently restrict it to the last 24 hours.
        limit: the most entries to yield; None reads every page.
        page_size: entries per API call (1..1000).
        api_endpoint: e.g. "http://127.0.0.1:43121" (the simulator); None for the real API.
        credentials: google-auth credentials; None: anonymous for an endpoint, else ADC.

    Yields:
        LogEntry, newest first.

    Raises:
        BadInput: the filter has no time bound (`has_time_bound`), or limit/page_size out of range; HTTP
            400 from the API (e.g. an unparseable filter).
        PermissionDenied (401/403, no credentials), NotFound (404), QuotaExceeded (429),
        BackendUnavailable (5xx, connection refused), BackendTimeout (timeouts, 504): from
            `ops.gcp.google.map_error` with backend "logging". Errors on a later page are raised after the
            earlier entries were yielded.
    """
    if not has_time_bound(filter_):
        raise BadInput(
            "the log filter has no lower bound on `timestamp` ANDed at its top level (the client would "
            "silently add the last 24 h, or read without a bound when another field is named timestamp)",
            "build it with ops.gcp.cloudlogs.build_filter",
            backend="logging",
        )
    if limit is not None and limit < 0:
        raise BadInput(f"limit must be >= 0, got {limit}", "", backend="logging")
    if not 1 <= page_size <= 1000:
        raise BadInput(f"page_size must be 1..1000, got {page_size}", "", backend="logging")
    if limit == 0:
        return
    listing = Listing(filter_, min(page_size, limit) if limit is not None else page_size)
    left = limit
    reader = LogReader(project, api_endpoint=api_endpoint, credentials=credentials)
    try:
        while not listing.done and (left is None or left > 0):
            entries = reader.page(listing, None if left is None else min(listing.page_size, left))
            yield from entries
            if left is not None:
                left -= len(entries)
    finally:
        reader.close()
