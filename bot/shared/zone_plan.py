"""What the zone data says before a create, a recovery or a capacity search, and the order a search tries
zones in.

The facts are the ones `/tpu zones` shows: the zone's `acceleratorTypes.list`, its preemptible TPU quota
(Cloud Quotas API; flex-start and spot draw on it: "you need sufficient preemptible quota",
https://cloud.google.com/tpu/docs/request-using-flex-start) and the refusals the state store remembers for
(zone, accelerator type, provisioning model). A zone that fails on one of them is named in the preview
with the reason and the zones that do not, before anyone confirms.

Every preview of a change that can create capacity (`/tpu create`, `/tpu find`, `/tpu ensure`, `/tpu reset`,
`/tpu recover`) takes its spend and its warnings from one place, `capacity_preview`: the worst case priced
over every zone it may create in, a change of provisioning model from the resource it replaces, the zone
warnings (not offered, quota 0, a remembered refusal), and the primary or a same-named resource already
running (`already_running` is the refusal of create, find and recover without `--allow-second`). The result
of such a change that went on beside a running TPU says what now bills, from `second_tpu`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

from bot.commands.context import Context
from bot.shared.hints import delete_line
from bot.shared.safety import active_named
from ops.cost import pricing as cost
from ops.cost.spend import SpendPlan, plan_spend
from ops.diagnosis.zonefit import classify
from ops.errors import BadInput, OpsError
from ops.gcp import quotas
from ops.store.state import ZoneFailure
from ops.times import utc_text
from ops.tpu.capacity import CapacitySearch
from ops.tpu.model import CreateSpec, QueuedResourceInfo, primary_among

__all__ = [
    "PREEMPTIBLE_MODELS",
    "STANDARD_MODELS",
    "Billing",
    "CapacityAsk",
    "CapacityPreview",
    "SecondTpu",
    "ZoneFacts",
    "already_running",
    "became_running",
    "capacity_preview",
    "order_zones",
    "quota_family",
    "remembering_refusals",
    "running_beside",
    "second_tpu",
    "starts_second",
    "zone_facts",
    "zone_warnings",
]

PREEMPTIBLE_MODELS = frozenset({"flex-start", "spot"})  # they draw on the preemptible quota
# On-demand and reservations draw on the on-demand (standard) quota:
# https://cloud.google.com/tpu/docs/consumption-options ("Quota type for Cloud TPU API").
STANDARD_MODELS = frozenset({"on-demand", "reserved"})


def quota_family(accelerator: str) -> str:
    """The family in the TPU quota ids of an accelerator type or family.

    Args:
        accelerator: a type ("v6e-8", "v5litepod-4") or a family ("v6e", "v5litepod").

    Returns:
        e.g. "v6e"; "v5e" for v5litepod (its quota ids say V5E), else the type's prefix as given.
    """
    prefix = accelerator.split("-")[0]
    try:
        return cost.family_of(f"{prefix}-1")
    except BadInput:  # a family the price table does not know keeps its own name
        return prefix


@dataclass(frozen=True)
class ZoneFacts:
    """The zone data for one accelerator type and provisioning model.

    Attributes:
        offered: zone -> whether `acceleratorTypes.list` has the type (None: the list could not be read).
        preemptible: zone -> the preemptible quota limit (None: not listed by the Cloud Quotas API).
        remembered: zone -> the refusal remembered in the state store for this type and model.
        quota_error: why the quotas could not be read (then `preemptible` is empty), else None.
        standard: zone -> the on-demand (standard) quota limit, read for on-demand and reserved requests.
    """

    offered: Mapping[str, bool | None]
    preemptible: Mapping[str, int | None]
    remembered: Mapping[str, ZoneFailure]
    quota_error: OpsError | None
    standard: Mapping[str, int | None] = field(default_factory=dict)

    def blockers(
        self, zone: str, accelerator_type: str, provisioning_model: str, *, remembered: bool = True
    ) -> list[str]:
        """Why a request for the type and model in `zone` will be refused, from these facts ([] if none
        is known); `remembered=False` leaves out the refusals remembered in the store."""
        reasons = []
        if self.offered.get(zone) is False:
            reasons.append(f"does not offer {accelerator_type} (acceleratorTypes.list)")
        if provisioning_model in PREEMPTIBLE_MODELS and self.preemptible.get(zone) == 0:
            reasons.append(
                f"has preemptible {quota_family(accelerator_type)} quota 0 ({provisioning_model} draws on it)"
            )
        if provisioning_model in STANDARD_MODELS and self.standard.get(zone) == 0:
            reasons.append(
                f"has on-demand {quota_family(accelerator_type)} quota 0 ({provisioning_model} draws on it)"
            )
        failure = self.remembered.get(zone) if remembered else None
        if failure is not None:
            when = utc_text(failure.at)
            # The stored message starts with the classification's reason ("no quota in zone: <text>").
            reasons.append(
                f"refused {failure.provisioning_model} {failure.accelerator_type} on {when} "
                f"({failure.message.split(':', 1)[0]}; a remembered refusal)"
            )
        return reasons

    def fit(self, zone: str, accelerator_type: str, provisioning_model: str) -> str:
        """The one judgement of a zone's fit, in the words `/tpu zones`, the previews and `/tpu find`'s
        skipped zones all show: "✅ fits" when nothing known refuses the request, else "❌ " and every reason
        (`blockers`, remembered refusals included), e.g. "❌ has preemptible v6e quota 0 (flex-start draws
        on it); refused flex-start v6e-8 on 2026-12-06 05:04 UTC (flex-start not offered; a remembered
        refusal)"."""
        reasons = self.blockers(zone, accelerator_type, provisioning_model)
        return "❌ " + "; ".join(reasons) if reasons else "✅ fits"


@contextmanager
def remembering_refusals(ctx: Context, spec: CreateSpec) -> Iterator[None]:
    """Remember, for the spec's zone, accelerator type and provisioning model, a refusal of the `with`
    body (a create and the wait for its operation) that retrying cannot fix
    (`ops.diagnosis.zonefit.classify`, from
    the fault catalogue: the type or model not offered there, no quota at all), as the capacity search does;
    `/tpu zones` and the create and find previews then show it. The error is raised on, unchanged.
    """
    try:
        yield
    except OpsError as exc:
        verdict = classify(exc)
        if verdict.remember:
            ctx.services.store.remember_zone_failure(
                spec.zone,
                spec.accelerator_type,
                spec.provisioning_model,
                f"{verdict.reason}: {exc.message}"[:1000],
                now=ctx.services.now(),
            )
        raise


def zone_facts(
    ctx: Context, zones: Sequence[str], accelerator_type: str, provisioning_model: str
) -> ZoneFacts:
    """Read the zone data of `zones` (accelerator types per zone in parallel, the quotas once, the store).

    Degrades: a zone whose types cannot be read is unknown (None); quotas that cannot be read leave
    `preemptible` empty and set `quota_error`. Never raises for a backend failure.
    """
    services = ctx.services
    settings = services.settings
    offered = CapacitySearch(services.tpu, services.store).offered(list(zones), accelerator_type)
    standard_id, preemptible_id = quotas.quota_ids(quota_family(accelerator_type))
    preemptible: dict[str, int | None] = {}
    standard: dict[str, int | None] = {}
    quota_error = None
    if provisioning_model in PREEMPTIBLE_MODELS | STANDARD_MODELS:
        try:
            limits = quotas.zone_quotas(
                settings.gcp_project,
                quota_family(accelerator_type),
                api_endpoint=settings.google_api_endpoint,
                timeout_s=settings.google_timeout_s,
            )
        except OpsError as exc:
            quota_error = exc
        else:
            preemptible = {zone: limits.get(zone, {}).get(preemptible_id) for zone in zones}
            standard = {zone: limits.get(zone, {}).get(standard_id) for zone in zones}
    remembered = services.store.zone_failures(accelerator_type, provisioning_model)
    mine = {z: f for z, f in remembered.items() if z in zones}
    return ZoneFacts(offered, preemptible, mine, quota_error, standard)


def zone_warnings(
    ctx: Context, zone: str, accelerator_type: str, provisioning_model: str, instead: str
) -> list[str]:
    """Preview lines for a create or recreate in `zone`: a warning per reason it will be refused, then the
    watched zones (TPU_ZONES) where no reason is known as the alternative; [] when no reason is known.

    Args:
        ctx: the command's context.
        zone, accelerator_type, provisioning_model: the request, e.g. "europe-west4-a", "v6e-8", "spot".
        instead: how the command reaches another zone, e.g. "`/tpu create NAME --zone Z` with Z one of".
    """
    watched = list(dict.fromkeys([zone, *ctx.services.settings.tpu_zones]))
    facts = zone_facts(ctx, watched, accelerator_type, provisioning_model)
    reasons = facts.blockers(zone, accelerator_type, provisioning_model)
    lines = [f":warning: `{zone}` {reason}: the request will likely be refused" for reason in reasons]
    if reasons:
        others = [
            other
            for other in watched[1:]
            if facts.offered.get(other) and not facts.blockers(other, accelerator_type, provisioning_model)
        ]
        lines.append(
            f"*Instead* {instead} " + ", ".join(f"`{z}`" for z in others)
            if others
            else "*Instead* no watched zone is known to take it: see `/tpu zones`"
        )
    if facts.quota_error is not None:
        lines.append(f"_Preemptible quota unknown: {facts.quota_error.message}_")
    return lines


@dataclass(frozen=True)
class CapacityAsk:
    """What a change that can create capacity asks for.

    Attributes:
        names: the queued resource names it creates (with TPU_PRIMARY, checked for one already running).
        accelerator_type, provisioning_model: e.g. "v6e-8", "flex-start".
        zones: every zone it may create in, in order: the worst case is priced over all of them.
        parallel: requests outstanding at once (a search's; 1 for a create).
        hours: the hours the one it keeps may bill (max run duration; None: no fixed end).
        replaces: the queued resource it deletes and asks for again (a recovery), None for a new one: its
            provisioning model, if another, is said; it is never "already running" itself.
    """

    names: frozenset[str]
    accelerator_type: str
    provisioning_model: str
    zones: tuple[str, ...]
    parallel: int = 1
    hours: float | None = None
    replaces: QueuedResourceInfo | None = None


@dataclass(frozen=True)
class CapacityPreview:
    """The money and the warnings of a capacity-creating change's preview.

    Attributes:
        spend: the spend plan over every zone of the ask (`ops.cost.spend.plan_spend`).
        running: the primary or a queued resource of the ask's names that is ACTIVE or provisioning.
        warnings: mrkdwn lines: the change of provisioning model, the zone warnings, what already runs.
    """

    spend: SpendPlan
    running: list[QueuedResourceInfo]
    warnings: list[str]


def running_beside(
    ctx: Context, names: Iterable[str], zones: Sequence[str], apart: QueuedResourceInfo | None = None
) -> list[QueuedResourceInfo]:
    """The primary (TPU_PRIMARY) and the queued resources named in `names` that are ACTIVE or provisioning
    in the watched zones and `zones`, but for `apart` (the resource a change replaces, or the one it
    started): what a second TPU would bill beside.

    Raises:
        OpsError: a zone could not be listed (nothing can be promised about a second TPU).
    """
    settings = ctx.services.settings
    found = active_named(ctx, {*names, settings.tpu_primary}, [*settings.tpu_zones, *zones])
    return [qr for qr in found if apart is None or (qr.name, qr.zone) != (apart.name, apart.zone)]


def starts_second(ctx: Context, qr: QueuedResourceInfo) -> bool:
    """Whether `/tpu recover` of `qr`, or `/tpu create` of its name in its zone once it is deleted, would
    start a second TPU beside one running (`running_beside` of its name and zone, `qr` itself apart), so
    that a hint offering either must add --allow-second for it to be accepted (`already_running`).

    Returns:
        False too when a zone could not be listed: the command offered then says so itself.
    """
    try:
        return bool(running_beside(ctx, {qr.name}, [qr.zone], qr))
    except OpsError:
        return False


def became_running(
    ctx: Context, names: Iterable[str], zones: Sequence[str], apart: QueuedResourceInfo | None = None
) -> None:
    """On Confirm of a change whose preview found nothing running beside it (`running_beside`): refuse if
    something is running now, as /tpu find and /tpu recover do without --allow-second.

    Raises:
        OpsError: "`gemma4-qr` became ACTIVE in `us-east5-a` since the preview", with --allow-second as the
            way on; or a zone could not be listed.
    """
    running = running_beside(ctx, names, zones, apart)
    if running:
        first = running[0]
        raise OpsError(
            f"refused: `{first.name}` became {first.state} in `{first.zone}` since the preview",
            "add --allow-second to go on anyway",
        )


def capacity_preview(
    ctx: Context, ask: CapacityAsk, *, instead: str, facts: ZoneFacts | None = None
) -> CapacityPreview:
    """The spend and warnings every capacity-creating preview shows, from the state read now.

    Args:
        ctx: the command's context.
        ask: what the change may create.
        instead: how the command reaches another zone, for a single-zone ask (see `zone_warnings`); ""
            for a search (each zone that will likely refuse is named, no alternative).
        facts: the zone facts of `ask.zones` when the caller already read them (a search's plan).

    Raises:
        OpsError: a watched zone could not be listed (nothing can be promised about a second TPU).
    """
    spend = plan_spend(ask.accelerator_type, ask.provisioning_model, list(ask.zones), ask.parallel, ask.hours)
    running = running_beside(ctx, ask.names, ask.zones, ask.replaces)
    lines = []
    old = ask.replaces
    if old is not None and old.provisioning_model != ask.provisioning_model:
        lines.append(
            f":warning: *Provisioning model changes*: `{old.name}` was {old.provisioning_model}; this "
            f"requests {ask.provisioning_model}, priced and billed as {ask.provisioning_model}"
        )
    if len(ask.zones) == 1 and instead:
        lines += zone_warnings(ctx, ask.zones[0], ask.accelerator_type, ask.provisioning_model, instead)
    else:
        facts = facts or zone_facts(ctx, ask.zones, ask.accelerator_type, ask.provisioning_model)
        for zone in ask.zones:
            reasons = facts.blockers(zone, ask.accelerator_type, ask.provisioning_model)
            if reasons:
                refused = "a request there will likely be refused"
                lines.append(f":warning: `{zone}` {'; '.join(reasons)}: {refused}")
        if facts.quota_error is not None:
            lines.append(f"_Preemptible quota unknown: {facts.quota_error.message}_")
    if running:
        names = ", ".join(f"`{qr.name}` ({qr.state}, `{qr.zone}`)" for qr in running)
        lines.append(f":warning: *Already running* {names}: a second {ask.accelerator_type} bills beside it.")
    return CapacityPreview(spend, running, lines)


def already_running(ctx: Context, preview: CapacityPreview, what: str, go_on: str) -> BadInput:
    """The refusal of a change that would start a second TPU beside one already running (the preview's
    `running` is not empty): e.g. "the primary `gemma4-qr` is already ACTIVE in `us-east5-a` (v6e-8): a
    search would start a second one (up to $25.92/h more)", offering `go_on` or the delete of the running
    one.

    Args:
        ctx: the command's context.
        preview: the change's preview (its `running` and its spend's highest hourly price).
        what: the change, e.g. "a search", "this create", "this recovery".
        go_on: the same command with `--allow-second`.
    """
    first, rate = preview.running[0], preview.spend.max_usd_per_hour
    bound = "up to" if preview.spend.ceiling else "about"
    more = f" ({bound} ${rate:,.2f}/h more)" if rate is not None else ""
    settings = ctx.services.settings
    primary = (
        "the primary "
        if first is primary_among(preview.running, settings.tpu_primary, settings.tpu_zones)
        else ""
    )
    return BadInput(
        f"{primary}`{first.name}` is already {first.state} in `{first.zone}` "
        f"({first.accelerator_type or 'TPU'}): {what} would start a second one{more}",
        f"to go on anyway: `{go_on}`; or first `{delete_line(ctx, first)}`",
    )


@dataclass(frozen=True)
class Billing:
    """One TPU that bills now.

    Attributes:
        qr: the queued resource, as read. usd_per_hour: its price, USD per hour (None: not priced).
        worst_usd: what it may still bill at worst, USD: to its termination time, or over the hours the
            change asked for (None: no fixed end, or not priced); hours: those hours (None likewise).
        bound: the price's bound, "at most " (a ceiling row), "about " (a substitute) or "" (its own row).
    """

    qr: QueuedResourceInfo
    usd_per_hour: float | None
    worst_usd: float | None
    hours: float | None
    bound: str


@dataclass(frozen=True)
class SecondTpu:
    """What bills after a change started a TPU beside one already running (`second_tpu`).

    Attributes:
        started: the TPU the change started; beside: those that ran already (the primary, the same name).
        delete: the `/tpu delete` of `started` as just read, for when the second one is not wanted.
    """

    started: Billing
    beside: list[Billing]
    delete: str


def second_tpu(
    ctx: Context, started: QueuedResourceInfo, spend: SpendPlan, names: set[str]
) -> SecondTpu | None:
    """What bills now that `started` runs, when the primary or a resource named in `names` was ACTIVE (or
    provisioning) beside it: the preview's "a second TPU bills beside it", said again in the result.

    Args:
        ctx: the command's context.
        started: the queued resource the change made, as read after it.
        spend: the change's spend plan (its price per zone and the hours it may bill: the worst case the
            preview stated).
        names: the names the change asked for (with TPU_PRIMARY, looked for running beside it).

    Returns:
        None when nothing else runs.

    Raises:
        OpsError: a watched zone could not be listed.
    """
    running = running_beside(ctx, names, (started.zone,), started)
    if not running:
        return None
    rate, hours = spend.usd_per_hour.get(started.zone), spend.run_hours
    quote = spend.quotes.get(started.zone)
    worst = rate * hours if rate is not None and hours is not None else None
    mine = Billing(started, rate, worst, hours, quote.bound if quote else "")
    now = ctx.services.now()
    return SecondTpu(mine, [_billing(qr, now) for qr in running], delete_line(ctx, started))


def _billing(qr: QueuedResourceInfo, now: datetime) -> Billing:
    """What `qr`, running, bills from `now`: its live rate and what is left to its termination time."""
    try:
        spend = cost.burn(qr, now)
    except OpsError:  # provisioning, or no price: nothing to state but the resource
        return Billing(qr, None, None, None, "")
    left = (qr.termination_time - now).total_seconds() / 3600 if qr.termination_time else None
    return Billing(qr, spend.usd_per_hour, spend.usd_until_termination, left, spend.quote.bound)


def order_zones(
    zones: Sequence[str],
    preferred: Sequence[str],
    usd_per_hour: Mapping[str, float | None],
    blocked: set[str],
) -> list[str]:
    """The order a capacity search tries zones in: cheapest first (an unpriced zone after every priced
    one), equal prices in `preferred` order (TPU_ZONES), then by name; zones in `blocked` (the zone data
    says they will refuse) last.

    Args:
        zones: the candidate zones (any order, no duplicates).
        preferred: the watched zones, the operators' own order.
        usd_per_hour: zone -> price of one accelerator with the search's model, USD/h (None: unknown).
        blocked: zones expected to refuse (e.g. preemptible quota 0).

    Returns:
        `zones` reordered.
    """
    rank = {zone: index for index, zone in enumerate(preferred)}

    def key(zone: str) -> tuple[bool, bool, float, int, str]:
        price = usd_per_hour.get(zone)
        return (zone in blocked, price is None, price or 0.0, rank.get(zone, len(rank)), zone)

    return sorted(zones, key=key)
