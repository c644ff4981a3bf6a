"""Start-up failures of `python -m bot serve` as one line each: what failed (a setting or a component) and
the fix. Nothing here retries or guesses; it only names the problem."""

from __future__ import annotations

import urllib.error

from slack_bolt.error import BoltError
from slack_sdk.errors import SlackApiError
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError

from bot.config import Settings


def google_credentials_problem(settings: Settings) -> str | None:
    """None when Application Default Credentials load (or a local emulator is configured), else one line.

    ADC are looked up as google-auth does: GOOGLE_APPLICATION_CREDENTIALS, the gcloud user file, then the
    metadata server of a Google Cloud VM or Cloud Run (https://cloud.google.com/docs/authentication/adc).
    """
    if settings.google_api_endpoint:
        return None
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    except DefaultCredentialsError as exc:
        detail = " ".join(str(exc).split())[:160]
        return (
            "Google credentials: no Application Default Credentials "
            f"({detail}). Fix: run `gcloud auth application-default login`, set "
            "GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, or run on Google Cloud with a "
            "service account attached"
        )
    return None


def explain(exc: BaseException, settings: Settings) -> str:
    """One line for an exception raised while building or starting the bot."""
    if isinstance(exc, SlackApiError) and str(exc.response.api_url).endswith(CONNECTIONS_OPEN):
        return _socket_mode_refused(str(exc.response.get("error") or ""))
    if isinstance(exc, BoltError | SlackApiError):
        error = exc.response.get("error") if isinstance(exc, SlackApiError) else _slack_error(str(exc))
        if error in ("invalid_auth", "not_authed", "token_revoked", "account_inactive", "token_expired"):
            return (
                f"SLACK_BOT_TOKEN: Slack refused the token ({error}). Fix: copy the Bot User OAuth Token "
                "(xoxb-...) from the app's OAuth & Permissions page, and reinstall the app if it was revoked"
            )
        return f"Slack: auth.test failed ({error or exc}). Fix: check SLACK_BOT_TOKEN and SLACK_API_URL"
    if isinstance(exc, urllib.error.URLError | ConnectionError | TimeoutError):
        reason = getattr(exc, "reason", exc)
        return (
            f"Slack unreachable at SLACK_API_URL={settings.slack_api_url} ({reason}). Fix: allow outbound "
            "HTTPS to slack.com (proxy: HTTPS_PROXY), or correct SLACK_API_URL"
        )
    if isinstance(exc, ArgumentError | NoSuchModuleError | OperationalError):
        detail = " ".join(str(exc).split("\n")[0].split())[:200]
        return (
            f"STATE_DATABASE_URL: cannot open the state database ({detail}). Fix: use sqlite:///FILE or a "
            "reachable postgresql+psycopg://USER:PASSWORD@HOST/DB"
        )
    return f"start-up failed: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


# The Web API method a Socket Mode client calls first, with the app-level token, for its websocket URL
# (https://docs.slack.dev/reference/methods/apps.connections.open).
CONNECTIONS_OPEN = "apps.connections.open"


def _socket_mode_refused(error: str) -> str:
    """One line for Slack's refusal of apps.connections.open (BOT_MODE=socket), by its error code:
    `socket_mode_not_enabled` (the app has Socket Mode off, e.g. it was created from the HTTP manifest),
    a token refused or of the wrong kind, or the token without the connections:write scope."""
    if error == "socket_mode_not_enabled":
        return (
            "BOT_MODE=socket, but Socket Mode is off for this Slack app (apps.connections.open: "
            "socket_mode_not_enabled), so no event would ever arrive. Fix: turn on Socket Mode in the app's "
            "settings (or update the app from `BOT_MODE=socket python -m bot manifest`), or run in HTTP "
            "mode: BOT_MODE=http, SLACK_SIGNING_SECRET set and SLACK_APP_TOKEN unset"
        )
    if error == "not_allowed_token_type":
        return (
            "SLACK_APP_TOKEN: Slack says this is not an app-level token (not_allowed_token_type). Fix: copy "
            "the xapp- token from Basic Information, App-Level Tokens"
        )
    if error == "missing_scope":
        return (
            "SLACK_APP_TOKEN: the app-level token lacks the connections:write scope (missing_scope). Fix: "
            "generate an app-level token with connections:write (Basic Information, App-Level Tokens)"
        )
    if error in ("invalid_auth", "not_authed", "token_revoked", "account_inactive", "token_expired"):
        return (
            f"SLACK_APP_TOKEN: Slack refused the app-level token ({error}). Fix: generate a new one with "
            "the connections:write scope (Basic Information, App-Level Tokens)"
        )
    return f"Slack: {CONNECTIONS_OPEN} failed ({error or 'no error code'}). Fix: check SLACK_APP_TOKEN"


def _slack_error(message: str) -> str:
    """The error code inside Bolt's auth.test failure message, e.g. "invalid_auth"."""
    for code in ("invalid_auth", "not_authed", "token_revoked", "account_inactive", "token_expired"):
        if code in message:
            return code
    return ""
