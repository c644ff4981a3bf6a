"""What the bot answers and logs for a Slack request no listener handles, instead of Bolt's defaults.

A workspace sends only the slash commands its app configuration lists (the manifest), but an app configured
from an older manifest can still send one the bot no longer has. Bolt would answer it HTTP 404 (the user
sees "failed with the error dispatch_failed") and log, at WARNING, a Python snippet suggesting
`@app.command("/foo")` to the developer. Here an unknown command gets a one-line ephemeral answer, and any
other unhandled request (an event or a button the bot does not listen to) a one-line INFO log; listener
errors are logged as Bolt's default handler logs them (`slack_bolt/listener/listener_error_handler.py`).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from slack_bolt import Ack, App
from slack_bolt.error import BoltUnhandledRequestError

from bot.commands.registry import echo

log = logging.getLogger(__name__)


def register(app: App) -> None:
    """Answer unknown slash commands and log unhandled requests briefly. Call after every other command
    listener is registered (Bolt tries listeners in registration order; this one matches any command);
    the App must be built with `raise_error_for_unhandled_request=True` so that unhandled requests reach
    `on_error` instead of Bolt's warning."""
    app.command(re.compile(r"^/"))(on_unknown_command)
    app.error(on_error)


def on_unknown_command(ack: Ack, command: dict[str, Any]) -> None:
    """Ack an unknown slash command with a short ephemeral line pointing at `/tpu help`."""
    name = echo(str(command.get("command") or "?"))
    log.info("unknown slash command %s from %s", name, command.get("user_id"))
    ack(text=f"`{name}` is not a command of this bot; try `/tpu help`.")


def on_error(error: Exception, body: dict[str, Any]) -> None:
    """Bolt's error handler: one INFO line for an unhandled request (Bolt answers it HTTP 404), the
    traceback for a listener that raised."""
    if isinstance(error, BoltUnhandledRequestError):
        log.info("no listener for a Slack request (%s); answered HTTP 404", describe(body))
        return
    log.error("a Slack listener failed on %s: %s", describe(body), error, exc_info=error)


def describe(body: dict[str, Any]) -> str:
    """A short name of a Slack request body: the slash command, event type, action id, or payload type."""
    event = body.get("event")
    event = event if isinstance(event, dict) else {}
    actions = body.get("actions") if isinstance(body.get("actions"), list) else []
    action = actions[0].get("action_id") if actions and isinstance(actions[0], dict) else None
    kind = body.get("command") or event.get("type") or action or body.get("type") or "unknown"
    return str(kind)[:80]
