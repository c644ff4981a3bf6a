"""Admin answers: the audit trail (/tpu audit), the Hugging Face token form and its results (/tpu token), and
help as text (the command list from the registry, one command's usage, the active settings, secrets
masked)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from slack_sdk.models.blocks import (
    InputBlock,
    MarkdownTextObject,
    PlainTextInputElement,
    PlainTextObject,
    SectionBlock,
)
from slack_sdk.models.views import View

from bot.commands.registry import Command, Registry, Role
from bot.config import Settings, masked
from bot.slack.render import (
    Reply,
    blocks_reply,
    channel_link,
    code,
    context,
    header,
    mention,
    plural,
    section,
    text_reply,
    utc,
)
from bot.version import DISTRIBUTION, bot_version
from ops.store.state import AuditEntry

SECRET_FORM_ID = "hf_token_form"  # noqa: S105  (a Slack callback id, not a secret)
TOKEN_MAX_CHARS = 200  # the form's input; Hugging Face tokens are "hf_" and at most 100 more characters


def audit(entries: list[AuditEntry], *, reads: bool, scanned: int) -> Reply:
    """The audit lines, newest first, as a code block under a header.

    Args:
        entries: the lines to show (changes only unless `reads`).
        reads: whether read-only commands were asked for (`--reads`).
        scanned: how many lines were read to find them (0: the trail is empty).
    """
    if not entries:
        what = "The audit trail is empty." if reads or not scanned else "No change in the audit trail yet"
        more = "" if reads or not scanned else f" ({plural(scanned, 'read line')}: `/tpu audit --reads`)."
        return blocks_reply([section(what + more)])
    lines = [
        f"{utc(e.at)} {e.user_id:<11} {e.channel_id:<11} {e.action:<17} /{e.command} -> {e.outcome}"
        + (f" ({e.duration_s:.1f} s)" if e.duration_s is not None else "")
        for e in entries
    ]
    title = f"Audit: last {len(entries)}" + ("" if reads else " changes")
    note = [] if reads else [context("Read-only commands are left out: `/tpu audit --reads` shows them too.")]
    return blocks_reply([header(title), section(code("\n".join(lines))), *note])


def token_modal(channel_id: str, secret: str, deployment: str = "") -> dict[str, Any]:
    """The modal (views.open payload) that takes a Hugging Face token in a single-line input. Its private
    metadata is "CHANNEL DEPLOYMENT": the submission is stored in the project of the deployment it was
    opened for (https://api.slack.com/reference/surfaces/views)."""
    view = View(
        type="modal",
        callback_id=SECRET_FORM_ID,
        private_metadata=f"{channel_id} {deployment}".strip(),
        title=PlainTextObject(text="Hugging Face token"),
        submit=PlainTextObject(text="Store"),
        close=PlainTextObject(text="Cancel"),
        blocks=[
            SectionBlock(
                text=MarkdownTextObject(
                    text=f"Stored as a new version of Secret Manager secret `{secret}`. "
                    "The TPU VM reads it there; it is never shown, logged or sent to the model."
                )
            ),
            InputBlock(
                block_id="token",
                label=PlainTextObject(text="Token (hf_...)"),
                element=PlainTextInputElement(action_id="value", max_length=TOKEN_MAX_CHARS),
            ),
        ],
    )
    return view.to_dict()


def form_opened() -> Reply:
    """`/tpu token`'s answer once the form is open."""
    return blocks_reply([section("Opened a form to paste the Hugging Face token (only you can see it).")])


def token_stored(user_id: str, version: str) -> Reply:
    """Who stored a new token and its Secret Manager version name (never the token)."""
    return blocks_reply(
        [section(f":white_check_mark: {mention(user_id)} stored a new Hugging Face token: `{version}`.")]
    )


def help_reply(markdown: str) -> Reply:
    """A help answer: `markdown` (from the functions below) in as many sections as it needs."""
    return text_reply(markdown)


def all_help(
    reg: Registry, s: Settings, deployments: Mapping[str, Sequence[str]] | None, deployment: str
) -> Reply:
    """`help all`: every group's usage lines, a section each, then the active settings (secrets masked).
    `deployments`: each deployment's name -> the channels bound to it, in configuration order
    (`bot.services.Fleet.bound_channels`; None: a single deployment); `deployment`: the one answering."""
    blocks = [section(reg.group_usage(group)) for group in reg.groups()]
    blocks.append(section(settings_summary(s, deployments, deployment)))
    return blocks_reply(blocks)


def command_help(command: Command) -> str:
    """One command's usage line, summary, one line per option, and the role it needs above viewer."""
    lines = [f"`{command.usage()}`", command.summary]
    lines += [f"• `{p.flag or p.metavar}`: {p.help}" for p in command.params]
    if command.role > Role.VIEWER:
        lines.append(f"_Needs the {command.role.name.lower()} role._")
    return "\n".join(lines)


def short_help(reg: Registry, deployments: Mapping[str, Sequence[str]] | None, deployment: str) -> str:
    """One line per command group with its verbs, how to ask for more, the deployments (when several, as in
    `all_help`), and the bot's version."""
    lines = ["*Commands* (type `/tpu list` or mention me with the same words, e.g. `@gemma-bot tpu list`):"]
    for group in reg.groups():
        verbs = [" ".join(c.words[1:]) or "[options]" for c in reg.commands(group)]
        lines.append(f"• `/{group}` {', '.join(verbs)}")
    lines.append("`help tpu` lists a group, `help tpu create` explains a command, `help all` shows all.")
    footer = f"_{DISTRIBUTION} {bot_version()}_"
    return "\n".join([*lines, *_deployments_line(deployments, deployment), footer])


def _deployments_line(deployments: Mapping[str, Sequence[str]] | None, deployment: str) -> list[str]:
    """With several deployments: each one and its bound channels, and how to choose one elsewhere."""
    if deployments is None or len(deployments) < 2:
        return []
    names = []
    for name, channels in deployments.items():
        bound = " ".join(channel_link(channel) for channel in channels)
        names.append(f"`{name}`" + (f" ({bound})" if bound else ""))
    return [
        f"*Deployments* {', '.join(names)}: a bound channel acts on its own; elsewhere add "
        f"`--deployment NAME` (this answer: `{deployment}`)"
    ]


def settings_summary(s: Settings, deployments: Mapping[str, Sequence[str]] | None, deployment: str) -> str:
    """The active settings, every secret masked (`bot.config.masked`), after the deployments line (as in
    `all_help`)."""
    endpoint = s.vllm_base_url or f"discovered from the ACTIVE queued resource's node, port {s.vllm_port}"
    return "\n".join(
        [
            *_deployments_line(deployments, deployment),
            "*Active settings*",
            f"• project `{s.gcp_project}`, zones `{', '.join(s.tpu_zones)}`",
            f"• default accelerator `{s.tpu_accelerator_type}`, runtime `{s.tpu_runtime_version}`",
            f"• model `{s.vllm_model}`, endpoint {endpoint}",
            f"• mode `{s.bot_mode}`, bot token {masked(s.slack_bot_token)}, "
            f"signing secret {masked(s.slack_signing_secret)}, app token {masked(s.slack_app_token)}, "
            f"vLLM API key {masked(s.vllm_api_key)}",
        ]
    )
