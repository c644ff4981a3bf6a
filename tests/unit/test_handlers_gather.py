"""Handlers gather, views render: no module under bot/handlers/ builds Block Kit.

A handler builds blocks if it imports slack_sdk's block models, imports one of `bot.slack.render`'s block
builders (`blocks_reply`, which only wraps the blocks a view made with their fallback text, is not one), or
writes a dict literal whose "type" is a Block Kit block or element type
(https://api.slack.com/reference/block-kit/blocks). Rendering lives in bot/views/.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = ROOT / "bot" / "handlers"

BLOCK_TYPES = frozenset(
    {
        "actions",
        "button",
        "context",
        "divider",
        "header",
        "image",
        "input",
        "mrkdwn",
        "plain_text",
        "rich_text",
        "section",
    }
)
RENDER_BUILDERS = frozenset(
    {
        "cancel_button",
        "confirm_buttons",
        "context",
        "divider",
        "header",
        "section",
        "split_sections",
        "text_reply",
    }
)


def block_building(source: str) -> list[str]:
    """What in `source` (a module's text) builds blocks, one line per finding with its line number."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [
                f"{node.lineno}: imports {a.name}"
                for a in node.names
                if a.name.startswith("slack_sdk.models")
            ]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("slack_sdk.models"):
                found.append(f"{node.lineno}: imports from {node.module}")
            elif node.module == "bot.slack.render":
                found += [
                    f"{node.lineno}: imports bot.slack.render.{a.name}"
                    for a in node.names
                    if a.name in RENDER_BUILDERS
                ]
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and key.value == "type"
                    and isinstance(value, ast.Constant)
                    and value.value in BLOCK_TYPES
                ):
                    found.append(f"{node.lineno}: a {value.value!r} dict literal")
    return found


def test_no_handler_builds_blocks() -> None:
    offenders = {
        path.name: findings
        for path in sorted(HANDLERS.glob("*.py"))
        if (findings := block_building(path.read_text()))
    }
    assert offenders == {}


def test_the_check_sees_each_way_of_building_blocks() -> None:
    source = (
        "from slack_sdk.models.blocks import SectionBlock\n"
        "import slack_sdk.models.blocks\n"
        "from bot.slack.render import Reply, section\n"
        "def f():\n"
        "    return {'type': 'actions', 'elements': [{'type': 'button'}]}\n"
        "x = {'type': 'queued_resource'}\n"
    )
    assert block_building(source) == [
        "1: imports from slack_sdk.models.blocks",
        "2: imports slack_sdk.models.blocks",
        "3: imports bot.slack.render.section",
        "5: a 'actions' dict literal",
        "5: a 'button' dict literal",
    ]
