"""Read a log window within Cloud Logging's read quota: plan the reads, pace them, back off, label gaps.

Cloud Logging allows 60 `entries.list` calls per minute per project by default, at most 1,000 entries a
page (https://cloud.google.com/logging/quotas#api-limits). Paging through a busy hour (1,000,000 entries)
would take 1,000 reads, over 16 minutes of quota. `read_window` instead:

1. reads every entry at ERROR or worse, newest first (at most `error_pages` pages; a vLLM container line,
   which gcplogs sends without a severity, by its level: `ops.gcp.cloudlogs.severity_clause`); when there
   are more, a sample of the older ones sized to `older_error_entries` (as in 3), so every error kind of the
   window is counted, the older ones by estimate;
2. reads one page of the rest; if the rest fits in it, that is all;
3. otherwise estimates the rest's size from one page of `sample(insertId, PROBE_FRACTION)` (a tenth of that
   again while the probe overflows its page, `probe_estimate`) and reads a
   `sample(insertId, f)` of it sized to `rest_entries` (the Logging query language's sample function,
   https://cloud.google.com/logging/docs/view/logging-query-language#sample), each sampled entry standing
   for 1/f entries;
4. paces every read through a `ReadQuota` (a sliding minute shared by all reads of the process), backs off
   exponentially on a 429 (the quota error carries no Retry-After), and stops at its read budget or
   deadline, returning what it has with what is missing.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from google.auth.credentials import Credentials

from ops.errors import BadInput, OpsError, QuotaExceeded
from ops.gcp import google
from ops.gcp.cloudlogs import LogEntry, entry_from_api, has_time_bound, severity_clause
from ops.gcp.google import map_error
from ops.times import rfc3339

__all__ = ["PROBE_FRACTION", "ReadQuota", "ReadReport", "probe_estimate", "read_window"]

PAGE_SIZE = 1000
"""The most entries `entries.list` returns per call (LogEntries pageSize maximum)."""
PROBE_FRACTION = 0.001
"""Sample fraction of the one-page probe that estimates how many entries a large window holds."""
PROBE_REFINE = 10
"""A probe that overflows its page (over PAGE_SIZE / PROBE_FRACTION = 1,000,000 entries) is sent again at
a tenth of its fraction, so the estimate (and the sample sized from it) follows the window's size."""
MAX_PROBES = 3
"""Probe reads at most (fractions 0.001, 0.0001, 0.00001: windows up to about 100,000,000 entries)."""
BACKOFF_FIRST_S = 2.0
BACKOFF_MAX_S = 60.0


class ReadQuota:
    """Paces `entries.list` calls of one project: at most `per_minute` in any 60 s, and none while a 429's
    back-off runs. Thread-safe; share one per project across the process.

    Args:
        per_minute: calls allowed per minute (Logging's default read quota: 60).
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
        self.per_minute = per_minute
        self.clock = clock
        self.sleep = sleep
        self._calls: deque[float] = deque()
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


@dataclass
class ReadReport:
    """What `read_window` read.

    Attributes:
        reads: `entries.list` calls that returned entries (429s not counted; see `throttled`).
        throttled: 429 answers received (each followed by a back-off).
        error_entries: entries at ERROR or worse read one by one, the newest (all of them when
            `errors_complete`).
        errors_complete: every error entry of the window was read.
        older_errors_read: error entries read from the sample of those older than the `error_entries`.
        older_errors_fraction: that sample's fraction (1.0: no sample was needed or taken).
        rest_read: entries below ERROR read (the sample, or all of them).
        sample_fraction: the fraction of the entries below ERROR read (1.0: all).
        estimated_entries: entries in the window, estimated (exact when nothing was sampled or cut).
        missing: what was not read, one phrase each (empty when the read was complete as planned).
    """

    reads: int = 0
    throttled: int = 0
    error_entries: int = 0
    errors_complete: bool = False
    older_errors_read: int = 0
    older_errors_fraction: float = 1.0
    rest_read: int = 0
    sample_fraction: float = 1.0
    estimated_entries: int = 0
    missing: list[str] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        """True when something planned could not be read."""
        return bool(self.missing)


class _OutOfBudget(Exception):
    """The read budget or the deadline is used up."""


class _Reader:
    def __init__(
        self,
        project: str,
        quota: ReadQuota,
        report: ReadReport,
        *,
        max_reads: int,
        deadline: float,
        api_endpoint: str | None,
        credentials: Credentials | None,
        cancel: threading.Event | None,
    ) -> None:
        self.project = project
        self.quota = quota
        self.report = report
        self.max_reads = max_reads
        self.deadline = deadline
        self.cancel = cancel
        self.client = google.cloud_logging(project, api_endpoint, credentials)
        self.what = f"Cloud Logging entries.list projects/{project}"

    def page(self, filter_: str, token: str | None) -> tuple[list[LogEntry], str | None]:
        """One page, newest first: paced, retried after a back-off on 429 until the deadline."""
        backoff = BACKOFF_FIRST_S
        while True:
            if self.report.reads >= self.max_reads or (self.cancel is not None and self.cancel.is_set()):
                raise _OutOfBudget
            if self.quota.clock() >= self.deadline:
                raise _OutOfBudget
            if not self.quota.acquire(self.deadline):
                raise _OutOfBudget
            body = {
                "resourceNames": [f"projects/{self.project}"],
                "filter": filter_,
                "orderBy": "timestamp desc",
                "pageSize": PAGE_SIZE,
            }
            if token:
                body["pageToken"] = token
            try:
                # The library's list_entries is a generator that hides the page token; its connection sends
                # the same POST /v2/entries:list (auth, retries of the transport, error mapping).
                page = self.client._connection.api_request(method="POST", path="/entries:list", data=body)
                entries = [entry_from_api(raw) for raw in page.get("entries") or []]
            except Exception as exc:
                error = (
                    exc
                    if isinstance(exc, OpsError)
                    else map_error(exc, self.what, backend="logging", api="Cloud Logging")
                )
                if not isinstance(error, QuotaExceeded):
                    raise error from exc
                self.report.throttled += 1
                self.quota.throttled(backoff)
                backoff = min(BACKOFF_MAX_S, backoff * 2)
                continue
            self.report.reads += 1
            return entries, page.get("nextPageToken") or None

    def close(self) -> None:
        self.client.close()


def read_window(
    project: str,
    filter_: str,
    sink: Callable[[LogEntry, float], None],
    *,
    quota: ReadQuota,
    max_reads: int = 50,
    error_pages: int = 15,
    older_error_entries: int = 5_000,
    rest_entries: int = 20_000,
    deadline_s: float = 120.0,
    api_endpoint: str | None = None,
    credentials: Credentials | None = None,
    cancel: threading.Event | None = None,
) -> ReadReport:
    """Read a log window as the module docstring plans it, handing each entry to `sink(entry, weight)`
    (weight: how many entries it stands for, 1/f for a sample of fraction f) and keeping none.

    Args:
        project: the project id.
        filter_: the window's Logging query, with a time bound (`ops.gcp.cloudlogs.build_filter`); it must not
            restrict severity (the plan adds `severity_clause("ERROR", project)` and its negation, which
            read a container line by its level).
        sink: called once per entry read, in read order.
        quota: the project's `ReadQuota` (shared with other reads of the process).
        max_reads: the most `entries.list` calls (default 50 of the 60 a minute allows).
        error_pages: the most pages of ERROR-or-worse entries read one by one (1,000 each).
        older_error_entries: about how many of the older errors to read when there are more (the sample size).
        rest_entries: about how many entries below ERROR to read (the sample size).
        deadline_s: stop reading after this many seconds of `quota.clock`.
        api_endpoint, credentials: as for `ops.gcp.cloudlogs.fetch`.
        cancel: set it to stop after the current read (what was read is kept, labelled partial).

    Returns:
        ReadReport; `missing` names what was not read when the budget, the deadline or a cancel cut it.

    Raises:
        BadInput: no time bound in the filter; a 400 from the API. PermissionDenied, NotFound,
        BackendUnavailable, BackendTimeout: from `ops.gcp.google.map_error` (429s are backed off, not raised).
        QuotaExceeded: every read was refused with 429 until the deadline (nothing was read).
    """
    if not has_time_bound(filter_):
        raise BadInput(
            "the log filter has no lower bound on `timestamp`",
            "build it with ops.gcp.cloudlogs.build_filter",
            backend="logging",
        )
    report = ReadReport()
    reader = _Reader(
        project,
        quota,
        report,
        max_reads=max_reads,
        deadline=quota.clock() + deadline_s,
        api_endpoint=api_endpoint,
        credentials=credentials,
        cancel=cancel,
    )
    at_error = severity_clause("ERROR", project)  # the container's lines by their level (no severity)
    errors_filter = f"{filter_} AND {at_error}"
    rest_filter = f"{filter_} AND NOT {at_error}"
    oldest_error: datetime | None = None
    errors_covered = False  # every error read, or the newest and a sample of the rest of them
    held: list[LogEntry] = []  # the newest page of the rest, kept until a sample replaces it
    try:
        token: str | None = None
        for _ in range(error_pages):
            entries, token = reader.page(errors_filter, token)
            for entry in entries:
                sink(entry, 1.0)
                oldest_error = entry.timestamp
            report.error_entries += len(entries)
            if token is None:
                report.errors_complete = True
                break
        if not report.errors_complete:
            # Pages may come back empty with a next page: with no error read yet, all of them are "older".
            older_filter = (
                errors_filter
                if oldest_error is None
                else f'{errors_filter} AND timestamp < "{rfc3339(oldest_error, micros=True)}"'
            )
            _read_sample(
                reader, older_filter, sink, older_error_entries, lambda f, n: _count_older(report, f, n)
            )
        errors_covered = True
        held, token = reader.page(rest_filter, None)
        if token is not None:
            _read_sample(
                reader, rest_filter, sink, rest_entries, lambda f, n: _count_rest(report, held, f, n)
            )
    except _OutOfBudget:
        stopped = "cancelled" if cancel is not None and cancel.is_set() else "read budget or deadline reached"
        if not errors_covered:
            report.missing.append(f"errors beyond the newest {report.error_entries:,}, in part ({stopped})")
        report.missing.append(f"entries below ERROR, in part or whole ({stopped})")
    finally:
        reader.close()
    if held:  # all of the rest, or what a cut read has of it: better than nothing
        report.sample_fraction = 1.0
        report.rest_read = len(held)
        for entry in held:
            sink(entry, 1.0)
    if report.reads == 0 and report.throttled:
        raise QuotaExceeded(
            f"Cloud Logging refused every read of projects/{project} ({report.throttled} times: read quota, "
            "60 entries.list calls a minute by default)",
            "try again in a minute, or ask for a higher 'Read requests per minute' quota",
            backend="logging",
        )
    rest_estimate = report.rest_read / report.sample_fraction if report.sample_fraction else 0
    older_estimate = report.older_errors_read / report.older_errors_fraction
    report.estimated_entries = report.error_entries + round(older_estimate + rest_estimate)
    return report


def _count_older(report: ReadReport, fraction: float, entries: int | None) -> None:
    report.older_errors_fraction = fraction
    report.older_errors_read += entries or 0


def _count_rest(report: ReadReport, held: list[LogEntry], fraction: float, entries: int | None) -> None:
    report.sample_fraction = fraction
    if entries is not None:  # a page of the sample came: it replaces the newest page of the rest
        held.clear()
        report.rest_read += entries


def probe_estimate(found: int, overflowed: bool, fraction: float, *, last: bool) -> float | None:
    """How many entries a window holds, from one page of `sample(insertId, fraction)`.

    Args:
        found: entries on the probe's page (at most PAGE_SIZE).
        overflowed: the probe had a next page (more than PAGE_SIZE sampled entries).
        fraction: the probe's sample fraction, e.g. 0.001.
        last: no finer probe will be sent.

    Returns:
        found / fraction (at least 1 / fraction); for an overflowed probe None (send a finer one) unless
        `last`, then the lower bound 2 x PAGE_SIZE / fraction.
    """
    if overflowed:
        return 2 * PAGE_SIZE / fraction if last else None
    return max(found, 1) / fraction


def _read_sample(
    reader: _Reader,
    filter_: str,
    sink: Callable[[LogEntry, float], None],
    entries: int,
    counted: Callable[[float, int | None], None],
) -> None:
    """Estimate how many entries `filter_` matches from one probe page, then read a sample of about
    `entries` of them, each handed to `sink` with weight 1/f: `counted(f, None)` once f is chosen (so a
    read cut later is scaled by it), then `counted(f, n)` before each page of n entries is handed on."""
    probe_fraction, probes, estimate = PROBE_FRACTION, 0, None
    while estimate is None:
        probes += 1
        probe, more = reader.page(f"{filter_} AND sample(insertId, {probe_fraction:.6g})", None)
        estimate = probe_estimate(len(probe), more is not None, probe_fraction, last=probes >= MAX_PROBES)
        probe_fraction /= PROBE_REFINE
    fraction = float(f"{min(1.0, entries / estimate):.6g}")  # the value the query states
    query = filter_ if fraction >= 1.0 else f"{filter_} AND sample(insertId, {fraction:.6g})"
    weight = 1.0 / fraction
    counted(fraction, None)
    token: str | None = None
    while True:
        page, token = reader.page(query, token)
        counted(fraction, len(page))
        for entry in page:
            sink(entry, weight)
        if token is None:
            return
