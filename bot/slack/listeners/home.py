"""The App Home tab: the live dashboard (the same data as `/tpu status`, or `/fleet` with several
deployments) and the open alerts, rebuilt each time a user opens it (`app_home_opened`, then
`views.publish`)."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt import App

from bot.commands.registry import Registry
from bot.commands.runner import Runner
from bot.oncall.scheduler import AlertScheduler
from bot.slack.gateway import SlackDeliveryError
from bot.slack.render import Block, context, divider, header, section
from ops.errors import PermissionDenied

log = logging.getLogger(__name__)


def home_blocks(
    runner: Runner, registry: Registry, user_id: str, alerts: AlertScheduler | None
) -> list[Block]:
    """The Home tab's blocks for `user_id`: the status dashboard (`/fleet` when there are several
    deployments), then open alerts, per watched deployment when there are several (the gateway escapes,
    redacts and fits them to a view's 100 blocks)."""
    dashboard = "fleet" if len(runner.fleet.services) > 1 else "tpu status"
    status = runner.run_read_only(registry.parse(dashboard), user_id)
    blocks = list(status.blocks)
    blocks.append(divider())
    blocks.append(header("Open alerts"))
    if alerts is None:
        blocks.append(section("Alerts are off (set ALERT_CHANNEL)."))
    elif not _may_read(runner, user_id):
        blocks.append(section("Alerts are shown to members with the viewer role."))
    else:
        now = runner.services.now()
        watchers = alerts.watchers
        for name, watcher in watchers.items():  # each from its own deployment's ledger
            lines = watcher.open_summary(now)
            title = f"*{name}*\n" if len(watchers) > 1 else ""
            blocks.append(section(title + ("\n".join(lines[:30]) or "No open alerts.")))
    blocks.append(context("Refreshed when you open this tab."))
    return blocks


def _may_read(runner: Runner, user_id: str) -> bool:
    """True when `user_id` holds the role `/alerts list` needs (the Home tab shows the same)."""
    try:
        runner.check_role(user_id, "alerts list")
    except PermissionDenied:
        return False
    return True


def register(app: App, registry: Registry, runner: Runner, alerts: AlertScheduler | None) -> None:
    def on_home_opened(event: dict[str, Any]) -> None:
        user_id = str(event.get("user") or "")
        if event.get("tab", "home") != "home" or not user_id:
            return

        def publish() -> None:
            try:
                runner.slack.publish_home(user_id, home_blocks(runner, registry, user_id, alerts))
            except SlackDeliveryError as exc:
                log.warning("App Home of %s not published: %s", user_id, exc.reason)

        runner.background(publish)

    app.event("app_home_opened")(on_home_opened)
