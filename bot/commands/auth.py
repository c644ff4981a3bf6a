"""Roles from settings: who may run what.

`VIEWERS`, `OPERATORS` and `ADMINS` hold Slack user ids (U..., W...) and user-group ids (S...). Each role
includes the ones below it. An empty `VIEWERS` means every member of the workspace may read. Group
membership is read with `usergroups.users.list` and cached for five minutes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from slack_sdk.errors import SlackApiError

from bot.commands.registry import Command, Role
from bot.config import Settings
from bot.slack.gateway import SlackGateway
from ops.errors import PermissionDenied

log = logging.getLogger(__name__)

GROUP_CACHE_S = 300.0


class Authorizer:
    """Resolves a Slack user's role and checks it against a command's required role."""

    def __init__(
        self, settings: Settings, slack: SlackGateway, *, clock: Callable[[], float] = time.monotonic
    ):
        self._lists: list[tuple[Role, Sequence[str]]] = [
            (Role.ADMIN, settings.admins),
            (Role.OPERATOR, settings.operators),
            (Role.VIEWER, settings.viewers),
        ]
        self._everyone_views = not settings.viewers
        self._slack = slack
        self._clock = clock
        self._lock = threading.Lock()
        self._groups: dict[str, tuple[float, frozenset[str]]] = {}

    def role_of(self, user_id: str) -> Role | None:
        """The highest role `user_id` holds, or None if they hold none."""
        for role, principals in self._lists:
            if user_id in principals or any(
                user_id in self._members(p) for p in principals if p.startswith("S")
            ):
                return role
        return Role.VIEWER if self._everyone_views else None

    def check(self, user_id: str, command: Command) -> None:
        """Raise PermissionDenied unless `user_id` holds the role `command` needs."""
        role = self.role_of(user_id)
        if role is None or role < command.role:
            needed = command.role.name.lower()
            raise PermissionDenied(
                f"`{command.name}` needs the {needed} role",
                f"ask an admin to add you to {needed.upper()}S",
            )

    def _members(self, group_id: str) -> frozenset[str]:
        with self._lock:
            cached = self._groups.get(group_id)
        if cached and self._clock() - cached[0] < GROUP_CACHE_S:
            return cached[1]
        try:
            users = self._slack.usergroup_members(group_id)
        except SlackApiError as exc:
            log.warning("cannot read user group %s: %s", group_id, exc.response.get("error"))
            return cached[1] if cached else frozenset()
        members = frozenset(users)
        with self._lock:
            self._groups[group_id] = (self._clock(), members)
        return members
