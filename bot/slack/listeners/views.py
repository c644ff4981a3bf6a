"""Modal submissions (`view_submission`): the Hugging Face token form.

The shape is checked in the ack (errors show in the form); the admin role is checked again before the token
is stored. The token is never logged: only its form field is read, and only the store sees it.
"""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App

from bot.commands.runner import Origin, Runner
from bot.handlers.admin import store_token, token_problem
from bot.views.admin import SECRET_FORM_ID


def register(app: App, runner: Runner) -> None:
    def on_token(ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        values = (view.get("state") or {}).get("values") or {}
        token = str(((values.get("token") or {}).get("value") or {}).get("value") or "")
        problem = token_problem(token)
        if problem:
            ack(response_action="errors", errors={"token": problem})
            return
        ack()
        channel_id, _, deployment = str(view.get("private_metadata", "")).partition(" ")
        origin = Origin(user_id=(body.get("user") or {}).get("id", ""), channel_id=channel_id)
        runner.submit_form("tpu token", store_token, {"token": token}, origin, deployment or None)

    app.view(SECRET_FORM_ID)(on_token)
