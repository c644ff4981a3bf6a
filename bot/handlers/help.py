"""`help [TOPIC]`: the command list from the registry, and the active settings with secrets masked."""

from __future__ import annotations

from bot.commands import Param, Role, echo, registry
from bot.config import masked
from bot.context import Context
from bot.render import Reply, blocks_reply, channel_link, section, text_reply


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
    if topic is None:
        return text_reply(_short_help(ctx))
    if topic == "all":
        blocks = [section(reg.group_usage(group)) for group in reg.groups()]
        blocks.append(section(_settings_summary(ctx)))
        return blocks_reply(blocks)
    if topic:
        words = topic.split()
        if len(words) == 1 and words[0] in reg.groups():
            return text_reply(reg.group_usage(words[0]))
        command = next((c for c in reg.commands() if list(c.words) == words), None)
        if command is None:
            groups = ", ".join(reg.groups())
            return text_reply(
                f"No help topic `{echo(topic)}`. Topics: {groups}, or a command such as `tpu list`."
            )
        lines = [f"`{command.usage()}`", command.summary]
        lines += [f"• `{p.flag or p.metavar}`: {p.help}" for p in command.params]
        if command.role > Role.VIEWER:
            lines.append(f"_Needs the {command.role.name.lower()} role._")
        return text_reply("\n".join(lines))
    return text_reply(_short_help(ctx))


def _short_help(ctx: Context) -> str:
    reg = ctx.registry
    lines = ["*Commands* (type `/tpu list` or mention me with the same words, e.g. `@gemma-bot tpu list`):"]
    for group in reg.groups():
        verbs = [" ".join(c.words[1:]) or "[options]" for c in reg.commands(group)]
        lines.append(f"• `/{group}` {', '.join(verbs)}")
    lines.append("`help tpu` lists a group, `help tpu create` explains a command, `help all` shows all.")
    return "\n".join([*lines, *_deployments_line(ctx)])


def _deployments_line(ctx: Context) -> list[str]:
    """With several deployments: each one and its bound channels, and how to choose one elsewhere."""
    fleet = ctx.fleet
    if fleet is None or len(fleet.services) < 2:
        return []
    names = []
    for name in fleet.names:
        bound = " ".join(channel_link(channel) for channel, owner in fleet.channels.items() if owner == name)
        names.append(f"`{name}`" + (f" ({bound})" if bound else ""))
    return [
        f"*Deployments* {', '.join(names)}: a bound channel acts on its own; elsewhere add "
        f"`--deployment NAME` (this answer: `{ctx.deployment}`)"
    ]


def _settings_summary(ctx: Context) -> str:
    s = ctx.services.settings
    endpoint = s.vllm_base_url or f"discovered from the ACTIVE queued resource's node, port {s.vllm_port}"
    return "\n".join(
        [
            *_deployments_line(ctx),
            "*Active settings*",
            f"• project `{s.gcp_project}`, zones `{', '.join(s.tpu_zones)}`",
            f"• default accelerator `{s.tpu_accelerator_type}`, runtime `{s.tpu_runtime_version}`",
            f"• model `{s.vllm_model}`, endpoint {endpoint}",
            f"• mode `{s.bot_mode}`, bot token {masked(s.slack_bot_token)}, "
            f"signing secret {masked(s.slack_signing_secret)}, app token {masked(s.slack_app_token)}, "
            f"vLLM API key {masked(s.vllm_api_key)}",
        ]
    )
