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


def _slack_error(message: str) -> str:
    """The error code inside Bolt's auth.test failure message, e.g. "invalid_auth"."""
    for code in ("invalid_auth", "not_authed", "token_revoked", "account_inactive", "token_expired"):
        if code in message:
            return code
    return ""
