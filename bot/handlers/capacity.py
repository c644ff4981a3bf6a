"""`/tpu zones` (quota and accelerator types per zone), `/tpu find` (capacity search across zones) and
`/tpu recover` (a dead queued resource brought back, in its zone or through a search)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta

from bot.commands.context import Context
from bot.commands.registry import (
    ACCELERATOR_TYPE,
    SEARCHED_ZONE,
    Param,
    Role,
    accelerator_type,
    duration,
    int_range,
    registry,
    resource_name,
    zone_name,
)
from bot.oncall.followup import watch
from bot.shared.hints import command_line, not_found_hint
from bot.shared.recovery import projected_usd, recover, recovery_request
from bot.shared.safety import check_pins, check_zones, one_operation, pin_of, pins_text
from bot.shared.tpu_requests import create_spec, default_create_args
from bot.shared.zone_plan import (
    CapacityAsk,
    ZoneFacts,
    already_running,
    became_running,
    capacity_preview,
    order_zones,
    quota_family,
    second_tpu,
    zone_facts,
)
from bot.slack.render import Reply, human_duration, plural
from bot.views.cost import spend_lines
from bot.views.lifecycle import RecoveryPreview, recovered, recovery_preview
from bot.views.tpu import find_preview, resource_line, search_progress, search_result, zones_table
from ops.alerts.ledger import identity
from ops.cost import pricing as cost
from ops.cost.spend import plan_spend
from ops.errors import BadInput, NotFound, OpsError
from ops.gcp import quotas
from ops.store.state import ZoneFailure
from ops.tpu.capacity import CapacitySearch, SearchResult
from ops.tpu.model import LIVE_STATES, PROVISIONING_MODELS, QueuedResourceInfo, free_name, primary_among
from ops.tpu.recovery import dead_reason


def zone_list(word: str) -> list[str]:
    """Comma-separated zones, e.g. us-east5-a,asia-northeast1-b."""
    zones = [zone_name(part) for part in word.split(",") if part]
    if not zones:
        raise ValueError("give at least one zone")
    return list(dict.fromkeys(zones))


def family(word: str) -> str:
    """An accelerator family (v6e) or type (v6e-8)."""
    if "-" in word:
        accelerator_type(word)
        return word
    if not word.isalnum() or not word.startswith("v"):
        raise ValueError(f"{word!r} is not an accelerator family (e.g. v6e) or type (e.g. v6e-8)")
    return word


def provisioning_model(word: str) -> str:
    """One of flex-start, spot, on-demand, reserved."""
    if word not in PROVISIONING_MODELS:
        raise ValueError(f"{word!r} is not a provisioning model ({', '.join(PROVISIONING_MODELS)})")
    return word


@registry.command(
    "tpu zones",
    "Zones with TPU quota (Cloud Quotas API), the accelerator types each offers, and whether a request "
    "of the provisioning model fits there, with the reason for each zone that will refuse",
    Param.option("type_", "family (v6e) or type (v6e-8); default TPU_ACCELERATOR_TYPE", family, "T"),
    Param.option(
        "model",
        "provisioning model to check the fit for (default flex-start, as /tpu create)",
        provisioning_model,
        "M",
    ),
    Param.toggle("all_models", "the fit for every provisioning model"),
    exclusive=(("model", "all_models"),),
)
def tpu_zones(ctx: Context, type_: str | None, model: str | None = None, all_models: bool = False) -> Reply:
    """Per zone (those with quota for the family, and the watched ones): its quotas and accelerator types,
    then the fit of a request for the type with the provisioning model (default flex-start), or with every
    model: ✅ when nothing known says it will be refused, else ❌ with each reason (type not offered,
    the quota it draws on is 0, a refusal remembered for this zone, type and model)."""
    settings = ctx.services.settings
    wanted = type_ or settings.tpu_accelerator_type
    quota_fam = quota_family(wanted)
    fam = "v5litepod" if quota_fam == "v5e" else quota_fam
    limits = quotas.zone_quotas(
        settings.gcp_project,
        quota_fam,
        api_endpoint=settings.google_api_endpoint,
        timeout_s=settings.google_timeout_s,
    )
    zones = sorted(
        {zone for zone, values in limits.items() if any(values.values())} | set(settings.tpu_zones)
    )

    def offered(zone: str) -> list[str] | OpsError:
        try:
            return [t for t in ctx.services.tpu.list_accelerator_types(zone) if t.startswith(f"{fam}-")]
        except OpsError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="zones") as pool:
        types = dict(zip(zones, pool.map(offered, zones), strict=True))
    standard_id, preemptible_id = quotas.quota_ids(quota_fam)
    models = list(PROVISIONING_MODELS) if all_models else [model or cost.DEFAULT_MODEL]
    exact = "-" in wanted
    facts = {
        m: ZoneFacts(
            offered={
                z: (wanted in found if exact else bool(found)) if not isinstance(found, OpsError) else None
                for z, found in types.items()
            },
            preemptible={z: limits.get(z, {}).get(preemptible_id) for z in zones},
            remembered=ctx.services.store.zone_failures(wanted, m) if exact else {},
            quota_error=None,
            standard={z: limits.get(z, {}).get(standard_id) for z in zones},
        )
        for m in models
    }
    lines = []
    for zone in zones:
        quota = (
            f"quota {limits.get(zone, {}).get(standard_id, 0)} / "
            f"preemptible {limits.get(zone, {}).get(preemptible_id, 0)}"
        )
        found = types[zone]
        listed = (
            f"accelerator types unavailable ({found.message})"
            if isinstance(found, OpsError)
            else ", ".join(found) or f"no {fam} types"
        )
        fits = [(m, facts[m].fit(zone, wanted, m)) for m in models]
        refused = sum(1 for _, fit in fits if fit.startswith("❌"))
        icon = (
            ":white_check_mark:"
            if not refused
            else ":x:"
            if refused == len(fits)
            else ":large_yellow_circle:"
        )
        if isinstance(found, OpsError):
            icon = ":red_circle:"
        lines.append(f"{icon} `{zone}` {quota}: {listed}")
        for m, fit in fits:
            lines.append(f"    {m}: {fit}")
    if not lines:
        lines.append(f"No zone has {quota_fam} quota in project `{settings.gcp_project}`.")
    scope = (
        "every provisioning model"
        if all_models
        else f"{models[0]} (`--model M` or `--all-models` for others)"
    )
    note = (
        "" if exact else f" For a family, refusals remembered per type are not shown: give `--type {fam}-N`."
    )
    return zones_table(f"Zones for {wanted}: {scope}", lines, (standard_id, preemptible_id), note)


_FIND_PARAMS = (
    Param("name", "queued resource name (default TPU_PRIMARY)", kind=resource_name, metavar="NAME"),
    ACCELERATOR_TYPE,
    Param.option(
        "zones", "zones to try, comma-separated (default: every zone offering the type)", zone_list, "a,b"
    ),
    Param.option(
        "parallel", "request in up to K zones at once (default CAPACITY_PARALLEL)", int_range(1, 16), "K"
    ),
    Param.toggle("retry_all", "also retry zones remembered as not offering it"),
    Param.option(
        "valid_until", "how long each zone's request may wait for capacity (default 1h)", duration, "D"
    ),
    Param.toggle(
        "allow_second", "go on although the name or the primary is already ACTIVE (a second one bills too)"
    ),
)


@dataclass(frozen=True)
class _FindPlan:
    """What a search will do: its name (the same in every zone), type, the zones tried (in order, with
    `order` saying why) and those skipped, what the zone data says will refuse (zone -> reasons), the
    zone data itself (for the preview's warnings), the zones skipped because a resource of the name is
    there (zone -> it), and the live resource whose name the search's was derived from (None: the name
    was free, or given)."""

    name: str
    accelerator: str
    tried: list[str]
    remembered: dict[str, ZoneFailure]
    parallel: int
    order: str
    blocked: dict[str, list[str]]
    facts: ZoneFacts
    existing: dict[str, QueuedResourceInfo]
    named_after: QueuedResourceInfo | None


def _plan(
    ctx: Context,
    name: str | None,
    type_: str | None,
    zones: list[str] | None,
    retry_all: bool,
    parallel: int | None,
) -> _FindPlan:
    """Resolve the search's zones: the given ones in the given order (each checked: known, offers the
    type), else every zone offering the type, in `order_zones` order; remembered permanent failures are
    skipped unless `retry_all`. After a confirmation the zones are tried in the order previewed.

    Raises:
        BadInput: an unknown zone, a zone not offering the type, or no zone offering it at all.
    """
    settings = ctx.services.settings
    accelerator = type_ or settings.tpu_accelerator_type
    if zones:
        check_zones(ctx, zones, accelerator)
        candidates = list(zones)
    else:
        candidates = CapacitySearch(ctx.services.tpu, ctx.services.store).candidate_zones(accelerator)
        if not candidates:
            raise BadInput(
                f"no zone of project {settings.gcp_project} offers accelerator type {accelerator}",
                "check the type with /tpu zones",
            )
    facts = zone_facts(ctx, candidates, accelerator, "flex-start")
    remembered = {} if retry_all else dict(facts.remembered)
    blocked = {}
    for zone in candidates:
        reasons = facts.blockers(zone, accelerator, "flex-start", remembered=False)
        if reasons:
            blocked[zone] = reasons
    if zones:
        order = "in the order given"
    else:
        prices = plan_spend(accelerator, "flex-start", candidates, 1, None).usd_per_hour
        candidates = order_zones(candidates, settings.tpu_zones, prices, set(blocked))
        order = "cheapest first, equal prices in TPU_ZONES order" + (
            ", zones expected to refuse last" if blocked else ""
        )
    named = _search_name(ctx, name, [*settings.tpu_zones, *candidates])
    existing = {qr.zone: qr for qr in named.listed if qr.name == named.name and qr.zone in candidates}
    tried = [zone for zone in candidates if zone not in remembered]
    previewed = _previewed(ctx)
    if previewed is not None:  # confirmed: the zones previewed, in that order, and no other (their pins
        tried = [zone for zone in previewed[1] if zone in tried]  # say if the name appeared in one since)
    else:  # never a zone where the name exists: its create would fail, or make a second of the name
        tried = [zone for zone in tried if zone not in existing]
    skipped = {zone: failure for zone, failure in remembered.items() if zone in candidates}
    at_once = parallel or settings.capacity_parallel
    return _FindPlan(
        named.name, accelerator, tried, skipped, at_once, order, blocked, facts, existing, named.named_after
    )


@dataclass(frozen=True)
class _SearchName:
    """The name a search's requests carry (`name`), the live resource it was derived from (None: the name
    was free, or given), and every queued resource listed while choosing it."""

    name: str
    named_after: QueuedResourceInfo | None
    listed: tuple[QueuedResourceInfo, ...]


def _search_name(ctx: Context, name: str | None, zones: list[str]) -> _SearchName:
    """The name every request of the search carries, from the listing of `zones` read now.

    A second TPU beside a live one needs a name of its own: when no name is given and a queued resource
    named TPU_PRIMARY is live (`LIVE_STATES`) in any zone, the search takes the first free
    `TPU_PRIMARY-N` (`free_name`, against every queued resource and node name listed), so that the
    primary stays the one resource of its name. After a confirmation the previewed name is kept (its
    pins are checked again before anything is created).

    Raises:
        OpsError: a zone could not be listed (no name can be promised free).
        BadInput: a given name is live in a zone: a second of the same name would be two resources
            of one name, so the refusal offers a free one.
    """
    settings = ctx.services.settings
    listing = ctx.services.tpu.list_queued_resources(list(dict.fromkeys(zones)), with_nodes=False)
    if listing.errors:
        zone, error = next(iter(listing.errors.items()))
        raise OpsError(f"cannot read {zone}: {error.message}", "try again shortly")
    wanted = name or settings.tpu_primary
    live = primary_among(
        [qr for qr in listing.resources if qr.state in LIVE_STATES], wanted, settings.tpu_zones
    )
    previewed = _previewed(ctx)
    if previewed is not None:
        return _SearchName(previewed[0], live if previewed[0] != wanted else None, listing.resources)
    if live is None:
        return _SearchName(wanted, None, listing.resources)
    taken = {qr.name for qr in listing.resources} | {node for qr in listing.resources for node in qr.node_ids}
    free = free_name(wanted, taken)
    if name is not None:
        raise BadInput(
            f"`{name}` is already {live.state} in `{live.zone}`: a search for it would make a second "
            f"queued resource of the same name in another zone",
            f"give the second one a name of its own, e.g. `/tpu find {free} --allow-second`",
        )
    return _SearchName(free, live, listing.resources)


def _previewed(ctx: Context) -> tuple[str, list[str]] | None:
    """The name and the zones (in their order) of the confirmed preview's pins (None when not run from
    a preview)."""
    try:
        pins = json.loads(ctx.confirmed_plan or "")["pins"]
        return pins[0]["name"], [pin["zone"] for pin in pins]
    except (ValueError, KeyError, TypeError, IndexError):
        return None


def _names(plan: _FindPlan, ctx: Context) -> set[str]:
    """The queued resource name the search makes in every zone, and the primary's."""
    return {plan.name, ctx.services.settings.tpu_primary}


def _pins(ctx: Context, plan: _FindPlan) -> list[dict[str, str]]:
    """The search's targets as pins: per tried zone, the name it will request there (absent or not)."""
    listing = ctx.services.tpu.list_queued_resources(plan.tried, with_nodes=False)
    if listing.errors:
        zone, error = next(iter(listing.errors.items()))
        raise OpsError(f"cannot read {zone}: {error.message}", "try again shortly")
    found = {(qr.zone, qr.name): qr for qr in listing.resources}
    pins = []
    for zone in plan.tried:
        pins.append(pin_of(found.get((zone, plan.name)), zone, plan.name))
    return pins


def _preview_find(
    ctx: Context,
    name: str | None,
    type_: str | None,
    zones: list[str] | None,
    parallel: int | None,
    retry_all: bool,
    valid_until: timedelta | None,
    allow_second: bool,
) -> Reply:
    plan = _plan(ctx, name, type_, zones, retry_all, parallel)
    given = {
        "name": name, "type_": type_, "zones": ",".join(zones) if zones else None, "parallel": parallel,
        "retry_all": retry_all, "valid_until": valid_until, "allow_second": allow_second,
    }  # fmt: skip
    if not plan.tried and plan.existing:
        where = ", ".join(f"`{zone}` ({qr.state})" for zone, qr in sorted(plan.existing.items()))
        raise BadInput(
            f"`{plan.name}` already exists in every zone left to try for {plan.accelerator}: {where}",
            "give the search another name (`/tpu find NAME`), or other zones (`--zones a,b`)",
        )
    if not plan.tried:
        raise BadInput(
            f"every zone for {plan.accelerator} is remembered as not offering flex-start for it",
            f"to try them again: `{command_line(ctx.registry, 'tpu find', {**given, 'retry_all': True})}`",
        )
    spec, _ = create_spec(ctx, default_create_args(plan.name))
    hours = spec.max_run_duration.total_seconds() / 3600 if spec.max_run_duration else None
    ask = CapacityAsk(
        frozenset({plan.name}), plan.accelerator, "flex-start", tuple(plan.tried), plan.parallel, hours
    )
    preview = capacity_preview(ctx, ask, instead="", facts=plan.facts)
    spend = preview.spend
    if preview.running and not allow_second:
        go_on = command_line(ctx.registry, "tpu find", {**given, "allow_second": True})
        raise already_running(ctx, preview, "a search", go_on)
    lines = [
        f"*Find capacity* for `{plan.name}`: {plan.accelerator}, flex-start (max run "
        f"{human_duration(spec.max_run_duration)}), {plural(spend.at_once, 'zone')} at a time, each request "
        f"valid for {human_duration(valid_until or timedelta(hours=1))}",
        f"*Zones tried, in order* ({plan.order}) " + ", ".join(f"`{z}`" for z in plan.tried),
        *spend_lines(spend, "flex-start"),
        f"Every request is named `{plan.name}` (a name is unique per zone){_named_why(plan)}; the first zone "
        "that becomes ACTIVE is kept, every other request this search made (labelled with its id) is deleted "
        "and checked gone.",
        *preview.warnings,
    ]
    if plan.existing:
        there = " · ".join(f"`{zone}` ({qr.state})" for zone, qr in sorted(plan.existing.items()))
        lines.append(f"*Not tried* (`{plan.name}` exists there, a name is unique per zone): {there}")
    if plan.remembered:  # in /tpu zones' words: one judgement of a zone's fit
        skipped = " · ".join(
            f"`{z}` {plan.facts.fit(z, plan.accelerator, 'flex-start')}" for z in sorted(plan.remembered)
        )
        lines.append(f"*Skipped* (`--retry-all` to try): {skipped}")
    reply = find_preview(lines)
    reply.plan = pins_text(_pins(ctx, plan))
    return reply


def _named_why(plan: _FindPlan) -> str:
    """Why the search's name is not the primary's, when it was derived (else "")."""
    live = plan.named_after
    if live is None:
        return ""
    return (
        f", not `{live.name}`: that is the primary, {live.state} in `{live.zone}`, and a second TPU beside "
        f"it gets a name of its own (give `NAME` to choose it)"
    )


def _recheck(ctx: Context, plan: _FindPlan, allow_second: bool) -> None:
    """On Confirm, with the name held: refuse if the previewed names changed or a primary became ACTIVE."""
    check_pins(ctx, _pins(ctx, plan), "tpu find")
    if not allow_second:
        became_running(ctx, _names(plan, ctx), plan.tried)


@registry.command(
    "tpu find",
    "Find TPU capacity: request in several zones, keep the first ACTIVE, delete the rest",
    *_FIND_PARAMS,
    role=Role.OPERATOR,
    changes_infra=True,
    preview=_preview_find,
)
def tpu_find(
    ctx: Context,
    name: str | None,
    type_: str | None,
    zones: list[str] | None,
    parallel: int | None,
    retry_all: bool,
    valid_until: timedelta | None,
    allow_second: bool,
) -> Reply:
    """Run the search with one progress message (updated in place, with Cancel) and report the outcome.

    The name is held for the whole search (a second search or create of it is refused); what was
    previewed (the names per zone) is checked again first.
    """
    plan = _plan(ctx, name, type_, zones, retry_all, parallel)
    spec, _startup = create_spec(ctx, default_create_args(plan.name))
    title = f"Capacity search: {plan.name} ({plan.accelerator}, flex-start)"
    search = CapacitySearch(
        ctx.services.tpu,
        ctx.services.store,
        poll_s=ctx.services.settings.capacity_poll_s,
        now=ctx.services.now,
    )

    def progress(states: Mapping[str, str]) -> None:
        if ctx.progress is not None:
            ctx.progress.update(search_progress(title, states, ctx.operation_id))

    with one_operation(ctx, "search", plan.name, f"tpu find {plan.name}") as operation_id:
        _recheck(ctx, plan, allow_second)
        result = search.run(
            plan.name,
            plan.accelerator,
            "flex-start",
            plan.tried,
            parallel=plan.parallel,
            retry_all=True,  # the plan already skipped the remembered zones
            runtime_version=spec.runtime_version,
            max_run_duration=spec.max_run_duration,
            valid_until=valid_until or timedelta(hours=1),
            startup_script=spec.startup_script,
            labels=spec.labels,
            service_account=spec.service_account,
            ssh_keys=spec.ssh_keys,
            progress=progress,
            cancel=ctx.cancelled,
            search_id=operation_id,
            user_id=ctx.user_id,
            channel_id=ctx.channel_id,
        )
    final = search_result(title, result.zones, _outcome(ctx, result), _unresolved(ctx, plan.name, result))
    watch(ctx, final)
    return final


def _outcome(ctx: Context, result: SearchResult) -> str:
    """The search's outcome in words; "every request ... was deleted" only when each one was seen gone."""
    deleted = (
        "every request this search made was deleted"
        if result.all_deleted
        else "the requests seen were deleted, but not every request is accounted for (below)"
    )
    if result.winner is not None:
        outcome = f":white_check_mark: Capacity found in {result.elapsed_s:.0f} s:\n" + resource_line(
            result.winner, ctx.services.now()
        )
    elif result.cancelled:
        outcome = f":no_entry_sign: Cancelled; {deleted}."
    elif result.error is not None:
        outcome = f":x: {result.error.message}" + (f" _({result.error.hint})_" if result.error.hint else "")
    elif result.all_deleted:
        outcome = f":x: No zone had capacity; {deleted}. Try later."
    else:  # an unanswered create may have found capacity after all
        outcome = f":x: No request became ACTIVE while the search ran; {deleted}."
    for note in result.left_alone:
        outcome += f"\n:shield: {note}"
    if result.leftovers:
        outcome += (
            f"\n:warning: {plural(result.leftovers, 'request')} could not be verified deleted: see the zones "
            "above; the bot deletes them when it can and says so here."
        )
    return outcome


def _unresolved(ctx: Context, name: str, result: SearchResult) -> dict[str, str]:
    """Per zone whose create was ambiguous and never seen, by request id: what is not known, and what the
    bot does about it (reconciliation edits the line to what it finds)."""
    settings = ctx.services.settings
    every = human_duration(timedelta(seconds=settings.reconcile_interval_s))
    watch_for = human_duration(timedelta(seconds=settings.ambiguous_create_watch_s))
    return {
        request_id: f"`{name}` in `{zone}`: its create got no clear answer and the request has not appeared, "
        f"so it may still be made. If it appears it is deleted (it carries this search's label "
        f"`{request_id}`); the bot looks every {every} for {watch_for} and says here what it found"
        for zone, request_id in result.unresolved.items()
    }


def _dead(ctx: Context, name: str | None, zone: str | None) -> tuple[QueuedResourceInfo, str]:
    settings = ctx.services.settings
    target = name or settings.tpu_primary
    zones = [zone] if zone else list(settings.tpu_zones)
    try:
        qr = ctx.services.tpu.get_queued_resource(target, zones)
    except NotFound as exc:
        exc.hint = not_found_hint(ctx, target, "recover", zones)
        raise
    reason = dead_reason(qr)
    if reason is None:
        raise BadInput(
            f"nothing to recover: `{qr.name}` is {qr.state} and its nodes are not preempted",
            f"see it with `/tpu describe {qr.name} --zone {qr.zone}`",
        )
    return qr, reason


def _recovery_ask(ctx: Context, qr: QueuedResourceInfo, search: bool) -> CapacityAsk:
    """What the recovery of `qr` may create: its name, type and the model and hours it requests
    (`recovery_request`), in its zone or, searching, every watched zone; it replaces `qr`."""
    model, hours = recovery_request(qr, search=search)
    zones = tuple(ctx.services.settings.tpu_zones) if search else (qr.zone,)
    return CapacityAsk(frozenset({qr.name}), qr.accelerator_type, model, zones, 1, hours, qr)


def _preview_recover(
    ctx: Context, name: str | None, zone: str | None, search: bool, allow_second: bool
) -> Reply:
    """The recovery's preview: what it deletes and asks for, its worst-case spend over every zone it may
    create in, and the capacity warnings every create shows (a change of provisioning model, the zones).
    A recovery that would start a second TPU beside the primary already running is refused as `/tpu create`
    and `/tpu find` refuse it (`already_running`), unless `allow_second`.

    Raises:
        BadInput: nothing to recover; the primary runs and `allow_second` is off (the hint offers the same
            command with --allow-second, or the delete of the running one).
    """
    qr, reason = _dead(ctx, name, zone)
    ask = _recovery_ask(ctx, qr, search)
    zones = list(ctx.services.settings.tpu_zones)
    second = " --allow-second" if allow_second else ""  # the way on beside a running TPU, as given
    instead = "" if search else f"`/tpu recover {qr.name} --search{second}` (flex-start) or `/tpu create` in"
    checked = capacity_preview(ctx, ask, instead=instead)
    if checked.running and not allow_second:
        given = {"name": name, "zone": zone, "search": search, "allow_second": True}
        raise already_running(ctx, checked, "this recovery", command_line(ctx.registry, "tpu recover", given))
    usd: float | None = None
    unpriced = ""
    missing: list[str] = []
    dearest = qr.zone
    try:
        usd, plan = projected_usd(qr, search_zones=zones if search else ())
        missing = list(plan.missing)
        dearest = max(plan.usd_per_hour, key=lambda z: plan.usd_per_hour[z] or 0.0)
    except BadInput as exc:
        unpriced = exc.message
    preview = RecoveryPreview(
        qr, reason, search, zones, ask.provisioning_model, ask.hours, usd, unpriced, missing,
        checked.warnings, ctx.services.now(), dearest,
    )  # fmt: skip
    reply = recovery_preview(preview)
    reply.plan = f"{identity(qr)}|{reason}|{search}"
    return reply


@registry.command(
    "tpu recover",
    "Recover a dead queued resource: delete it and create it again (or search the watched zones)",
    Param("name", "queued resource (default TPU_PRIMARY)", kind=resource_name, metavar="NAME"),
    SEARCHED_ZONE,
    Param.toggle("search", "run the capacity search over TPU_ZONES instead"),
    Param.toggle("allow_second", "go on although the primary is already ACTIVE (a second one bills too)"),
    role=Role.ADMIN,
    changes_infra=True,
    preview=_preview_recover,
)
def tpu_recover(ctx: Context, name: str | None, zone: str | None, search: bool, allow_second: bool) -> Reply:
    """Carry out the confirmed recovery; refuse if the resource changed since the confirmation, or the
    primary became ACTIVE since (without `allow_second`). The result says what bills when a second TPU now
    runs beside the primary (`second_tpu`)."""
    qr, reason = _dead(ctx, name, zone)
    if f"{identity(qr)}|{reason}|{search}" != ctx.confirmed_plan:
        raise OpsError(f"`{qr.name}` changed since the confirmation", f"run /tpu recover {qr.name} again")
    ask = _recovery_ask(ctx, qr, search)
    if not allow_second:
        became_running(ctx, ask.names, ask.zones, qr)
    done = recover(ctx, qr, search=search)
    try:
        fresh = ctx.services.tpu.get_queued_resource(qr.name, list(ask.zones))
    except NotFound:  # an ambiguous create, said in `done`
        return recovered(done)
    spend = plan_spend(ask.accelerator_type, ask.provisioning_model, list(ask.zones), 1, ask.hours)
    return recovered(done, second_tpu(ctx, fresh, spend, {qr.name}))
