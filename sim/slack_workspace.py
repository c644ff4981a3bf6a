"""SIMULATED Slack: what a workspace holds against the bot beyond channel membership: archived channels,
the scopes its token was granted, and a revoked token. `SlackSimulator` asks `Workspace.refusal` before it
answers any Web API method and returns Slack's error body when there is one.

The answers are Slack's (docs.slack.dev/reference/methods/chat.postMessage, "Errors"):
- a post, edit, ephemeral message or file share in an archived channel: `is_archived`;
- a method whose scope the token lacks: `missing_scope`, with `needed` (the scope) and `provided` (the
  token's scopes, comma separated), as slack_sdk prints them (apache/superset#15903,
  slackapi/python-slack-sdk#655);
- any method once the token is revoked (the app uninstalled): `token_revoked`, or `account_inactive` (the
  bot user or workspace deleted), whichever `revoke_token` was given.

A scenario may set them under `slack:` (`archived: [C0ALERTS01]`, `scopes: [commands, ...]`,
`token_revoked: true`); tests change them while the bot runs (`archive`, `unarchive`, `revoke_scope`,
`grant_scope`, `revoke_token`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from bot.slack.manifest import BOT_SCOPES

__all__ = ["DEFAULT_SCOPES", "SCOPE_OF", "Workspace"]

# The app is installed with the bot scopes of its manifest (bot/slack/manifest.py, app_manifest.yaml).
DEFAULT_SCOPES = tuple(BOT_SCOPES)
# The bot scope each simulated method needs (each method's "Required scopes" on docs.slack.dev/reference/
# methods); conversations.replies needs the history scope of the conversation's type (see `_needed`).
SCOPE_OF = {
    "chat.postMessage": "chat:write",
    "chat.update": "chat:write",
    "chat.postEphemeral": "chat:write",
    "files.getUploadURLExternal": "files:write",
    "files.completeUploadExternal": "files:write",
    "conversations.open": "im:write",
    "usergroups.users.list": "usergroups:read",
}
# Methods that write into a conversation, refused in an archived one.
POSTING = frozenset({"chat.postMessage", "chat.update", "chat.postEphemeral", "files.completeUploadExternal"})
_HISTORY = {"C": "channels:history", "G": "groups:history"}  # a DM's im:history is not simulated


class Workspace:
    """Archived channels, granted scopes and the token's state of one simulated workspace (thread-safe)."""

    def __init__(
        self, scopes: Iterable[str] = DEFAULT_SCOPES, archived: Iterable[str] = (), *, revoked: str = ""
    ) -> None:
        self._lock = threading.Lock()
        self.scopes: set[str] = set(scopes)
        self.archived: set[str] = set(archived)
        self.revoked = revoked

    def configure(self, spec: dict[str, Any]) -> None:
        """Apply a scenario's `slack:` section (keys `archived`, `scopes`, `token_revoked`)."""
        with self._lock:
            self.archived.update(str(c) for c in spec.get("archived") or ())
            if spec.get("scopes") is not None:
                self.scopes = {str(s) for s in spec["scopes"]}
            if spec.get("token_revoked"):
                self.revoked = "token_revoked"

    def archive(self, *channels: str) -> None:
        """Archive these channels (as a member does from the channel's settings)."""
        with self._lock:
            self.archived.update(channels)

    def unarchive(self, *channels: str) -> None:
        """Unarchive these channels."""
        with self._lock:
            self.archived.difference_update(channels)

    def revoke_scope(self, *scopes: str) -> None:
        """Take scopes off the token (an app reinstalled with fewer scopes)."""
        with self._lock:
            self.scopes.difference_update(scopes)

    def grant_scope(self, *scopes: str) -> None:
        """Give the token scopes (the app reinstalled with them)."""
        with self._lock:
            self.scopes.update(scopes)

    def revoke_token(self, error: str = "token_revoked") -> None:
        """Refuse the bot token from now on with `error` ("token_revoked", "account_inactive"); "" gives it
        back."""
        with self._lock:
            self.revoked = error

    def refusal(self, method: str, args: dict[str, Any]) -> dict[str, Any] | None:
        """Slack's error body for `method` called with `args`, or None when the workspace allows it."""
        channel = str(args.get("channel") or args.get("channel_id") or "")
        with self._lock:
            if self.revoked:
                return {"ok": False, "error": self.revoked}
            needed = _needed(method, channel)
            if needed and needed not in self.scopes:
                provided = ",".join(sorted(self.scopes))
                return {"ok": False, "error": "missing_scope", "needed": needed, "provided": provided}
            if method in POSTING and channel in self.archived:
                return {"ok": False, "error": "is_archived"}
        return None


def _needed(method: str, channel: str) -> str:
    if method == "conversations.replies":
        return _HISTORY.get(channel[:1], "")
    return SCOPE_OF.get(method, "")
