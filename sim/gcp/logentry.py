"""A Cloud Logging LogEntry as the Google simulator stores it (`SimLogEntry`) and builds it
(`make_log_entry`; `make_container_entry` for a container line as Docker's gcplogs driver writes it): the
logging.v2 JSON shape (https://cloud.google.com/logging/docs/reference/v2/rest/v2/LogEntry) and the
LogSeverity ranks."""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from sim.gcp.api import rfc3339

# LogSeverity names in rank order (severity N*100 is the N-th name).
LOG_SEVERITIES = ("DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY")
LOG_RANK = {name: i for i, name in enumerate(LOG_SEVERITIES)}

# Docker's gcplogs driver (moby daemon/logger/gcplogs/gcplogging.go): every line of a container goes to the
# log "gcplogs-docker-driver" as a jsonPayload {instance, container, message}, on the monitored resource
# gce_instance {instance_id, zone} when the daemon runs on a Google VM, and with no severity (the driver
# sets none, so the entry is DEFAULT and entries.list leaves the field out).
GCPLOGS_LOG_ID = "gcplogs-docker-driver"


@dataclass
class SimLogEntry:
    """One stored log entry: its JSON (logging.v2 LogEntry shape) plus what the filter needs.

    A generated stream entry (`stream_log_entries`) shares its `body` and `blob` with every entry of its
    kind and variant (so a million of them fit in memory); its own `insert_id` and `timestamp` replace the
    body's when it is rendered (`log_entry_json`) and in `sample()`.
    """

    timestamp: datetime
    seq: int
    body: dict[str, Any]
    blob: str  # every string in the entry, lowercased, for free-text terms
    insert_id: str = ""  # set: `body` is a shared prototype


def log_entry_json(entry: SimLogEntry) -> dict[str, Any]:
    """The entry's LogEntry JSON as entries.list returns it (a copy)."""
    body: dict[str, Any] = json.loads(json.dumps(entry.body))
    if entry.insert_id:
        body["timestamp"] = rfc3339(entry.timestamp)
        body["receiveTimestamp"] = rfc3339(entry.timestamp + timedelta(milliseconds=500 + entry.seq % 1000))
        body["insertId"] = entry.insert_id
    return body


def insert_id_of(entry: SimLogEntry) -> str:
    """The entry's insertId (its own for a stream entry, else its body's)."""
    return entry.insert_id or str(entry.body.get("insertId", ""))


def log_severity(value: Any) -> str:
    """A LogSeverity name, upper-cased. Raises ValueError for anything else."""
    name = str(value or "DEFAULT").upper()
    if name not in LOG_RANK:
        raise ValueError(f"bad log severity {value!r}: use one of {', '.join(LOG_SEVERITIES)}")
    return name


def strings_of(value: Any) -> Iterator[str]:
    """Every string inside a JSON value (dict values and list items, recursively)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_of(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_of(item)


def make_log_entry(
    project: str,
    timestamp: datetime,
    severity: str,
    *,
    text: str | None = None,
    json_payload: dict[str, Any] | None = None,
    proto_payload: dict[str, Any] | None = None,
    log_id: str = "syslog",
    resource_type: str = "tpu_worker",
    labels: dict[str, str] | None = None,
    insert_id: str = "",
) -> dict[str, Any]:
    """A LogEntry JSON body (logging.v2 discovery shape) with exactly one payload.

    Args:
        project: project id (logName is "projects/<project>/logs/<url-encoded log_id>").
        timestamp: aware datetime of the event; receiveTimestamp is 0.5-1.5 s later.
        severity: a LogSeverity name.
        text / json_payload / proto_payload: the payload (the first one given is used).
        log_id: e.g. "syslog" or "tpu.googleapis.com/runtime_monitor".
        resource_type, labels: the monitored resource.
        insert_id: the insertId (default: derived from the content).
    """
    body: dict[str, Any] = {
        "logName": f"projects/{project}/logs/{quote(log_id, safe='')}",
        "resource": {"type": resource_type, "labels": dict(labels or {})},
        "timestamp": rfc3339(timestamp),
        "receiveTimestamp": rfc3339(
            timestamp + timedelta(milliseconds=500 + zlib.crc32(insert_id.encode()) % 1000)
        ),
        "severity": log_severity(severity),
    }
    if text is not None:
        body["textPayload"] = text
    elif json_payload is not None:
        body["jsonPayload"] = json_payload
    elif proto_payload is not None:
        body["protoPayload"] = proto_payload
    body["insertId"] = insert_id or f"{zlib.crc32(json.dumps(body, sort_keys=True).encode()):08x}"
    return body


def make_container_entry(
    project: str,
    timestamp: datetime,
    message: str,
    *,
    container: dict[str, Any],
    zone: str,
    instance_name: str,
    labels: dict[str, str],
    insert_id: str = "",
) -> dict[str, Any]:
    """A LogEntry JSON body for one line of a container, as Docker's gcplogs driver writes it on a VM.

    Args:
        project: project id (logName is "projects/<project>/logs/gcplogs-docker-driver").
        timestamp: aware datetime of the line.
        message: the line (jsonPayload.message).
        container: {"name": "vllm-gemma4", "image": "vllm/vllm-tpu:gemma4", "created": datetime}; the
            driver writes the name as the daemon holds it, with a leading "/".
        zone, instance_name: the VM's, as the metadata server gives them (the instance id is derived from
            the name: SIMULATED, a real one is a number Google assigns).
        labels: the container labels its `--log-opt labels=` names (jsonPayload.container.metadata).
        insert_id: the insertId (default: derived from the content).
    """
    instance_id = str(int(hashlib.sha256(instance_name.encode()).hexdigest()[:15], 16))
    container_id = hashlib.sha256(f"{project}/{instance_name}/{container['name']}".encode()).hexdigest()
    image_id = "sha256:" + hashlib.sha256(str(container["image"]).encode()).hexdigest()
    body: dict[str, Any] = {
        "logName": f"projects/{project}/logs/{GCPLOGS_LOG_ID}",
        "resource": {
            "type": "gce_instance",
            "labels": {"project_id": project, "instance_id": instance_id, "zone": zone},
        },
        "timestamp": rfc3339(timestamp),
        "receiveTimestamp": rfc3339(
            timestamp + timedelta(milliseconds=500 + zlib.crc32(insert_id.encode()) % 1000)
        ),
        "jsonPayload": {
            "instance": {"zone": zone, "name": instance_name, "id": instance_id},
            "container": {
                "name": "/" + str(container["name"]),
                "id": container_id,
                "imageName": str(container["image"]),
                "imageId": image_id,
                "created": rfc3339(container["created"]),
                "metadata": dict(labels),
            },
            "message": message,
        },
    }
    body["insertId"] = insert_id or f"{zlib.crc32(json.dumps(body, sort_keys=True).encode()):08x}"
    return body
