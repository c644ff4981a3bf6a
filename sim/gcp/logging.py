"""The Cloud Logging API (logging.googleapis.com v2, entries.list) of the Google simulator, SIMULATED.

    POST /v2/entries:list        reads its JSON body (the real client: `ops.gcp.google.cloud_logging(url)`)

Body fields: resourceNames (projects/{p} only), filter (see `sim.gcp.logfilter`), orderBy ("timestamp asc"
default, or "timestamp desc"; ties by insertId), pageSize (default 50, at most 1000, a negative one is a
400) and pageToken (opaque, bound to the filter and order). Reads count against the per-minute quota of
`World.log_read_quota` and are refused past it, as Cloud Logging does; `World.log_reads_served` counts
the answered ones. `GcpSimulator.cut_log_searches` makes the next answers end early with a nextPageToken,
as Cloud Logging's do when a search runs out of time.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import zlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sim.gcp.api import ApiError, json_body
from sim.gcp.logentry import SimLogEntry, insert_id_of, log_entry_json
from sim.gcp.logfilter import FilterError, parse_log_filter
from sim.gcp.world import Route, World

LOG_PAGE_SIZE_DEFAULT = 50
LOG_PAGE_SIZE_MAX = 1000
SAMPLE_BUCKETS = 4096
"""Buckets of the simulator's insertId-hash index: a `... AND sample(insertId, F)` query evaluates the rest
of its filter only on the entries whose hash is below F (about F x the stored entries), not on every entry,
so a page of a sampled 10,000,000-entry window is answered in bounded time (Cloud Logging answers such a
page in seconds; how it indexes is its own)."""
_TRAILING_SAMPLE = re.compile(
    r"^(?P<rest>.*\S)\s+AND\s+sample\(\s*insertId\s*,\s*(?P<f>[0-9.eE+-]+)\s*\)\s*$", re.S
)


def sample_candidates(w: World, fraction: float) -> list[SimLogEntry]:
    """The stored entries `sample(insertId, fraction)` selects, in stored (timestamp) order: the hash
    buckets wholly below the fraction, and the entries of the boundary bucket whose hash is below it (the
    same CRC-32 rule as `sim.gcp.logfilter`)."""
    if w.log_sample_index is None:
        index: list[list[int]] = [[] for _ in range(SAMPLE_BUCKETS)]
        shift = 32 - SAMPLE_BUCKETS.bit_length() + 1
        for position, entry in enumerate(w.logs):
            index[zlib.crc32(insert_id_of(entry).encode()) >> shift].append(position)
        w.log_sample_index = index
    limit = fraction * 2**32
    whole = min(SAMPLE_BUCKETS, int(fraction * SAMPLE_BUCKETS))
    positions = [p for bucket in w.log_sample_index[:whole] for p in bucket]
    if whole < SAMPLE_BUCKETS:
        edge = w.log_sample_index[whole]
        positions += [p for p in edge if zlib.crc32(insert_id_of(w.logs[p]).encode()) < limit]
    positions.sort()
    return [w.logs[p] for p in positions]


class LogScan:
    """The entries one (filter, order) selects, found as pages need them: each page scans only until it
    is full (and one entry past it, to know whether there is more), so a page's time is bounded by how
    rare its matches are, never by a scan of the whole store first."""

    def __init__(self, source: list[SimLogEntry], predicate: Callable[[SimLogEntry], bool], descending: bool):
        self._source, self._predicate, self._descending = source, predicate, descending
        self._next = 0
        self.matched: list[SimLogEntry] = []

    def upto(self, wanted: int) -> list[SimLogEntry]:
        """At least `wanted` matches (fewer when the store holds no more), in the scan's order."""
        source, size = self._source, len(self._source)
        while len(self.matched) < wanted and self._next < size:
            entry = source[size - 1 - self._next] if self._descending else source[self._next]
            self._next += 1
            if self._predicate(entry):
                self.matched.append(entry)
        return self.matched


def _scan(w: World, filter_text: str, descending: bool) -> LogScan:
    """A LogScan of the stored entries `filter_text` selects; a trailing top-level `AND sample(...)` (AND
    binds loosest in the Logging query language) scans only the hash index's candidates.

    Raises:
        FilterError: the filter does not parse.
    """
    predicate = parse_log_filter(filter_text)  # the whole filter's errors, as without the index
    trailing = _TRAILING_SAMPLE.match(filter_text)
    if trailing is None:
        return LogScan(w.logs, predicate, descending)
    rest = parse_log_filter(trailing["rest"])
    return LogScan(sample_candidates(w, float(trailing["f"])), rest, descending)


def _matching(w: World, filter_text: str) -> list[SimLogEntry]:
    """Every stored entry `filter_text` selects, in stored order (`_scan` to the end)."""
    return _scan(w, filter_text, False).upto(len(w.logs))


# ---- handlers (called with world.lock held)
def _list_log_entries(w: World, m: re.Match[str], query: dict[str, str], raw: bytes) -> dict[str, Any]:
    """entries.list: resourceNames, filter, orderBy ("timestamp asc" | "timestamp desc"), pageSize
    (default 50, at most 1000), pageToken."""
    _charge_log_read(w)
    body = json_body(raw)
    names = body.get("resourceNames") or [f"projects/{p}" for p in body.get("projectIds") or []]
    if not names:
        raise ApiError(400, "resourceNames: at least one resource name is required.")
    for name in names:
        match = re.match(r"^projects/([^/]+)$", str(name))
        if match is None:
            raise ApiError(400, f"Invalid resource name {name!r}: the simulator serves projects/* only.")
        w.check(match.group(1))
    filter_text = str(body.get("filter") or "")
    order = " ".join(str(body.get("orderBy") or "timestamp asc").lower().split())
    if order not in ("timestamp asc", "timestamp desc", "timestamp"):
        raise ApiError(
            400, f'Invalid orderBy {body.get("orderBy")!r}: use "timestamp asc" or "timestamp desc".'
        )
    descending = order == "timestamp desc"
    key = (filter_text, descending)
    scan = w.log_cache.get(key)
    if not isinstance(scan, LogScan):
        try:
            scan = _scan(w, filter_text, descending)
        except FilterError as exc:
            raise ApiError(400, f"Unparseable filter: {exc}") from None
        if len(w.log_cache) > 64:
            w.log_cache.clear()
        w.log_cache[key] = scan
    try:
        size = int(body.get("pageSize") or LOG_PAGE_SIZE_DEFAULT)
    except (TypeError, ValueError):
        raise ApiError(400, "Invalid pageSize.") from None
    if size < 0:  # "If the value is negative, the request is rejected." (entries.list, pageSize)
        raise ApiError(400, f"Invalid pageSize {size}: it must not be negative.")
    size = min(max(size, 1), LOG_PAGE_SIZE_MAX)
    signature = f"{zlib.crc32(repr(key).encode()):08x}"
    offset = 0
    token = body.get("pageToken")
    if token:
        try:
            decoded = json.loads(base64.urlsafe_b64decode(str(token).encode()))
            offset, token_signature = int(decoded["o"]), str(decoded["s"])
        except (ValueError, KeyError, TypeError, binascii.Error):
            raise ApiError(400, "Invalid page token.") from None
        if token_signature != signature or offset < 0:
            raise ApiError(400, "Invalid page token: the query changed.")
    matched = scan.upto(offset + size + 1)
    if offset > len(matched):
        raise ApiError(400, "Invalid page token: the query changed.")
    cuts, keep = w.log_search_cuts
    if cuts and offset + keep < len(matched):
        # "If a value for nextPageToken appears and the entries field is empty, it means that the search
        # found no log entries so far but it did not have time to search all the possible log entries"
        # (entries.list, nextPageToken): a page cut short, here after `keep` entries.
        size = min(size, keep)
        w.log_search_cuts = (cuts - 1, keep)
    page = matched[offset : offset + size]
    result: dict[str, Any] = {}
    if page:
        result["entries"] = [log_entry_json(e) for e in page]
    if offset + size < len(matched):
        next_token = json.dumps({"o": offset + size, "s": signature}).encode()
        result["nextPageToken"] = base64.urlsafe_b64encode(next_token).decode()
    return result


def _charge_log_read(w: World) -> None:
    """Count one entries.list call against the project's read quota: more than `log_read_quota` calls in
    the last 60 simulated seconds are refused with Google's 429 (body as captured in
    tests/fixtures/cases/logging-read-quota-429.json). Refused calls do not count."""
    horizon = w.now - timedelta(seconds=60)
    while w.log_reads and w.log_reads[0] <= horizon:
        w.log_reads.popleft()
    if len(w.log_reads) >= w.log_read_quota:
        number = zlib.crc32(w.project.encode()) % 10**12  # a simulated project number
        metadata = {
            "quota_limit": "ReadRequestsPerMinutePerProject",
            "quota_limit_value": str(w.log_read_quota),
            "quota_metric": "logging.googleapis.com/read_requests",
            "service": "logging.googleapis.com",
            "consumer": f"projects/{number}",
        }
        raise ApiError(
            429,
            "Quota exceeded for quota metric 'Read requests' and limit 'Read requests per minute' of "
            f"service 'logging.googleapis.com' for consumer 'project_number:{number}'.",
            details=[
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "RATE_LIMIT_EXCEEDED",
                    "domain": "googleapis.com",
                    "metadata": metadata,
                }
            ],
        )
    w.log_reads.append(w.now)
    w.log_reads_served += 1


ROUTES: list[Route] = [("POST", r"/v2/entries:list$", _list_log_entries)]
