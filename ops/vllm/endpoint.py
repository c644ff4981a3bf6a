"""Where vLLM is: the endpoint in use (`EndpointResolver`: the configured URL, or the node of a queued
resource the bot trusts), read from the state just listed or the node read again, never described from
memory; and the endpoint last used whose node a newer read no longer shows (`Departed`). How to talk to the
server found there is `ops.vllm.server`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from ops.errors import NotFound, OpsError
from ops.tpu.api import TpuOps
from ops.tpu.model import QueuedResourceInfo, ZoneListing, primary_among
from ops.tpu.ownership import created_by_bot

__all__ = ["DEAD_NODE_STATES", "Departed", "Endpoint", "EndpointResolver"]

# -- where vLLM is ----------------------------------------------------------------------------------------

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


@dataclass(frozen=True)
class Departed:
    """The endpoint the resolver last found on a node, which the newest read of the TPU API no longer shows
    serving: its queued resource is not listed, not ACTIVE, or its node is gone or not running. Something may
    still answer on its address (another VM given the IP, a server left behind): it is not the deployment's.

    Attributes:
        endpoint: the endpoint as last found (its node, queued resource and zone).
        why: what the newest read showed, e.g. "`gemma4-qr` is not listed in us-east5-a".
    """

    endpoint: Endpoint
    why: str

    @property
    def address(self) -> str:
        """host:port of the endpoint's URL."""
        return urlsplit(self.endpoint.url).netloc

    def sentence(self) -> str:
        """E.g. "the endpoint last used, 10.0.0.2:8000 (node `gemma4-qr-node` of `gemma4-qr`, us-east5-a),
        serves this deployment no more: `gemma4-qr` is not listed in us-east5-a"."""
        e = self.endpoint
        return (
            f"the endpoint last used, {self.address} (node `{e.node}` of `{e.resource}`, {e.zone}), serves "
            f"this deployment no more: {self.why}"
        )


class EndpointResolver:
    """Resolves the vLLM endpoint and caches it for `ttl_s` seconds.

    No address is hard-coded: with no `VLLM_BASE_URL`, the endpoint is `http://<node IP>:<vllm port>` of the
    ACTIVE primary (`TPU_PRIMARY`), else of an ACTIVE queued resource carrying the bot's `managed-by` label
    (`ops.tpu.ownership`), in the watched zones' order. A cached endpoint is never described from memory:
    given a listing, discovery runs on it; without one, the cached node is read again (`nodes.get`, one call)
    and a node that is gone, not running, recreated (another create time) or at another address sends
    discovery to the listing. The endpoint last found whose node the newest read no longer shows is kept as
    `departed()`, and named in the NotFound that follows (something may still answer on its address). Any
    other ACTIVE queued resource, whoever made it, is never used: prompts and the API key would go to a server
    the bot did not start. The node's external IP is used unless `VLLM_USE_INTERNAL_IP` (the bot runs inside
    the VPC; see docs/deploy.md), then the internal one (the reference setup serves vLLM with `--host 0.0.0.0
    --port 8000` on the TPU VM). A preempted queued
    resource (`QueuedResourceInfo.preempted`) and a node that is not running are skipped.

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
        self._last: Endpoint | None = None  # the last endpoint found on a node
        self._departed: Departed | None = None

    def resolve(self, listing: Callable[[], ZoneListing] | None = None, *, fresh: bool = False) -> Endpoint:
        """The endpoint to use now.

        Args:
            listing: the queued resources the caller is already fetching: discovery runs on them, whatever
                is cached (the answer describes the endpoint from the state it read); None: the cached
                endpoint's node is read again within `ttl_s`, else the watched zones are listed.
            fresh: discover again even within `ttl_s` (what a confirmation checks must be current).

        Raises:
            NotFound: no URL is configured, and neither the primary nor a queued resource labelled
                `managed-by=tpu-chatops` is ACTIVE with a node IP in the zones (others are ignored); the
                message names the departed endpoint, if any.
            OpsError: the TPU API failed in every zone (as raised by `TpuOps`).
        """
        if self._base_url:
            return Endpoint(self._base_url, "setting VLLM_BASE_URL")
        if listing is None and not fresh:
            with self._lock:
                cached = self._cached
            if cached and self._clock() - cached[0] < self._ttl_s and self._still_serving(cached[1]):
                return cached[1]
        endpoint = self._discover(listing or (lambda: self._tpu.list_queued_resources(self._zones)))
        with self._lock:
            self._cached = (self._clock(), endpoint)
        return endpoint

    def departed(self) -> Departed | None:
        """The endpoint last found on a node that the newest discovery no longer found serving (None when
        discovery found an endpoint since, or never lost one)."""
        with self._lock:
            return self._departed

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

    def _still_serving(self, endpoint: Endpoint, *, unread: bool = True) -> bool:
        """Whether the cached endpoint's node is still the VM it was found on (`nodes.get`): not gone, not
        stopped or preempted, the same create time and address. A read that fails otherwise than NotFound
        answers `unread`: True keeps the cached endpoint (a listing would most likely fail alike; it is what
        the last read showed), False does not."""
        if not endpoint.node or not endpoint.zone:
            return True
        try:
            node = self._tpu.get_node(endpoint.zone, endpoint.node)
        except NotFound:
            return False
        except OpsError:
            return unread
        host = urlsplit(endpoint.url).hostname or ""
        return (
            node.state not in DEAD_NODE_STATES
            and node.create_time == endpoint.node_created
            and host in (*node.external_ips, *node.internal_ips)
        )

    def _discover(self, fetch: Callable[[], ZoneListing]) -> Endpoint:
        listing = fetch()
        found = self._found(listing)
        with self._lock:
            if found is not None:
                self._last, self._departed = found, None
                return found
            last = self._last
        if last is not None and last.zone in listing.errors and self._still_serving(last, unread=False):
            return last  # its zone could not be listed, but its node, read now, is still the one found
        departed = self._departure(last, listing) if last is not None else None
        if departed is not None:
            with self._lock:
                self._departed = departed
        if listing.errors and not listing.resources:
            raise next(iter(listing.errors.values()))
        raise self._none_found(listing, departed)

    def _departure(self, last: Endpoint, listing: ZoneListing) -> Departed | None:
        """What the listing shows of the last endpoint's node, when it no longer serves there (None when its
        zone could not be read: nothing is known of it)."""
        if last.zone in listing.errors:
            return None
        resource = next(
            (qr for qr in listing.resources if qr.name == last.resource and qr.zone == last.zone), None
        )
        node = next((n for n in resource.nodes if n.name == last.node), None) if resource else None
        if resource is None:
            why = f"`{last.resource}` is not listed in {last.zone}"
        elif resource.state != "ACTIVE" or resource.preempted:
            why = f"`{last.resource}` is {resource.state}" + (" (preempted)" if resource.preempted else "")
        elif node is None:
            why = f"node `{last.node}` is not listed under `{last.resource}`"
        elif node.state in DEAD_NODE_STATES:
            why = f"node `{last.node}` is {node.state}"
        elif node.create_time != last.node_created:
            why = f"node `{last.node}` was recreated"
        else:
            why = f"node `{last.node}` has no address now"
        return Departed(last, why)

    def _found(self, listing: ZoneListing) -> Endpoint | None:
        """The endpoint of the first trusted serving node of `listing`, in rank order."""
        order = {zone: index for index, zone in enumerate(self._zones)}

        primary = self._primary_in(listing)

        def rank(qr: QueuedResourceInfo) -> tuple[bool, int]:
            return qr is not primary, order.get(qr.zone, len(order))

        trusted = [qr for qr in listing.resources if self._trusted(qr, primary)]
        for resource in sorted(trusted, key=rank):
            endpoint = self._from_resource(resource)
            if endpoint is not None:
                return endpoint
        return None

    def _none_found(self, listing: ZoneListing, departed: Departed | None) -> NotFound:
        """The NotFound of a listing with no trusted serving node: what it shows instead, and the endpoint
        last used when it is gone."""
        primary = self._primary_in(listing)
        trusted = [qr for qr in listing.resources if self._trusted(qr, primary)]
        zones = ", ".join(self._zones)
        ignored = [
            f"{qr.name} in {qr.zone}"
            for qr in listing.resources
            if qr.state == "ACTIVE" and not self._trusted(qr, primary)
        ]
        also = f" ({', '.join(ignored)}: ACTIVE, not the primary, not made by the bot)" if ignored else ""
        down = [  # a trusted VM that is stopped or preempted: say so, it is not "booting"
            f"node `{node.name}` of `{qr.name}` is {node.state}, so vLLM is not booting there"
            for qr in trusted
            if qr.state == "ACTIVE"
            for node in qr.nodes
            if node.state in DEAD_NODE_STATES
        ]
        also += "; " + "; ".join(down) if down else ""
        if departed is not None and not any(f"`{departed.endpoint.node}`" in line for line in down):
            also += f"; {departed.sentence()}"
        return NotFound(
            f"no vLLM endpoint: neither the primary {self._primary} nor a queued resource the bot made is "
            f"ACTIVE with a node IP in {zones}{also}",
            "set VLLM_BASE_URL, or create one with /tpu create",
        )

    def _primary_in(self, listing: ZoneListing) -> QueuedResourceInfo | None:
        """The primary of `listing`: one resource, by zone and name (`primary_among`)."""
        return primary_among(listing.resources, self._primary, self._zones) if self._primary else None

    @staticmethod
    def _trusted(resource: QueuedResourceInfo, primary: QueuedResourceInfo | None) -> bool:
        """The primary (by zone and name), or a queued resource carrying the bot's `managed-by` label."""
        return resource is primary or created_by_bot(resource)

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
