"""The manifest and the serve mode agree: an app created from the HTTP manifest reaches the bot's real
Bolt/HTTP stack at the manifest's URL; an app created from the Socket Mode manifest opens a connection with
the app-level token; a bot in Socket Mode for an app with Socket Mode off refuses to start, saying why."""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.__main__ import main
from bot.slack.manifest import manifest
from sim.demo import Demo
from sim.slack import SlackSimulator
from tests.serve import serve_until_exit

ROOT = Path(__file__).resolve().parents[2]
URL = "https://bot.example.com/slack/events"


def _printed_manifest(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["manifest", *argv]) == 0
    return yaml.safe_load(capsys.readouterr().out)


def test_an_app_from_the_http_manifest_reaches_the_bot_at_every_url_it_gives(
    demo: Demo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("BOT_MODE", raising=False)
    data = _printed_manifest(capsys, "--url", URL)  # BOT_MODE unset: http, the demo bot's mode
    assert demo.settings.bot_mode == "http"
    demo.slack.app.install(data)
    assert demo.slack.app.socket_mode_enabled is False and demo.slack.app.request_url == URL
    urls = {c["url"] for c in data["features"]["slash_commands"]}
    urls |= {
        data["settings"]["event_subscriptions"]["request_url"],
        data["settings"]["interactivity"]["request_url"],
    }
    assert urls == {URL}
    # Slack posts to the manifest's URL; the bot's server behind HOST answers at its path.
    path = urlsplit(URL).path
    body = demo.user.slash_body("/tpu", "list --zone us-east5-a", "modes-http")
    response = demo.user.post_signed(body, "application/x-www-form-urlencoded")
    assert response.request.url.path == path and response.status_code == 200
    reply = demo.slack.wait_for(lambda m: m.response_id == "modes-http", timeout=20)
    assert reply is not None and "gemma4-qr" in reply.text
    # Slack's check of the request URL when the app is created (url_verification) is answered too.
    challenge = demo.user.post_signed(
        '{"type": "url_verification", "challenge": "c0ffee"}', "application/json"
    )
    assert challenge.status_code == 200 and "c0ffee" in challenge.text


def test_an_app_from_the_socket_manifest_opens_a_connection_and_one_from_the_http_manifest_does_not(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bot_token, app_token = "xoxb-sim-" + secrets.token_hex(4), "xapp-1-A0SIM-1-" + secrets.token_hex(4)
    slack = SlackSimulator(bot_token, app_token=app_token).start()
    try:
        client = WebClient(base_url=slack.api_url)
        monkeypatch.setenv("BOT_MODE", "socket")
        slack.app.install(_printed_manifest(capsys))
        assert slack.app.socket_mode_enabled is True and slack.app.request_url is None
        assert client.apps_connections_open(app_token=app_token)["url"].startswith("ws://")
        slack.app.install(manifest(URL))  # the HTTP manifest: Socket Mode off
        with pytest.raises(SlackApiError) as refused:
            client.apps_connections_open(app_token=app_token)
        assert refused.value.response["error"] == "socket_mode_not_enabled"
        with pytest.raises(SlackApiError) as wrong_token:
            client.apps_connections_open(app_token=bot_token)
        assert wrong_token.value.response["error"] == "not_allowed_token_type"
    finally:
        slack.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_in_socket_mode_refuses_an_app_with_socket_mode_off(tmp_path: Path) -> None:
    bot_token, app_token = "xoxb-sim-" + secrets.token_hex(4), "xapp-1-A0SIM-1-" + secrets.token_hex(4)
    slack = SlackSimulator(bot_token, app_token=app_token).start()
    slack.app.install(manifest(URL))  # created from the HTTP manifest (the committed one's mode)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "SLACK_BOT_TOKEN": bot_token,
        "SLACK_APP_TOKEN": app_token,
        "BOT_MODE": "socket",
        "SLACK_API_URL": slack.api_url,
        "GCP_PROJECT": "demo-project",
        "TPU_ZONES": "us-east5-a",
        "GOOGLE_API_ENDPOINT": "http://127.0.0.1:9",  # no Google call is made before Slack's answer
        "STATE_DATABASE_URL": f"sqlite:///{tmp_path}/state.db",
        "BOT_HOST": "127.0.0.1",
        "BOT_PORT": str(_free_port()),
    }
    try:
        done = serve_until_exit(env, tmp_path, timeout_s=120)
    finally:
        slack.stop()
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("start-up error: BOT_MODE=socket, but Socket Mode is off for this Slack app")
    assert "socket_mode_not_enabled" in line and "BOT_MODE=http" in line
    assert app_token not in done.stderr and bot_token not in done.stderr
    assert ("apps.connections.open", {}) in slack.calls
