"""The Cloud Quotas API (cloudquotas.googleapis.com v1, quotaInfos) of the Google simulator, SIMULATED.

Served in the shapes of the `cloudquotas_v1` protos, so the real client works against it
(`ops.gcp.google.cloud_quotas(url)`):

    GET /v1/projects/{p}/locations/global/services/{s}/quotaInfos[/{id}]   list / get

The values are the scenario's zone quotas (`zones.<zone>.quota`) and defaults (`quota_defaults`); a quota's
default is served as the QuotaInfo's default dimension (empty `dimensions`, `applicableLocations` = the
zones without their own value), as Cloud Quotas does
(https://cloud.google.com/docs/quotas/reference/rest/v1/DimensionsInfo). The metric names are
simulator-only texts. Creates over a limit are refused by the TPU API (`World.check_quota`).
"""

from __future__ import annotations

import re
from typing import Any

from sim.gcp.api import ApiError, paginate
from sim.gcp.world import Route, World

QUOTA_SERVICE = "tpu.googleapis.com"


def quota_infos(world: World) -> dict[str, list[tuple[str, int]]]:
    """Quota id -> [(zone, value)] from the zones' `quota` entries, ids and zones sorted; a quota with a
    default (`quota_defaults`) has a ("", default) entry first (the default dimension)."""
    infos: dict[str, list[tuple[str, int]]] = {
        quota_id: [("", value)] for quota_id, value in world.quota_defaults.items()
    }
    for zone in sorted(world.zones):
        for quota_id, value in world.zones[zone].quota.items():
            infos.setdefault(quota_id, []).append((zone, value))
    return dict(sorted(infos.items()))


def quota_info_json(world: World, quota_id: str, values: list[tuple[str, int]]) -> dict[str, Any]:
    """A Cloud Quotas `QuotaInfo` (cloudquotas_v1 proto JSON) with one dimensionsInfo per zone.

    The metric name and display names are the simulator's own (not captured from Google).
    """
    family = re.sub(r"^TPU|(Preemptible)?PerProjectPerZoneForTPUAPI$", "", quota_id).lower() or "tpu"
    preemptible = "Preemptible" in quota_id
    metric = f"{QUOTA_SERVICE}/{'preemptible_' if preemptible else ''}tpu_{family}_cores"
    return {
        "name": f"projects/{world.project}/locations/global/services/{QUOTA_SERVICE}/quotaInfos/{quota_id}",
        "quotaId": quota_id,
        "metric": metric,
        "service": QUOTA_SERVICE,
        "isPrecise": True,
        "containerType": "PROJECT",
        "dimensions": ["zone"],
        "metricDisplayName": f"{'Preemptible ' if preemptible else ''}TPU {family} cores",
        "quotaDisplayName": f"{'Preemptible ' if preemptible else ''}TPU {family} cores per project per zone",
        "metricUnit": "1/{project}/{zone}",
        "quotaIncreaseEligibility": {"isEligible": True},
        "isFixed": False,
        "isConcurrent": False,
        "dimensionsInfos": [_dimensions_info(world, quota_id, values, zone, value) for zone, value in values],
    }


def _dimensions_info(
    world: World, quota_id: str, values: list[tuple[str, int]], zone: str, value: int
) -> dict[str, Any]:
    """One DimensionsInfo: a zone's own value, or (zone "") the default dimension: empty `dimensions`,
    applicable to every zone without its own value (cloud.google.com/docs/quotas/reference/rest/v1/
    DimensionsInfo: "applicableLocations: The applicable regions or zones of this dimensions info")."""
    if zone:
        return {"dimensions": {"zone": zone}, "details": {"value": str(value)}, "applicableLocations": [zone]}
    overridden = {z for z, _ in values if z}
    covered = [z for z in sorted(world.zones) if z not in overridden]
    return {"dimensions": {}, "details": {"value": str(value)}, "applicableLocations": covered}


# ---- handlers (called with world.lock held)
def _list_quota_infos(w: World, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
    w.check(m["project"])
    infos = quota_infos(w) if m["service"] == QUOTA_SERVICE else {}
    items = [quota_info_json(w, quota_id, values) for quota_id, values in infos.items()]
    page, token = paginate(items, query, w.page_size)
    return {"quotaInfos": page, **({"nextPageToken": token} if token else {})}


def _get_quota_info(w: World, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
    w.check(m["project"])
    infos = quota_infos(w) if m["service"] == QUOTA_SERVICE else {}
    if m["id"] not in infos:
        raise ApiError(404, f"QuotaInfo {m['id']} of service {m['service']} was not found.")
    return quota_info_json(w, m["id"], infos[m["id"]])


_QUOTA_INFOS = r"/v1/projects/(?P<project>[^/]+)/locations/global/services/(?P<service>[^/]+)/quotaInfos"
ROUTES: list[Route] = [
    ("GET", _QUOTA_INFOS + "$", _list_quota_infos),
    ("GET", _QUOTA_INFOS + r"/(?P<id>[^/:]+)$", _get_quota_info),
]
