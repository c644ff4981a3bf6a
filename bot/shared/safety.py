"""What every changing `/tpu` command shares: one operation per name (a lease in the state store, refused
with who holds it), creates written down before they are sent and carrying ownership labels, and pins of
what a confirmation showed (re-checked on the click): queued resources, and the SSH target of `/vllm`'s
container commands."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime

from bot.commands.context import Context
from bot.slack.render import mention
from ops.errors import BackendTimeout, BackendUnavailable, BadInput, NotFound, OpsError
from ops.store.state import OperationBusy
from ops.times import shown_time, utc_text
from ops.tpu.api import unknown_zone
from ops.tpu.model import CreateSpec, QueuedResourceInfo, primary_among
from ops.tpu.ownership import (
    CreateOutcome,
    create_owned,
    hold_operation,
    labels_of,
    new_request_id,
    operation_keys,
    ownership_labels,
    record_ambiguous,
    record_sending,
)


@contextmanager
def one_operation(ctx: Context, scope: str, name: str, command: str) -> Iterator[str]:
    """Hold the name for this command while the block runs; yields the operation's id.

    Args:
        scope: the zone the command changes, or "search" (find, ensure: any zone).
        command: the command line, shown to whoever is refused.

    Raises:
        OperationBusy: another running request holds the name (names who started it and when).
    """
    services = ctx.services
    operation_id = ctx.operation_id or new_request_id()
    keys = operation_keys(services.settings.gcp_project, scope, name)
    store, ttl_s = services.store, services.settings.operation_lease_ttl_s
    try:
        with hold_operation(store, keys, operation_id, ctx.user_id, command, now=services.now, ttl_s=ttl_s):
            yield operation_id
    except OperationBusy as exc:  # name the holder with a live mention (the gateway escapes a typed one)
        raise OperationBusy(exc.holder, mention(exc.holder.user_id)) from None


def create_labelled(ctx: Context, spec: CreateSpec, *, operation_id: str, kind: str) -> CreateOutcome:
    """Send a create with the ownership labels, written down first; an ambiguous answer is read back.

    Returns:
        The CreateOutcome; the in-flight record says "created" unless the request was not seen yet (then
        it stays open, "sending", for reconciliation to look for it).

    Raises:
        NameTaken: the name belongs to a resource this request did not make.
        BackendTimeout, BackendUnavailable: ambiguous, and it could not be read back (the record stays
            open: reconciliation looks for it by label).
        OpsError: the create was refused (the record says "failed").
    """
    services = ctx.services
    request_id = new_request_id()
    owned = replace(spec, labels=labels_of(spec.labels, ownership_labels(request_id, ctx.user_id)))
    sent_at = services.now()
    record_sending(
        services.store, owned, request_id=request_id, operation_id=operation_id, kind=kind,
        project=services.settings.gcp_project, user_id=ctx.user_id, channel_id=ctx.channel_id, now=sent_at,
    )  # fmt: skip
    try:
        outcome = create_owned(services.tpu, owned, request_id, sent_at)
    except (BackendTimeout, BackendUnavailable) as exc:  # ambiguous, and not read back: it may exist
        record_ambiguous(services.store, request_id, exc, now=services.now())
        raise
    except OpsError as exc:
        services.store.update_inflight(request_id, "failed", now=services.now(), note=exc.message)
        raise
    if outcome.operation is not None or outcome.resource is not None:
        services.store.update_inflight(request_id, "created", now=services.now())
    elif outcome.ambiguous is not None:
        record_ambiguous(services.store, request_id, outcome.ambiguous, now=services.now())
    return outcome


# ---- pins: what a confirmation showed, checked again on Confirm


def pin_of(qr: QueuedResourceInfo | None, zone: str = "", name: str = "") -> dict[str, str]:
    """A pin of one target: its zone, name, create time and state ("absent" when it does not exist)."""
    if qr is None:
        return {"zone": zone, "name": name, "created": "", "state": "absent"}
    created = qr.create_time.isoformat() if qr.create_time else ""
    return {"zone": qr.zone, "name": qr.name, "created": created, "state": qr.state}


def pins_text(pins: list[dict[str, str]]) -> str:
    """The pins as the confirmation's plan (a JSON list, stored with the confirmation)."""
    return json.dumps({"pins": pins}, sort_keys=True)


def check_pins(ctx: Context, current: list[dict[str, str]], command: str) -> None:
    """Refuse when what the confirmation showed (`ctx.confirmed_plan`) differs from `current`.

    A change of state is allowed where only the state moved forward in the same resource (a WAITING
    request that became ACTIVE is still the same request); a different create time (deleted and recreated
    under the same name), a resource that appeared or vanished, is refused with what changed.

    Raises:
        OpsError: the pin differs (the message names each difference); or the confirmation carries no pin.
    """
    if not ctx.confirmed_plan:
        return  # not run through a confirmation (e.g. the console's direct call in tests of handlers)
    try:
        pinned = json.loads(ctx.confirmed_plan)["pins"]
    except (ValueError, KeyError, TypeError):
        raise OpsError("this confirmation carries no pin of its target", f"run /{command} again") from None
    changes = []
    for before, now in zip(pinned, current, strict=False):
        where = f"`{before['name']}` in `{before['zone']}`"
        if before["state"] == "absent" and now["state"] != "absent":
            changes.append(f"{where} now exists ({now['state']}, created {shown_time(now['created'])})")
        elif before["state"] != "absent" and now["state"] == "absent":
            changes.append(f"{where} no longer exists")
        elif before["created"] != now["created"]:
            # Two creates of one name may share a minute: their times are shown to the second.
            then, since = (
                shown_time(before["created"], seconds=True),
                shown_time(now["created"], seconds=True),
            )
            changes.append(f"{where} was recreated (created {then} when previewed, now {since})")
        elif before["state"] != now["state"] and not _moved_on(before["state"], now["state"]):
            changes.append(f"{where} went from {before['state']} to {now['state']}")
    if len(pinned) != len(current):
        changes.append("the set of targets changed")
    if changes:
        raise OpsError(
            "refused: the target changed since the preview: " + "; ".join(changes),
            f"look again with /{command}",
        )


def ssh_pin_text(pin: dict[str, str]) -> str:
    """An SSH target (`Services.ssh_target`) as the confirmation's plan."""
    return json.dumps({"ssh": pin}, sort_keys=True)


def check_ssh_pin(ctx: Context, current: dict[str, str], command: str) -> None:
    """Refuse when the SSH target a confirmation showed is not the one now: another address, another
    node, or the same node recreated (another create time), as `check_pins` does for queued resources.

    Raises:
        OpsError: the target changed (each difference named); or the confirmation carries no SSH pin.
    """
    if not ctx.confirmed_plan:
        return  # not run through a confirmation (the console's direct call in tests of handlers)
    try:
        pinned = json.loads(ctx.confirmed_plan)["ssh"]
    except (ValueError, KeyError, TypeError):
        raise OpsError("this confirmation carries no pin of its target", f"run /{command} again") from None
    changes = []
    if pinned.get("node") != current.get("node"):
        changes.append(
            f"the VM is now node `{current.get('node') or '?'}` (was `{pinned.get('node') or '?'}`)"
        )
    elif pinned.get("created") != current.get("created"):
        then = shown_time(pinned.get("created", ""), seconds=True)
        since = shown_time(current.get("created", ""), seconds=True)
        changes.append(
            f"node `{current.get('node')}` was recreated (created {then} when previewed, now {since})"
        )
    if pinned.get("host") != current.get("host"):
        changes.append(f"its address changed from `{pinned.get('host')}` to `{current.get('host')}`")
    if changes:
        raise OpsError(
            "refused: the target changed since the preview: " + "; ".join(changes) + "; nothing was sent",
            f"look again with /{command}",
        )


# Natural progress of one request: waiting -> provisioning -> active. Anything else is a change.
_ORDER = ("ACCEPTED", "WAITING_FOR_RESOURCES", "CREATING", "PROVISIONING", "ACTIVE")


def _moved_on(before: str, after: str) -> bool:
    return before in _ORDER and after in _ORDER and _ORDER.index(after) >= _ORDER.index(before)


def current_pin(ctx: Context, name: str, zone: str) -> dict[str, str]:
    """The pin of `name` in `zone` now (absent when not found)."""
    try:
        return pin_of(ctx.services.tpu.get_queued_resource(name, [zone]))
    except NotFound:
        return pin_of(None, zone, name)


def now_text(moment: datetime | None) -> str:
    """A create time for people (`utc_text`), "unknown" when there is none."""
    return utc_text(moment) if moment else "unknown"


# ---- previews: refusals before Confirm


def check_zones(ctx: Context, zones: list[str], accelerator_type: str) -> None:
    """Refuse unknown zones, and zones that do not offer the accelerator type, before anything is shown.

    Raises:
        BadInput: a zone is not a location of the project, or does not offer the type (the hint names
            where the type is offered, from the zones that could be read).
        OpsError: the locations cannot be listed.
    """
    tpu = ctx.services.tpu
    known = set(tpu.list_zones())
    unknown = [zone for zone in zones if zone not in known]
    if unknown:
        raise unknown_zone(ctx.services.settings.gcp_project, unknown)
    missing = []
    for zone in zones:
        try:
            offered = tpu.list_accelerator_types(zone)
        except BadInput:  # a location listed a moment ago and gone now (ops.tpu.api.unknown_zone)
            missing.append(f"{zone} (unknown)")
            continue
        if accelerator_type not in offered:
            families = sorted({t for t in offered if t.split("-")[0] == accelerator_type.split("-")[0]})
            missing.append(f"{zone} (offers {', '.join(families) or 'no such family'})")
    if missing:
        raise BadInput(
            f"accelerator type {accelerator_type} is not offered in {', '.join(missing)}",
            f"see where it is offered with /tpu zones --type {accelerator_type}",
        )


def is_primary(ctx: Context, qr: QueuedResourceInfo) -> bool:
    """Whether `qr` is the deployment's primary: one resource, by zone and name (`primary_among` the
    watched zones and `qr`'s, listed now), never by name alone (a name is unique per zone only).
    A listing that fails leaves the name alone to judge by."""
    settings = ctx.services.settings
    if qr.name != settings.tpu_primary:
        return False
    zones = list(dict.fromkeys([*settings.tpu_zones, qr.zone]))
    try:
        listing = ctx.services.tpu.list_queued_resources(zones, with_nodes=False)
    except OpsError:
        return True
    primary = primary_among(listing.resources, settings.tpu_primary, settings.tpu_zones)
    return primary is None or (primary.zone, primary.name) == (qr.zone, qr.name)


def active_named(ctx: Context, names: set[str], zones: list[str]) -> list[QueuedResourceInfo]:
    """Queued resources named in `names` that are ACTIVE (or on their way: provisioning) in `zones`.

    Raises:
        OpsError: a zone could not be listed (the preview cannot promise there is no second one).
    """
    listing = ctx.services.tpu.list_queued_resources(list(dict.fromkeys(zones)), with_nodes=False)
    if listing.errors:
        zone, error = next(iter(listing.errors.items()))
        raise OpsError(
            f"cannot check what already runs: listing {zone} failed: {error.message}", "try again shortly"
        )
    return [qr for qr in listing.resources if qr.name in names and qr.state in ("ACTIVE", "PROVISIONING")]
