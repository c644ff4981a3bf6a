"""Contract test: every response body the TPU simulator can produce matches the discovery documents
google-api-python-client ships (tpu.v2alpha1.json, tpu.v2.json): no unknown field, no wrong JSON type,
no enum value the document does not define. v2 bodies also round-trip through the GAPIC protos."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from google.cloud import tpu_v2
from googleapiclient import discovery_cache

import sim.scenario as scenario_module
from sim.gcp import GcpSimulator
from sim.scenario import load

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def default_scenario() -> dict[str, Any]:
    """`sim.scenario.load()`; falls back to the file path when a stale editable install made `sim` a
    namespace package (importlib.resources then raises NotADirectoryError)."""
    try:
        return load()
    except NotADirectoryError:
        return load(Path(scenario_module.__file__).parent / "scenarios" / "default.yaml")


_FORMATS = {
    "int64": re.compile(r"^-?\d+$"),
    "uint64": re.compile(r"^\d+$"),
    "google-duration": re.compile(r"^-?\d+(\.\d+)?s$"),
    "google-datetime": re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)$"),
}


_JSON_TYPES: dict[str, Any] = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "integer": int,
    "number": (int, float),
}


def validate(
    doc: dict[str, Any], schema_or_name: dict[str, Any] | str, value: Any, path: str = "$"
) -> list[str]:
    """Problems of `value` against a discovery-document schema (a schema dict or a schema name)."""
    schema: dict[str, Any] = {"$ref": schema_or_name} if isinstance(schema_or_name, str) else schema_or_name
    if "$ref" in schema:
        schema = doc["schemas"][schema["$ref"]]
    kind, problems = schema.get("type", "any"), list[str]()
    if kind == "any":
        return []
    if not isinstance(value, _JSON_TYPES[kind]) or (
        kind in ("integer", "number") and isinstance(value, bool)
    ):
        return [f"{path}: expected {kind}, got {type(value).__name__} {value!r}"]
    if kind == "object":
        props, extra = schema.get("properties", {}), schema.get("additionalProperties")
        for key, item in value.items():
            if key in props:
                problems += validate(doc, props[key], item, f"{path}.{key}")
            elif extra is not None:
                problems += validate(doc, extra, item, f"{path}.{key}")
            else:
                problems.append(f"{path}.{key}: unknown field")
    elif kind == "array":
        for i, item in enumerate(value):
            problems += validate(doc, schema.get("items", {}), item, f"{path}[{i}]")
    elif kind == "string":
        if "enum" in schema and value not in schema["enum"]:
            problems.append(f"{path}: {value!r} not in enum {schema['enum']}")
        fmt = _FORMATS.get(schema.get("format", ""))
        if fmt is not None and not fmt.match(value):
            problems.append(f"{path}: {value!r} is not a {schema['format']}")
    return problems


def response_schema(doc: dict[str, Any], path: str) -> str:
    """The response schema name of the GET method whose flatPath matches `path`."""

    def methods(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
        yield from node.get("methods", {}).values()
        for child in node.get("resources", {}).values():
            yield from methods(child)

    for method in methods(doc):
        pattern = "^/" + re.sub(r"\{[^}]+\}", "[^/:]+", method["flatPath"]) + "$"
        if method["httpMethod"] == "GET" and re.match(pattern, path):
            return str(method["response"]["$ref"])
    raise AssertionError(f"no GET method of {doc['version']} serves {path}")


DOCS = {v: json.loads(discovery_cache.get_static_doc("tpu", v)) for v in ("v2alpha1", "v2")}


def coverage_scenario() -> dict[str, Any]:
    """The default scenario plus QRs in every state and provisioning model, and more operations."""
    scenario = default_scenario()
    google = scenario["google"]
    models = ["STANDARD", "SPOT", "RESERVATION_BOUND", "FLEX_START"]
    states = ["CREATING", "ACCEPTED", "PROVISIONING", "DELETING", "ACTIVE", "SUSPENDING", "SUSPENDED"]
    for i, state in enumerate(states):
        for model in models:
            qr: dict[str, Any] = {
                "name": f"cov-{state.lower()}-{model.lower().replace('_', '-')}",
                "zone": "us-east5-a" if i % 2 else "europe-west4-a",
                "state": state,
                "state_initiator": "SERVICE" if state.startswith("SUSPEND") else "USER",
                "provisioning_model": model,
                "created": "-2h",
                "node": {
                    "id": f"cov-{state.lower()}-{model.lower().replace('_', '-')}-node",
                    "accelerator_type": "v5litepod-8" if i % 2 else "v6e-8",
                    "internal_ip": ["10.0.0.2", "10.0.0.3"],
                    "external_ip": ["34.1.2.3", "34.1.2.4"],
                    "health_description": "ok",
                },
            }
            if model == "FLEX_START":
                qr["max_run_duration"] = "7h"
                qr["valid_until"] = "1h"
            google["queued_resources"].append(qr)
    running = {"id": "op-running", "zone": "us-east5-a", "verb": "delete", "queued_resource": "gemma4-qr"}
    failed = {"id": "op-failed", "zone": "europe-west4-a", "verb": "create", "queued_resource": "gemma4-old"}
    google["operations"] += [
        {**running, "done": False},
        {"id": "op-empty", "zone": "us-east5-a", "verb": "delete", "target": "x", "done": True},
        {**failed, "error": {"code": 8, "message": "There is no more capacity in the zone"}},
    ]
    return scenario


@pytest.fixture(scope="module", params=["default", "coverage"])
def sim(request: pytest.FixtureRequest) -> Iterator[GcpSimulator]:
    scenario = default_scenario() if request.param == "default" else coverage_scenario()
    with GcpSimulator(scenario, now=lambda: NOW) as server:
        yield server


def fetch(sim: GcpSimulator, path: str) -> tuple[int, dict[str, Any]]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(sim.url + path, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def all_paths(sim: GcpSimulator, api: str) -> list[str]:
    """Every GET path the simulator answers 200 for, discovered through its own list responses."""
    base = f"/{api}/projects/{sim.project}/locations"
    paths = [base]
    for loc in fetch(sim, base)[1]["locations"]:
        zone = f"/{api}/{loc['name']}"
        paths += [zone, f"{zone}/queuedResources", f"{zone}/nodes", f"{zone}/acceleratorTypes"]
        paths += [
            f"/{api}/{qr['name']}"
            for qr in fetch(sim, f"{zone}/queuedResources?pageSize=1000")[1]["queuedResources"]
        ]
        paths += [
            f"/{api}/{n['name']}" for n in fetch(sim, f"{zone}/nodes?pageSize=1000")[1].get("nodes", [])
        ]
        paths += [
            f"/{api}/{t['name']}" for t in fetch(sim, f"{zone}/acceleratorTypes")[1]["acceleratorTypes"]
        ]
    paths += [
        f"/{api}/projects/{sim.project}/locations/{z}/operations/{op}" for z, op in sim.world.operations
    ]
    return paths


@pytest.mark.parametrize("api", ["v2alpha1", "v2"])
def test_every_response_matches_the_discovery_document(sim: GcpSimulator, api: str) -> None:
    doc, checked, problems = DOCS[api], 0, []
    for path in all_paths(sim, api):
        status, body = fetch(sim, path)
        assert status == 200, (path, body)
        problems += [f"{path}: {p}" for p in validate(doc, response_schema(doc, path), body)]
        if (
            "response" in body
            and "@type" in body["response"]
            and body["response"]["@type"].endswith("QueuedResource")
        ):
            inner = {k: v for k, v in body["response"].items() if k != "@type"}
            problems += [f"{path} response: {p}" for p in validate(doc, "QueuedResource", inner)]
        if "metadata" in body and "verb" in body["metadata"]:
            meta = {k: v for k, v in body["metadata"].items() if k != "@type"}
            problems += [f"{path} metadata: {p}" for p in validate(doc, "OperationMetadata", meta)]
        checked += 1
    assert problems == []
    assert checked >= 12


def test_paged_lists_are_valid_and_complete(sim: GcpSimulator) -> None:
    base = f"/v2alpha1/projects/{sim.project}/locations/us-east5-a/queuedResources"
    names, token = [], ""
    while True:
        status, body = fetch(sim, f"{base}?pageSize=2" + (f"&pageToken={token}" if token else ""))
        assert status == 200 and validate(DOCS["v2alpha1"], "ListQueuedResourcesResponse", body) == []
        names += [qr["name"] for qr in body["queuedResources"]]
        token = body.get("nextPageToken", "")
        if not token:
            break
    assert len(names) == len(set(names)) == len(sim.world.qrs_in("us-east5-a"))


def test_v2_bodies_round_trip_through_gapic_protos(sim: GcpSimulator) -> None:
    protos: dict[str, Any] = {
        "Node": tpu_v2.Node,
        "ListNodesResponse": tpu_v2.ListNodesResponse,
        "QueuedResource": tpu_v2.QueuedResource,
        "ListQueuedResourcesResponse": tpu_v2.ListQueuedResourcesResponse,
        "AcceleratorType": tpu_v2.AcceleratorType,
        "ListAcceleratorTypesResponse": tpu_v2.ListAcceleratorTypesResponse,
    }
    parsed = 0
    for path in all_paths(sim, "v2"):
        proto = protos.get(response_schema(DOCS["v2"], path))
        if proto is not None:
            proto.from_json(json.dumps(fetch(sim, path)[1]), ignore_unknown_fields=False)
            parsed += 1
    assert parsed >= 8


def test_error_envelope_shape(sim: GcpSimulator) -> None:
    status, body = fetch(sim, f"/v2alpha1/projects/{sim.project}/locations/us-east5-a/queuedResources/nope")
    assert status == 404
    assert body == {"error": {"code": 404, "message": body["error"]["message"], "status": "NOT_FOUND"}}
    assert fetch(sim, "/v2alpha1/projects/other-project/locations")[0] == 403


def test_validator_catches_bad_enum_unknown_field_and_wrong_type() -> None:
    doc = DOCS["v2alpha1"]
    good = {"name": "projects/p/locations/z/queuedResources/q", "state": {"state": "ACTIVE"}, "spot": {}}
    assert validate(doc, "QueuedResource", good) == []
    bad_enum = {**good, "state": {"state": "RUNNING"}}
    assert any("$.state.state: 'RUNNING' not in enum" in p for p in validate(doc, "QueuedResource", bad_enum))
    unknown = {**good, "tpu": {"nodeSpec": [{"nodeId": "n", "colour": "red"}]}}
    assert validate(doc, "QueuedResource", unknown) == ["$.tpu.nodeSpec[0].colour: unknown field"]
    wrong_type = {"name": "n", "networkEndpoints": [{"port": "8470"}], "createTime": "yesterday"}
    problems = validate(doc, "Node", wrong_type)
    assert any("port: expected integer" in p for p in problems)
    assert any("createTime: 'yesterday' is not a google-datetime" in p for p in problems)
    # v2 lacks the flex-start fields, and its node scheduling has no terminationTimestamp.
    flex = {"provisioningModel": "FLEX_START", "runDuration": {"maxRunDuration": "3600s"}}
    assert validate(DOCS["v2"], "QueuedResource", flex) == [
        "$.provisioningModel: unknown field",
        "$.runDuration: unknown field",
    ]
    node_flex = {"schedulingConfig": {"provisioningModel": "FLEX_START"}}
    assert validate(doc, "Node", node_flex)[0].startswith(
        "$.schedulingConfig.provisioningModel: 'FLEX_START'"
    )


# ---- changes (LROs), Cloud Quotas and Secret Manager ---------------------------------------------

SECRET_DOC = json.loads(discovery_cache.get_static_doc("secretmanager", "v1"))


def send(sim: GcpSimulator, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(sim.url + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with opener.open(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def operation_problems(doc: dict[str, Any], body: dict[str, Any]) -> list[str]:
    """An Operation body, its metadata (OperationMetadata) and its response (by @type) against `doc`."""
    problems = validate(doc, "Operation", body)
    assert re.match(r"^projects/[^/]+/locations/[^/]+/operations/[^/]+$", body["name"]), body["name"]
    meta = {k: v for k, v in body["metadata"].items() if k != "@type"}
    problems += [f"metadata: {p}" for p in validate(doc, "OperationMetadata", meta)]
    response = body.get("response") or {}
    kind = str(response.get("@type", "")).rsplit(".", 1)[-1]
    if kind in ("QueuedResource", "Node"):
        inner = {k: v for k, v in response.items() if k != "@type"}
        problems += [f"response: {p}" for p in validate(doc, kind, inner)]
    return problems


def lifecycle_world() -> dict[str, Any]:
    scenario = default_scenario()
    zones = scenario["google"]["zones"]
    zones["us-east5-a"]["capacity"] = {"after": "5m"}
    return scenario


def qr_body(api: str, zone: str, node_id: str, model: str) -> dict[str, Any]:
    parent = f"projects/demo-project/locations/{zone}"
    node: dict[str, Any] = {
        "acceleratorType": "v6e-8",
        "runtimeVersion": "v2-alpha-tpuv6e",
        "networkConfig": {"network": "default", "enableExternalIps": True},
        "labels": {"managed-by": "tpu-chatops"},
        "metadata": {"startup-script": "#!/bin/bash"},
        "serviceAccount": {"email": "sa@demo-project.iam.gserviceaccount.com", "scope": ["x"]},
    }
    if api == "v2":  # GAPIC REST: enums as integers
        node = {**node, "acceleratorConfig": {"type": 11, "topology": "2x4"}}
        del node["acceleratorType"]
    body: dict[str, Any] = {"tpu": {"nodeSpec": [{"parent": parent, "nodeId": node_id, "node": node}]}}
    if model == "FLEX_START":
        body |= {"provisioningModel": "FLEX_START", "runDuration": {"maxRunDuration": "3600s"}}
    elif model == "SPOT":
        body["spot"] = {}
    elif model == "RESERVED":
        body["guaranteed"] = {"reserved": True}
    body["queueingPolicy"] = {"validUntilDuration": "1800s"}
    return body


@pytest.mark.parametrize("api", ["v2alpha1", "v2"])
def test_changes_and_every_lifecycle_state_match_the_discovery_document(api: str) -> None:
    doc, problems, checked = DOCS[api], list[str](), 0
    models = ["FLEX_START", "SPOT", "RESERVED", "STANDARD"] if api == "v2alpha1" else ["SPOT", "STANDARD"]
    with GcpSimulator(lifecycle_world(), now=lambda: NOW) as sim:
        sim.set_quota("europe-west4-a", "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI", 0)  # no spot there
        base = f"/{api}/projects/{sim.project}/locations"

        def change(method: str, path: str, body: Any = None, expect: int = 200) -> dict[str, Any]:
            nonlocal problems, checked
            status, answer = send(sim, method, base + path, body)
            assert status == expect, (path, answer)
            if status == 200:
                problems += [f"{method} {path}: {p}" for p in operation_problems(doc, answer)]
                checked += 1
            else:
                assert set(answer["error"]) == {"code", "message", "status"}
            return answer

        for zone in ("us-east5-a", "asia-northeast1-b"):
            for model in models:
                name = f"c-{model.lower().replace('_', '-')}-{zone[:4]}"
                change(
                    "POST",
                    f"/{zone}/queuedResources?queuedResourceId={name}",
                    qr_body(api, zone, f"{name}-n", model),
                )
        # flex-start is not offered there (the operation fails); spot is, but the zone's preemptible quota is
        # 0: refused at once with 429 RESOURCE_EXHAUSTED
        change(
            "POST",
            "/europe-west4-a/queuedResources?queuedResourceId=c-eu",
            qr_body(api, "europe-west4-a", "c-eu-n", "FLEX_START" if api == "v2alpha1" else "SPOT"),
            200 if api == "v2alpha1" else 429,
        )
        dup = change(
            "POST",
            "/us-east5-a/queuedResources?queuedResourceId=gemma4-qr",
            qr_body(api, "us-east5-a", "x", "SPOT"),
            409,
        )
        assert dup["error"]["status"] == "ALREADY_EXISTS"
        wrong = qr_body(api, "europe-west4-a", "w-n", "SPOT")
        wrong["tpu"]["nodeSpec"][0]["node"]["acceleratorType"] = "v6e-1"
        wrong["tpu"]["nodeSpec"][0]["node"].pop("acceleratorConfig", None)
        assert (
            change("POST", "/europe-west4-a/queuedResources?queuedResourceId=w", wrong, 400)["error"][
                "status"
            ]
            == "INVALID_ARGUMENT"
        )
        refused = change("DELETE", "/us-east5-a/queuedResources/gemma4-qr", None, 400)
        assert refused["error"]["status"] == "FAILED_PRECONDITION"
        change("POST", "/us-east5-a/nodes/gemma4-qr-node:stop", {})
        change("POST", "/europe-west4-a/queuedResources/gemma4-old:reset", {})
        for step in (
            0,
            1,
            4 * 60 + 30,
            60,
            30 * 60,
            3600,
        ):  # WAITING, PROVISIONING, ACTIVE, FAILED, SUSPENDED
            sim.advance(step)
            for path in all_paths(sim, api):
                status, body = fetch(sim, path)
                assert status == 200, (path, body)
                if "/operations/" in path:
                    problems += [f"{path}: {p}" for p in operation_problems(doc, body)]
                else:
                    problems += [f"{path}: {p}" for p in validate(doc, response_schema(doc, path), body)]
                checked += 1
            if step == 60:
                change("POST", "/us-east5-a/nodes/gemma4-qr-node:start", {})
                change("DELETE", "/us-east5-a/queuedResources/c-spot-us-e?force=true")
        states = {qr.state for qr in sim.world.queued_resources.values()}
    assert {"FAILED", "SUSPENDED", "ACTIVE"} <= states or api == "v2"
    assert problems == []
    assert checked >= 60


def test_quota_infos_round_trip_through_the_cloudquotas_protos() -> None:
    from google.cloud import cloudquotas_v1

    with GcpSimulator(default_scenario(), now=lambda: NOW) as sim:
        base = f"/v1/projects/{sim.project}/locations/global/services/tpu.googleapis.com/quotaInfos"
        status, listing = fetch(sim, base)
        assert status == 200
        parsed = cloudquotas_v1.ListQuotaInfosResponse.from_json(
            json.dumps(listing), ignore_unknown_fields=False
        )
        assert len(parsed.quota_infos) == 2
        for info in listing["quotaInfos"]:
            status, body = fetch(sim, f"{base}/{info['quotaId']}")
            assert status == 200 and body == info
            quota = cloudquotas_v1.QuotaInfo.from_json(json.dumps(body), ignore_unknown_fields=False)
            assert {d.dimensions["zone"] for d in quota.dimensions_infos} == set(sim.world.zones)
        assert fetch(sim, f"{base}/NoSuchQuota")[0] == 404
        assert fetch(sim, base.replace(sim.project, "other-project"))[0] == 403


def test_secret_manager_responses_match_the_discovery_document() -> None:
    from google.cloud import secretmanager_v1

    doc, problems = SECRET_DOC, list[str]()
    protos: dict[str, Any] = {
        "Secret": secretmanager_v1.Secret,
        "SecretVersion": secretmanager_v1.SecretVersion,
        "AccessSecretVersionResponse": secretmanager_v1.AccessSecretVersionResponse,
    }
    with GcpSimulator(default_scenario(), now=lambda: NOW) as sim:
        base = f"/v1/projects/{sim.project}/secrets"
        calls: list[tuple[str, str, Any, str]] = [
            ("POST", f"{base}?secretId=hf-token", {"replication": {"automatic": {}}}, "Secret"),
            ("GET", f"{base}/hf-token", None, "Secret"),
            (
                "POST",
                f"{base}/hf-token:addVersion",
                {"payload": {"data": "aGk=", "dataCrc32c": "4120762818"}},
                "SecretVersion",
            ),
            ("POST", f"{base}/hf-token:addVersion", {"payload": {"data": "aG8="}}, "SecretVersion"),
            ("GET", f"{base}/hf-token/versions/1", None, "SecretVersion"),
            ("GET", f"{base}/hf-token/versions/latest:access", None, "AccessSecretVersionResponse"),
            ("GET", f"{base}/hf-token/versions/1:access", None, "AccessSecretVersionResponse"),
        ]
        for method, path, body, schema in calls:
            status, answer = send(sim, method, path, body)
            assert status == 200, (path, answer)
            problems += [f"{method} {path}: {p}" for p in validate(doc, schema, answer)]
            protos[schema].from_json(json.dumps(answer), ignore_unknown_fields=False)
        assert send(sim, "GET", f"{base}/hf-token/versions/1:access")[1]["payload"]["data"] == "aGk="
        bad_crc = send(
            sim, "POST", f"{base}/hf-token:addVersion", {"payload": {"data": "aGk=", "dataCrc32c": "1"}}
        )
        assert bad_crc[0] == 400 and "aGk=" not in json.dumps(bad_crc[1])
        assert send(sim, "POST", f"{base}?secretId=hf-token", {"replication": {"automatic": {}}})[0] == 409
        assert send(sim, "GET", f"{base}/nope/versions/latest:access")[0] == 404
    assert problems == []


@pytest.mark.parametrize("api", ["v2alpha1", "v2"])
def test_announced_maintenance_matches_the_discovery_document(api: str) -> None:
    """`Node.upcomingMaintenance` (both documents define it) while PENDING and while ONGOING."""
    with GcpSimulator(default_scenario(), now=lambda: NOW) as server:
        server.schedule_maintenance("us-east5-a", "gemma4-qr-node", starts_in=3600, lasts=1800)
        path = f"/{api}/projects/{server.project}/locations/us-east5-a/nodes/gemma4-qr-node"
        seen = []
        for step in (0, 3600 + 60):
            server.advance(step)
            status, body = fetch(server, path)
            assert status == 200 and validate(DOCS[api], "Node", body) == []
            seen.append((body["upcomingMaintenance"]["maintenanceStatus"], body["health"]))
        assert seen == [("PENDING", "HEALTHY"), ("ONGOING", "UNHEALTHY_MAINTENANCE")]
        server.advance(1800)
        assert "upcomingMaintenance" not in fetch(server, path)[1]


@pytest.mark.parametrize("api", ["v2alpha1", "v2"])
def test_guest_attributes_match_the_discovery_document(api: str) -> None:
    with GcpSimulator(default_scenario(), now=lambda: NOW) as gcp:
        gcp.publish_host_key("us-east5-a", "gemma4-qr-node", "ssh-ed25519", "AAAAC3NzaC1lZDI1NTE5AAAAI")
        path = f"/{api}/projects/{gcp.project}/locations/us-east5-a/nodes/gemma4-qr-node:getGuestAttributes"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        request = urllib.request.Request(
            gcp.url + path, data=json.dumps({"queryPath": "hostkeys/", "workerIds": ["0"]}).encode()
        )
        with opener.open(request, timeout=5) as response:
            body = json.loads(response.read())
    assert validate(DOCS[api], "GetGuestAttributesResponse", body) == []
    (attributes,) = body["guestAttributes"]
    assert attributes["queryValue"]["items"] == [
        {"namespace": "hostkeys", "key": "ssh-ed25519", "value": "AAAAC3NzaC1lZDI1NTE5AAAAI"}
    ]
    if api == "v2":
        tpu_v2.GetGuestAttributesResponse.from_json(json.dumps(body), ignore_unknown_fields=False)
