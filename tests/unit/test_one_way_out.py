"""One way out: no module but bot/slack/gateway.py calls Slack's Web API or a response_url (AST walk).

Fails on, anywhere in bot/, ops/ and llm/ outside the gateway: importing slack_sdk's WebClient or
WebhookClient, calling a Web API method (`chat_postMessage`, `views_publish`, `files_upload_v2`,
`conversations_replies`, `api_call`, ...), or calling Bolt's `say` / `respond` helpers.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GATEWAY = ROOT / "bot" / "slack" / "gateway.py"
SOURCES = sorted(
    p for package in ("bot", "ops", "llm") for p in (ROOT / package).rglob("*.py") if p != GATEWAY
)

# WebClient method names are the Web API method with `_` for `.` (slack_sdk/web/client.py). The "api"
# family has one method, api.test (https://api.slack.com/methods/api.test), named below with the generic
# `api_call`, so that Google's `Connection.api_request` is not taken for Slack.
API_METHOD = re.compile(
    r"^(?:admin|apps|assistant|auth|bookmarks|bots|calls|canvases|chat|conversations|dialog|dnd|emoji|"
    r"files|functions|migration|oauth|openid|pins|reactions|reminders|rtm|search|stars|team|usergroups|users|"
    r"views|workflows)_[A-Za-z0-9_]+$"
)
FORBIDDEN_IMPORTS = {"WebClient", "WebhookClient", "AsyncWebClient", "AsyncWebhookClient"}
API_FAMILY = {"api_call", "api_test"}
BOLT_HELPERS = {"say", "respond"}


def violations(path: Path) -> list[str]:
    """What in `path` talks to Slack directly, as "line: what" strings."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("slack_sdk"):
            names = {alias.name for alias in node.names}
            if names & FORBIDDEN_IMPORTS or (node.module or "").startswith(
                ("slack_sdk.web", "slack_sdk.webhook")
            ):
                found.append(f"{node.lineno}: imports {node.module}")
        if isinstance(node, ast.Import) and any(a.name.startswith("slack_sdk.web") for a in node.names):
            found.append(f"{node.lineno}: imports slack_sdk.web*")
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and (API_METHOD.match(func.attr) or func.attr in API_FAMILY):
            found.append(f"{node.lineno}: calls .{func.attr}()")
        if isinstance(func, ast.Name) and (func.id in BOLT_HELPERS or func.id in FORBIDDEN_IMPORTS):
            found.append(f"{node.lineno}: calls {func.id}()")
    return found


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_no_module_but_the_gateway_calls_slack(path: Path) -> None:
    assert violations(path) == [], f"{path.relative_to(ROOT)} talks to Slack directly; use bot.slack.gateway"


def test_the_walk_catches_each_way_of_calling_slack(tmp_path: Path) -> None:
    sample = tmp_path / "sender.py"
    sample.write_text(
        "from slack_sdk import WebClient\n"
        "from slack_sdk.webhook import WebhookClient\n"
        "client.chat_postMessage(channel='C1', text='x')\n"
        "self._client.views_publish(user_id='U1', view={})\n"
        "client.files_upload_v2(content='x')\n"
        "client.api_call('chat.update')\n"
        "client.api_test()\n"
        "say('hello')\n"
        "respond(text='x')\n"
        "WebhookClient('https://hooks.slack.com/x').send(text='x')\n"
    )
    assert len(violations(sample)) == 10


def test_google_connection_requests_are_not_slack(tmp_path: Path) -> None:
    sample = tmp_path / "reader.py"
    sample.write_text("client._connection.api_request(method='POST', path='/entries:list', data={})\n")
    assert violations(sample) == []


def test_the_gateway_itself_is_where_the_calls_are() -> None:
    assert len(violations(GATEWAY)) >= 8
