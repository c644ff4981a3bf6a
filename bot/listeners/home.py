"""The App Home tab: the live dashboard (the same data as `/tpu status`, or `/fleet` with several
deployments) and the open alerts, rebuilt each time a user opens it (`app_home_opened`, then
`views.publish`)."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt import App
from slack_sdk import WebClient

from bot.commands import Registry
from bot.render import Reply, context, divider, fit, header, scrub, section
from bot.runner import Runner
from bot.scheduler import AlertScheduler

log = logging.getLogger(__name__)

# Views hold at most 100 blocks (slack_sdk/models/views: blocks_max_length).
VIEW_BLOCKS_LIMIT = 100


def home_view(
    runner: Runner, registry: Registry, user_id: str, alerts: AlertScheduler | None
) -> dict[str, Any]:
    """The Home tab view for `user_id`: the status dashboard (`/fleet` when there are several deployments),
    then open alerts."""
    dashboard = "fleet" if len(runner.fleet.services) > 1 else "tpu status"
    status = runner.run_read_only(registry.parse(dashboard), user_id)
    blocks = list(fit(status).blocks)
    blocks.append(divider())
    blocks.append(header("Open alerts"))
    if alerts is None:
        blocks.append(section("Alerts are off (set ALERT_CHANNEL)."))
    else:
        lines = alerts.open_summary(runner.services.now())
        blocks.append(section("\n".join(lines[:30]) or "No open alerts."))
    blocks.append(context("Refreshed when you open this tab."))
    return {"type": "home", "blocks": scrub(Reply(text="", blocks=blocks)).blocks[:VIEW_BLOCKS_LIMIT]}


def register(app: App, registry: Registry, runner: Runner, alerts: AlertScheduler | None) -> None:
    def on_home_opened(event: dict[str, Any], client: WebClient) -> None:
        user_id = str(event.get("user") or "")
        if event.get("tab", "home") != "home" or not user_id:
            return

        def publish() -> None:
            client.views_publish(user_id=user_id, view=home_view(runner, registry, user_id, alerts))

        runner.background(publish)

    app.event("app_home_opened")(on_home_opened)
