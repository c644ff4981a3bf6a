"""Command lines for hints, built from the registry and the values a command was given, so a refusal can
name the exact command that goes on from the state just read ("the same create with --allow-second"), one
that parses as typed and names no placeholder.
"""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from bot.chat.subjects import CLEARLY_BETTER, CLOSE_RATIO, TYPO_LENGTH
from bot.commands.context import Context
from bot.commands.registry import Registry
from ops.errors import OpsError
from ops.times import duration_word
from ops.tpu.model import QueuedResourceInfo, primary_among

__all__ = ["close_names", "command_line", "delete_line", "has_running_nodes", "not_found_hint"]


def command_line(registry: Registry, name: str, values: Mapping[str, Any]) -> str:
    """ "/NAME positional --flag value --switch" for the registered command `name` with `values`.

    Args:
        registry: the command registry.
        name: the command's words, e.g. "tpu create".
        values: parameter name -> value as the handler received it (None and False are left out; a
            timedelta is written as a duration, e.g. 4h).

    Returns:
        The line with a leading slash, each value shell-quoted.

    Raises:
        KeyError: no command of that name.
    """
    command = next((c for c in registry.commands() if c.name == name), None)
    if command is None:
        raise KeyError(name)
    words = [f"/{command.name}"]
    for param in command.params:
        value = values.get(param.name)
        if value is None or value is False:
            continue
        text = duration_word(value) if isinstance(value, timedelta) else str(value)
        if param.flag is None:
            words.append(shlex.quote(text))
        elif param.switch:
            words.append(param.flag)
        else:
            words += [param.flag, shlex.quote(text)]
    return " ".join(words)


def has_running_nodes(qr: QueuedResourceInfo, *, nodes_read: bool = True) -> bool:
    """Whether deleting `qr` takes nodes down (so `/tpu delete` needs --force): it has nodes and is not
    FAILED, SUSPENDED or ACCEPTED (whose nodes, if any are listed, are already gone). With `nodes_read`
    False (a listing that did not read the nodes) an ACTIVE or PROVISIONING resource's node spec counts."""
    if qr.state in ("FAILED", "SUSPENDED", "ACCEPTED"):
        return False
    if nodes_read:
        return bool(qr.nodes)
    return bool(qr.nodes) or (bool(qr.node_ids) and qr.state in ("ACTIVE", "PROVISIONING", "SUSPENDING"))


def delete_line(ctx: Context, qr: QueuedResourceInfo) -> str:
    """The `/tpu delete` whose preview accepts `qr` as just read: its zone, and --force when it has nodes."""
    values = {"name": qr.name, "zone": qr.zone, "force": has_running_nodes(qr, nodes_read=False)}
    return command_line(ctx.registry, "tpu delete", values)


def close_names(typed: str, known: Iterable[str]) -> list[str]:
    """The known names `typed` may stand for: those equal to it but for case, else those a typo away (a
    length within `bot.chat.subjects.TYPO_LENGTH`, a difflib ratio of at least `CLOSE_RATIO` and within
    `CLEARLY_BETTER` of the best: the thresholds the chat offers "did you mean" at), best first, at most 3.

    Args:
        typed: the name as the user gave it, e.g. "GEMMA4-QR" or "gemma4-q".
        known: the names read now (queued resources, nodes).

    Returns:
        The names to offer; [] when none is close or `typed` is itself known.
    """
    names = list(dict.fromkeys(known))
    if typed in names:
        return []
    same = [name for name in names if name.lower() == typed.lower()]
    if same:
        return same
    ratios = {
        name: difflib.SequenceMatcher(None, typed.lower(), name).ratio()
        for name in names
        if abs(len(name) - len(typed)) <= TYPO_LENGTH
    }
    best = max(ratios.values(), default=0.0)
    close = [name for name, ratio in ratios.items() if ratio >= max(CLOSE_RATIO, best - CLEARLY_BETTER)]
    return sorted(close, key=lambda name: -ratios[name])[:3]


def not_found_hint(ctx: Context, name: str, verb: str, looked_in: list[str]) -> str:
    """What to run when queued resource `name` was not found in `looked_in`, from the watched zones' (and
    `looked_in`'s) listing read now: the same command with the zone where it is; else, when a name there
    is `name` in another case or a typo away (`close_names`), "did you mean `/tpu describe gemma4-qr`?"
    (the same command for it); else `/tpu list --all-zones` (every zone).

    Args:
        ctx: the command's context; name: the queued resource; verb: e.g. "delete" (`/tpu VERB NAME`).
        looked_in: the zones searched.
    """
    zones = list(dict.fromkeys([*ctx.services.settings.tpu_zones, *looked_in]))
    try:
        listing = ctx.services.tpu.list_queued_resources(zones, with_nodes=False)
    except OpsError:  # a hint is best effort: fall back to the general one
        listing = None
    resources = listing.resources if listing else ()
    found = [qr for qr in resources if qr.name == name and qr.zone not in looked_in]
    if found:  # a name is unique per zone only: offer every zone that holds it
        primary = primary_among(resources, ctx.services.settings.tpu_primary, ctx.services.settings.tpu_zones)
        offers = []
        for qr in found:
            line = command_line(ctx.registry, f"tpu {verb}", {"name": name, "zone": qr.zone})
            which = " (the primary)" if qr is primary else ""
            offers.append(
                f"`{qr.zone}`{which} (`{line}`)" if len(found) > 1 else f"`{qr.zone}`{which}: `{line}`"
            )
        return "it is in " + " and in ".join(offers)
    close = close_names(name, [qr.name for qr in resources])
    if close:
        zone_of = {qr.name: qr.zone for qr in resources}
        lines = [
            command_line(
                ctx.registry,
                f"tpu {verb}",
                {"name": other, "zone": None if zone_of[other] in looked_in else zone_of[other]},
            )
            for other in close
        ]
        return "did you mean " + " or ".join(f"`{line}`" for line in lines) + "?"
    return f"no queued resource `{name}` there: `/tpu list --all-zones` lists every zone's"
