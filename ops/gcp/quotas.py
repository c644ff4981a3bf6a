"""TPU quotas per zone, read through the Cloud Quotas API (`cloudquotas_v1`, REST transport).

The quota ids `TPU{FAMILY}PerProjectPerZoneForTPUAPI` and `TPU{FAMILY}PreemptiblePerProjectPerZoneForTPUAPI`
(e.g. TPUV6EPerProjectPerZoneForTPUAPI) come from the reference project's code, not from Google's docs;
whether they are metered in chips or cores is unverified. Flex-start and spot draw on the preemptible
quota ("you need sufficient preemptible quota", https://cloud.google.com/tpu/docs/request-using-flex-start).
"""

from __future__ import annotations

from google.api_core.retry import Retry
from google.auth.credentials import Credentials
from google.cloud import cloudquotas_v1

from ops.errors import BadInput, NotFound, OpsError
from ops.gcp import google
from ops.gcp.google import map_error
from ops.tpu.model import is_zone

__all__ = ["QUOTA_SERVICE", "quota_ids", "zone_quotas"]

QUOTA_SERVICE = "tpu.googleapis.com"
_API = "the Cloud Quotas API"


def quota_ids(family: str) -> tuple[str, str]:
    """The (standard, preemptible) per-zone TPU quota ids of an accelerator family.

    Args:
        family: accelerator family as in the type name, e.g. "v6e" (from "v6e-8"), "v5p".

    Returns:
        e.g. ("TPUV6EPerProjectPerZoneForTPUAPI", "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI").

    Raises:
        BadInput: the family is not letters and digits.
    """
    if not family or not family.isalnum():
        raise BadInput(f"bad accelerator family {family!r}", "use e.g. v6e")
    upper = family.upper()
    return f"TPU{upper}PerProjectPerZoneForTPUAPI", f"TPU{upper}PreemptiblePerProjectPerZoneForTPUAPI"


def zone_quotas(
    project: str,
    family: str = "v6e",
    *,
    api_endpoint: str | None = None,
    credentials: Credentials | None = None,
    timeout_s: float = 15.0,
) -> dict[str, dict[str, int]]:
    """The per-zone TPU quota limits of a project (`quotaInfos.get`, Cloud Quotas API v1).

    Reads `projects/{project}/locations/global/services/tpu.googleapis.com/quotaInfos/{id}` for both ids
    of `quota_ids(family)`; an id the project does not have is left out.

    Args:
        project: project id, e.g. "demo-project".
        family: accelerator family, e.g. "v6e".
        api_endpoint: base URL of the API, e.g. the simulator's "http://127.0.0.1:43121"; None for Google.
        credentials: google-auth credentials; None: see `ops.gcp.google`.
        timeout_s: the most time one quota read may take, retries of 429/5xx included, seconds.

    Returns:
        zone -> {quota id -> limit (`dimensionsInfos[].details.value`, unit unverified: chips or cores)}: a
        zone's own dimension, else the default dimension (empty `dimensions`) when its `applicableLocations`
        lists the zone ("applicableLocations: The applicable regions or zones of this dimensions info",
        cloud.google.com/docs/quotas/reference/rest/v1/DimensionsInfo),
        e.g. {"us-east5-a": {"TPUV6EPerProjectPerZoneForTPUAPI": 64,
        "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI": 64}}. Region and global locations are left out.

    Raises:
        BadInput: malformed family. PermissionDenied, QuotaExceeded, BackendUnavailable, BackendTimeout,
        NotFound (unknown project): see `ops.gcp.google.map_error` (backend "quotas").
    """
    with google.cloud_quotas(api_endpoint, credentials) as client:  # closes its HTTP session
        return _read(client, project, family, timeout_s)


def _read(
    client: cloudquotas_v1.CloudQuotasClient, project: str, family: str, timeout_s: float
) -> dict[str, dict[str, int]]:
    result: dict[str, dict[str, int]] = {}
    for quota_id in quota_ids(family):
        name = f"projects/{project}/locations/global/services/{QUOTA_SERVICE}/quotaInfos/{quota_id}"
        what = f"Cloud Quotas API quotaInfos.get {quota_id}"
        try:
            info = client.get_quota_info(name=name, retry=Retry(timeout=timeout_s), timeout=timeout_s)
        except Exception as exc:
            error = map_error(exc, what, backend="quotas", api=_API)
            if isinstance(error, NotFound):  # the project has no such quota (e.g. another family)
                continue
            raise error from exc
        own: dict[str, int] = {}
        default: dict[str, int] = {}
        for dimensions_info in info.dimensions_infos:
            dimensions = dict(dimensions_info.dimensions)
            zone = dimensions.get("zone")
            try:
                value = int(dimensions_info.details.value)
            except (TypeError, ValueError) as exc:
                raise OpsError(
                    f"{what}: non-integer value for {zone or 'default'}", backend="quotas"
                ) from exc
            if zone:
                own[zone] = value
            elif not dimensions:  # the default dimension: every applicable zone without its own value
                for location in dimensions_info.applicable_locations:
                    if is_zone(location):
                        default[location] = value
        for zone, value in {**default, **own}.items():
            result.setdefault(zone, {})[quota_id] = value
    return dict(sorted(result.items()))
