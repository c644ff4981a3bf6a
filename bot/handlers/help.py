"""`help [TOPIC]`: the command list from the registry, and the active settings with secrets masked."""

from __future__ import annotations

from bot.commands.context import Context
from bot.commands.registry import Param, echo, registry
from bot.slack.render import Reply
from bot.views.admin import all_help, command_help, help_reply, short_help


@registry.command(
    "help",
    "Commands, their usage, and the active settings",
    Param("topic", "group, command, or all", metavar="TOPIC"),
)
def show_help(ctx: Context, topic: str | None) -> Reply:
    """Help, shown to the requester only (an ephemeral reply).

    Returns:
        No topic: one short line per group with its commands. "tpu": that group's usage lines.
        "tpu list": one command's usage and options. "all": every usage line and the active settings.
    """
    reply = _help(ctx, topic)
    reply.ephemeral = True
    return reply


def _help(ctx: Context, topic: str | None) -> Reply:
    reg = ctx.registry
    deployments = ctx.fleet.bound_channels() if ctx.fleet is not None else None
    if topic is None:
        return help_reply(short_help(reg, deployments, ctx.deployment))
    if topic == "all":
        return all_help(reg, ctx.services.settings, deployments, ctx.deployment)
    if topic:
        words = topic.split()
        if len(words) == 1 and words[0] in reg.groups():
            return help_reply(reg.group_usage(words[0]))
        command = next((c for c in reg.commands() if list(c.words) == words), None)
        if command is None:
            groups = ", ".join(reg.groups())
            return help_reply(
                f"No help topic `{echo(topic)}`. Topics: {groups}, or a command such as `tpu list`."
            )
        return help_reply(command_help(command))
    return help_reply(short_help(reg, deployments, ctx.deployment))
