"""Reading a log window within Cloud Logging's read quota (`ops.gcp.logplan`, every read through
`ops.gcp.cloudlogs.LogReader`) against the simulator, which enforces the quota with Google's 429, serves
`sample()`, and pages at most 1,000 entries; and the time-bound guard of `ops.gcp.cloudlogs`. The quota
clock is the simulator's (it moves only when a reader waits), so no test sleeps for real."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from llm.logsum import TemplateStream
from llm.logwindow import mine_window
from ops.errors import BadInput, QuotaExceeded
from ops.gcp.cloudlogs import LogEntry, ReadQuota, build_filter, fetch, has_time_bound, severity_clause
from ops.gcp.logplan import read_window
from sim.gcp import GcpSimulator

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
PROJECT = "logreads-project"
CASE = Path(__file__).resolve().parent.parent / "fixtures" / "cases" / "logging-read-quota-429.json"
ENTRIES = 12_000
ERRORS = 240  # 2% at ERROR


def scenario(reads_per_minute: int = 60) -> dict[str, Any]:
    stream = {"count": ENTRIES, "window": "1h", "error_share": ERRORS / ENTRIES, "error_kinds": 12, "seed": 3}
    logs = {"noise": {"count": 0}, "audit": False, "stream": stream}
    return {"project": PROJECT, "google": {"logs": logs, "logging_reads_per_minute": reads_per_minute}}


@pytest.fixture
def sim() -> Iterator[GcpSimulator]:
    with GcpSimulator(scenario(), now=lambda: NOW) as server:
        yield server


def sim_quota(sim: GcpSimulator, per_minute: int) -> ReadQuota:
    """A ReadQuota on the simulator's clock: waiting advances simulated time."""
    return ReadQuota(
        per_minute, clock=lambda: (sim.now() - NOW).total_seconds(), sleep=lambda s: sim.advance(s) and None
    )


def list_raw(sim: GcpSimulator, filter_: str, page_size: int = 1000) -> httpx.Response:
    body = {"resourceNames": [f"projects/{PROJECT}"], "filter": filter_, "pageSize": page_size}
    return httpx.post(f"{sim.url}/v2/entries:list", json=body, timeout=30)


WINDOW = build_filter(timedelta(hours=1), project=PROJECT, now=NOW)


def test_the_61st_read_in_a_minute_gets_googles_429_body(sim: GcpSimulator) -> None:
    for _ in range(60):
        assert list_raw(sim, WINDOW, page_size=1).status_code == 200
    refused = list_raw(sim, WINDOW, page_size=1)
    assert refused.status_code == 429
    error, real = refused.json()["error"], json.loads(CASE.read_text())["error"]
    assert (error["code"], error["status"]) == (real["code"], real["status"])
    assert error["message"].startswith(real["message"].split("for consumer")[0])
    assert error["details"][0]["reason"] == real["details"][0]["reason"] == "RATE_LIMIT_EXCEEDED"
    assert error["details"][0]["metadata"]["quota_limit"] == "ReadRequestsPerMinutePerProject"
    with pytest.raises(QuotaExceeded):
        list(fetch(PROJECT, WINDOW, limit=1, api_endpoint=sim.url))
    sim.advance(61)
    assert list_raw(sim, WINDOW, page_size=1).status_code == 200


def test_sample_selects_a_stable_fraction_by_insert_id(sim: GcpSimulator) -> None:
    def ids(fraction: float) -> set[str]:
        found: set[str] = set()
        token = None
        while True:
            body: dict[str, Any] = {
                "resourceNames": [f"projects/{PROJECT}"],
                "filter": f"{WINDOW} AND sample(insertId, {fraction})",
                "pageSize": 1000,
            }
            if token:
                body["pageToken"] = token
            page = httpx.post(f"{sim.url}/v2/entries:list", json=body, timeout=30).json()
            found |= {e["insertId"] for e in page.get("entries", [])}
            token = page.get("nextPageToken")
            if not token:
                return found

    tenth, fifth = ids(0.1), ids(0.2)
    assert 0.08 * ENTRIES < len(tenth) < 0.12 * ENTRIES
    assert tenth < fifth  # a smaller fraction is a subset of a larger one
    assert list_raw(sim, f"{WINDOW} AND sample(insertId, 2)").status_code == 400


def test_planned_read_takes_every_error_and_a_weighted_sample(sim: GcpSimulator) -> None:
    stream = TemplateStream()
    report = read_window(
        PROJECT, WINDOW, stream.add, quota=sim_quota(sim, 60), api_endpoint=sim.url, rest_entries=2000
    )
    summary = stream.summary()
    assert report.errors_complete and report.error_entries == ERRORS == summary.error_entries
    assert 0 < report.sample_fraction < 1 and not report.partial
    assert report.reads < 1 + ENTRIES // 1000  # fewer than full paging
    assert abs(summary.total_entries - ENTRIES) / ENTRIES < 0.1
    assert abs(report.estimated_entries - ENTRIES) / ENTRIES < 0.1


def test_errors_past_the_pages_read_one_by_one_are_sampled_not_dropped() -> None:
    many = scenario()
    many["google"]["logs"]["stream"] |= {"count": 30_000, "error_share": 0.1}  # 3,000 errors
    with GcpSimulator(many, now=lambda: NOW) as sim:
        stream = TemplateStream()
        report = read_window(
            PROJECT,
            WINDOW,
            stream.add,
            quota=sim_quota(sim, 60),
            api_endpoint=sim.url,
            error_pages=1,
            older_error_entries=500,
            rest_entries=2000,
        )
    summary = stream.summary()
    assert not report.errors_complete and not report.partial  # nothing missing: the older ones estimated
    assert report.error_entries == 1000 and 0 < report.older_errors_fraction < 1 and report.older_errors_read
    assert abs(summary.error_entries - 3000) / 3000 < 0.2
    assert abs(report.estimated_entries - 30_000) / 30_000 < 0.1


def test_reads_are_paced_under_the_quota_without_a_429() -> None:
    with GcpSimulator(scenario(reads_per_minute=3), now=lambda: NOW) as sim:
        report = read_window(
            PROJECT, WINDOW, lambda e, w: None, quota=sim_quota(sim, 3), api_endpoint=sim.url, deadline_s=3600
        )
        waited_s = (sim.now() - NOW).total_seconds()
    assert report.throttled == 0 and not report.partial
    assert waited_s >= 60 * ((report.reads - 1) // 3)  # three reads per simulated minute at most


def test_a_429_is_backed_off_and_a_cut_read_returns_what_it_has_labelled_partial() -> None:
    with GcpSimulator(scenario(reads_per_minute=2), now=lambda: NOW) as sim:
        seen: list[LogEntry] = []
        # The bot believes it has 60 reads a minute; the project has 2 (another reader uses the rest).
        report = read_window(
            PROJECT,
            WINDOW,
            lambda e, w: seen.append(e),
            quota=sim_quota(sim, 60),
            api_endpoint=sim.url,
            deadline_s=30,
        )
    assert report.throttled >= 1 and report.partial
    assert report.reads == 2 and len(seen) == ERRORS + 1000  # the two pages read are kept
    assert report.errors_complete and report.missing == [
        "entries below ERROR, in part or whole (read budget or deadline reached)"
    ]


def list_requests(sim: GcpSimulator) -> int:
    """entries.list requests the simulator received, the refused ones included."""
    return sum(path.startswith("/v2/entries:list") for _, path in sim.requests)


def test_a_429_mid_window_is_resumed_by_the_query_without_losing_or_doubling_an_entry() -> None:
    errors_only = scenario(reads_per_minute=2)
    errors_only["google"]["logs"]["stream"] |= {"count": 2500, "error_share": 1.0}
    with GcpSimulator(errors_only, now=lambda: NOW) as sim:
        # Four more errors at the very timestamp of the 2,000th newest: the second page ends among them.
        boundary = sim.log_entries()[-2000]["timestamp"]
        at = datetime.fromisoformat(boundary.replace("Z", "+00:00"))
        for i in range(4):
            sim.add_log_entry(f"RuntimeError: burst line {i}", severity="ERROR", at=at)
        newest_first = [e["insertId"] for e in reversed(sim.log_entries())]
        at_boundary = [i for i, e in enumerate(reversed(sim.log_entries())) if e["timestamp"] == boundary]
        assert at_boundary[0] < 2000 <= at_boundary[-1]  # the group straddles pages 2 and 3
        seen: list[LogEntry] = []
        # The project allows 2 reads a minute: the client's own request for the third page is refused
        # with 429, and after the back-off the read resumes by the query below the boundary's timestamp.
        report = read_window(
            PROJECT, WINDOW, lambda e, w: seen.append(e), quota=sim_quota(sim, 60), api_endpoint=sim.url
        )
        below = (at + timedelta(microseconds=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        filters = [b["filter"] for _, path, b in sim.request_bodies if path.startswith("/v2/entries:list")]
        assert f'{WINDOW} AND {severity_clause("ERROR", PROJECT)} AND timestamp<"{below}"' in filters
        assert report.throttled >= 1 and report.errors_complete and not report.partial
        assert [e.insert_id for e in seen] == newest_first  # every entry once, newest first
        assert report.reads == sim.log_reads_served() == 4  # three pages of errors, one of the rest
        assert report.reads + report.throttled == list_requests(sim)


def test_pages_cut_short_are_read_on_by_the_client_and_counted_where_it_sends_them() -> None:
    with GcpSimulator(scenario(), now=lambda: NOW) as sim:
        sim.cut_log_searches(3)  # three empty answers with a nextPageToken: the search ran out of time
        report = read_window(
            PROJECT,
            WINDOW,
            lambda e, w: None,
            quota=sim_quota(sim, 60),
            api_endpoint=sim.url,
            rest_entries=2000,
        )
        assert report.errors_complete and report.error_entries == ERRORS and not report.partial
        assert report.reads == sim.log_reads_served() == list_requests(sim)
    with GcpSimulator(scenario(), now=lambda: NOW) as sim:
        sim.cut_log_searches(5)
        report = read_window(
            PROJECT, WINDOW, lambda e, w: None, quota=sim_quota(sim, 60), api_endpoint=sim.url, max_reads=3
        )
        # The budget holds the requests the client sends by itself: the fourth is never sent.
        assert report.reads == sim.log_reads_served() == list_requests(sim) == 3
        assert report.error_entries == 0 and report.missing == [
            "errors beyond the newest 0, in part (read budget or deadline reached)",
            "entries below ERROR, in part or whole (read budget or deadline reached)",
        ]


def test_mine_window_returns_a_picklable_summary(sim: GcpSimulator) -> None:
    import pickle

    summary, report = mine_window(PROJECT, WINDOW, api_endpoint=sim.url, quota=sim_quota(sim, 60))
    assert pickle.loads(pickle.dumps((summary, report)))[0].templates == summary.templates
    assert any(t.is_error for t in summary.templates)


@pytest.mark.parametrize(
    ("filter_", "bounded"),
    [
        ('resource.type="tpu_worker" AND timestamp>="2026-11-29T06:00:00.000000Z"', True),
        ('timestamp >= "2026-11-29T06:00:00Z" severity>=ERROR', True),
        ('timestamp>"2026-11-29" AND sample(insertId, 0.1)', True),
        ("jsonPayload.timestamp_ms>0", False),  # the substring test let this read without a bound
        ('NOT timestamp>="2026-11-29T06:00:00Z"', False),
        ('severity>=ERROR OR timestamp>="2026-11-29T06:00:00Z"', False),
        ('(timestamp>="2026-11-29T06:00:00Z" OR textPayload:"x")', False),
        ('timestamp<="2026-11-29T06:00:00Z"', False),
        ('textPayload:"timestamp>=\\"2026\\""', False),
    ],
)
def test_the_time_bound_guard_parses_the_filter(filter_: str, bounded: bool) -> None:
    assert has_time_bound(filter_) is bounded


def test_fetch_refuses_a_filter_that_only_names_a_timestamp_field() -> None:
    with pytest.raises(BadInput, match="lower bound on `timestamp`"):
        next(fetch(PROJECT, "jsonPayload.timestamp_ms>0", api_endpoint="http://127.0.0.1:9"))


@pytest.mark.parametrize("fraction", [0.0001, 0.01, 0.3, 1.0])
def test_the_sample_index_selects_what_a_full_scan_selects(sim: GcpSimulator, fraction: float) -> None:
    from sim.gcp.logfilter import parse_log_filter
    from sim.gcp.logging import _matching

    query = f"{WINDOW} AND severity<ERROR AND sample(insertId, {fraction})"
    full = parse_log_filter(query)
    assert _matching(sim.world, query) == [e for e in sim.world.logs if full(e)]
