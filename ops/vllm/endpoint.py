"""Where the vLLM server is: the configured URL, or the node of a queued resource the bot trusts.

No address is hard-coded: with no `VLLM_BASE_URL`, the endpoint is `http://<node IP>:<vllm port>` of the
ACTIVE primary (`TPU_PRIMARY`), else of an ACTIVE queued resource carrying the bot's `managed-by` label
(`ops.tpu.ownership`), in the watched zones' order. Any other ACTIVE queued resource, whoever made it, is
never
used: prompts and the API key would go to a server the bot did not start. The node's external IP is used
unless `VLLM_USE_INTERNAL_IP` (the bot runs inside the VPC; see docs/deploy.md), then the internal one
(the reference setup serves vLLM with `--host 0.0.0.0 --port 8000` on the TPU VM). A preempted queued
resource (`QueuedResourceInfo.preempted`) and a node that is not running are skipped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from ops.errors import NotFound
from ops.tpu.api import TpuOps
from ops.tpu.model import QueuedResourceInfo, ZoneListing
from ops.tpu.ownership import created_by_bot

# Node states of a VM that cannot be serving (Node.State, cloud.google.com/tpu/docs/reference/rest/v2/
# projects.locations.nodes): skipped by discovery, so a preempted primary is not kept as the endpoint.
DEAD_NODE_STATES = frozenset({"PREEMPTED", "STOPPED", "STOPPING", "TERMINATED", "DELETING", "HIDDEN"})


@dataclass(frozen=True)
class Endpoint:
    """The vLLM base URL (no /v1) and a sentence saying how it was found; for an endpoint found from a
    node, that node's name, create time, queued resource and zone (the VM behind the URL: a recreated VM
    has another create time, and usually another IP). Such a node is always one the bot trusts: the
    primary, or made by the bot."""

    url: str
    source: str
    node: str = ""
    node_created: datetime | None = None
    resource: str = ""
    zone: str = ""


class EndpointResolver:
    """Resolves the vLLM endpoint and caches it for `ttl_s` seconds.

    Args:
        base_url: the `VLLM_BASE_URL` setting, or None to discover from the TPU.
        tpu: the TPU API, used for discovery.
        zones: the watched zones, searched in order.
        port: the vLLM port on the node (the `VLLM_PORT` setting).
        primary: the queued resource to prefer (`TPU_PRIMARY`); then the zones' order.
        ttl_s: how long a discovered endpoint is reused, seconds.
        internal_ip: use the node's internal IP (the bot runs in the VPC), else the external one first.
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
        internal_ip: bool = False,
    ) -> None:
        self._base_url = base_url
        self._tpu = tpu
        self._zones = list(zones)
        self._port = port
        self._primary = primary
        self._ttl_s = ttl_s
        self._clock = clock
        self._internal_ip = internal_ip
        self._lock = threading.Lock()
        self._cached: tuple[float, Endpoint] | None = None

    def resolve(self, listing: Callable[[], ZoneListing] | None = None, *, fresh: bool = False) -> Endpoint:
        """The endpoint to use now.

        Args:
            listing: where to get the queued resources if discovery is needed (e.g. a listing the caller
                is already fetching); None lists the watched zones.
            fresh: discover again even within `ttl_s` (what a confirmation checks must be current).

        Raises:
            NotFound: no URL is configured, and neither the primary nor a queued resource labelled
                `managed-by=tpu-chatops` is ACTIVE with a node IP in the zones (others are ignored).
            OpsError: the TPU API failed in every zone (as raised by `TpuOps`).
        """
        if self._base_url:
            return Endpoint(self._base_url, "setting VLLM_BASE_URL")
        with self._lock:
            if self._cached and not fresh and self._clock() - self._cached[0] < self._ttl_s:
                return self._cached[1]
        endpoint = self._discover(listing or (lambda: self._tpu.list_queued_resources(self._zones)))
        with self._lock:
            self._cached = (self._clock(), endpoint)
        return endpoint

    def of(self, name: str) -> Endpoint | None:
        """The endpoint of the queued resource `name`'s node (VLLM_BASE_URL when set), or None while it has
        none (not listed, not ACTIVE, no IP yet): where work on that resource will serve, uncached.

        Raises:
            OpsError: the TPU API failed in every zone.
        """
        if self._base_url:
            return Endpoint(self._base_url, "setting VLLM_BASE_URL")
        listing = self._tpu.list_queued_resources(self._zones)
        if listing.errors and not listing.resources:
            raise next(iter(listing.errors.values()))
        found = next((qr for qr in listing.resources if qr.name == name), None)
        return self._from_resource(found) if found is not None else None

    def forget(self) -> None:
        """Drop the cached endpoint (after the server moved or restarted)."""
        with self._lock:
            self._cached = None

    def _discover(self, fetch: Callable[[], ZoneListing]) -> Endpoint:
        listing = fetch()
        order = {zone: index for index, zone in enumerate(self._zones)}

        def rank(qr: QueuedResourceInfo) -> tuple[bool, int]:
            return qr.name != self._primary, order.get(qr.zone, len(order))

        trusted = [qr for qr in listing.resources if self._trusted(qr)]
        for resource in sorted(trusted, key=rank):
            endpoint = self._from_resource(resource)
            if endpoint is not None:
                return endpoint
        if listing.errors and not listing.resources:
            raise next(iter(listing.errors.values()))
        zones = ", ".join(self._zones)
        ignored = [qr.name for qr in listing.resources if qr.state == "ACTIVE" and not self._trusted(qr)]
        also = f" ({', '.join(ignored)}: ACTIVE, not the primary, not made by the bot)" if ignored else ""
        down = [  # a trusted VM that is stopped or preempted: say so, it is not "booting"
            f"node `{node.name}` of `{qr.name}` is {node.state}, so vLLM is not booting there"
            for qr in trusted
            if qr.state == "ACTIVE"
            for node in qr.nodes
            if node.state in DEAD_NODE_STATES
        ]
        also += "; " + "; ".join(down) if down else ""
        raise NotFound(
            f"no vLLM endpoint: neither the primary {self._primary} nor a queued resource the bot made is "
            f"ACTIVE with a node IP in {zones}{also}",
            "set VLLM_BASE_URL, or create one with /tpu create",
        )

    def _trusted(self, resource: QueuedResourceInfo) -> bool:
        """The primary by name, or a queued resource carrying the bot's `managed-by` label."""
        return resource.name == self._primary or created_by_bot(resource)

    def _from_resource(self, resource: QueuedResourceInfo) -> Endpoint | None:
        if resource.state != "ACTIVE" or resource.preempted:
            return None
        order = (
            (("internal", "internal_ips"),)
            if self._internal_ip
            else (("external", "external_ips"), ("internal", "internal_ips"))
        )
        for node in resource.nodes:
            if node.state in DEAD_NODE_STATES:  # a preempted or stopped VM serves nothing
                continue
            for kind, ips in ((kind, getattr(node, field)) for kind, field in order):
                if ips:
                    return Endpoint(
                        f"http://{ips[0]}:{self._port}",
                        f"{kind} IP of node {node.name} of ACTIVE queued resource {resource.name} "
                        f"({resource.zone}), port {self._port}",
                        node=node.name,
                        node_created=node.create_time,
                        resource=resource.name,
                        zone=resource.zone,
                    )
        return None
