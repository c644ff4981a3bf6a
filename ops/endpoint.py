"""Where the vLLM server is: the configured URL, or the ACTIVE queued resource's node.

No address is hard-coded: with no `VLLM_BASE_URL`, the endpoint is `http://<node external IP, else internal
IP>:<vllm port>` of the first ACTIVE queued resource in the watched zones (the reference setup serves vLLM
with `--host 0.0.0.0 --port 8000` on the TPU VM). A preempted queued resource (`QueuedResourceInfo.preempted`)
and a node that is not running are skipped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ops.errors import NotFound
from ops.tpu import QueuedResourceInfo, TpuOps, ZoneListing

# Node states of a VM that cannot be serving (Node.State, cloud.google.com/tpu/docs/reference/rest/v2/
# projects.locations.nodes): skipped by discovery, so a preempted primary is not kept as the endpoint.
DEAD_NODE_STATES = frozenset({"PREEMPTED", "STOPPED", "STOPPING", "TERMINATED", "DELETING", "HIDDEN"})


@dataclass(frozen=True)
class Endpoint:
    """The vLLM base URL (no /v1) and a sentence saying how it was found."""

    url: str
    source: str


class EndpointResolver:
    """Resolves the vLLM endpoint and caches it for `ttl_s` seconds.

    Args:
        base_url: the `VLLM_BASE_URL` setting, or None to discover from the TPU.
        tpu: the TPU API, used for discovery.
        zones: the watched zones, searched in order.
        port: the vLLM port on the node (the `VLLM_PORT` setting).
        primary: the queued resource to prefer (`TPU_PRIMARY`); then the zones' order.
        ttl_s: how long a discovered endpoint is reused, seconds.
    """

    def __init__(
        self,
        base_url: str | None,
        tpu: TpuOps,
        zones: Sequence[str],
        port: int,
        *,
        primary: str | None = None,
        ttl_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._base_url = base_url
        self._tpu = tpu
        self._zones = list(zones)
        self._port = port
        self._primary = primary
        self._ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: tuple[float, Endpoint] | None = None

    def resolve(self, listing: Callable[[], ZoneListing] | None = None) -> Endpoint:
        """The endpoint to use now.

        Args:
            listing: where to get the queued resources if discovery is needed (e.g. a listing the caller
                is already fetching); None lists the watched zones.

        Raises:
            NotFound: no URL is configured and no ACTIVE queued resource with a node IP is in the zones.
            OpsError: the TPU API failed in every zone (as raised by `TpuOps`).
        """
        if self._base_url:
            return Endpoint(self._base_url, "setting VLLM_BASE_URL")
        with self._lock:
            if self._cached and self._clock() - self._cached[0] < self._ttl_s:
                return self._cached[1]
        endpoint = self._discover(listing or (lambda: self._tpu.list_queued_resources(self._zones)))
        with self._lock:
            self._cached = (self._clock(), endpoint)
        return endpoint

    def forget(self) -> None:
        """Drop the cached endpoint (after the server moved or restarted)."""
        with self._lock:
            self._cached = None

    def _discover(self, fetch: Callable[[], ZoneListing]) -> Endpoint:
        listing = fetch()
        order = {zone: index for index, zone in enumerate(self._zones)}

        def rank(qr: QueuedResourceInfo) -> tuple[bool, int]:
            return qr.name != self._primary, order.get(qr.zone, len(order))

        for resource in sorted(listing.resources, key=rank):
            endpoint = self._from_resource(resource)
            if endpoint is not None:
                return endpoint
        if listing.errors and not listing.resources:
            raise next(iter(listing.errors.values()))
        zones = ", ".join(self._zones)
        raise NotFound(
            f"no vLLM endpoint: no ACTIVE queued resource with a node IP in {zones}",
            "set VLLM_BASE_URL, or create a queued resource with /tpu create",
        )

    def _from_resource(self, resource: QueuedResourceInfo) -> Endpoint | None:
        if resource.state != "ACTIVE" or resource.preempted:
            return None
        for node in resource.nodes:
            if node.state in DEAD_NODE_STATES:  # a preempted or stopped VM serves nothing
                continue
            for kind, ips in (("external", node.external_ips), ("internal", node.internal_ips)):
                if ips:
                    return Endpoint(
                        f"http://{ips[0]}:{self._port}",
                        f"{kind} IP of node {node.name} of ACTIVE queued resource {resource.name} "
                        f"({resource.zone}), port {self._port}",
                    )
        return None
