"""The deploy recipes validate against their platforms' schemas, and give the bot what it needs.

- deploy/kubernetes.yaml: every object against the Kubernetes OpenAPI schemas, strict (unknown fields
  refused), with kubernetes-validate (the upstream schemas shipped in the package: offline).
- deploy/cloudrun.yaml: against the Service schema of the Cloud Run Admin API v1 as Google publishes it in
  its discovery document (run.v1.json, shipped inside google-api-python-client: offline), turned into a
  JSON Schema that refuses unknown fields; fields Google marks "Not supported by Cloud Run" are refused, and
  each run.googleapis.com/ or autoscaling.knative.dev/ annotation must be one the same document lists for
  the resource it sits on (a Service or a Revision template).

Then both recipes' settings are loaded by the bot's own settings model, as the platform would run them
(K_SERVICE or KUBERNETES_SERVICE_HOST set), so a recipe the bot would refuse fails here.
"""

from __future__ import annotations

import copy
import json
import posixpath
import re
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from googleapiclient import discovery_cache

from bot.config import Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]
CLOUD_RUN = ROOT / "deploy" / "cloudrun.yaml"
KUBERNETES = ROOT / "deploy" / "kubernetes.yaml"
SETUP = (ROOT / "deploy" / "gcp-setup.sh").read_text()
# Kubernetes versions validated against: an older one still served by GKE, and the newest the package has.
K8S_VERSIONS = ("1.33", kubernetes_validate.latest_version())
FILLED = {
    "__PROJECT__": "my-project",
    "__REGION__": "us-east5",
    "__IMAGE__": "us-east5-docker.pkg.dev/p/r/i:1",
}
# Setting-like variables the recipes set that are not fields of Settings: read by the logging set-up
# (LOG_FORMAT, bot/observability.py) or by matplotlib (MPLCONFIGDIR).
NOT_SETTINGS = {"LOG_FORMAT", "MPLCONFIGDIR"}


def _filled(path: Path) -> str:
    text = path.read_text()
    for placeholder, value in FILLED.items():
        text = text.replace(placeholder, value)
    return text


def _setup_default(name: str) -> str:
    match = re.search(rf'^{name}="\$\{{{name}:-([^}}]*)\}}"', SETUP, flags=re.M)
    assert match, f"{name} has no default in deploy/gcp-setup.sh"
    return match.group(1)


# ---- Cloud Run: the run.v1 discovery document as a JSON Schema -----------------------------------------


@cache
def _run_v1() -> dict[str, Any]:
    text = discovery_cache.get_static_doc("run", "v1")
    assert text is not None, "google-api-python-client ships run.v1.json"
    doc: dict[str, Any] = json.loads(text)
    return doc


def _to_json_schema(prop: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in prop:
        return {"$ref": f"#/definitions/{prop['$ref']}"}
    kind = prop.get("type")
    if kind == "array":
        return {"type": "array", "items": _to_json_schema(prop.get("items", {}))}
    if kind == "object":
        extra = prop.get("additionalProperties")
        return {"type": "object", "additionalProperties": _to_json_schema(extra) if extra else False}
    if kind == "string" and prop.get("format") in ("int64", "uint64"):  # JSON strings that hold integers
        return {"type": ["string", "integer"]}
    if kind in ("string", "integer", "boolean", "number"):
        schema: dict[str, Any] = {"type": kind}
        if "enum" in prop:
            schema["enum"] = prop["enum"]
        return schema
    return {}  # "any"


@cache
def cloud_run_schema() -> dict[str, Any]:
    """The Service schema of run.v1 as a JSON Schema (draft 7) whose objects refuse unknown fields."""
    definitions = {}
    for name, schema in _run_v1()["schemas"].items():
        definitions[name] = {
            "type": "object",
            "properties": {key: _to_json_schema(prop) for key, prop in schema.get("properties", {}).items()},
            "additionalProperties": False,
        }
    return {"$ref": "#/definitions/Service", "definitions": definitions}


def _unsupported_fields(value: Any, schema_name: str, path: str = "") -> list[str]:
    """Paths of fields whose run.v1 description says "Not supported by Cloud Run"."""
    schemas = _run_v1()["schemas"]
    found: list[str] = []
    if not isinstance(value, dict):
        return found
    for key, item in value.items():
        prop = schemas[schema_name].get("properties", {}).get(key, {})
        where = f"{path}.{key}" if path else key
        if prop.get("description", "").startswith("Not supported by Cloud Run"):
            found.append(where)
        ref = prop.get("$ref") or prop.get("items", {}).get("$ref")
        if ref:
            for element in item if isinstance(item, list) else [item]:
                found += _unsupported_fields(element, ref, where)
    return found


def accepted_annotations() -> dict[str, set[str]]:
    """annotation -> the resource types Cloud Run accepts it on, from ObjectMeta.annotations' description
    ("* `autoscaling.knative.dev/minScale`: Revision. ...")."""
    text = _run_v1()["schemas"]["ObjectMeta"]["properties"]["annotations"]["description"]
    pairs = re.findall(r"\* `([^`]+)`: ([^*]+)", text)
    assert len(pairs) > 20, "the annotation list of run.v1 changed shape"
    return {
        name: {kind.strip(" .,") for kind in kinds.split(",") if kind.strip(" .,")} for name, kinds in pairs
    }


def cloud_run_problems(service: dict[str, Any]) -> list[str]:
    """Everything the schema and Google's notes refuse in a Cloud Run Service, one line each."""
    validator = jsonschema.Draft7Validator(cloud_run_schema())
    problems = [
        f"{'.'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(service)
    ]
    problems += [f"{path}: not supported by Cloud Run" for path in _unsupported_fields(service, "Service")]
    accepted = accepted_annotations()
    template = service.get("spec", {}).get("template", {})
    for kind, meta in (("Service", service.get("metadata", {})), ("Revision", template.get("metadata", {}))):
        for name in (meta or {}).get("annotations", {}):
            restricted = name.startswith(("run.googleapis.com/", "autoscaling.knative.dev/"))
            if (
                restricted
                and kind not in accepted.get(name, set())
                and "All resources" not in accepted.get(name, set())
            ):
                problems.append(f"annotation {name} is not accepted on a {kind}")
    return problems


def cloud_run() -> dict[str, Any]:
    service: dict[str, Any] = yaml.safe_load(_filled(CLOUD_RUN))
    return service


def test_cloud_run_service_validates_against_run_v1() -> None:
    assert cloud_run_problems(cloud_run()) == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda s: s["spec"]["template"]["spec"]["containers"][0].update(livenesProbe={}), "livenesProbe"),
        (
            lambda s: s["spec"]["template"]["metadata"]["annotations"].update(
                {"autoscaling.knative.dev/minScale": 1}
            ),
            "is not of type 'string'",
        ),
        (
            lambda s: s["metadata"]["annotations"].update({"run.googleapis.com/cpu-throttling": "false"}),
            "Service",
        ),
        (
            lambda s: s["spec"]["template"]["spec"]["containers"][0].update(securityContext={"runAsUser": 1}),
            "not supported by Cloud Run",
        ),
    ],
)
def test_the_cloud_run_validator_refuses_mistakes(change: Any, expected: str) -> None:
    service = copy.deepcopy(cloud_run())
    change(service)
    assert any(expected in line for line in cloud_run_problems(service)), cloud_run_problems(service)


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container.get("env", [])}


def test_cloud_run_gives_the_bot_what_it_needs() -> None:
    service = cloud_run()
    template = service["spec"]["template"]
    annotations = template["metadata"]["annotations"]
    assert int(annotations["autoscaling.knative.dev/minScale"]) >= 1  # the scheduler keeps running
    assert annotations["run.googleapis.com/cpu-throttling"] == "false"  # CPU always allocated
    sql = f"my-project:us-east5:{_setup_default('SQL_INSTANCE')}"
    assert annotations["run.googleapis.com/cloudsql-instances"] == sql
    spec = template["spec"]
    assert spec["serviceAccountName"] == f"{_setup_default('BOT_SA_NAME')}@my-project.iam.gserviceaccount.com"
    (container,) = spec["containers"]
    port = container["ports"][0]["containerPort"]
    assert port == Settings.model_fields["bot_port"].default
    assert container["startupProbe"]["httpGet"] == {"path": "/readyz", "port": port}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port}
    env = _env(container)
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "STATE_DATABASE_URL"):  # from Secret Manager
        ref = env[name]["secretKeyRef"]
        assert ref["key"] == "latest" and re.search(rf"\b{ref['name']}\b", SETUP), name
    assert env["TPU_SERVICE_ACCOUNT"] == f"{_setup_default('TPU_SA_NAME')}@my-project.iam.gserviceaccount.com"
    # The SSH key: a secret volume whose one file is SSH_KEY_PATH, mounted read-only.
    (mount,) = container["volumeMounts"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    (item,) = volume["secret"]["items"]
    assert mount["readOnly"] is True
    assert env["SSH_KEY_PATH"] == posixpath.join(mount["mountPath"], item["path"])
    assert re.search(rf"\b{volume['secret']['secretName']}\b", SETUP)
    _loads_as_production(env, {"K_SERVICE": service["metadata"]["name"]})


# ---- Kubernetes --------------------------------------------------------------------------------------------


def kubernetes() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(_filled(KUBERNETES)) if doc]


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_kubernetes_objects_validate_strictly(version: str) -> None:
    docs = kubernetes()
    assert [doc["kind"] for doc in docs] == ["ServiceAccount", "Deployment", "PodDisruptionBudget", "Service"]
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_kubernetes_validator_refuses_mistakes() -> None:
    deployment = copy.deepcopy(kubernetes()[1])
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSIONS[0], strict=True)
    deployment = copy.deepcopy(kubernetes()[1])
    deployment["spec"]["replicas"] = "2"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSIONS[0], strict=True)


def test_kubernetes_deployment_gives_the_bot_what_it_needs() -> None:
    account, deployment, budget, service = kubernetes()
    spec = deployment["spec"]
    assert spec["replicas"] == 2  # on the PostgreSQL store and its leases: no Kubernetes leader election
    pod = spec["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False  # the bot never calls the Kubernetes API
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    uid = int(re.search(r"--uid (\d+)", (ROOT / "Dockerfile").read_text()).group(1))  # type: ignore[union-attr]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == uid
    (container,) = pod["containers"]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    port = container["ports"][0]
    assert port["containerPort"] == Settings.model_fields["bot_port"].default
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
    assert container["startupProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    # The SSH key secret, read-only, readable by the pod's group only (files are root-owned, group fsGroup).
    env = _env(container)
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    (key_volume,) = [v for v in pod["volumes"] if "secret" in v]
    mount = mounts[key_volume["name"]]
    assert mount["readOnly"] is True
    assert posixpath.dirname(env["SSH_KEY_PATH"]) == mount["mountPath"]
    assert key_volume["secret"]["defaultMode"] & 0o077 == 0o040 and pod["securityContext"]["fsGroup"] == uid
    # The Secrets the kubectl lines of the setup script make hold what the pod reads.
    secret = container["envFrom"][0]["secretRef"]["name"]
    line = next(x for x in SETUP.splitlines() if f"create secret generic {secret} " in x)
    keys = set(re.findall(r"--from-file=([A-Z_]+)=", line))
    assert keys == {"SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "STATE_DATABASE_URL"}
    key_line = next(
        x for x in SETUP.splitlines() if f"create secret generic {key_volume['secret']['secretName']} " in x
    )
    assert f"--from-file={posixpath.basename(env['SSH_KEY_PATH'])}=" in key_line
    assert budget["spec"]["minAvailable"] == 1
    assert service["spec"]["ports"][0]["targetPort"] == port["name"]
    assert account["metadata"]["namespace"] == _setup_default("K8S_NAMESPACE")
    secrets = {key: "xoxb-k8s" if key == "SLACK_BOT_TOKEN" else "value" for key in keys}
    secrets["STATE_DATABASE_URL"] = "postgresql+psycopg://bot:pw@10.0.0.5/chatops"
    _loads_as_production({**env, **secrets}, {"KUBERNETES_SERVICE_HOST": "10.96.0.1"})


# ---- both -------------------------------------------------------------------------------------------------


def _loads_as_production(env: dict[str, Any], platform: dict[str, str]) -> None:
    """The recipe's settings, secrets filled in, load as the platform runs them (a SQLite store would not)."""
    fields = {f.upper() for f in Settings.model_fields}
    unknown = set(env) - fields - NOT_SETTINGS
    assert not unknown, f"not settings of the bot: {sorted(unknown)}"
    # A value from a secret (Cloud Run's secretKeyRef) stands for what the setup script stores there.
    values = {name.lower(): value if isinstance(value, str) else "secret" for name, value in env.items()}
    values = {name: value for name, value in values.items() if name.upper() not in NOT_SETTINGS}
    values["slack_bot_token"] = "xoxb-recipe"
    # The key file the recipe mounts at SSH_KEY_PATH (the settings read it): a throwaway one here.
    key_dir = tempfile.TemporaryDirectory(prefix="recipe-ssh-")
    key_path = Path(key_dir.name, posixpath.basename(values["ssh_key_path"]))
    key_path.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
    )
    values["ssh_key_path"] = str(key_path)
    if values["state_database_url"] == "secret":
        values["state_database_url"] = "postgresql+psycopg://bot:pw@/chatops?host=/cloudsql/p:r:i"
    with key_dir, pytest.MonkeyPatch.context() as patch:
        for name, value in platform.items():
            patch.setenv(name, value)
        settings = load_settings(_env_file=None, **values)
        assert settings.bot_mode == "http" and settings.state_database_url.startswith("postgresql+psycopg://")
