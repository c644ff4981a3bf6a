"""The Google API methods the code calls, the table of their permissions (ops/gcp/iam.py) and the setup script
(deploy/gcp-setup.sh) agree: a call missing from the table, a row nothing calls, or a custom role with a
permission too few or too many fails here.

The calls are found by reading the code (its AST), not by running it: every client is built by a factory of
ops/gcp/google.py, so the modules calling a factory are the ones that can call Google; in them a call is a
method of that client's API (the GAPIC transports' RPC names, the discovery document's methods of a
collection, the logging client's list methods and its raw `api_request`).
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from google.cloud.cloudquotas_v1.services.cloud_quotas.transports.base import CloudQuotasTransport
from google.cloud.secretmanager_v1.services.secret_manager_service.transports.base import (
    SecretManagerServiceTransport,
)
from google.cloud.tpu_v2.services.tpu.transports.base import TpuTransport

from ops.errors import PermissionDenied
from ops.gcp import google, iam

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy" / "gcp-setup.sh"
PRODUCT = ("bot", "ops", "llm")

# ops/gcp/google.py's client factories -> the `client` name of ops/gcp/iam.py's rows.
FACTORIES = {
    "tpu_v2alpha1": "tpu-v2alpha1",
    "tpu_v2": "tpu-v2",
    "cloud_quotas": "cloudquotas",
    "secret_manager": "secretmanager",
    "cloud_logging": "logging",
}
# Classes and functions that build a Google client: only ops/gcp/google.py may call them.
CONSTRUCTORS = {"TpuClient", "CloudQuotasClient", "SecretManagerServiceClient", "Client"}


def _rpcs(transport: type) -> set[str]:
    """The RPC names of a GAPIC transport: its properties, less the plumbing."""
    names = {name for name, value in vars(transport).items() if isinstance(value, property)}
    return names - {"host", "kind", "operations_client"}


GAPIC_RPCS = {
    "tpu-v2": _rpcs(TpuTransport),
    "cloudquotas": _rpcs(CloudQuotasTransport),
    "secretmanager": _rpcs(SecretManagerServiceTransport),
    # google.cloud.logging.Client's methods that call the API (the others build local objects).
    "logging": {"list_entries", "list_sinks", "list_metrics"},
}


def _discovery_methods() -> dict[str, set[str]]:
    """collection -> its methods in the bundled v2alpha1 discovery document ("" is `locations` itself)."""
    locations = google._discovery_doc("tpu", "v2alpha1")["resources"]["projects"]["resources"]["locations"]
    methods = {"": set(locations["methods"])}
    for name, resource in locations["resources"].items():
        methods[name] = set(resource.get("methods", {}))
    return methods


def _modules() -> list[Path]:
    return sorted(path for package in PRODUCT for path in (ROOT / package).rglob("*.py"))


def _factory_calls(tree: ast.AST) -> set[str]:
    """The client kinds a module builds through ops/gcp/google.py (`google.tpu_v2(...)`, ...)."""
    kinds = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "google"
            and node.func.attr in FACTORIES
        ):
            kinds.add(FACTORIES[node.func.attr])
    return kinds


def _receiver_is_self(func: ast.Attribute) -> bool:
    return isinstance(func.value, ast.Name) and func.value.id == "self"


def _calls_in(tree: ast.AST, kinds: set[str], discovery: dict[str, set[str]]) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    # Discovery collections: `name = self._collection("queuedResources")`, then `name.verb(...)`.
    collections: dict[str, str] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and node.value.func.attr == "_collection"
            and node.value.args
            and isinstance(node.value.args[0], ast.Constant)
        ):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    collections[target.id] = str(node.value.args[0].value)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        func = node.func
        if (
            "tpu-v2alpha1" in kinds
            and isinstance(func.value, ast.Name)
            and func.value.id in collections
            and func.attr != "list_next"  # the next page of a list: the same method
        ):
            collection = collections[func.value.id]
            assert func.attr in discovery[collection], f"{collection}.{func.attr} is no v2alpha1 method"
            found.add(
                ("tpu-v2alpha1", f"{collection}.{func.attr}" if collection else f"locations.{func.attr}")
            )
        for kind in kinds & GAPIC_RPCS.keys():
            if func.attr in GAPIC_RPCS[kind] and not _receiver_is_self(func):
                found.add((kind, func.attr))
        if "logging" in kinds and func.attr == "api_request":
            words = {kw.arg: kw.value.value for kw in node.keywords if isinstance(kw.value, ast.Constant)}
            found.add(("logging", f"{words.get('method', 'GET')} {words['path']}"))
    return found


def code_calls() -> dict[tuple[str, str], list[str]]:
    """(client, call) -> the modules making it, for every Google API call in bot/, ops/ and llm/."""
    discovery = _discovery_methods()
    calls: dict[tuple[str, str], list[str]] = {}
    for path in _modules():
        if path == ROOT / "ops" / "gcp" / "google.py":
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for key in _calls_in(tree, _factory_calls(tree), discovery):
            calls.setdefault(key, []).append(str(path.relative_to(ROOT)))
    return calls


def test_only_ops_google_builds_google_clients() -> None:
    """A client built elsewhere would escape this scan (and the simulator's endpoint switch)."""
    builders = []
    for path in _modules():
        if path == ROOT / "ops" / "gcp" / "google.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = (
                    node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                )
                owner = node.func.value if isinstance(node.func, ast.Attribute) else None
                google_owner = isinstance(owner, ast.Name) and owner.id in {
                    "discovery",
                    "tpu_v2",
                    "cloudquotas_v1",
                    "secretmanager_v1",
                    "cloud_logging_lib",
                }
                discovery_build = name in {"build", "build_from_document"} and google_owner
                if discovery_build or (name in CONSTRUCTORS and (google_owner or owner is None)):
                    builders.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    assert builders == [], "build Google clients in ops/gcp/google.py only: " + ", ".join(builders)


def test_every_google_call_of_the_code_is_in_the_table_and_back() -> None:
    calls = code_calls()
    table = {(call.client, call.call) for call in iam.CALLS}
    missing = sorted(
        f"{client} {call} ({', '.join(calls[client, call])})" for client, call in calls.keys() - table
    )
    assert not missing, (
        "Google calls missing from ops/gcp/iam.py CALLS (add each with its IAM permission and source, "
        "and the "
        f"permission to deploy/gcp-setup.sh): {missing}"
    )
    unused = sorted(f"{client} {call}" for client, call in table - calls.keys())
    assert not unused, f"ops/gcp/iam.py rows no code calls (remove them and their permission): {unused}"
    # The scan finds what the code is known to call (a scan finding nothing would pass the above).
    assert ("tpu-v2alpha1", "queuedResources.create") in calls
    assert ("tpu-v2", "get_node") in calls
    assert ("logging", "list_entries") in calls


def test_every_row_is_sourced_and_explained() -> None:
    for call in iam.CALLS:
        assert call.source.startswith("https://cloud.google.com/"), call
        assert re.fullmatch(r"[a-z]+\.[a-zA-Z]+\.[a-zA-Z]+", call.permission), call
        if call.grant in ("not-granted", "service-account-user"):
            assert call.reason, f"{call.call}: say why {call.permission} is {call.grant}"


def _script_array(name: str) -> list[str]:
    text = SCRIPT.read_text()
    match = re.search(rf"^{name}=\(\n(.*?)^\)", text, flags=re.M | re.S)
    assert match, f"{name}=( ... ) not found in {SCRIPT}"
    return [
        line.split("#", 1)[0].strip() for line in match.group(1).splitlines() if line.split("#", 1)[0].strip()
    ]


def test_the_custom_role_holds_exactly_the_permissions_the_code_uses() -> None:
    script = _script_array("BOT_PERMISSIONS")
    wanted = iam.bot_role_permissions()
    assert sorted(script) == script, "keep BOT_PERMISSIONS sorted"
    assert set(script) >= set(wanted), f"the custom role lacks {sorted(set(wanted) - set(script))}"
    assert set(script) <= set(wanted), (
        f"the custom role holds what nothing uses: {sorted(set(script) - set(wanted))}"
    )
    assert f'BOT_ROLE_ID="{iam.BOT_ROLE_ID}"' in SCRIPT.read_text()


def test_the_other_grants_are_bound_on_one_resource_each() -> None:
    text = SCRIPT.read_text()
    assert (
        'grant_on_secret "$HF_TOKEN_SECRET" "serviceAccount:$BOT_SA" roles/secretmanager.secretVersionAdder'
        in text
    )
    assert (
        'grant_on_secret "$VLLM_API_KEY_SECRET" "serviceAccount:$BOT_SA" roles/secretmanager.secretAccessor'
        in text
    )
    assert re.search(
        r'add-iam-policy-binding "\$TPU_SA" .*\n'
        r'.*--member="serviceAccount:\$BOT_SA" --role=roles/iam.serviceAccountUser',
        text,
    )
    grants = {call.grant for call in iam.CALLS}
    assert grants <= {
        "bot-role",
        "secret-accessor",
        "secret-version-adder",
        "service-account-user",
        "not-granted",
    }
    for call in iam.CALLS:
        if call.grant == "not-granted":
            assert call.permission not in _script_array("BOT_PERMISSIONS"), f"{call.permission} is granted"
    # Wide predefined roles stay out: the custom role replaces them.
    commands = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    for wide in (
        "roles/tpu.admin",
        "roles/tpu.editor",
        "roles/logging.viewer",
        "roles/editor",
        "roles/owner",
    ):
        assert wide not in commands, wide
    # The token secret the bot adds versions to is made by the script (the bot cannot create secrets).
    assert 'ensure_secret "$HF_TOKEN_SECRET"' in text


def test_the_script_is_safe_shell() -> None:
    text = SCRIPT.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "\nset -euo pipefail\n" in text
    # Creates come after a describe of the same resource (idempotent where gcloud allows).
    creates = [line.strip() for line in text.splitlines() if re.search(r"gcloud \S+( \S+)? create ", line)]
    assert creates, "no create found"
    for line in creates:
        noun = re.search(r"gcloud \S+( \S+)?(?= create )", line).group(0)  # type: ignore[union-attr]
        assert f"{noun} describe" in text or f"{noun} list" in text, f"no describe before: {line}"
    result = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(
    shutil.which("shellcheck") is None, reason="shellcheck not installed (apt-get install shellcheck)"
)
def test_shellcheck_finds_nothing() -> None:
    result = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


def test_a_403_names_the_permissions_the_call_needs() -> None:
    """What an operator sees when the role lacks a permission: the permission and where it is granted."""
    from google.api_core import exceptions as core_exceptions

    error = google.map_error(
        core_exceptions.Forbidden("Permission 'tpu.nodes.list' denied"),
        "TPU API v2alpha1 queuedResources.list us-east5-a",
    )
    assert isinstance(error, PermissionDenied)
    assert "tpu.nodes.list" in error.hint and "deploy/gcp-setup.sh" in error.hint
    create = google.create_error(
        core_exceptions.Forbidden("denied"), "TPU API v2alpha1 queuedResources.create us-east5-a/qr"
    )
    assert "tpu.nodes.create" in create.hint and "iam.serviceAccounts.actAs" in create.hint
    assert (
        iam.permissions_for("Cloud Logging entries.list projects/p")[0].permission
        == "logging.logEntries.list"
    )
    assert iam.permissions_for("something else") == ()
