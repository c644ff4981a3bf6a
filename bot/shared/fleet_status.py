"""What `/fleet` and the chat know of one deployment: its sources fetched at once, and its lines.

Each deployment's sources (queued resources, vLLM /health and /metrics, open alerts) are fetched at the
same time as every other deployment's, so a fleet takes as long as its slowest source. A source that fails
is one red line; the rest still show. Deployments that read the TPU API the same way (project, API endpoint
and credentials) share each zone's listing: a zone is listed once per fleet, whichever deployments watch it.

An endpoint the resolver no longer finds (`EndpointResolver.departed`: its queued resource deleted, its node
gone) is described from the state just read and the audit trail (`departed_line`), for `/fleet` and
`/tpu status` alike: whatever still answers on its address is never shown as the deployment's vLLM.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, TypeVar

from bot.chat.asks import deletions, outcomes
from bot.services import Services, answered, settled
from bot.slack.render import Block, human_duration, section, utc
from bot.views.tpu import STATE_ICONS
from ops.alerts.ledger import AlertLedger, LedgerRow
from ops.alerts.placement import place_open_alerts
from ops.cost.spend import DeploymentSpend, deployment_spend, midnight, unreadable
from ops.errors import OpsError
from ops.tpu.model import QueuedResourceInfo, ZoneListing, primary_among
from ops.vllm.endpoint import Endpoint
from ops.vllm.metrics import LOAD_FAMILIES, MetricsSummary
from ops.vllm.server import HealthCheck, VllmClient

__all__ = [
    "SOURCES",
    "Snapshot",
    "deployment_blocks",
    "deployment_lines",
    "primary_of",
    "snapshot",
    "snapshots",
]

T = TypeVar("T")

# Tasks per deployment on its pool at once: /health and /metrics (each zone's listing is one more, on the
# pool of the first deployment watching it, and the open alerts of every deployment sharing a store one
# more, on the first one's pool; its lines are rendered by whichever of those threads finishes last).
SOURCES = 2
OPEN_ALERTS_DAYS = 7  # as `/alerts list`


@dataclass(frozen=True)
class Snapshot:
    """What `/fleet` learned of one deployment; each source is its value or the OpsError that stopped it.
    `spend` (today's, UTC) and `lines` (`deployment_lines`) are computed once, on the fleet's pool as soon as
    this deployment's sources are in, not on the command thread after the slowest deployment's."""

    name: str
    services: Services
    listing: ZoneListing | OpsError
    endpoint: Endpoint | OpsError
    health: HealthCheck | OpsError
    metrics: MetricsSummary | OpsError
    alerts: list[LedgerRow] | OpsError
    spend: DeploymentSpend = field(default_factory=DeploymentSpend)
    lines: tuple[str, ...] = ()


def snapshot(
    pool: ThreadPoolExecutor,
    name: str,
    services: Services,
    now: datetime,
    open_alerts: Future[dict[str, list[LedgerRow]]],
    zones: list[Future[ZoneListing]],
) -> Future[Snapshot]:
    """Start fetching one deployment: its /health and /metrics on `pool`; returns the future of its
    Snapshot, whose spend and lines are rendered by the thread that brings its last source in (no thread
    waits for them). Its open alerts are those of its own ledger (`AlertLedger` of deployment `name`) over
    the last 7 days, taken from `open_alerts` (every deployment's of the store, read once:
    `AlertLedger.open_alerts_by_deployment`). `zones`: the listings of its zones
    (`TpuOps.list_queued_resources` of one zone each, maybe shared with other deployments), put together as
    its listing. `pool` needs SOURCES threads per deployment fetched at once, and one per zone it lists."""
    listing_f = (
        zones[0] if len(zones) == 1 else _when_all(zones, lambda: _joined([z.result() for z in zones]))
    )

    def client() -> tuple[Endpoint, VllmClient]:  # the endpoint cached by the resolver, or from the listing
        endpoint = services.endpoints.resolve(listing_f.result)
        return endpoint, services.vllm_kept(endpoint)

    def health() -> tuple[Endpoint, HealthCheck]:  # /health never raises: a failure here is the endpoint's
        endpoint, vllm = client()
        return endpoint, vllm.health()

    health_f = pool.submit(health)
    metrics_f = pool.submit(lambda: client()[1].metrics(LOAD_FAMILIES))  # its lines show the load only

    def gather() -> Snapshot:
        listing, checked = settled(listing_f, "fleet listing"), settled(health_f, "fleet endpoint")
        endpoint, health = (checked, checked) if isinstance(checked, OpsError) else checked
        metrics = settled(metrics_f, "fleet /metrics")
        every = settled(open_alerts, "fleet alerts")
        alerts = every if isinstance(every, OpsError) else every[name]
        spend = deployment_spend(listing, now, midnight(now))
        snap = Snapshot(name, services, listing, endpoint, health, metrics, alerts, spend)
        lines = (_resource_line(snap, now), _vllm_line(snap), _cost_line(snap), _alerts_line(snap))
        return replace(snap, lines=lines)

    return _when_all([listing_f, health_f, metrics_f, open_alerts], gather)


def _when_all(futures: list[Future[Any]], then: Callable[[], T]) -> Future[T]:
    """The future of `then()`, called by the thread that completes the last of `futures` (or this one, when
    they are all done): a thread blocked on each future would be woken once per future, each wake-up a
    turn of the interpreter lock."""
    done: Future[T] = Future()
    left = [len(futures)]
    lock = threading.Lock()

    def one_done(_: Future[Any]) -> None:
        with lock:
            left[0] -= 1
            if left[0]:
                return
        try:
            done.set_result(then())
        except Exception as exc:  # `then` is the caller's: its failure is the future's
            done.set_exception(exc)

    for future in futures:
        future.add_done_callback(one_done)
    return done


def _joined(listings: list[ZoneListing]) -> ZoneListing:
    """Listings of single zones as one, as `TpuOps.list_queued_resources` of those zones returns it."""
    resources = sorted(
        (qr for listing in listings for qr in listing.resources), key=lambda qr: (qr.zone, qr.name)
    )
    return ZoneListing(tuple(resources), {z: e for listing in listings for z, e in listing.errors.items()})


def _reader(services: Services) -> Hashable:
    """What a deployment's TPU API reads depend on besides the zone: two deployments with the same reader
    get the same answer from a zone."""
    s = services.settings
    return (s.gcp_project, s.google_api_endpoint, s.google_credentials_file)


AUDIT_LINES = 200
"""How many of the newest audit lines are read for the command that deleted a departed endpoint's queued
resource."""

DEPARTED_PROBE_S = 2.0
"""Seconds the `/health` probe of a departed endpoint's address may take (or HTTP_TIMEOUT_S, if shorter).
Its owner is known to be gone (queued resource deleted, node not running), so the probe only asks whether
something else took the address: a dead address (a released IP drops the connection attempt) would
otherwise hold `/fleet` and `/tpu status` for the whole HTTP_TIMEOUT_S (10 s by default) per deployment.
The bot's own bound, not a published figure: a server that answers at all answers /health within it (the
simulated and real vLLM in the tests answer in milliseconds)."""


def departed_line(services: Services) -> str:
    """What became of the vLLM endpoint the deployment last used, when discovery no longer finds it
    (`EndpointResolver.departed`); "" when it has not departed. Its queued resource's deletion is named from
    the audit trail (when, by whom, the command), else what the newest listing showed; its address is probed
    with `/health` only, without the API key (a server the bot does not trust gets no secret), for at most
    DEPARTED_PROBE_S (a timeout is said as such, "nothing answered at ADDR within 2 s"), e.g.
    "something still answers at 10.0.0.2:8000, but `gemma4-qr` was deleted at 04:10 UTC by <@U1>
    (`/tpu delete gemma4-qr --force`, from the audit trail): not this deployment's node, so not its vLLM".
    """
    departed = services.endpoints.departed()
    if departed is None:
        return ""
    try:
        runs = outcomes(list(reversed(services.store.audit(last=AUDIT_LINES))))
        gone = deletions(runs).get(departed.endpoint.resource.lower(), departed.why)
    except Exception:  # the audit store failing leaves what the listing showed
        gone = departed.why
    probe_s = min(DEPARTED_PROBE_S, services.settings.http_timeout_s)
    with VllmClient(departed.endpoint.url, timeout_s=probe_s) as client:
        health = client.health()
    if answered(health):
        return (
            f":warning: something still answers at {departed.address}, but {gone}: not this deployment's "
            "node, so not its vLLM"
        )
    if health.state == "timeout":
        return (
            f":white_circle: nothing answered at {departed.address} within {probe_s:g} s (not waited longer: "
            f"its owner is gone), where vLLM was: {gone}"
        )
    return f":white_circle: nothing answers at {departed.address}, where vLLM was: {gone}"


def _red(label: str, err: OpsError) -> str:
    return f":red_circle: *{label}*: {err.message}" + (f" _({err.hint})_" if err.hint else "")


def primary_of(listing: ZoneListing, primary: str, zones: list[str]) -> QueuedResourceInfo | None:
    """The deployment's primary queued resource (TPU_PRIMARY, one resource: `primary_among` the listing,
    `zones` the watched ones in order), else its first ACTIVE one, else None."""
    by_name = primary_among(listing.resources, primary, zones)
    return by_name or next((qr for qr in listing.resources if qr.state == "ACTIVE"), None)


def _resource_line(snap: Snapshot, now: datetime) -> str:
    if isinstance(snap.listing, OpsError):
        return _red("Queued resources", snap.listing)
    failed_all = unreadable(snap.listing)
    if failed_all is not None:
        return _red("Queued resources", failed_all)
    s = snap.services.settings
    qr = primary_of(snap.listing, s.tpu_primary, s.tpu_zones)
    failed = [f"`{zone}`" for zone in snap.listing.errors]
    missing = f" · :warning: zones not answering: {', '.join(failed)}" if failed else ""
    if qr is None:
        return f":white_circle: primary `{s.tpu_primary}` not found in {', '.join(s.tpu_zones)}{missing}"
    icon = STATE_ICONS.get(qr.state, ":grey_question:")
    kind = f"{qr.accelerator_type or '?'} {qr.provisioning_model}"
    parts = [f"{icon} `{qr.name}` {qr.state} · `{qr.zone}` · {kind}"]
    left = qr.time_left(now)
    if left is not None:
        parts.append(f"{human_duration(left)} left")
    elif qr.valid_until is not None and qr.state in ("WAITING_FOR_RESOURCES", "ACCEPTED"):
        parts.append(f"valid until {utc(qr.valid_until)}")
    for node in qr.nodes:
        health = f" {node.health}" if node.health else ""
        parts.append(f"node {STATE_ICONS.get(node.state, ':grey_question:')} {node.state}{health}")
    if not qr.nodes and qr.state == "ACTIVE":
        parts.append(":warning: no node")
    return " · ".join(parts) + missing


def _vllm_line(snap: Snapshot) -> str:
    model = snap.services.settings.vllm_model
    if isinstance(snap.endpoint, OpsError):
        departed = departed_line(snap.services)
        return "\n".join(filter(None, [f"*vLLM* `{model}` · " + _red("endpoint", snap.endpoint), departed]))
    parts = [f"*vLLM* `{model}`"]
    if isinstance(snap.health, OpsError):
        parts.append(_red("/health", snap.health))
    else:
        icon = ":large_green_circle:" if snap.health.state == "ready" else ":red_circle:"
        parts.append(f"{icon} {snap.health.state} ({snap.health.latency_s * 1000:.0f} ms)")
    if isinstance(snap.metrics, OpsError):
        parts.append(_red("metrics", snap.metrics))
    else:
        m = snap.metrics
        kv = "-" if m.kv_cache_usage is None else f"{m.kv_cache_usage:.0%}"
        running = "-" if m.running is None else f"{m.running:.0f}"
        waiting = "-" if m.waiting is None else f"{m.waiting:.0f}"
        parts.append(f"running {running} · waiting {waiting} · KV cache {kv}")
    return " · ".join(parts)


def _cost_line(snap: Snapshot) -> str:
    spend = snap.spend
    if spend.error is not None:
        return "*Cost* unknown: the queued resources could not be read"
    partial = " (some zones did not answer)" if spend.zones_failed else ""
    if not spend.resources:
        return f"*Cost* nothing ACTIVE: $0/h{partial}"
    unpriced = [f"`{r.qr.name}` not priced: {r.why}" for r in spend.unpriced]
    if len(unpriced) == len(spend.resources):  # never "$0.00/h" for a resource billing at an unknown price
        return " · ".join([f"*Cost* unknown{partial}", *unpriced])
    bound = "at most " if spend.bounded else ""
    line = f"*Cost* {bound}${spend.usd_per_hour:,.2f}/h · {bound}${spend.usd:,.2f} today (UTC)"
    if unpriced:
        line += " (priced resources only)"
    missing = list(dict.fromkeys(r.why for r in spend.resources if r.usd is not None and r.why))
    return " · ".join([line + partial, *unpriced, *missing])


def _alerts_line(snap: Snapshot) -> str:
    if isinstance(snap.alerts, OpsError):
        return _red("Alerts", snap.alerts)
    mine, gone = snap.alerts, 0
    if not isinstance(snap.listing, OpsError):  # by identity, as /alerts list places them
        answered = set(snap.services.settings.tpu_zones) - set(snap.listing.errors)
        placed = place_open_alerts(mine, snap.listing.resources, answered)
        mine, gone = placed.current, len(placed.gone)
    left_out = f" · {gone} of queued resources that no longer exist: `/alerts list`" if gone else ""
    if not mine:
        return f"*Alerts* none open{left_out}"
    newest = mine[-1]
    return f"*Alerts* {len(mine)} open · newest: {newest.text.splitlines()[0][:150]}{left_out}"


def deployment_lines(snap: Snapshot) -> list[str]:
    """One deployment's resource, vLLM, cost and alert lines (markdown), rendered when its sources came in."""
    return list(snap.lines)


def deployment_blocks(snap: Snapshot) -> list[Block]:
    """One deployment: its name and project, then its lines (`deployment_lines`)."""
    s = snap.services.settings
    return [section(f"*{snap.name}* · project `{s.gcp_project}`\n" + "\n".join(snap.lines))]


def _open_alerts(services: Services, names: list[str], now: datetime) -> dict[str, list[LedgerRow]]:
    since = now - timedelta(days=OPEN_ALERTS_DAYS)
    return AlertLedger.open_alerts_by_deployment(services.store, names, since=since)


def snapshots(deployments: dict[str, Services], now: datetime) -> list[Snapshot]:
    """Every deployment's Snapshot, all sources of all deployments fetched at once, in the given order.

    Each deployment's sources run on its own fan-out pool (`Services.fanout`, FIFO, so a task waiting on an
    earlier one never holds back a task without a thread), whose threads stay for the next command: a
    pool made per /fleet started SOURCES threads per deployment each time, one after the other under the
    interpreter lock (0.28 s before the 50th deployment's first request went out).

    Every zone is listed first, once per reader (`_reader`: the deployments of one project with the same
    credentials share it), before any vLLM call, so no listing waits behind other deployments' vLLM tasks:
    submitted deployment by deployment, the last of 50 left 0.12 s after the first (on a loaded machine)."""
    sharing: dict[int, list[str]] = {}  # the deployments of each state store (usually one for all)
    for name, services in deployments.items():
        sharing.setdefault(id(services.store), []).append(name)
    alerts: dict[int, Future[dict[str, list[LedgerRow]]]] = {}
    for names in sharing.values():
        first = deployments[names[0]]
        alerts[id(first.store)] = first.fanout.submit(_open_alerts, first, names, now)
    listed: dict[tuple[Hashable, str], Future[ZoneListing]] = {}
    for services in deployments.values():
        for zone in dict.fromkeys(services.settings.tpu_zones):
            if (_reader(services), zone) not in listed:
                listing = services.fanout.submit(services.tpu.list_queued_resources, [zone])
                listed[(_reader(services), zone)] = listing
    waits = [
        snapshot(
            services.fanout, name, services, now, alerts[id(services.store)],
            [listed[(_reader(services), zone)] for zone in dict.fromkeys(services.settings.tpu_zones)],
        )
        for name, services in deployments.items()
    ]  # fmt: skip
    return [wait.result() for wait in waits]
