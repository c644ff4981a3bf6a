"""Every Google API method the bot calls, with the IAM permission it needs and who grants it.

The one table of the bot's Google calls (`CALLS`). `deploy/gcp-setup.sh` grants exactly these permissions:
the project-wide ones through the custom role `tpuChatopsBot` (`BOT_ROLE_ID`), the per-secret and
per-service-account ones through narrow predefined roles bound on that one resource. A test
(tests/unit/test_iam.py) reads the code of `bot/`, `ops/` and `llm/` for Google client calls and fails when
one is missing here, when a row here is called nowhere, or when the script's custom role lacks a permission
of this table or holds one nothing uses. `ops.gcp.google.map_error` names the permissions a call needs
when Google answers 403.

The TPU API has no `tpu.queuedResources.*` permissions: its queued-resource methods are authorized by the
`tpu.nodes.*` ones (the permission list of https://cloud.google.com/iam/docs/roles-permissions/tpu, and the
"IAM Permissions" section of each method's REST reference page, linked per row).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "BOT_ROLE_ID",
    "CALLS",
    "CLOUD_PLATFORM_SCOPE",
    "GoogleCall",
    "bot_role_permissions",
    "permissions_for",
]

BOT_ROLE_ID = "tpuChatopsBot"
"""The custom role `deploy/gcp-setup.sh` creates in the project (projects/PROJECT/roles/tpuChatopsBot)."""

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
"""The one OAuth scope the bot's credentials, and the service account of a node it creates, ask for: what
they may do is then the IAM permissions above, as Google recommends
(https://cloud.google.com/compute/docs/access/service-accounts#scopes_best_practice)."""

Grant = Literal["bot-role", "secret-accessor", "secret-version-adder", "service-account-user", "not-granted"]

_TPU_REST = "https://cloud.google.com/tpu/docs/reference/rest"


@dataclass(frozen=True)
class GoogleCall:
    """One Google API method as the code calls it.

    Attributes:
        client: the client the code calls it through: "tpu-v2alpha1" (google-api-python-client discovery
            resource, `ops.gcp.google.tpu_v2alpha1`), "tpu-v2" (`tpu_v2.TpuClient`), "cloudquotas"
            (`CloudQuotasClient`), "secretmanager" (`SecretManagerServiceClient`), "logging"
            (`google.cloud.logging.Client`).
        call: the call in the code: "queuedResources.list" (discovery collection and verb), "get_node"
            (a GAPIC client method), "list_entries" (logging).
        label: how error messages name the call (the start of `what` in `ops.gcp.google.map_error`), e.g.
            "TPU API v2alpha1 queuedResources.list".
        permission: the IAM permission Google checks, e.g. "tpu.nodes.list".
        grant: who grants it: "bot-role" (the custom role, project-wide), "secret-accessor" /
            "secret-version-adder" (roles/secretmanager.secretAccessor / secretVersionAdder, bound on one
            secret only), "service-account-user" (roles/iam.serviceAccountUser, bound on the TPU VMs'
            service account only), "not-granted" (deliberately left out; `reason` says why).
        source: the public page giving the permission (the method's "IAM Permissions" section).
        reason: why the call needs this permission beyond its own (e.g. actAs for a create), or why a
            "not-granted" one is left out.
    """

    client: str
    call: str
    label: str
    permission: str
    grant: Grant
    source: str
    reason: str = ""


CALLS: tuple[GoogleCall, ...] = (
    # Cloud TPU API v2alpha1 through the discovery client (ops/tpu/api.py): queued resources, zones,
    # operations.
    GoogleCall(
        "tpu-v2alpha1",
        "locations.list",
        "TPU API v2alpha1 locations.list",
        "tpu.locations.list",
        "bot-role",
        f"{_TPU_REST}/v2alpha1/projects.locations/list",
    ),
    GoogleCall(
        "tpu-v2alpha1",
        "queuedResources.list",
        "TPU API v2alpha1 queuedResources.list",
        "tpu.nodes.list",
        "bot-role",
        f"{_TPU_REST}/v2alpha1/projects.locations.queuedResources/list",
    ),
    GoogleCall(
        "tpu-v2alpha1",
        "queuedResources.get",
        "TPU API v2alpha1 queuedResources.get",
        "tpu.nodes.get",
        "bot-role",
        f"{_TPU_REST}/v2alpha1/projects.locations.queuedResources/get",
    ),
    GoogleCall(
        "tpu-v2alpha1",
        "queuedResources.create",
        "TPU API v2alpha1 queuedResources.create",
        "tpu.nodes.create",
        "bot-role",
        f"{_TPU_REST}/v2alpha1/projects.locations.queuedResources/create",
    ),
    GoogleCall(
        "tpu-v2alpha1",
        "queuedResources.create",
        "TPU API v2alpha1 queuedResources.create",
        "iam.serviceAccounts.actAs",
        "service-account-user",
        "https://cloud.google.com/iam/docs/service-accounts-actas",
        reason="the created TPU VMs run as TPU_SERVICE_ACCOUNT: creating them acts as that account",
    ),
    GoogleCall(
        "tpu-v2alpha1",
        "queuedResources.delete",
        "TPU API v2alpha1 queuedResources.delete",
        "tpu.nodes.delete",
        "bot-role",
        f"{_TPU_REST}/v2alpha1/projects.locations.queuedResources/delete",
    ),
    GoogleCall(
        "tpu-v2alpha1",
        "queuedResources.reset",
        "TPU API v2alpha1 queuedResources.reset",
        "tpu.nodes.reset",
        "bot-role",
        f"{_TPU_REST}/v2alpha1/projects.locations.queuedResources/reset",
    ),
    GoogleCall(
        "tpu-v2alpha1",
        "nodes.list",
        "TPU API v2alpha1 nodes.list",
        "tpu.nodes.list",
        "bot-role",
        f"{_TPU_REST}/v2alpha1/projects.locations.nodes/list",
    ),
    GoogleCall(
        "tpu-v2alpha1",
        "operations.get",
        "TPU API v2alpha1 operations.get",
        "tpu.operations.get",
        "bot-role",
        f"{_TPU_REST}/v2alpha1/projects.locations.operations/get",
    ),
    GoogleCall(
        "tpu-v2alpha1",
        "acceleratorTypes.list",
        "TPU API v2alpha1 acceleratorTypes.list",
        "tpu.acceleratortypes.list",
        "bot-role",
        f"{_TPU_REST}/v2alpha1/projects.locations.acceleratorTypes/list",
    ),
    # Cloud TPU API v2 through the GAPIC client (ops/tpu/api.py): one node, start and stop.
    GoogleCall(
        "tpu-v2",
        "get_node",
        "TPU API v2 nodes.get",
        "tpu.nodes.get",
        "bot-role",
        f"{_TPU_REST}/v2/projects.locations.nodes/get",
    ),
    # The host keys the guest agent publishes (ops/tpu/api.py `host_keys`). Google's method page lists its IAM
    # permission; reading a node's attributes is a read of the node (tpu.nodes.get), as `gcloud compute tpus
    # tpu-vm ssh` does with roles/tpu.viewer.
    GoogleCall(
        "tpu-v2",
        "get_guest_attributes",
        "TPU API v2 nodes.getGuestAttributes",
        "tpu.nodes.get",
        "bot-role",
        f"{_TPU_REST}/v2/projects.locations.nodes/getGuestAttributes",
    ),
    GoogleCall(
        "tpu-v2",
        "start_node",
        "TPU API v2 nodes.start",
        "tpu.nodes.start",
        "bot-role",
        f"{_TPU_REST}/v2/projects.locations.nodes/start",
    ),
    GoogleCall(
        "tpu-v2",
        "stop_node",
        "TPU API v2 nodes.stop",
        "tpu.nodes.stop",
        "bot-role",
        f"{_TPU_REST}/v2/projects.locations.nodes/stop",
    ),
    # Cloud Quotas API (ops/gcp/quotas.py): the per-zone TPU quotas.
    GoogleCall(
        "cloudquotas",
        "get_quota_info",
        "Cloud Quotas API quotaInfos.get",
        "cloudquotas.quotas.get",
        "bot-role",
        "https://cloud.google.com/docs/quotas/reference/rest/v1/projects.locations.services.quotaInfos/get",
    ),
    # Cloud Logging API (ops/gcp/cloudlogs.py, the one reader): /logs, /logs analyze, chat, the alerts.
    GoogleCall(
        "logging",
        "list_entries",
        "Cloud Logging entries.list",
        "logging.logEntries.list",
        "bot-role",
        "https://cloud.google.com/logging/docs/reference/v2/rest/v2/entries/list",
    ),
    # Secret Manager API (ops/gcp/secrets.py): the vLLM API key read, the Hugging Face token written.
    GoogleCall(
        "secretmanager",
        "access_secret_version",
        "Secret Manager versions.access",
        "secretmanager.versions.access",
        "secret-accessor",
        "https://cloud.google.com/secret-manager/docs/reference/rest/v1/projects.secrets.versions/access",
    ),
    GoogleCall(
        "secretmanager",
        "add_secret_version",
        "Secret Manager secrets.addVersion",
        "secretmanager.versions.add",
        "secret-version-adder",
        "https://cloud.google.com/secret-manager/docs/reference/rest/v1/projects.secrets/addVersion",
    ),
    GoogleCall(
        "secretmanager",
        "create_secret",
        "Secret Manager secrets.create",
        "secretmanager.secrets.create",
        "not-granted",
        "https://cloud.google.com/secret-manager/docs/reference/rest/v1/projects.secrets/create",
        reason=(
            "only when the Hugging Face token secret is missing; deploy/gcp-setup.sh creates it, and the "
            "permission is project-wide (it would let the bot create any secret)"
        ),
    ),
)


def bot_role_permissions() -> list[str]:
    """The permissions of the custom role `BOT_ROLE_ID`, sorted and without repeats.

    Returns:
        e.g. ["cloudquotas.quotas.get", "logging.logEntries.list", "tpu.acceleratortypes.list", ...]: the
        `permission` of every row of `CALLS` granted by "bot-role".
    """
    return sorted({call.permission for call in CALLS if call.grant == "bot-role"})


def permissions_for(what: str) -> tuple[GoogleCall, ...]:
    """The rows whose `label` starts the error text `what` (as `ops.gcp.google.map_error` receives it).

    Args:
        what: e.g. "TPU API v2alpha1 queuedResources.list us-east5-a".

    Returns:
        The matching GoogleCalls, in table order (one call may need several permissions, e.g. a create
        needs tpu.nodes.create and iam.serviceAccounts.actAs); () when no row's label starts `what`.
    """
    return tuple(call for call in CALLS if what == call.label or what.startswith(call.label + " "))
