"""Button clicks (`block_actions`): Confirm / Cancel of a pending change, Cancel of a running operation,
"Review" of a command Gemma suggested (which then goes through the usual role check and confirmation), and
Helpful / Not helpful under a Gemma answer (which run `/gemma rate`).

Each click is acked at once; the runner then checks the clicker's role again before anything happens.
"""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App

from bot.commands.registry import Registry, UsageError
from bot.commands.runner import Origin, Runner
from bot.slack.render import error_reply


def _origin(body: dict[str, Any]) -> Origin:
    container = body.get("container") or {}
    channel = (body.get("channel") or {}).get("id") or container.get("channel_id", "")
    return Origin(
        user_id=(body.get("user") or {}).get("id", ""),
        channel_id=channel,
        response_url=body.get("response_url"),
        thread_ts=container.get("thread_ts"),
        replace=True,
    )


def _value(action: dict[str, Any]) -> str:
    return str(action.get("value") or "")


def register(app: App, registry: Registry, runner: Runner) -> None:
    def on_confirm(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        runner.confirm(_value(action), _origin(body))

    def on_cancel_change(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        runner.cancel_change(_value(action), _origin(body))

    def on_cancel_operation(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        runner.cancel_operation(_value(action), _origin(body))

    def on_run_suggested(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        origin = _origin(body)
        try:
            invocation = registry.parse(_value(action))
        except UsageError as exc:
            runner.deliver(
                error_reply(exc.problem or "that command no longer parses"), origin, ephemeral=True
            )
            return
        runner.submit(
            invocation, Origin(origin.user_id, origin.channel_id, origin.response_url, origin.thread_ts)
        )

    app.action("confirm_change")(on_confirm)
    app.action("run_suggested")(on_run_suggested)
    # Helpful / Not helpful under a Gemma answer: their value is a `gemma rate ID VERDICT` command line
    app.action("rate_helpful")(on_run_suggested)
    app.action("rate_not_helpful")(on_run_suggested)
    app.action("cancel_change")(on_cancel_change)
    app.action("cancel_operation")(on_cancel_operation)
