"""Button clicks (`block_actions`): Confirm / Cancel of a pending change, Cancel of a running operation.

Each click is acked at once; the runner then checks the clicker's role again before anything happens.
"""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App

from bot.runner import Origin, Runner


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


def register(app: App, runner: Runner) -> None:
    def on_confirm(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        runner.confirm(_value(action), _origin(body))

    def on_cancel_change(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        runner.cancel_change(_value(action), _origin(body))

    def on_cancel_operation(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        runner.cancel_operation(_value(action), _origin(body))

    app.action("confirm_change")(on_confirm)
    app.action("cancel_change")(on_cancel_change)
    app.action("cancel_operation")(on_cancel_operation)
