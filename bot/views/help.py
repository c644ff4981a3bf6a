"""Help as text: the command list from the registry, one command's usage, and the active settings (secrets
masked)."""

from __future__ import annotations

from bot.commands.registry import Command, Registry, Role
from bot.config import Settings, masked
from bot.deployments import Fleet
from bot.slack.render import Reply, blocks_reply, channel_link, section, text_reply
from bot.version import DISTRIBUTION, bot_version


def help_reply(markdown: str) -> Reply:
    """A help answer: `markdown` (from the functions below) in as many sections as it needs."""
    return text_reply(markdown)


def all_help(reg: Registry, s: Settings, fleet: Fleet | None, deployment: str) -> Reply:
    """`help all`: every group's usage lines, a section each, then the active settings (secrets masked)."""
    blocks = [section(reg.group_usage(group)) for group in reg.groups()]
    blocks.append(section(settings_summary(s, fleet, deployment)))
    return blocks_reply(blocks)


def command_help(command: Command) -> str:
    """One command's usage line, summary, one line per option, and the role it needs above viewer."""
    lines = [f"`{command.usage()}`", command.summary]
    lines += [f"• `{p.flag or p.metavar}`: {p.help}" for p in command.params]
    if command.role > Role.VIEWER:
        lines.append(f"_Needs the {command.role.name.lower()} role._")
    return "\n".join(lines)


def short_help(reg: Registry, fleet: Fleet | None, deployment: str) -> str:
    """One line per command group with its verbs, how to ask for more, the deployments (when several), and
    the bot's version."""
    lines = ["*Commands* (type `/tpu list` or mention me with the same words, e.g. `@gemma-bot tpu list`):"]
    for group in reg.groups():
        verbs = [" ".join(c.words[1:]) or "[options]" for c in reg.commands(group)]
        lines.append(f"• `/{group}` {', '.join(verbs)}")
    lines.append("`help tpu` lists a group, `help tpu create` explains a command, `help all` shows all.")
    footer = f"_{DISTRIBUTION} {bot_version()}_"
    return "\n".join([*lines, *_deployments_line(fleet, deployment), footer])


def _deployments_line(fleet: Fleet | None, deployment: str) -> list[str]:
    """With several deployments: each one and its bound channels, and how to choose one elsewhere."""
    if fleet is None or len(fleet.services) < 2:
        return []
    names = []
    for name in fleet.names:
        bound = " ".join(channel_link(channel) for channel, owner in fleet.channels.items() if owner == name)
        names.append(f"`{name}`" + (f" ({bound})" if bound else ""))
    return [
        f"*Deployments* {', '.join(names)}: a bound channel acts on its own; elsewhere add "
        f"`--deployment NAME` (this answer: `{deployment}`)"
    ]


def settings_summary(s: Settings, fleet: Fleet | None, deployment: str) -> str:
    """The active settings, every secret masked (`bot.config.masked`), after the deployments line."""
    endpoint = s.vllm_base_url or f"discovered from the ACTIVE queued resource's node, port {s.vllm_port}"
    return "\n".join(
        [
            *_deployments_line(fleet, deployment),
            "*Active settings*",
            f"• project `{s.gcp_project}`, zones `{', '.join(s.tpu_zones)}`",
            f"• default accelerator `{s.tpu_accelerator_type}`, runtime `{s.tpu_runtime_version}`",
            f"• model `{s.vllm_model}`, endpoint {endpoint}",
            f"• mode `{s.bot_mode}`, bot token {masked(s.slack_bot_token)}, "
            f"signing secret {masked(s.slack_signing_secret)}, app token {masked(s.slack_app_token)}, "
            f"vLLM API key {masked(s.vllm_api_key)}",
        ]
    )
