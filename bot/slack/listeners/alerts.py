"""Alert buttons (`block_actions`): Delete now, Snooze 1 h, Acknowledge (each carries the alert key);
Recover / Recover by capacity search (value "zone/name"); Keep for N hours (value: the hours).

Delete now, Snooze, Recover and Keep go through the runner like typed commands (`tpu delete NAME --zone Z
--force --created T`, `alerts mute NAME 1h`, `tpu recover NAME --zone Z [--search]`, `alerts mute idle Nh`),
so the clicker's role is checked and destructive ones ask for confirmation with their Confirm button. The
Delete key pins the resource the alert was about (zone, name, create time): a resource deleted and
recreated under the same name since is refused. Acknowledge marks the alert in the ledger and needs the
role of `alerts mute` (it silences the alert too). Each acts on, and checks the clicker's role in, the
deployment the alert belongs to (the one whose ledger recorded its key; for Recover the one whose primary
it is), wherever the alert was posted. A crafted or stale value gets a one-line reply, never silence.
Refusals and errors are shown only to the clicker (ephemeral), never to the channel.
"""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App

import bot.handlers.alerts  # noqa: F401  (declares /alerts on the registry)
from bot.commands.registry import (
    DEPLOYMENT_FLAG,
    Invocation,
    UsageError,
    registry,
    resource_name,
    timestamp,
    zone_name,
)
from bot.commands.runner import Origin, Runner
from bot.oncall.scheduler import AlertScheduler, parse_key
from bot.slack.render import Reply, error_reply, mention, section
from ops.errors import PermissionDenied
from ops.times import rfc3339


def _origin(body: dict[str, Any]) -> Origin:
    container = body.get("container") or {}
    channel = (body.get("channel") or {}).get("id") or container.get("channel_id", "")
    return Origin(
        user_id=(body.get("user") or {}).get("id", ""),
        channel_id=channel,
        response_url=body.get("response_url"),
        ephemeral_errors=True,
    )


def _key(action: dict[str, Any]) -> str:
    return str(action.get("value") or "")


def _on(invocation: Invocation, watcher: AlertScheduler | None, scheduler: AlertScheduler) -> Invocation:
    """`invocation` pinned to the deployment of `watcher` when `scheduler` watches several (None: left to the
    channel, as typed). The flag is written into the command's text, which a confirmation stores and parses
    again on the click."""
    if watcher is None or len(scheduler.watchers) < 2:
        return invocation
    return registry.parse(f"{invocation.text} {DEPLOYMENT_FLAG} {watcher.deployment}")


def register(app: App, runner: Runner, scheduler: AlertScheduler) -> None:
    """Register the alert buttons' listeners on `app`: `alert_delete`, `alert_snooze`, `alert_ack`,
    `alert_recover`, `alert_recover_search` and `alert_keep`."""

    def on_delete(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        origin = _origin(body)
        try:
            zone, name, created = parse_key(_key(action))
            zone, name = zone_name(zone), resource_name(name)
            pinned = rfc3339(timestamp(created))
        except ValueError:
            runner.deliver(
                error_reply("this button does not name a queued resource", "use /tpu delete NAME"),
                origin,
                ephemeral=True,
            )
            return
        invocation = registry.parse(f"tpu delete {name} --zone {zone} --force --created {pinned}")
        runner.submit(_on(invocation, scheduler.owner_of(_key(action)), scheduler), origin)

    def on_snooze(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        origin = _origin(body)
        try:
            _, name, _ = parse_key(_key(action))
            name = resource_name(name)
        except ValueError:
            runner.deliver(error_reply("this alert cannot be snoozed"), origin, ephemeral=True)
            return
        mute = registry.parse(f"alerts mute {name} 1h")
        runner.submit(_on(mute, scheduler.owner_of(_key(action)), scheduler), origin)

    def on_ack(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        origin = _origin(body)
        owner = scheduler.owner_of(_key(action))
        try:
            runner.check_role(origin.user_id, "alerts mute", owner.deployment if owner else None)
        except PermissionDenied as exc:
            message = exc.message.replace("`alerts mute`", "acknowledging an alert")
            runner.deliver(error_reply(message, exc.hint), origin, ephemeral=True)
            return
        row = (owner or scheduler).ledger.acknowledge(_key(action), origin.user_id)
        if row is None:
            runner.deliver(error_reply("this alert is unknown"), origin, ephemeral=True)
            return
        text = f":white_check_mark: Acknowledged by {mention(origin.user_id)}: {row.text}"
        runner.deliver(Reply(text=text, blocks=[section(text)]), origin)

    def on_recover(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        zone, _, name = _key(action).partition("/")
        search = " --search" if action.get("action_id") == "alert_recover_search" else ""
        try:
            invocation = registry.parse(f"tpu recover {name} --zone {zone}{search}")
        except UsageError:
            runner.deliver(error_reply("this alert names no queued resource"), _origin(body), ephemeral=True)
            return
        runner.submit(_on(invocation, scheduler.watcher_of(zone, name), scheduler), _origin(body))

    def on_keep(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        hours, _, key = _key(action).partition(" ")
        if not hours.isdigit():
            runner.deliver(error_reply("this button carries no duration"), _origin(body), ephemeral=True)
            return
        keep = registry.parse(f"alerts mute idle {hours}h")
        runner.submit(_on(keep, scheduler.owner_of(key), scheduler), _origin(body))

    app.action("alert_delete")(on_delete)
    app.action("alert_recover")(on_recover)
    app.action("alert_recover_search")(on_recover)
    app.action("alert_keep")(on_keep)
    app.action("alert_snooze")(on_snooze)
    app.action("alert_ack")(on_ack)
