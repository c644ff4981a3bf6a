"""`/tpu zones` (quota and accelerator types per zone) and `/tpu find` (capacity search across zones)."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from bot.commands import (
    Param,
    Role,
    accelerator_type,
    duration,
    int_range,
    registry,
    resource_name,
    zone_name,
)
from bot.context import Context
from bot.handlers.lifecycle import create_spec, default_create_args
from bot.handlers.tpu import resource_line
from bot.render import Reply, blocks_reply, cancel_button, context, header, human_duration, section
from ops import cost, quotas
from ops.capacity import CapacitySearch
from ops.errors import OpsError
from ops.store import ZoneFailure

_STATE_ICONS = {
    "ACTIVE": ":large_green_circle:",
    "deleted": ":wastebasket:",
    "requesting": ":arrow_right:",
    "pending": ":white_circle:",
    "not": ":white_circle:",
    "cancelled": ":no_entry_sign:",
    "failed": ":red_circle:",
    "skipped": ":fast_forward:",
    "leftover": ":warning:",
}


def _icon(state: str) -> str:
    """An icon for a zone's search state: its first word decides; queue states get an hourglass."""
    return _STATE_ICONS.get(state.split(":")[0].split(" ")[0], ":hourglass:")


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


@registry.command(
    "tpu zones",
    "Zones with TPU quota (Cloud Quotas API) and whether each offers the accelerator type",
    Param(
        "type_",
        "family (v6e) or type (v6e-8); default TPU_ACCELERATOR_TYPE",
        flag="--type",
        kind=family,
        metavar="T",
    ),
)
def tpu_zones(ctx: Context, type_: str | None) -> Reply:
    settings = ctx.services.settings
    wanted = type_ or settings.tpu_accelerator_type
    fam = cost.family_of(wanted) if "-" in wanted else wanted
    fam = "v5litepod" if fam == "v5e" else fam
    quota_family = "v5e" if fam == "v5litepod" else fam
    limits = quotas.zone_quotas(
        settings.gcp_project,
        quota_family,
        api_endpoint=settings.google_api_endpoint,
        timeout_s=settings.google_timeout_s,
    )
    zones = sorted(zone for zone, values in limits.items() if any(values.values()))

    def offered(zone: str) -> list[str] | OpsError:
        try:
            return [t for t in ctx.services.tpu.list_accelerator_types(zone) if t.startswith(f"{fam}-")]
        except OpsError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="zones") as pool:
        types = dict(zip(zones, pool.map(offered, zones), strict=True))
    standard_id, preemptible_id = quotas.quota_ids(quota_family)
    lines = []
    for zone in zones:
        quota = (
            f"quota {limits[zone].get(standard_id, 0)} / preemptible {limits[zone].get(preemptible_id, 0)}"
        )
        found = types[zone]
        if isinstance(found, OpsError):
            lines.append(f":red_circle: `{zone}` {quota}: accelerator types unavailable ({found.message})")
            continue
        has = wanted in found if "-" in wanted else bool(found)
        icon = ":white_check_mark:" if has else ":heavy_minus_sign:"
        lines.append(f"{icon} `{zone}` {quota}: {', '.join(found) or f'no {fam} types'}")
    if not lines:
        lines.append(f"No zone has {quota_family} quota in project `{settings.gcp_project}`.")
    return blocks_reply(
        [
            header(f"Zones for {wanted}"),
            section("\n".join(lines)),
            context(
                "Quota ids "
                + f"`{standard_id}` / `{preemptible_id}`; flex-start and spot draw on preemptible quota."
            ),
        ]
    )


_FIND_PARAMS = (
    Param("name", "queued resource name (default TPU_PRIMARY)", kind=resource_name, metavar="NAME"),
    Param(
        "type_",
        "accelerator type (default TPU_ACCELERATOR_TYPE)",
        flag="--type",
        kind=accelerator_type,
        metavar="T",
    ),
    Param(
        "zones",
        "zones to try, comma-separated (default: every zone offering the type)",
        flag="--zones",
        kind=zone_list,
        metavar="a,b",
    ),
    Param(
        "parallel",
        "request in up to K zones at once (default 1)",
        flag="--parallel",
        kind=int_range(1, 16),
        metavar="K",
    ),
    Param("retry_all", "also retry zones remembered as not offering it", flag="--retry-all", switch=True),
    Param(
        "valid_until",
        "how long each zone's request may wait for capacity (default 1h)",
        flag="--valid-until",
        kind=duration,
        metavar="D",
    ),
)


def _plan(
    ctx: Context, name: str | None, type_: str | None, zones: list[str] | None, retry_all: bool
) -> tuple[str, str, list[str] | None, dict[str, ZoneFailure]]:
    """(queued resource name, accelerator type, zones to try or None for all, remembered failures)."""
    settings = ctx.services.settings
    primary = name or settings.tpu_primary
    accelerator = type_ or settings.tpu_accelerator_type
    remembered = {} if retry_all else ctx.services.store.zone_failures(accelerator, "flex-start")
    return primary, accelerator, zones, remembered


def _preview_find(
    ctx: Context,
    name: str | None,
    type_: str | None,
    zones: list[str] | None,
    parallel: int | None,
    retry_all: bool,
    valid_until: timedelta | None,
) -> Reply:
    primary, accelerator, zones, remembered = _plan(ctx, name, type_, zones, retry_all)
    where = ", ".join(f"`{z}`" for z in zones) if zones else "every zone of the project that offers it"
    lines = [
        f"*Find capacity* for `{primary}`: {accelerator}, flex-start (max run 4h), "
        f"{parallel or 1} zone(s) at a time, each request valid for "
        f"{human_duration(valid_until or timedelta(hours=1))}",
        f"*Zones* {where}",
        "The first zone that becomes ACTIVE is kept; every other request is deleted and checked gone.",
    ]
    if remembered:
        skipped = ", ".join(f"`{z}` ({f.message[:60]})" for z, f in sorted(remembered.items()))
        lines.append(f"*Skipped* (remembered as not offered; `--retry-all` to try): {skipped}")
    return blocks_reply([section("\n".join(lines))])


def _progress_reply(ctx: Context, title: str, states: Mapping[str, str], running: bool) -> Reply:
    lines = [f"{_icon(state)} `{zone}` {state}" for zone, state in states.items()]
    blocks = [header(title), section("\n".join(lines) or "starting…")]
    if running:
        blocks.append(cancel_button(ctx.operation_id))
    return blocks_reply(blocks)


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
) -> Reply:
    """Run the search with one progress message (updated in place, with Cancel) and report the outcome."""
    primary, accelerator, zones, _ = _plan(ctx, name, type_, zones, retry_all)
    spec, _startup = create_spec(ctx, default_create_args(primary))
    title = f"Capacity search: {primary} ({accelerator}, flex-start)"
    search = CapacitySearch(
        ctx.services.tpu,
        ctx.services.store,
        poll_s=ctx.services.settings.capacity_poll_s,
        now=ctx.services.now,
    )

    def progress(states: Mapping[str, str]) -> None:
        if ctx.progress is not None:
            ctx.progress.update(_progress_reply(ctx, title, states, running=True))

    result = search.run(
        primary,
        accelerator,
        "flex-start",
        zones,
        parallel=parallel or 1,
        retry_all=retry_all,
        runtime_version=spec.runtime_version,
        max_run_duration=spec.max_run_duration,
        valid_until=valid_until or timedelta(hours=1),
        startup_script=spec.startup_script,
        labels=spec.labels,
        service_account=spec.service_account,
        progress=progress,
        cancel=ctx.cancelled,
    )
    reply = _progress_reply(ctx, title, result.zones, running=False)
    if result.winner is not None:
        outcome = f":white_check_mark: Capacity found in {result.elapsed_s:.0f} s:\n" + resource_line(
            result.winner, ctx.services.now()
        )
    elif result.cancelled:
        outcome = ":no_entry_sign: Cancelled; every request was deleted."
    elif result.error is not None:
        outcome = f":x: {result.error.message}" + (f" _({result.error.hint})_" if result.error.hint else "")
    else:
        outcome = ":x: No zone had capacity; every request was deleted. Try more zones or later."
    if result.leftovers:
        outcome += (
            f"\n:warning: {result.leftovers} request(s) could not be verified deleted: see the zones above."
        )
    reply.blocks.insert(1, section(outcome))
    return blocks_reply(reply.blocks)
