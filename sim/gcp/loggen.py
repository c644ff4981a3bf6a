"""GENERATED Cloud Logging entries for the Google simulator: the story a scenario's `google.logs` section
tells, and large streams for benchmarks. The words are real (the case files of `sim.cases`, with
timestamps, pids and request ids varied per occurrence); their number, times and mix are made up.

Scenario keys (`google.logs`; the default scenario is `sim/scenarios/default.yaml`):

    seed: 1                     # deterministic per seed
    node_id, zone, workers      # tpu_worker resource labels (default: the first QR's node and zone)
    log_name: syslog            # log id of text entries (runtime-monitor JSON noise uses
                                # tpu.googleapis.com/runtime_monitor)
    container: {name: vllm-gemma4, image: vllm/vllm-tpu:gemma4}
                                # the vLLM container whose lines gcplogs writes (payload: container)
    cases_dir: <dir>            # where case files live (default: the package data of sim.cases)
    noise: {count: 2000, window: 6h}        # INFO/WARNING lines typical of vLLM on a TPU VM
    cases: [{file: vllm-kv-cache-insufficient.log, count: 12, from: -3h, to: -170m,
             severity: ERROR, payload: text|json|container, node_id, zone, worker_id, log_name,
             lines: [1, 2, 0]}]
                                # each occurrence = every line of a real case file (one entry per line),
                                # timestamps/pids/request ids varied; `window: 6h` instead of from/to;
                                # `lines: [1, 2, 0]`: only these of its lines (0 is the first), in this
                                # order, e.g. one of two wordings a file holds, each at the time its
                                # container ran, the exception line after its traceback
    served: [{from: -85m, to: -60m}]
                                # when earlier vLLM containers served, besides the one serving now: the
                                # noise's vLLM and uvicorn lines (engine stats, requests, preemptions) fall
                                # only then and while the current one serves; absent: at any time
                                # payload: container = a line of the vLLM container as Docker's gcplogs
                                # driver writes it (sim.gcp.logentry.make_container_entry): no severity
    entries: [{at: -5m, severity: ERROR, text: "...", payload: text|json|container}]
    audit: true                 # CreateQueuedResource audit entries (protoPayload, audited_resource)
    stream: {count: 1000000, window: 1h, error_share: 0.005, error_kinds: 40, seed: 7, workers: 1}
                                # a large stream (see stream_log_entries)

Generated entries are ordinary LogEntry bodies (textPayload, jsonPayload or protoPayload) valid against
logging.v2.json. The noise's vLLM and uvicorn lines are the container's (gcplogs-shaped); docker, guest-agent
and runtime-monitor lines are the VM's (`tpu_worker`).
"""

from __future__ import annotations

import random
import re
import uuid
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sim.cases import CASES, missing_case_line, read_case
from sim.gcp.logentry import SimLogEntry, log_severity, make_container_entry, make_log_entry, strings_of
from sim.scenario import duration

RUNTIME_MONITOR_LOG = "tpu.googleapis.com/runtime_monitor"
CONTAINER = "container"
"""The log id `_noise_lines` gives a line of the vLLM container: written as gcplogs writes it."""
DEFAULT_CONTAINER = {"name": "vllm-gemma4", "image": "vllm/vllm-tpu:gemma4"}
# The labels the startup script gives the vLLM container and names in --log-opt labels= (ops/vllm/deploy.py):
# gcplogs copies them into jsonPayload.container.metadata.
NODE_LABEL, WORKER_LABEL = "tpu_node", "tpu_worker_id"


def container_line(
    project: str,
    at: datetime,
    message: str,
    *,
    node_id: str,
    zone: str,
    worker: int | str,
    container: dict[str, Any],
    insert_id: str = "",
) -> dict[str, Any]:
    """One line of the vLLM container on TPU VM worker `worker` of `node_id`, as gcplogs writes it.
    SIMULATED: the VM's instance name ("t1v-n-<hash>-w-<worker>", the form TPU VMs' hostnames take) and
    the container's creation time (6 h before the line's hour)."""
    name = f"t1v-n-{zlib.crc32(node_id.encode()):08x}-w-{worker}"
    created = at.replace(minute=0, second=0, microsecond=0) - timedelta(hours=6)
    return make_container_entry(
        project,
        at,
        message,
        container={"name": container["name"], "image": container["image"], "created": created},
        zone=zone,
        instance_name=name,
        labels={NODE_LABEL: node_id, WORKER_LABEL: str(worker)},
        insert_id=insert_id,
    )


def stream_log_entries(
    spec: dict[str, Any], *, project: str, start: datetime, node_id: str, zone: str, first_seq: int
) -> list[SimLogEntry]:
    """A large generated log stream (`google.logs.stream`), sorted by timestamp, SIMULATED.

    Spec keys: `count` (entries), `window` (e.g. 1h, ending at the scenario start), `error_share` (share
    of entries at ERROR, e.g. 0.005), `error_kinds` (how many distinct error texts, at most the ERROR lines
    of the case files; shares follow a Zipf law, the most frequent kind first), `seed`, `workers`.
    Error texts are the real ERROR lines of the case files (sim/cases), each in 8 varied copies; the rest
    is the INFO/WARNING noise of `generate_logs`, 512 varied lines.
    Entries of one kind and copy share one body.

    Returns:
        The entries (not yet stored); `stream_error_kinds(spec)` gives the error texts in kind order.
    """
    rng = random.Random(int(spec.get("seed", 7)))  # simulated data, not security
    count = int(spec["count"])
    begin, end = _window(spec, start, "1h")
    span = (end - begin).total_seconds()
    workers = max(1, int(spec.get("workers", 1)))
    kinds = stream_error_kinds(spec)
    weights = [1 / (rank + 1) ** 1.1 for rank in range(len(kinds))]
    errors = round(count * float(spec.get("error_share", 0.005))) if kinds else 0

    container = {**DEFAULT_CONTAINER, **(spec.get("container") or {})}

    def prototype(severity: str, payload: Any, worker: int, lid: str) -> tuple[dict[str, Any], str]:
        labels = {"project_id": project, "zone": zone, "node_id": node_id, "worker_id": str(worker)}
        if lid == CONTAINER:
            body = container_line(
                project, begin, str(payload), node_id=node_id, zone=zone, worker=worker, container=container
            )
        elif isinstance(payload, dict):
            body = make_log_entry(project, begin, severity, json_payload=payload, log_id=lid, labels=labels)
        else:
            body = make_log_entry(project, begin, severity, text=payload, log_id=lid, labels=labels)
        return body, " ".join(strings_of(body)).lower()

    noise = []
    for _ in range(512):
        severity, lid, payload = _noise_lines(rng, begin + timedelta(seconds=rng.uniform(0, span)))
        noise.append(prototype(severity, payload, rng.randrange(workers), lid))
    error_protos = [
        [
            prototype("ERROR", vary_case_line(text, rng, begin), rng.randrange(workers), "syslog")
            for _ in range(8)
        ]
        for text in kinds
    ]
    times = sorted(rng.uniform(0, span) for _ in range(count))
    error_slots = set(rng.sample(range(count), errors))
    choices = rng.choices(range(len(kinds)), weights, k=errors) if errors else []
    out = []
    picked = iter(choices)
    for i, offset in enumerate(times):
        seq = first_seq + i
        if i in error_slots:
            body, blob = error_protos[next(picked)][seq % 8]
        else:
            body, blob = noise[rng.randrange(512)]
        out.append(SimLogEntry(begin + timedelta(seconds=offset), seq, body, blob, f"s{seq:015x}"))
    return out


def stream_error_kinds(spec: dict[str, Any]) -> list[str]:
    """The error texts of a `google.logs.stream` spec, most frequent kind first (see stream_log_entries)."""
    texts: list[str] = []
    for name in sorted(path.name for path in CASES.iterdir()):
        if not name.endswith((".log", ".txt")) or not name.startswith(("vllm-", "tpu-", "docker-")):
            continue
        if name.startswith(("vllm-metrics", "vllm-bench")):
            continue
        for line in case_lines(name):
            if case_line_severity(line, "ERROR") == "ERROR" and line not in texts:
                texts.append(line)
    wanted = int(spec.get("error_kinds", 40))
    if wanted > len(texts):
        raise ValueError(f"error_kinds: at most {len(texts)} distinct error lines in the case files")
    return texts[:wanted]


# Variable parts of the real case texts, varied per occurrence (the figures that diagnose reads stay).
_VARY_VLLM_TS = re.compile(r"\b(INFO|WARNING|ERROR|DEBUG|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d\b")
_VARY_GLOG = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d\d\.\d{6}\s+\d+")
_VARY_ISO = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+(?:Z|[+-]\d\d:\d\d)")
_VARY_PID = re.compile(r"\bpid=\d+")
_VARY_REQUEST_ID = re.compile(r"Root=1-[0-9a-f]{8}-[0-9a-f]{24};[0-9a-f-]{36}")
_VARY_EID = re.compile(r"\[EID: 0x[0-9a-f]+\]")
_VARY_OPERATION = re.compile(r"operations/operation-\d+-[0-9a-f-]+")
_LINE_LEVEL = re.compile(r"\b(INFO|WARNING|DEBUG)(?: \d\d-\d\d \d\d:\d\d:\d\d\b|:\s)")


def vary_case_line(line: str, rng: random.Random, at: datetime) -> str:
    """One line of a real case file with its variable parts (timestamps, pids, request ids, EIDs,
    operation ids) changed for an occurrence at `at`; the figures the diagnosis reads are kept."""
    local = at.astimezone(UTC)
    line = _VARY_VLLM_TS.sub(lambda m: f"{m.group(1)} {local:%m-%d %H:%M:%S}", line)
    line = _VARY_GLOG.sub(
        lambda m: f"{m.group(1)}{local:%m%d %H:%M:%S.%f} {rng.randint(1000, 99999):>7}", line
    )
    line = _VARY_ISO.sub(lambda m: local.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000+00:00", line)
    line = _VARY_PID.sub(lambda m: f"pid={rng.randint(2, 32000)}", line)
    line = _VARY_REQUEST_ID.sub(
        lambda m: (
            f"Root=1-{rng.getrandbits(32):08x}-{rng.getrandbits(96):024x};{uuid.UUID(int=rng.getrandbits(128))}"
        ),
        line,
    )
    line = _VARY_EID.sub(lambda m: f"[EID: 0x{rng.getrandbits(64):016x}]", line)
    return _VARY_OPERATION.sub(
        lambda m: f"operations/operation-{int(local.timestamp() * 1000)}-{rng.getrandbits(48):012x}", line
    )


def case_lines(name: str, folder: Path | None = None) -> list[str]:
    """The non-empty lines of a case file (`sim.cases`, or `folder`), or one placeholder line if missing."""
    text = read_case(name, folder)
    if text is None:
        return [missing_case_line(name, folder)]
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def case_line_severity(line: str, default: str) -> str:
    """INFO/WARNING/DEBUG when the line carries that level (vLLM or uvicorn prefix), else `default`."""
    match = _LINE_LEVEL.search(line)
    return match.group(1) if match else default


# What a preemption warning of the serving container becomes beyond its counter (an access-log line).
_ACCESS_LINE = 'INFO:     10.128.0.7:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK'


def _noise_lines(rng: random.Random, at: datetime, serving: bool = False) -> tuple[str, str, Any]:
    """One INFO/WARNING line typical of a TPU VM serving vLLM: (severity, log id, text or JSON payload);
    the log id of a vLLM or uvicorn line is CONTAINER (the vLLM container's output, through gcplogs).

    `serving`: `at` is in the life of the container serving now, whose `/metrics` the vLLM simulator
    serves (a light load: a few hundred requests, tens of thousands of tokens): its engine lines show that
    load (at most 2 running, none waiting, tens of tokens/s) and it logs no preemption (the caller keeps
    the few its counter holds). The same random draws are made either way, so the other lines stay as
    they were.

    The vLLM, uvicorn, docker and guest-agent texts follow the real programs' formats; the runtime-monitor
    JSON is illustrative (its real fields are unverified).
    """
    md, hms = f"{at:%m-%d}", f"{at:%H:%M:%S}"
    roll = rng.random()
    if roll < 0.30:
        prompt_tps, gen_tps = rng.uniform(0, 9000), rng.uniform(50, 2500)
        running, waiting = rng.randint(0, 64), rng.randint(0, 8)
        kv, hits = rng.uniform(0, 95), rng.uniform(0, 90)
        if serving:  # the same draws scaled to the load the simulator's /metrics counts
            prompt_tps, gen_tps, running, waiting, kv = prompt_tps / 30, gen_tps / 60, running % 3, 0, kv / 3
        return (
            "INFO",
            CONTAINER,
            (
                f"INFO {md} {hms} [loggers.py:123] Engine 000: Avg prompt throughput: "
                f"{prompt_tps:.1f} tokens/s, Avg generation throughput: "
                f"{gen_tps:.1f} tokens/s, Running: "
                f"{running} reqs, Waiting: {waiting} reqs, GPU KV cache usage: "
                f"{kv:.1f}%, Prefix cache hit rate: {hits:.1f}%"
            ),
        )
    if roll < 0.55:
        status = "200 OK" if rng.random() < 0.97 else "400 Bad Request"
        return (
            "INFO",
            CONTAINER,
            (
                f'INFO:     10.128.0.{rng.randint(2, 250)}:{rng.randint(30000, 65000)} - "POST '
                f'/v1/chat/completions HTTP/1.1" {status}'
            ),
        )
    if roll < 0.68:
        path = rng.choice(("/health", "/metrics", "/v1/models"))
        return (
            "INFO",
            CONTAINER,
            f'INFO:     127.0.0.1:{rng.randint(30000, 65000)} - "GET {path} HTTP/1.1" 200 OK',
        )
    if roll < 0.80:
        return (
            "INFO",
            CONTAINER,
            (f"INFO {md} {hms} [async_llm.py:261] Added request chatcmpl-{rng.getrandbits(128):032x}."),
        )
    if roll < 0.86:
        return (
            "INFO",
            RUNTIME_MONITOR_LOG,
            {
                "verb": "tpu-runtime-metrics",
                "message": f"TPU chip {rng.randint(0, 7)}: duty cycle {rng.uniform(0, 100):.1f}%, HBM used "
                f"{rng.uniform(20, 31):.2f} GiB of 31.25 GiB",
            },
        )
    if roll < 0.90:
        return (
            "INFO",
            "syslog",
            (
                f'dockerd[{rng.randint(500, 2000)}]: time="{at:%Y-%m-%dT%H:%M:%S.%f}000Z" level=info '
                f'msg="ignoring event" container={rng.getrandbits(256):064x} module=libcontainerd '
                'namespace=moby topic=/tasks/delete type="*events.TaskDelete"'
            ),
        )
    if roll < 0.93:
        return (
            "INFO",
            "syslog",
            (f"google_guest_agent[{rng.randint(800, 1200)}]: Updating keys for user tpu-chatops."),
        )
    if roll < 0.97:
        return (
            "WARNING",
            CONTAINER,
            (
                f"WARNING {md} {hms} [scheduler.py:1754] Sequence group {rng.randint(1, 99999)} is "
                "preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. "
                "This can affect the end-to-end performance. Increase gpu_memory_utilization or "
                "tensor_parallel_size to provide more KV cache memory. "
                f"total_num_cumulative_preemption={rng.randint(1, 500)}"
            ),
        )
    field_name = rng.choice(("top_k", "min_p", "repetition_penalty", "chat_template_kwargs"))
    return (
        "WARNING",
        CONTAINER,
        (
            f"WARNING {md} {hms} [protocol.py:58] The following fields were present in the request but "
            f"ignored: {{'{field_name}'}}"
        ),
    )


def _within(at: datetime, windows: list[tuple[datetime, datetime]]) -> bool:
    return any(begin <= at <= end for begin, end in windows)


def _window(spec: dict[str, Any], start: datetime, default: str) -> tuple[datetime, datetime]:
    if "from" in spec or "to" in spec:
        begin = start + duration(spec.get("from", f"-{default}"))
        end = start + duration(spec.get("to", "0s"))
    else:
        begin, end = start - duration(spec.get("window", default)), start
    if end < begin:
        raise ValueError(f"log window ends before it begins: {spec!r}")
    return begin, end


def generate_logs(
    logs: dict[str, Any],
    *,
    project: str,
    start: datetime,
    node_id: str = "gemma4-qr-node",
    zone: str = "us-east5-a",
    cases_dir: Path | None = None,
    serving_since: datetime | None = None,
    serving_preemptions: int = 0,
) -> list[dict[str, Any]]:
    """Generate the log entries a scenario's `google.logs` section describes (see the module docstring).

    Deterministic for a given `seed`. Returns LogEntry JSON bodies sorted by timestamp (oldest first).
    `serving_since`: when the vLLM container serving now started (None: no such container): noise after
    it shows its light load and holds only `serving_preemptions` preemption warnings (what its
    `vllm:num_preemptions` counter says), the others becoming access-log lines.

    Raises:
        ValueError: a malformed spec (bad severity, duration or window).
    """
    rng = random.Random(int(logs.get("seed", 20261129)))  # simulated data, not security
    node_id = str(logs.get("node_id", node_id))
    zone = str(logs.get("zone", zone))
    workers = max(1, int(logs.get("workers", 1)))
    log_id = str(logs.get("log_name", "syslog"))
    container = {**DEFAULT_CONTAINER, **(logs.get("container") or {})}
    folder = Path(logs["cases_dir"]) if logs.get("cases_dir") else cases_dir
    out: list[dict[str, Any]] = []

    def labels(spec: dict[str, Any], worker: int) -> dict[str, str]:
        return {
            "project_id": project,
            "zone": str(spec.get("zone", zone)),
            "node_id": str(spec.get("node_id", node_id)),
            "worker_id": str(spec.get("worker_id", worker)),
        }

    def add(at: datetime, severity: str, payload: Any, spec: dict[str, Any], worker: int, lid: str) -> None:
        kind = spec.get("payload", "text")
        if kind == CONTAINER or lid == CONTAINER:  # gcplogs: no severity, whatever the spec says
            at_labels = labels(spec, worker)
            out.append(
                container_line(
                    project,
                    at,
                    str(payload),
                    node_id=at_labels["node_id"],
                    zone=at_labels["zone"],
                    worker=at_labels["worker_id"],
                    container=container,
                    insert_id=f"{rng.getrandbits(64):016x}",
                )
            )
            return
        content: dict[str, Any]
        if isinstance(payload, dict):
            content = {"json_payload": payload}
        elif kind == "json":
            content = {"json_payload": {"message": payload}}
        else:
            content = {"text": payload}
        body = make_log_entry(
            project,
            at,
            severity,
            **content,
            log_id=lid,
            labels=labels(spec, worker),
            insert_id=f"{rng.getrandbits(64):016x}",
        )
        out.append(body)

    noise = logs.get("noise") or {}
    if isinstance(noise, int):
        noise = {"count": noise}
    begin, end = _window(noise, start, "6h")
    span = (end - begin).total_seconds()
    preemptions_left = serving_preemptions
    served = [_window(spec, start, "6h") for spec in logs.get("served") or []]
    for _ in range(int(noise.get("count", 0))):
        at = begin + timedelta(seconds=rng.uniform(0, span))
        serving = serving_since is not None and at >= serving_since
        severity, lid, payload = _noise_lines(rng, at, serving)
        if lid == CONTAINER and "served" in logs and not serving and not _within(at, served):
            continue  # no vLLM container served then: nothing printed engine stats, requests or preemptions
        if serving and "is preempted by" in str(payload):
            if preemptions_left > 0:
                preemptions_left -= 1
            else:
                severity, payload = "INFO", _ACCESS_LINE.format(port=30000 + int(at.timestamp()) % 35000)
        add(at, severity, payload, noise, rng.randrange(workers), lid)
    for case in logs.get("cases") or []:
        lines = case_lines(str(case["file"]), folder)
        if "lines" in case:
            lines = [lines[int(n)] for n in case["lines"]]
        severity = log_severity(case.get("severity", "ERROR"))
        begin, end = _window(case, start, "6h")
        span = (end - begin).total_seconds()
        for _ in range(int(case.get("count", 1))):
            at = begin + timedelta(seconds=rng.uniform(0, span))
            worker = rng.randrange(workers)
            for i, line in enumerate(lines):
                when = at + timedelta(microseconds=i * 137)
                add(
                    when,
                    case_line_severity(line, severity),
                    vary_case_line(line, rng, when),
                    case,
                    worker,
                    str(case.get("log_name", log_id)),
                )
    for spec in logs.get("entries") or []:
        at = start + duration(spec.get("at", "0s"))
        add(
            at,
            log_severity(spec.get("severity", "ERROR")),
            str(spec["text"]),
            spec,
            int(spec.get("worker_id", 0)),
            str(spec.get("log_name", log_id)),
        )
    out.sort(key=lambda body: body["timestamp"])
    return out
