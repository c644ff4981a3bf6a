"""SIMULATED Slack: the app as its manifest made it (`SlackApp.install`), and the Web API method only the
app's settings decide, `apps.connections.open` (Socket Mode's first call, with the app-level token)."""

from __future__ import annotations

from typing import Any

__all__ = ["SlackApp"]


class SlackApp:
    """The simulated app's settings. Until `install`, those of the committed app_manifest.yaml: HTTP mode,
    Socket Mode off.

    Args:
        app_token: the app-level token (xapp-...) `apps.connections.open` takes, if the app has one.
    """

    def __init__(self, app_token: str | None = None) -> None:
        self.app_token = app_token
        self.socket_mode_enabled = False
        self.request_url: str | None = None

    def install(self, manifest: dict[str, Any]) -> None:
        """Create the app from a manifest (`bot.slack.manifest.manifest`), as pasting it into Slack does: its
        `settings.socket_mode_enabled` and its event subscriptions' `request_url` become the app's."""
        settings = manifest["settings"]
        self.socket_mode_enabled = bool(settings.get("socket_mode_enabled"))
        self.request_url = settings.get("event_subscriptions", {}).get("request_url")

    def connections_open(self, authorization: str, bot_token: str, base_url: str) -> dict[str, Any]:
        """apps.connections.open (https://docs.slack.dev/reference/methods/apps.connections.open): only the
        app-level token in the Authorization header (a bot token: not_allowed_token_type), and only for an
        app with Socket Mode on (else socket_mode_not_enabled: "Socket mode is not enabled in manifest" in
        Slack's error reference, e.g. https://docs.slack.dev/reference/methods/apps.manifest.create).
        SIMULATED: with Socket Mode on it answers a URL under `base_url` where no websocket server listens;
        the simulator carries events over HTTP only."""
        if authorization == f"Bearer {bot_token}":
            return {"ok": False, "error": "not_allowed_token_type"}
        if self.app_token is None or authorization != f"Bearer {self.app_token}":
            return {"ok": False, "error": "invalid_auth"}
        if not self.socket_mode_enabled:
            return {"ok": False, "error": "socket_mode_not_enabled"}
        return {"ok": True, "url": base_url.replace("http://", "ws://", 1) + "/link/?ticket=simulated"}
