"""The Cloud TPU API (tpu.googleapis.com v2alpha1 and v2) of the Google simulator, SIMULATED.

Served in the JSON shapes of the discovery documents google-api-python-client ships (`tpu.v2alpha1.json`,
`tpu.v2.json`), so the real clients work against it (`ops.gcp.google.tpu_v2alpha1(url)`,
`ops.gcp.google.tpu_v2(url)`):

    GET /{v2alpha1|v2}/projects/{p}/locations                      locations.list (the scenario's zones)
    GET /{v}/projects/{p}/locations/{zone}                         locations.get
    GET /{v}/projects/{p}/locations/{zone}/queuedResources[/{id}]  list (pageSize/pageToken) / get
    POST /{v}/.../queuedResources?queuedResourceId={id}            create (LRO)
    DELETE /{v}/.../queuedResources/{id}[?force=true]              delete (LRO)
    POST /{v}/.../queuedResources/{id}:reset                       reset (LRO; FAILED only)
    GET /{v}/projects/{p}/locations/{zone}/nodes[/{id}]            list / get
    POST /{v}/.../nodes/{id}:start | :stop                         start / stop (LRO; response: the Node)
    POST /{v}/.../nodes/{id}:getGuestAttributes                    guest attributes (queryPath, workerIds)
    GET /{v}/projects/{p}/locations/{zone}/acceleratorTypes[/{t}]  list / get
    GET /{v}/projects/{p}/locations/{zone}/operations/{op}         operations.get

v2 responses drop what only v2alpha1 defines (provisioningModel, runDuration, bestEffort,
guaranteed.reserved, schedulingConfig.provisioningModel/terminationTimestamp/reservationName). Request
bodies may encode enums as names (google-api-python-client) or integers (GAPIC REST). Reset is accepted only
from FAILED: a SUSPENDED one is refused with 400 FAILED_PRECONDITION (its resources are gone; delete and
recreate it). Guest attributes are what a test published (`GcpSimulator.publish_host_key`, playing the
VM's guest agent); a path nothing was published under answers 200 with no items (a simulator choice:
Google's answer for that case was not captured). Delete without force of a QR whose node exists, unless it
is ACCEPTED, FAILED or SUSPENDED, is refused with 400 FAILED_PRECONDITION (DeleteQueuedResourceRequest.force
semantics). Simulator-only texts (not captured from Google): the FAILED_PRECONDITION messages and the
request-validation messages.
"""

from __future__ import annotations

import re
import zlib
from datetime import UTC, datetime, timedelta
from typing import Any

from sim.gcp.api import ApiError, duration_json, enum_name, json_body, paginate, rfc3339
from sim.gcp.world import (
    PROVISIONING_MODELS,
    WAITING,
    Route,
    SimNode,
    SimOperation,
    SimQueuedResource,
    SimZone,
    World,
)

# Real error texts (tpu-create-*.txt in sim/cases), with the type, zone or model substituted.
ACCELERATOR_NOT_IN_ZONE = (
    "Cloud TPU received a bad request. The requested accelerator configuration for accelerator type, "
    '"{type}", could not be found in the zonal accelerator configurations for "{zone}".; the accelerator '
    "{type} was not found in zone {zone}"
)
MODEL_NOT_SUPPORTED = (
    '{model} provisioning model is not supported for accelerator type "{type}" in location "{zone}"'
)
# google.rpc.Code of a refused create in the operation's error.
CODE_INVALID_ARGUMENT = 3
MAX_RUN_DURATION_LIMIT = timedelta(days=7)  # flex-start: "up to 7 days" (tpu/docs/request-using-flex-start)
_RESOURCE_ID = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
# Enum integers of request bodies (GAPIC REST sends enums as ints).
_PROVISIONING_MODEL_INTS = {0: "PROVISIONING_MODEL_UNSPECIFIED", 1: "STANDARD", 2: "SPOT"}
_PROVISIONING_MODEL_INTS.update({3: "RESERVATION_BOUND", 4: "FLEX_START"})
_ACCEL_TYPE_INTS = {2: "V2", 4: "V3", 7: "V4", 9: "V5LITE_POD", 10: "V5P", 11: "V6E"}

_STATE_DATA = {
    "CREATING": "creatingData",
    "ACCEPTED": "acceptedData",
    "PROVISIONING": "provisioningData",
    "DELETING": "deletingData",
    "ACTIVE": "activeData",
    "SUSPENDING": "suspendingData",
    "SUSPENDED": "suspendedData",
}
# acceleratorType prefix -> AcceleratorConfig.type enum; topology of common slice sizes.
_ACCEL_FAMILY = {"v2": "V2", "v3": "V3", "v4": "V4", "v5litepod": "V5LITE_POD", "v5p": "V5P", "v6e": "V6E"}
_TOPOLOGY_2D = {1: "1x1", 4: "2x2", 8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8", 128: "8x16", 256: "16x16"}
_TOPOLOGY_3D = {8: "2x2x1", 16: "2x2x2", 32: "2x2x4", 64: "2x4x4", 128: "4x4x4"}


# ---- JSON rendering (discovery-document shapes)


def location_json(world: World, zone: SimZone) -> dict[str, Any]:
    return {
        "name": world.parent(zone.name),
        "locationId": zone.name,
        "labels": {"cloud.googleapis.com/region": zone.region},
    }


def accelerator_config_json(accelerator_type: str) -> dict[str, Any]:
    family, _, size = accelerator_type.rpartition("-")
    config: dict[str, Any] = {}
    if family in _ACCEL_FAMILY:
        config["type"] = _ACCEL_FAMILY[family]
    if size.isdigit():
        topology = (_TOPOLOGY_3D if family in ("v4", "v5p") else _TOPOLOGY_2D).get(int(size))
        if topology:
            config["topology"] = topology
    return config


def accelerator_type_json(world: World, zone: str, accelerator_type: str) -> dict[str, Any]:
    config = accelerator_config_json(accelerator_type)
    return {
        "name": f"{world.parent(zone)}/acceleratorTypes/{accelerator_type}",
        "type": accelerator_type,
        "acceleratorConfigs": [config] if config else [],
    }


def queued_resource_json(world: World, qr: SimQueuedResource, api: str) -> dict[str, Any]:
    """A QueuedResource in the `api` ("v2alpha1" | "v2") discovery shape."""
    parent = world.parent(qr.zone)
    state: dict[str, Any] = {"state": qr.state, "stateInitiator": qr.state_initiator}
    if qr.state == "FAILED":
        state["failedData"] = {"error": {"code": qr.error_code or 13, "message": qr.error_message or ""}}
    elif qr.state in _STATE_DATA:
        state[_STATE_DATA[qr.state]] = {}
    body: dict[str, Any] = {
        "name": f"{parent}/queuedResources/{qr.qr_id}",
        "createTime": rfc3339(qr.create_time),
        "tpu": {
            "nodeSpec": [
                {
                    "parent": parent,
                    "nodeId": qr.node.node_id,
                    "node": {
                        "acceleratorType": qr.node.accelerator_type,
                        "runtimeVersion": qr.node.runtime_version,
                        "networkConfig": {"enableExternalIps": qr.node.enable_external_ips},
                        **_node_extras(qr.node),
                    },
                }
            ]
        },
        "state": state,
    }
    if qr.node.network:
        body["tpu"]["nodeSpec"][0]["node"]["networkConfig"]["network"] = qr.node.network
    if qr.provisioning_model == "SPOT":
        body["spot"] = {}
    if qr.provisioning_model == "RESERVATION_BOUND":
        body["reservationName"] = f"{parent}/reservations/{qr.reservation or '-'}"
    if api == "v2alpha1":
        body["provisioningModel"] = qr.provisioning_model
        if qr.max_run_duration is not None:
            run: dict[str, Any] = {"maxRunDuration": duration_json(qr.max_run_duration)}
            if qr.termination_time is not None:
                run["terminationTime"] = rfc3339(qr.termination_time)
            body["runDuration"] = run
    if qr.valid_until is not None:
        body["queueingPolicy"] = {"validUntilTime": rfc3339(qr.valid_until)}
    return body


def _node_extras(node: SimNode) -> dict[str, Any]:
    """The request-given Node fields echoed back: labels, metadata, serviceAccount."""
    extras: dict[str, Any] = {}
    if node.labels:
        extras["labels"] = dict(node.labels)
    if node.metadata:
        extras["metadata"] = dict(node.metadata)
    if node.service_account is not None:
        extras["serviceAccount"] = dict(node.service_account)
    return extras


def node_json(world: World, qr: SimQueuedResource, api: str) -> dict[str, Any]:
    """The Node of `qr` in the `api` ("v2alpha1" | "v2") discovery shape."""
    node, zone = qr.node, world.zones[qr.zone]
    endpoints: list[dict[str, Any]] = []
    for i, ip in enumerate(node.internal_ips):
        endpoint: dict[str, Any] = {"ipAddress": ip, "port": 8470}
        if node.enable_external_ips and i < len(node.external_ips):
            endpoint["accessConfig"] = {"externalIp": node.external_ips[i]}
        endpoints.append(endpoint)
    scheduling: dict[str, Any] = {}
    if qr.provisioning_model == "SPOT":
        scheduling["spot"] = True
    if qr.provisioning_model == "RESERVATION_BOUND":
        scheduling["reserved"] = True
    if api == "v2alpha1":
        # SchedulingConfig.provisioningModel has no FLEX_START value: flex-start nodes leave it unset.
        if qr.provisioning_model != "FLEX_START":
            scheduling["provisioningModel"] = qr.provisioning_model
        if qr.provisioning_model == "RESERVATION_BOUND":
            scheduling["reservationName"] = f"{world.parent(qr.zone)}/reservations/{qr.reservation or '-'}"
        if qr.termination_time is not None:
            scheduling["terminationTimestamp"] = rfc3339(qr.termination_time)
    name = f"{world.parent(qr.zone)}/nodes/{node.node_id}"
    body: dict[str, Any] = {
        "name": name,
        "id": str(zlib.crc32(name.encode()) * 1000003 % (2**62)),
        "acceleratorType": node.accelerator_type,
        "acceleratorConfig": accelerator_config_json(node.accelerator_type),
        "state": node.state,
        "runtimeVersion": node.runtime_version,
        "createTime": rfc3339(node.create_time or qr.create_time),
        "networkConfig": {
            "network": f"projects/{world.project}/global/networks/default",
            "subnetwork": f"projects/{world.project}/regions/{zone.region}/subnetworks/default",
            "enableExternalIps": node.enable_external_ips,
        },
        "networkEndpoints": endpoints,
        "schedulingConfig": scheduling,
        "queuedResource": f"{world.parent(qr.zone)}/queuedResources/{qr.qr_id}",
        "apiVersion": "V2_ALPHA1",
    }
    if node.health:
        body["health"] = node.health
    if node.health_description:
        body["healthDescription"] = node.health_description
    maintenance = _upcoming_maintenance(node, world.now)
    if maintenance:
        body["upcomingMaintenance"] = maintenance
    return {**body, **_node_extras(node)}


def _upcoming_maintenance(node: SimNode, now: datetime) -> dict[str, Any] | None:
    """`Node.upcomingMaintenance` (v2alpha1 and v2 discovery docs: `UpcomingMaintenance`) while the node's
    maintenance is announced or under way; canReschedule is false once it runs ("typically observed during
    the period in which the VM is actively undergoing maintenance",
    https://cloud.google.com/tpu/docs/view-maintenance-notifications)."""
    status, maintenance = node.maintenance_status(now), node.maintenance
    if status is None or maintenance is None:
        return None
    return {
        "type": maintenance.kind,
        "canReschedule": maintenance.can_reschedule and status == "PENDING",
        "windowStartTime": rfc3339(maintenance.start),
        "windowEndTime": rfc3339(maintenance.end),
        "latestWindowStartTime": rfc3339(maintenance.latest_start or maintenance.start),
        "maintenanceStatus": status,
    }


def operation_json(world: World, op: SimOperation, api: str) -> dict[str, Any]:
    """A google.longrunning.Operation with TPU OperationMetadata (and the response when done)."""
    metadata: dict[str, Any] = {
        "@type": f"type.googleapis.com/google.cloud.tpu.{api}.OperationMetadata",
        "createTime": rfc3339(op.create_time),
        "target": op.target,
        "verb": op.verb,
        "cancelRequested": False,
        "apiVersion": api,
    }
    if op.end_time is not None:
        metadata["endTime"] = rfc3339(op.end_time)
    body: dict[str, Any] = {
        "name": f"{world.parent(op.zone)}/operations/{op.op_id}",
        "metadata": metadata,
        "done": op.done,
    }
    if not op.done:
        return body
    if op.error_code is not None:
        body["error"] = {"code": op.error_code, "message": op.error_message or ""}
    elif op.response_qr and (op.zone, op.response_qr) in world.queued_resources:
        qr = world.queued_resources[(op.zone, op.response_qr)]
        body["response"] = {
            "@type": f"type.googleapis.com/google.cloud.tpu.{api}.QueuedResource",
            **queued_resource_json(world, qr, api),
        }
    elif op.response_node and any(q.node.node_id == op.response_node for q in world.nodes_in(op.zone)):
        body["response"] = {
            "@type": f"type.googleapis.com/google.cloud.tpu.{api}.Node",
            **node_json(world, world.node_owner(op.zone, op.response_node), api),
        }
    else:
        body["response"] = {"@type": "type.googleapis.com/google.protobuf.Empty"}
    return body


# ---- handlers (called with world.lock held)
def _list_locations(w: World, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
    w.check(m["project"])
    page, token = paginate([location_json(w, z) for z in w.zones.values()], query, w.page_size)
    return {"locations": page, **({"nextPageToken": token} if token else {})}


def _get_location(w: World, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
    w.check(m["project"], m["zone"])
    return location_json(w, w.zones[m["zone"]])


def _list_page(
    w: World, m: re.Match[str], query: dict[str, str], key: str, qrs: list[SimQueuedResource]
) -> dict[str, Any]:
    """One page of a zone's queued resources (key "queuedResources") or nodes ("nodes") as list returns it."""
    w.check(m["project"], m["zone"])
    page, token = paginate(qrs, query, w.page_size)
    render = queued_resource_json if key == "queuedResources" else node_json
    body: dict[str, Any] = {key: [render(w, qr, m["api"]) for qr in page]}
    return {**body, "nextPageToken": token} if token else body


def _list_queued_resources(w: World, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
    return _list_page(w, m, query, "queuedResources", w.qrs_in(m["zone"]))


def _get_queued_resource(w: World, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
    w.check(m["project"], m["zone"])
    return queued_resource_json(w, w.qr(m["zone"], m["id"]), m["api"])


def _list_nodes(w: World, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
    return _list_page(w, m, query, "nodes", w.nodes_in(m["zone"]))


def _get_node(w: World, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
    w.check(m["project"], m["zone"])
    return node_json(w, w.node_owner(m["zone"], m["id"]), m["api"])


def _list_accelerator_types(w: World, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
    w.check(m["project"], m["zone"])
    types = [accelerator_type_json(w, m["zone"], t) for t in w.zones[m["zone"]].accelerator_types]
    page, token = paginate(types, query, w.page_size)
    return {"acceleratorTypes": page, **({"nextPageToken": token} if token else {})}


def _get_accelerator_type(w: World, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
    w.check(m["project"], m["zone"])
    if m["id"] not in w.zones[m["zone"]].accelerator_types:
        raise ApiError(404, f'Resource "{w.parent(m["zone"])}/acceleratorTypes/{m["id"]}" was not found')
    return accelerator_type_json(w, m["zone"], m["id"])


def _get_operation(w: World, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
    w.check(m["project"], m["zone"])
    return operation_json(w, w.operation(m["zone"], m["id"]), m["api"])


# ---- TPU changes (LROs)
def _create_queued_resource(w: World, m: re.Match[str], query: dict[str, str], raw: bytes) -> dict[str, Any]:
    w, zone, api = w, m["zone"], m["api"]
    w.check(m["project"], zone)
    qr_id = query.get("queuedResourceId", "")
    if not _RESOURCE_ID.match(qr_id):
        raise ApiError(
            400, f"Invalid queued resource id {qr_id!r}: use 1-63 lowercase letters, digits, hyphens."
        )
    if (zone, qr_id) in w.queued_resources:
        raise ApiError(409, f"Resource '{w.parent(zone)}/queuedResources/{qr_id}' already exists")
    body = json_body(raw)
    qr = _qr_from_request(w, zone, qr_id, body)
    w.evolve(w.now)
    if qr.provisioning_model != "FLEX_START" or w.zones[zone].flex_start:  # refused below otherwise
        w.check_quota(zone, qr)
    target = f"{w.parent(zone)}/queuedResources/{qr_id}"
    done_at = w.now + w.operation_duration
    op = w.new_operation(zone, "create", target, done_at=done_at)
    if qr.provisioning_model == "FLEX_START" and not w.zones[zone].flex_start:
        op.error_code = CODE_INVALID_ARGUMENT
        op.error_message = MODEL_NOT_SUPPORTED.format(
            model="FLEX_START", type=qr.node.accelerator_type, zone=zone
        )
    else:
        w.queued_resources[(zone, qr_id)] = qr
        w.schedule(qr, w.now)
        op.response_qr = qr_id
    w.evolve(w.now)
    return operation_json(w, op, api)


def _delete_queued_resource(w: World, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
    w, zone = w, m["zone"]
    w.check(m["project"], zone)
    qr = w.qr(zone, m["id"])
    force = query.get("force", "").lower() in ("true", "1")
    if qr.state != "DELETING":
        if qr.node_visible and qr.state not in ("ACCEPTED", "FAILED", "SUSPENDED") and not force:
            raise ApiError(
                400,
                f"Queued resource {qr.qr_id} is {qr.state} and its nodes exist: delete them first or set "
                "force=true.",
                status_name="FAILED_PRECONDITION",
            )
        qr.state, qr.state_initiator = "DELETING", "USER"
        qr.delete_at = w.now + w.delete_duration
        qr.node.state, qr.node.health = "DELETING", None
    done_at = qr.delete_at or w.now
    op = w.new_operation(zone, "delete", f"{w.parent(zone)}/queuedResources/{qr.qr_id}", done_at=done_at)
    w.evolve(w.now)
    return operation_json(w, op, m["api"])


def _reset_queued_resource(w: World, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
    w, zone = w, m["zone"]
    w.check(m["project"], zone)
    qr = w.qr(zone, m["id"])
    if qr.state != "FAILED":
        raise ApiError(
            400,
            f"Queued resource {qr.qr_id} is {qr.state}: only a FAILED queued resource can be reset"
            + (
                " (a SUSPENDED one has lost its resources: delete it and create it again)."
                if qr.state == "SUSPENDED"
                else "."
            ),
            status_name="FAILED_PRECONDITION",
        )
    qr.state, qr.state_initiator = WAITING, "USER"
    qr.error_code = qr.error_message = None
    qr.active_time = None
    qr.node.state, qr.node.health, qr.node.preempt_at = "CREATING", None, None
    qr.node.pending_state = qr.node.pending_at = None
    if qr.valid_for is not None:
        qr.valid_until = w.now + qr.valid_for
    w.schedule(qr, w.now)
    op = w.new_operation(
        zone,
        "reset",
        f"{w.parent(zone)}/queuedResources/{qr.qr_id}",
        done_at=w.now + w.operation_duration,
    )
    op.response_qr = qr.qr_id
    w.evolve(w.now)
    return operation_json(w, op, m["api"])


def _node_change(w: World, m: re.Match[str], verb: str, need: str, during: str, then: str) -> dict[str, Any]:
    w, zone = w, m["zone"]
    w.check(m["project"], zone)
    qr = w.node_owner(zone, m["id"])
    if qr.state != "ACTIVE" or qr.node.state != need:
        raise ApiError(
            400,
            f"Node {qr.node.node_id} is {qr.node.state}: it must be {need} to {verb}.",
            status_name="FAILED_PRECONDITION",
        )
    done_at = w.now + w.operation_duration
    qr.node.state, qr.node.pending_state, qr.node.pending_at = during, then, done_at
    op = w.new_operation(zone, verb, f"{w.parent(zone)}/nodes/{qr.node.node_id}", done_at=done_at)
    op.response_node = qr.node.node_id
    w.evolve(w.now)
    return operation_json(w, op, m["api"])


def _start_node(w: World, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
    return _node_change(w, m, "start", "STOPPED", "STARTING", "READY")


def _stop_node(w: World, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
    return _node_change(w, m, "stop", "READY", "STOPPING", "STOPPED")


def _get_guest_attributes(w: World, m: re.Match[str], query: dict[str, str], raw: bytes) -> dict[str, Any]:
    """`nodes.getGuestAttributes`: one `GuestAttributes` per requested worker (all workers without
    `workerIds`), its `queryValue.items` the node's attributes under `queryPath` ("hostkeys/" is a
    namespace, "hostkeys/ssh-ed25519" one key; "" or "/" everything)."""
    w.check(m["project"], m["zone"])
    qr = w.node_owner(m["zone"], m["id"])
    body = json_body(raw)
    path = str(body.get("queryPath") or "").lstrip("/")
    workers = len(qr.node.internal_ips) or 1
    wanted = [str(worker) for worker in body.get("workerIds") or range(workers)]
    for worker in wanted:
        if not worker.isdigit() or int(worker) >= workers:
            raise ApiError(
                400, f"Invalid worker id {worker!r}: node {qr.node.node_id} has {workers} worker(s)."
            )
    items = [
        {"namespace": name.split("/", 1)[0], "key": name.split("/", 1)[1], "value": value}
        for name, value in sorted(qr.node.guest_attributes.items())
        if name.startswith(path) or not path
    ]
    return {"guestAttributes": [{"queryPath": path, "queryValue": {"items": items}} for _ in wanted]}


def _accelerator_type_of(node: dict[str, Any]) -> str:
    """`node.acceleratorType`, else one built from `node.acceleratorConfig{type, topology}`."""
    if node.get("acceleratorType"):
        return str(node["acceleratorType"])
    config = node.get("acceleratorConfig") or {}
    family_enum = enum_name(config.get("type", 0), {0: "", **_ACCEL_TYPE_INTS})
    family = {v: k for k, v in _ACCEL_FAMILY.items()}.get(family_enum)
    topology = str(config.get("topology") or "")
    if not family or not re.match(r"^\d+(x\d+)+$", topology):
        raise ApiError(
            400, "Either node.acceleratorType or node.acceleratorConfig{type, topology} is required."
        )
    chips = 1
    for part in topology.split("x"):
        chips *= int(part)
    return f"{family}-{chips * 2 if family in ('v4', 'v5p') else chips}"


def _request_duration(value: Any, field_name: str) -> timedelta:
    match = re.match(r"^(\d+(?:\.\d+)?)s$", str(value))
    if not match:
        raise ApiError(400, f"Invalid value at '{field_name}': expected a duration such as \"3600s\".")
    return timedelta(seconds=float(match.group(1)))


def _qr_from_request(w: World, zone: str, qr_id: str, body: dict[str, Any]) -> SimQueuedResource:
    """Validate a QueuedResource create body (v2alpha1 or v2) and build the QR it asks for.

    Raises:
        ApiError: 400 INVALID_ARGUMENT for a malformed body, or (the real text) for an accelerator type the
            zone does not offer.
    """
    specs = (body.get("tpu") or {}).get("nodeSpec") or []
    if len(specs) != 1 or not isinstance(specs[0], dict):
        raise ApiError(400, "tpu.nodeSpec must hold exactly one node spec (multi-node is not simulated).")
    spec = specs[0]
    node_id = str(spec.get("nodeId") or "")
    if not _RESOURCE_ID.match(node_id):
        raise ApiError(400, f"Invalid tpu.nodeSpec[0].nodeId {node_id!r}.")
    if spec.get("parent") != w.parent(zone):
        raise ApiError(400, f"tpu.nodeSpec[0].parent must be {w.parent(zone)}.")
    node = spec.get("node") or {}
    accelerator_type = _accelerator_type_of(node)
    if accelerator_type not in w.zones[zone].accelerator_types:
        raise ApiError(400, ACCELERATOR_NOT_IN_ZONE.format(type=accelerator_type, zone=zone))
    if not node.get("runtimeVersion"):
        raise ApiError(400, "tpu.nodeSpec[0].node.runtimeVersion is required.")
    model = enum_name(
        body.get("provisioningModel", "PROVISIONING_MODEL_UNSPECIFIED"), _PROVISIONING_MODEL_INTS
    )
    if model not in (*PROVISIONING_MODELS, "PROVISIONING_MODEL_UNSPECIFIED"):
        raise ApiError(400, f"Invalid value at 'provisioning_model': {model!r}.")
    guaranteed = body.get("guaranteed") or {}
    if model == "PROVISIONING_MODEL_UNSPECIFIED" or (model == "STANDARD" and guaranteed.get("reserved")):
        if "spot" in body:
            model = "SPOT"
        elif guaranteed.get("reserved") or body.get("reservationName"):
            model = "RESERVATION_BOUND"
        else:
            model = "STANDARD"
    run = body.get("runDuration") or {}
    max_run = _request_duration(run["maxRunDuration"], "run_duration.max_run_duration") if run else None
    if model == "FLEX_START" and max_run is None:
        raise ApiError(400, "runDuration.maxRunDuration is required for the FLEX_START provisioning model.")
    if max_run is not None and model != "FLEX_START":
        raise ApiError(400, "runDuration is only supported with the FLEX_START provisioning model.")
    if max_run is not None and not timedelta(0) < max_run <= MAX_RUN_DURATION_LIMIT:
        raise ApiError(400, "runDuration.maxRunDuration must be more than 0s and at most 7 days.")
    policy = body.get("queueingPolicy") or {}
    if len(policy) > 1:
        raise ApiError(400, "queueingPolicy: only one of its start timing constraints may be set.")
    valid_for = (
        _request_duration(policy["validUntilDuration"], "queueing_policy.valid_until_duration")
        if "validUntilDuration" in policy
        else None
    )
    valid_until = w.now + valid_for if valid_for is not None else None
    if "validUntilTime" in policy:
        valid_until = _parse_request_time(policy["validUntilTime"])
    labels = _request_labels(node.get("labels") or {})
    network = node.get("networkConfig") or {}
    account = node.get("serviceAccount")
    reservation = str(body.get("reservationName") or "").rsplit("/", 1)[-1] or None
    return SimQueuedResource(
        qr_id=qr_id,
        zone=zone,
        state=WAITING,
        state_initiator="USER",
        provisioning_model=model,
        create_time=w.now,
        node=SimNode(
            node_id=node_id,
            accelerator_type=accelerator_type,
            runtime_version=str(node["runtimeVersion"]),
            state="CREATING",
            health=None,
            enable_external_ips=bool(network.get("enableExternalIps", False)),
            network=str(network["network"]) if network.get("network") else None,
            labels=labels,
            metadata={str(k): str(v) for k, v in (node.get("metadata") or {}).items()},
            service_account=dict(account) if isinstance(account, dict) and account else None,
        ),
        max_run_duration=max_run,
        valid_until=valid_until,
        valid_for=valid_for,
        reservation=reservation if reservation != "-" else None,
    )


# Label rules of Google Cloud (https://cloud.google.com/compute/docs/labeling-resources#requirements):
# keys 1-63 chars starting with a lowercase letter; keys and values lowercase letters, digits, _ and -;
# values at most 63 chars; at most 64 labels.
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")


def _request_labels(raw: Any) -> dict[str, str]:
    """The node labels of a create body, checked as Google checks them (400 INVALID_ARGUMENT)."""
    if not isinstance(raw, dict) or len(raw) > 64:
        raise ApiError(400, "tpu.nodeSpec[0].node.labels must be a map of at most 64 labels.")
    for key, value in raw.items():
        if not _LABEL_KEY.match(str(key)) or not _LABEL_VALUE.match(str(value)):
            raise ApiError(
                400,
                f"Invalid label {key!r}={value!r}: keys and values must be lowercase letters, digits, "
                "underscores or dashes, at most 63 characters, keys starting with a letter.",
            )
    return {str(k): str(v) for k, v in raw.items()}


def _parse_request_time(value: Any) -> datetime:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        raise ApiError(400, f"Invalid timestamp {value!r}.") from None


_V = r"/(?P<api>v2alpha1|v2)/projects/(?P<project>[^/]+)/locations"
_Z = _V + r"/(?P<zone>[^/]+)"
_QR = _Z + r"/queuedResources/(?P<id>[^/:]+)"
_NODE = _Z + r"/nodes/(?P<id>[^/:]+)"
ROUTES: list[Route] = [
    ("GET", _V + r"$", _list_locations),
    ("GET", _Z + r"$", _get_location),
    ("GET", _Z + r"/queuedResources$", _list_queued_resources),
    ("POST", _Z + r"/queuedResources$", _create_queued_resource),
    ("GET", _QR + "$", _get_queued_resource),
    ("DELETE", _QR + "$", _delete_queued_resource),
    ("POST", _QR + ":reset$", _reset_queued_resource),
    ("GET", _Z + r"/nodes$", _list_nodes),
    ("GET", _NODE + "$", _get_node),
    ("POST", _NODE + ":start$", _start_node),
    ("POST", _NODE + ":stop$", _stop_node),
    ("POST", _NODE + ":getGuestAttributes$", _get_guest_attributes),
    ("GET", _Z + r"/acceleratorTypes$", _list_accelerator_types),
    ("GET", _Z + r"/acceleratorTypes/(?P<id>[^/:]+)$", _get_accelerator_type),
    ("GET", _Z + r"/operations/(?P<id>[^/:]+)$", _get_operation),
]
