"""Chat tools declared on the registry: the schema comes from the Params, only read-only commands qualify,
and a call becomes a command line that parses like typed input."""

from __future__ import annotations

from typing import Any

import pytest

import bot.handlers  # noqa: F401  (declares every command on the registry)
from bot.commands.registry import (
    ChatTool,
    Command,
    Param,
    Registry,
    Role,
    UsageError,
    accelerator_type,
    duration,
    int_range,
    one_of,
    registry,
    resource_name,
)


def _noop(ctx: Any, **args: Any) -> None:
    return None


def _declare(target: Registry, words: str, *params: Param, **options: Any) -> None:
    target.command(words, "summary", *params, **options)(_noop)


NAME = Param("name", "queued resource name", kind=resource_name, required=True, metavar="NAME")


def _one_tool(words: str, *params: Param, tool: ChatTool) -> tuple[Registry, Command]:
    """A registry of one command, declared with `tool`; returns it and the command."""
    local = Registry()
    _declare(local, words, *params, chat_tool=tool)
    [(_, command)] = local.tools()
    return local, command


def test_the_schema_is_built_from_the_params() -> None:
    _, command = _one_tool(
        "tpu peek",
        NAME,
        Param("last", "how many", flag="--last", kind=int_range(1, 50), metavar="N"),
        Param("level", "minimum level", flag="--level", kind=one_of("INFO", "ERROR"), metavar="L"),
        Param("since", "how far back", flag="--since", kind=duration, metavar="D"),
        Param("type_", "accelerator type", flag="--type", kind=accelerator_type, metavar="T"),
        Param("note", "free text", flag="--note", metavar="X"),
        Param("raw", "attach the raw text", flag="--raw", switch=True),
        Param("hidden", "not for the model", flag="--hidden", metavar="X"),
        tool=ChatTool(
            "peek", "Peek at one", params=("name", "last", "level", "since", "type_", "note", "raw")
        ),
    )
    schema = command.tool_parameters()
    properties = schema["properties"]
    assert schema["type"] == "object" and schema["required"] == ["name"]
    assert list(properties) == ["name", "last", "level", "since", "type_", "note", "raw"]  # not "hidden"
    assert (
        properties["name"]["type"] == "string" and properties["name"]["description"] == "queued resource name"
    )
    assert properties["name"]["pattern"].startswith("^[a-z]")
    assert properties["last"] == {"type": "integer", "minimum": 1, "maximum": 50, "description": "how many"}
    assert properties["level"] == {
        "type": "string",
        "enum": ["INFO", "ERROR"],
        "description": "minimum level",
    }
    assert properties["since"]["type"] == "string" and "30m" in properties["since"]["examples"]
    assert properties["type_"]["pattern"].startswith("^(v")
    assert properties["note"] == {"type": "string", "description": "free text"}
    assert properties["raw"] == {"type": "boolean", "description": "attach the raw text"}


def test_a_tool_without_params_takes_an_empty_object() -> None:
    _, command = _one_tool("tpu peek", Param("zone", "zone", flag="--zone"), tool=ChatTool("peek", "Peek"))
    assert command.tool_parameters() == {"type": "object", "properties": {}}


@pytest.mark.parametrize(
    "options",
    [
        {"changes_infra": True, "role": Role.OPERATOR},
        {"changes_infra": True},
        {"role": Role.OPERATOR},
        {"role": Role.ADMIN},
        {"opens_form": True},
        {"writes": True},
    ],
)
def test_a_command_that_is_not_read_only_cannot_be_a_tool(options: dict[str, Any]) -> None:
    local = Registry()
    with pytest.raises(ValueError, match="not read-only"):
        _declare(local, "tpu zap", chat_tool=ChatTool("zap", "Zap"), **options)
    assert local.commands() == []


def test_a_tool_names_only_its_commands_params_and_a_free_name() -> None:
    local = Registry()
    with pytest.raises(ValueError, match="no parameter nope"):
        _declare(local, "tpu a", chat_tool=ChatTool("a", "A", params=("nope",)))
    with pytest.raises(ValueError, match="no parameter level"):
        _declare(local, "tpu b", chat_tool=ChatTool("b", "B", preset={"level": "ERROR"}))
    with pytest.raises(ValueError, match="not \\[a-zA-Z0-9_-\\]"):
        _declare(local, "tpu c", chat_tool=ChatTool("see it", "C"))
    _declare(local, "tpu d", chat_tool=ChatTool("d", "D"))
    with pytest.raises(ValueError, match="already `tpu d`"):
        _declare(local, "tpu e", chat_tool=ChatTool("d", "E"))


def test_a_call_becomes_a_command_line_that_parses_like_typed_input() -> None:
    local, command = _one_tool(
        "logs",
        Param("since", "how far back", flag="--since", kind=duration, metavar="D"),
        Param("level", "minimum level", flag="--level", kind=one_of("INFO", "ERROR"), metavar="L"),
        Param("raw", "raw", flag="--raw", switch=True),
        tool=ChatTool("logs", "Logs", params=("since", "raw"), preset={"level": "error"}),
    )
    line = command.tool_line({"since": "2h", "raw": True})
    assert line == "logs --since 2h --level error --raw"
    args = local.parse(line).args
    assert args["level"] == "ERROR" and args["raw"] is True and args["since"].total_seconds() == 7200
    assert command.tool_line({"since": None, "raw": False}) == "logs --level error"
    with pytest.raises(ValueError, match="unknown argument level"):
        command.tool_line({"level": "INFO"})  # a preset is not the model's to change


def test_a_hostile_argument_stays_one_word() -> None:
    local, command = _one_tool(
        "tpu describe",
        NAME,
        Param("zone", "zone", flag="--zone", metavar="Z"),
        tool=ChatTool("describe", "Describe", params=("name",)),
    )
    line = command.tool_line({"name": "x --zone us-east5-a"})
    with pytest.raises(UsageError, match="is not a TPU resource name"):
        local.parse(line)


def test_the_bots_tools_keep_their_names_and_are_read_only() -> None:
    tools = {tool.name: command for tool, command in registry.tools()}
    assert set(tools) == {"status", "list", "describe", "metrics", "logs", "cost"}
    assert all(command.read_only for command in tools.values())
    describe = tools["describe"].tool_parameters()
    assert describe["required"] == ["name"] and describe["properties"]["name"]["type"] == "string"
    assert tools["logs"].tool_line({}) == "logs --severity ERROR"
    assert tools["logs"].tool_parameters()["properties"]["since"]["type"] == "string"
