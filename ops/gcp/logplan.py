"""The planned read of a large log window within Cloud Logging's read quota: what to read of it, and what
was not read. Every read goes through the one reader, `ops.gcp.cloudlogs.LogReader` (pacing, back-off,
budget, errors, entries); this module only chooses the queries and weighs what they return.

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
4. reads through a `LogReader` that paces every request by a `ReadQuota` (a sliding minute shared by all
   reads of the process), backs off exponentially on a 429, and stops at the read budget or deadline;
   `read_window` then returns what it has with what is missing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from google.auth.credentials import Credentials

from ops.errors import BadInput, QuotaExceeded
from ops.gcp.cloudlogs import (
    PAGE_SIZE,
    Listing,
    LogEntry,
    LogReader,
    ReadQuota,
    ReadStopped,
    has_time_bound,
    severity_clause,
)

__all__ = ["PROBE_FRACTION", "PROBE_REFINE", "ReadReport", "probe_estimate", "read_window"]

PROBE_FRACTION = 0.001
"""Sample fraction of the one-page probe that estimates how many entries a large window holds."""
PROBE_REFINE = 10
"""A probe that overflows its page (over PAGE_SIZE / PROBE_FRACTION = 1,000,000 entries) is sent again at
a tenth of its fraction, so the estimate (and the sample sized from it) follows the window's size."""
MAX_PROBES = 3
"""Probe reads at most (fractions 0.001, 0.0001, 0.00001: windows up to about 100,000,000 entries)."""


@dataclass
class ReadReport:
    """What `read_window` read.

    Attributes:
        reads: `entries.list` requests answered, counted where the client sent them (`LogReader.reads`:
            the requests it sent on its own for pages the API cut short included; 429s apart, see
            `throttled`).
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
        max_reads: the most `entries.list` requests answered (default 50 of the 60 a minute allows).
        error_pages: the most pages of ERROR-or-worse entries read one by one (1,000 each).
        older_error_entries: about how many of the older errors to read when there are more (the sample size).
        rest_entries: about how many entries below ERROR to read (the sample size).
        deadline_s: stop reading after this many seconds of `quota.clock`.
        api_endpoint, credentials: as for `ops.gcp.cloudlogs.fetch`.
        cancel: set it to stop before the next request (what was read is kept, labelled partial).

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
    reader = LogReader(
        project,
        quota=quota,
        max_reads=max_reads,
        deadline_s=deadline_s,
        api_endpoint=api_endpoint,
        credentials=credentials,
        cancel=cancel,
    )
    at_error = severity_clause("ERROR", project)  # the container's lines by their level (no severity)
    errors = Listing(f"{filter_} AND {at_error}")
    rest_filter = f"{filter_} AND NOT {at_error}"
    errors_covered = False  # every error read, or the newest and a sample of the rest of them
    held: list[LogEntry] = []  # the newest page of the rest, kept until a sample replaces it
    try:
        for _ in range(error_pages):
            entries = reader.page(errors)
            for entry in entries:
                sink(entry, 1.0)
            report.error_entries += len(entries)
            if errors.done:
                report.errors_complete = True
                break
        if not report.errors_complete:  # the older errors: those the listing has not read
            _read_sample(reader, errors, sink, older_error_entries, lambda f, n: _count_older(report, f, n))
        errors_covered = True
        rest = Listing(rest_filter)
        held = reader.page(rest)
        if not rest.done:
            _read_sample(
                reader, Listing(rest_filter), sink, rest_entries, lambda f, n: _count_rest(report, held, f, n)
            )
    except ReadStopped:
        stopped = "cancelled" if cancel is not None and cancel.is_set() else "read budget or deadline reached"
        if not errors_covered:
            report.missing.append(f"errors beyond the newest {report.error_entries:,}, in part ({stopped})")
        report.missing.append(f"entries below ERROR, in part or whole ({stopped})")
    finally:
        reader.close()
    report.reads, report.throttled = reader.reads, reader.throttled
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
        overflowed: the probe's page was full (there may be more than PAGE_SIZE sampled entries).
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
    reader: LogReader,
    listing: Listing,
    sink: Callable[[LogEntry, float], None],
    entries: int,
    counted: Callable[[float, int | None], None],
) -> None:
    """Estimate from one probe page how many entries of `listing`'s query it has not read yet, then read a
    sample of about `entries` of them, each handed to `sink` with weight 1/f: `counted(f, None)` once f is
    chosen (so a read cut later is scaled by it), then `counted(f, n)` before each page of n entries is
    handed on."""
    probe_fraction, probes, estimate = PROBE_FRACTION, 0, None
    while estimate is None:
        probes += 1
        probe = listing.remaining(probe_fraction)
        found = reader.page(probe)
        estimate = probe_estimate(len(found), not probe.done, probe_fraction, last=probes >= MAX_PROBES)
        probe_fraction /= PROBE_REFINE
    fraction = float(f"{min(1.0, entries / estimate):.6g}")  # the value the query states
    sample = listing.remaining(None if fraction >= 1.0 else fraction)
    weight = 1.0 / fraction
    counted(fraction, None)
    while not sample.done:
        page = reader.page(sample)
        counted(fraction, len(page))
        for entry in page:
            sink(entry, weight)
