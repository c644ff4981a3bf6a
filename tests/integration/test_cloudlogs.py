"""ops.gcp.cloudlogs with the REAL google-cloud-logging REST client against the simulator's Cloud Logging
(`POST /v2/entries:list`): filters, paging, newest-first order, the explicit timestamp bound, error mapping,
and every response body against google-api-python-client's logging.v2.json discovery document."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from googleapiclient import discovery_cache

from llm.logsum import summarize
from ops.errors import BackendUnavailable, BadInput, PermissionDenied
from ops.gcp import cloudlogs
from ops.gcp.cloudlogs import LogEntry, build_filter, entry_from_api, fetch, validate_filter
from sim.gcp import GcpSimulator
from sim.gcp.logfilter import parse_log_filter, stored_log_entry
from tests.integration.test_discovery_contract import default_scenario, send, validate

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
LOGGING_DOC = json.loads(discovery_cache.get_static_doc("logging", "v2"))
PROJECT = "demo-project"


def big_scenario() -> dict[str, Any]:
    scenario = default_scenario()
    # A node of 32 hours, so that the 30 h of noise fall in its life (nothing is logged before a node exists).
    (primary,) = [qr for qr in scenario["google"]["queued_resources"] if qr["name"] == "gemma4-qr"]
    primary["created"], primary["max_run_duration"] = "-32h", "48h"
    logs = scenario["google"]["logs"]
    logs["noise"] = {"count": 4000, "window": "30h"}  # older than 24 h too: the library default would hide it
    del logs["served"]  # vLLM served all along, not only in the default world's last 85 minutes
    logs["workers"] = 2
    logs["cases"].append(
        {
            "file": "vllm-hf-gated-repo-401.log",
            "count": 5,
            "from": "-28h",
            "to": "-26h",
            "severity": "CRITICAL",
        }
    )
    return scenario


@pytest.fixture(scope="module")
def sim() -> Iterator[GcpSimulator]:
    with GcpSimulator(big_scenario(), now=lambda: NOW) as server:
        yield server


def read(sim: GcpSimulator, filter_: str, **kwargs: Any) -> list[LogEntry]:
    return list(fetch(PROJECT, filter_, api_endpoint=sim.url, **kwargs))


def test_build_filter_always_has_a_timestamp_bound() -> None:
    text = build_filter(timedelta(hours=6), project=PROJECT, now=NOW)
    log = f'logName="projects/{PROJECT}/logs/gcplogs-docker-driver"'
    container = f"{log} AND jsonPayload.container.metadata.tpu_node:*"
    assert (
        text == f'(resource.type="tpu_worker" OR ({container})) AND timestamp>="2026-11-29T06:00:00.000000Z"'
    )
    full = build_filter(
        timedelta(minutes=30),
        project=PROJECT,
        severity="error",
        node="gemma4-qr-node",
        zone="us-east5-a",
        extra='textPayload:"KV cache"',
        now=NOW,
    )
    assert full == (
        f'(resource.type="tpu_worker" OR ({container})) AND timestamp>="2026-11-29T11:30:00.000000Z" AND '
        f"{cloudlogs.severity_clause('ERROR', PROJECT)} AND "
        '(resource.labels.node_id="gemma4-qr-node" OR '
        'jsonPayload.container.metadata.tpu_node="gemma4-qr-node") '
        'AND resource.labels.zone="us-east5-a" AND (textPayload:"KV cache")'
    )
    assert cloudlogs.severity_clause("CRITICAL", PROJECT) == "severity>=CRITICAL"
    for bad in (
        {"since": timedelta(0)},
        {"since": timedelta(hours=1), "severity": "LOUD"},
        {"since": timedelta(hours=1), "node": 'x" OR "1'},
        {"since": timedelta(hours=1), "zone": "mars"},
    ):
        with pytest.raises(BadInput):
            build_filter(project=PROJECT, now=NOW, **bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    ['textPayload:"unclosed', "a" * 501, "line\nbreak", "(a OR b", "a) OR (b", "", "tab\there"],
)
def test_validate_filter_rejects(text: str) -> None:
    with pytest.raises(BadInput):
        validate_filter(text)


def test_validate_filter_accepts_query_text_as_data() -> None:
    text = 'textPayload:"say \\"hi\\" (x)" OR jsonPayload.message=~"HBM|KV" ; rm -rf / `id` $(id)'
    assert validate_filter(f"  {text} ") == text


def test_fetch_reads_every_page_newest_first_with_the_explicit_bound(sim: GcpSimulator) -> None:
    since = timedelta(hours=30)
    entries = read(sim, build_filter(since, project=PROJECT, now=NOW), page_size=500)
    expected = [
        e
        for e in sim.log_entries()
        if (e["resource"]["type"] == "tpu_worker" or e["logName"].endswith("/gcplogs-docker-driver"))
        and e["timestamp"] >= "2026-11-28T06"
    ]
    assert len(entries) == len(expected) > 4000
    assert [e.timestamp for e in entries] == sorted((e.timestamp for e in entries), reverse=True)
    assert min(e.timestamp for e in entries) < NOW - timedelta(hours=24)  # no silent 24 h default
    assert all(e.timestamp.tzinfo is not None for e in entries)
    assert {e.resource_type for e in entries} == {"tpu_worker", "gce_instance"}  # the VM's, vLLM's (gcplogs)
    assert {e.worker_id for e in entries} == {"0", "1"}
    bodies = [body for method, path, body in sim.request_bodies if path.startswith("/v2/entries:list")]
    assert bodies[-1]["filter"] == build_filter(
        since, project=PROJECT, now=NOW
    )  # sent as-is: the library added nothing
    assert bodies[-1]["orderBy"] == "timestamp desc" and bodies[-1]["pageSize"] == 500
    assert len(bodies) >= len(expected) // 500  # paged
    assert sum("pageToken" in b for b in bodies[-len(expected) // 500 :]) >= 1


def test_filters_severity_node_text_and_limit(sim: GcpSimulator) -> None:
    errors = read(sim, build_filter(timedelta(hours=6), project=PROJECT, severity="ERROR", now=NOW))
    assert errors and all(e.severity_rank >= cloudlogs.severity_rank("ERROR") for e in errors)
    assert any("KV cache is needed" in e.message for e in errors)
    busy = read(
        sim,
        build_filter(timedelta(hours=6), project=PROJECT, severity="ERROR", extra='"/dev/vfio/0"', now=NOW),
    )
    assert busy and all("/dev/vfio/0" in e.message for e in busy)  # jsonPayload.message extracted
    # vLLM's lines (gcplogs, no severity): read at ERROR by their level, the node from the container label
    assert all(e.severity == "ERROR" and e.node_id == "gemma4-qr-node" for e in busy)
    assert read(sim, build_filter(timedelta(hours=6), project=PROJECT, node="other-node", now=NOW)) == []
    five = read(sim, build_filter(timedelta(hours=6), project=PROJECT, now=NOW), limit=5, page_size=2)
    assert len(five) == 5
    gated = read(
        sim,
        build_filter(
            timedelta(hours=30), project=PROJECT, severity="CRITICAL", extra="GatedRepoError", now=NOW
        ),
    )
    assert len(gated) == 5 and all(e.severity == "CRITICAL" for e in gated)
    audit = read(sim, 'resource.type="audited_resource" AND timestamp>="2026-11-20T00:00:00Z"')
    assert audit and all("CreateQueuedResource" in e.message for e in audit)


def test_fetch_sends_no_request_past_its_limit(sim: GcpSimulator) -> None:
    query = build_filter(timedelta(hours=6), project=PROJECT, now=NOW)
    before = sim.log_reads_served()
    assert len(read(sim, query, limit=30)) == 30
    assert len(read(sim, query, limit=5, page_size=2)) == 5
    # one page of 30, then pages of 2, 2 and 1: the library's own max_results would ask for one more page
    assert sim.log_reads_served() - before == 1 + 3


def test_filter_language_of_the_simulator() -> None:
    body = {
        "logName": "projects/p/logs/syslog",
        "resource": {"type": "tpu_worker", "labels": {"node_id": "n-1", "zone": "us-east5-a"}},
        "timestamp": "2026-11-29T10:00:00.000000Z",
        "severity": "WARNING",
        "textPayload": "Sequence group 7 is preempted",
        "insertId": "x",
    }
    entry = stored_log_entry(body, 1)
    cases = {
        'resource.type="tpu_worker" AND severity>=WARNING': True,
        "severity>=ERROR": False,
        "severity>=400": True,
        'resource.labels.node_id="n-1" timestamp>="2026-11-29T09:00:00Z"': True,
        'timestamp<="2026-11-29T09:00:00Z"': False,
        'resource.labels.node_id=~"^n-\\d$"': True,
        "NOT preempted": False,
        "-preempted OR severity=WARNING": True,
        'textPayload:"SEQUENCE GROUP"': True,
        '(severity=ERROR OR severity=WARNING) AND "group 7"': True,
        "severity=ERROR OR severity=WARNING AND preempted": True,
        "resource.labels.zone!=us-east5-a": False,
        "": True,
    }
    for text, want in cases.items():
        assert parse_log_filter(text)(entry) is want, text


def test_entries_list_bodies_match_the_discovery_document(sim: GcpSimulator) -> None:
    path = "/v2/entries:list"
    token, pages, problems = None, 0, []
    while pages < 6:
        request: dict[str, Any] = {
            "resourceNames": [f"projects/{PROJECT}"],
            "filter": 'timestamp>="2026-11-20T00:00:00Z"',
            "orderBy": "timestamp desc",
            "pageSize": 1000,
        }
        if token:
            request["pageToken"] = token
        status, body = send(sim, "POST", path, request)
        assert status == 200, body
        problems += validate(LOGGING_DOC, "ListLogEntriesResponse", body)
        kinds = {
            k
            for e in body.get("entries", [])
            for k in ("textPayload", "jsonPayload", "protoPayload")
            if k in e
        }
        assert kinds
        pages += 1
        token = body.get("nextPageToken")
        if not token:
            break
    assert problems == []
    assert pages >= 3
    status, body = send(sim, "POST", path, {"resourceNames": [f"projects/{PROJECT}"], "filter": "severity>="})
    assert status == 400 and body["error"]["status"] == "INVALID_ARGUMENT"
    status, body = send(sim, "POST", path, {"resourceNames": ["projects/other"], "filter": ""})
    assert status == 403
    status, body = send(
        sim, "POST", path, {"resourceNames": [f"projects/{PROJECT}"], "pageToken": "bm9wZQ==", "filter": ""}
    )
    assert status == 400


def test_errors_map_to_ops_errors(sim: GcpSimulator) -> None:
    with pytest.raises(BadInput, match="timestamp"):
        read(sim, 'resource.type="tpu_worker"')
    sim.inject_fault(r"^/v2/entries:list$", 403)
    with pytest.raises(PermissionDenied) as denied:
        read(sim, build_filter(timedelta(hours=1), project=PROJECT, now=NOW))
    assert denied.value.backend == "logging" and "\n" not in str(denied.value)
    sim.inject_fault(r"^/v2/entries:list$", 503)
    with pytest.raises(BackendUnavailable):
        read(sim, build_filter(timedelta(hours=1), project=PROJECT, now=NOW))
    with pytest.raises(BadInput, match="HTTP 400"):
        read(sim, build_filter(timedelta(hours=1), project=PROJECT, now=NOW) + " AND severity>=")
    with pytest.raises(BackendUnavailable, match="cannot connect"):
        list(
            fetch(
                PROJECT,
                build_filter(timedelta(hours=1), project=PROJECT, now=NOW),
                api_endpoint="http://127.0.0.1:9",
            )
        )


def test_added_entries_and_summary_of_what_was_fetched(sim: GcpSimulator) -> None:
    body = sim.add_log_entry(
        "RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: Error loading program: Attempting to reserve "
        "2.10G at the bottom of memory. That was not possible. There are 1.00G free, 0B reserved.",
        severity="CRITICAL",
        at=NOW - timedelta(seconds=5),
    )
    assert validate(LOGGING_DOC, "LogEntry", body) == []
    newest = read(sim, build_filter(timedelta(minutes=1), project=PROJECT, now=NOW), limit=1)[0]
    assert newest == entry_from_api(body)
    summary = summarize(read(sim, build_filter(timedelta(hours=6), project=PROJECT, now=NOW)))
    assert summary.templates[0].severity == "CRITICAL"
    assert any("KV cache is needed" in e for t in summary.templates for e in t.exemplars)
