"""What a command handler receives besides its arguments."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bot.commands.progress import Progress
from bot.commands.registry import Invocation, Registry, Role
from bot.deployments import DEFAULT, Fleet
from bot.services import Services
from bot.slack.render import Reply
from ops.store.state import AuditEntry


@dataclass(frozen=True)
class Context:
    """Who asked, where, and the backends to use.

    `progress` (when the transport provides one) shows intermediate states in one message updated in
    place; `cancelled` is set when someone with the command's role clicks its Cancel button, whose
    action value is `operation_id`. `confirmed_plan` is the plan fingerprint the confirmation showed
    (empty when the command needed no confirmation). `open_modal` opens a Slack modal; it is set only
    when the request carries a trigger id (slash commands and button clicks). `thread_history` returns the
    earlier messages of the thread a mention came from, oldest first, as chat messages. `fleet` holds
    every deployment (for `/fleet`); `deployment` names the one `services` belongs to. `run_command` runs
    another read-only command for the same user through the runner (role checked, an error as a one-line
    reply), as the chat's tools do; it is set when the runner runs the command. `recent_commands` returns the
    audit lines of the conversation the request came from (its thread, else its channel) of the last hours,
    oldest first (`bot.commands.runner.Runner`). `caller_role` returns the caller's role in this deployment
    (None: no
    role).
    """

    services: Services
    registry: Registry
    user_id: str
    channel_id: str
    progress: Progress | None = None
    operation_id: str = ""
    cancelled: threading.Event = field(default_factory=threading.Event)
    confirmed_plan: str = ""
    open_modal: Callable[[dict[str, Any]], None] | None = None
    thread_history: Callable[[], list[dict[str, str]]] | None = None
    fleet: Fleet | None = None
    deployment: str = DEFAULT
    run_command: Callable[[Invocation], Reply] | None = None
    recent_commands: Callable[[], list[AuditEntry]] | None = None
    caller_role: Callable[[], Role | None] | None = None
