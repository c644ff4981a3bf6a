"""HTTP mode's public request URL: the one rule for SLACK_REQUEST_URL (bot/config.py), `python -m bot
manifest --url` and the placeholder host of the committed app_manifest.yaml (bot/slack/manifest.py)."""

from __future__ import annotations

from urllib.parse import urlsplit

# The host of the committed app_manifest.yaml, to be replaced by the bot's public host (docs/slack-app.md).
PLACEHOLDER_HOST = "YOUR-BOT-HOST.example.com"
# The one path where the bot serves Slack's requests in HTTP mode (bot.slack.app.wsgi).
SLACK_EVENTS_PATH = "/slack/events"


def check_request_url(text: str) -> str:
    """Check the public request URL of HTTP mode. Slack sends events, slash commands and clicks only to a
    public HTTPS URL (https://docs.slack.dev/apis/events-api/#subscribing), and the bot answers them only at
    /slack/events, e.g. https://bot.example.com/slack/events.

    Args:
        text: the URL, e.g. "https://bot.example.com/slack/events".

    Returns:
        The URL unchanged.

    Raises:
        ValueError: not https, no host, credentials or spaces in it, a query or fragment (Slack would post
            to it verbatim, so a token in it would leak into the app's settings), a path other than one
            ending in /slack/events, or still the placeholder host of the committed app_manifest.yaml.
    """
    parts = urlsplit(text)
    if parts.scheme != "https" or not parts.hostname:
        raise ValueError(f"{text!r} is not an https:// URL with a host (e.g. https://HOST/slack/events)")
    if parts.username or parts.password or parts.query or parts.fragment or any(c.isspace() for c in text):
        raise ValueError(f"{text!r}: give the plain URL, without credentials, query, fragment or spaces")
    if not parts.path.endswith(SLACK_EVENTS_PATH):
        raise ValueError(
            f"{text!r}: the bot answers Slack at {SLACK_EVENTS_PATH}; give https://HOST{SLACK_EVENTS_PATH}"
        )
    if parts.hostname == PLACEHOLDER_HOST.lower():
        raise ValueError(f"{PLACEHOLDER_HOST} is the placeholder of app_manifest.yaml; give your bot's host")
    return text
