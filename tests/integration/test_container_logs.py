"""vLLM's output in Cloud Logging as Docker's gcplogs driver writes it (log gcplogs-docker-driver, resource
gce_instance, the line in jsonPayload.message, the container's labels in jsonPayload.container.metadata, no
severity) is found by the bot's reader, read at its level, and diagnosed: the real google-cloud-logging
client against the Google simulator."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from llm.logwindow import mine_window
from ops.diagnosis.engine import diagnose
from ops.gcp.cloudlogs import LogEntry, ReadQuota, build_filter, fetch
from sim.gcp import GcpSimulator

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
PROJECT = "gcplogs-project"
NODE = "gemma4-qr-node"
OOM = (
    "E0118 22:42:45.737331   20084 tpu_pjrt_client.cc:1889] TpuClient::AllocateBuffer returning error after "
    "1 attempt(s): RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 1.96G."
)
STATS = (
    "(APIServer pid=1) INFO 11-29 11:58:00 [loggers.py:123] Engine 000: Avg prompt throughput: 12.0 tokens/s"
)
TRACEBACK = (
    "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache"
)


def scenario() -> dict[str, Any]:
    return {"project": PROJECT, "google": {"logs": {"noise": {"count": 0}, "audit": False}}}


@pytest.fixture(scope="module")
def sim() -> Iterator[GcpSimulator]:
    with GcpSimulator(scenario(), now=lambda: NOW) as server:
        server.add_log_entry(OOM, payload="container", at=NOW - timedelta(minutes=5), node_id=NODE)
        server.add_log_entry(TRACEBACK, payload="container", at=NOW - timedelta(minutes=4), node_id=NODE)
        server.add_log_entry(STATS, payload="container", at=NOW - timedelta(minutes=3), node_id=NODE)
        server.add_log_entry(OOM, payload="container", at=NOW - timedelta(minutes=2), node_id="other-node")
        yield server


def read(sim: GcpSimulator, filter_: str) -> list[LogEntry]:
    return list(fetch(PROJECT, filter_, api_endpoint=sim.url))


def test_the_simulator_writes_gcplogs_shape(sim: GcpSimulator) -> None:
    body = next(e for e in sim.log_entries() if e["jsonPayload"]["message"] == STATS)
    assert body["logName"] == f"projects/{PROJECT}/logs/gcplogs-docker-driver"
    assert body["resource"]["type"] == "gce_instance" and set(body["resource"]["labels"]) >= {
        "instance_id",
        "zone",
    }
    assert "severity" not in body  # the driver sets none
    assert set(body["jsonPayload"]) == {"instance", "container", "message"}
    container = body["jsonPayload"]["container"]
    assert container["name"] == "/vllm-gemma4" and container["metadata"] == {
        "tpu_node": NODE,
        "tpu_worker_id": "0",
    }


def test_errors_of_a_node_are_read_at_their_level_and_diagnosed(sim: GcpSimulator) -> None:
    errors = read(
        sim, build_filter(timedelta(hours=1), project=PROJECT, severity="ERROR", node=NODE, now=NOW)
    )
    assert [e.message for e in errors] == [
        TRACEBACK,
        OOM,
    ]  # newest first; the INFO line and the other node not
    assert all(e.severity == "ERROR" and e.node_id == NODE and e.worker_id == "0" for e in errors)
    assert {e.zone for e in errors} == {"us-east5-a"} and {e.resource_type for e in errors} == {
        "gce_instance"
    }
    names = {f.name for f in diagnose("\n".join(e.message for e in errors)).findings}
    assert names == {"tpu-hbm-oom-allocate-buffer", "kv-cache-insufficient"}
    everything = read(sim, build_filter(timedelta(hours=1), project=PROJECT, node=NODE, now=NOW))
    assert [(e.severity, e.message) for e in everything] == [
        ("INFO", STATS),
        ("ERROR", TRACEBACK),
        ("ERROR", OOM),
    ]


def test_logs_analyze_reads_every_container_error_and_the_rest_apart(sim: GcpSimulator) -> None:
    quota = ReadQuota(60, clock=lambda: 0.0, sleep=lambda s: None)
    summary, report = mine_window(
        PROJECT, build_filter(timedelta(hours=1), project=PROJECT, now=NOW), api_endpoint=sim.url, quota=quota
    )
    assert summary.total_entries == 4 and summary.error_entries == 3
    assert report.error_entries == 3 and report.rest_read == 1 and not report.partial
    exemplars = "\n".join(e for t in summary.templates for e in t.exemplars)
    assert "RESOURCE_EXHAUSTED" in exemplars and "KV cache" in exemplars
