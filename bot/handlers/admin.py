"""Admin commands: `/tpu audit` (the audit trail) and `/tpu token` (a new Hugging Face token version)."""

from __future__ import annotations

from bot.commands.context import Context
from bot.commands.registry import Param, Role, UsageError, int_range, registry
from bot.slack.render import Reply
from bot.views.admin import audit, form_opened, token_modal, token_stored
from ops.errors import BadInput
from ops.linear import linear
from ops.store.state import AuditEntry

# Audit actions that are about a change whatever the command: a refusal, a confirmation asked or given, a
# cancel. A "command"/"result" line is a change when its command changes infrastructure or writes.
_CHANGE_ACTIONS = frozenset({"refuse", "confirm-requested", "confirm", "cancel"})
_SCAN = 5000  # most audit lines read to find the last N changes


def is_change(entry: AuditEntry) -> bool:
    """Whether an audit line is about a change: a refusal, a confirmation, a cancel, or any line of a
    command that changes infrastructure, writes or opens a form (create, delete, restart, token, ...); a
    line whose command no longer parses counts as a change, so nothing is hidden by a renamed command."""
    if entry.action in _CHANGE_ACTIONS:
        return True
    try:
        command = registry.parse(entry.command).command
    except (UsageError, ValueError):
        return True
    return command.changes_infra or command.writes or command.opens_form


@registry.command(
    "tpu audit",
    "The audit trail: changes by default (create, delete, restart, confirm, refusal); --reads adds reads",
    Param.option("last", "how many entries (default 20)", int_range(1, 500), "N"),
    Param.toggle("reads", "also the read-only commands (status, list, ...)"),
    role=Role.ADMIN,
)
def tpu_audit(ctx: Context, last: int | None, reads: bool = False) -> Reply:
    """The last N audit lines about changes, newest first (`is_change`), or about everything with
    `--reads`; the header says how many read lines were left out."""
    wanted = last or 20
    scanned = ctx.services.store.audit(wanted if reads else _SCAN)
    entries = scanned if reads else [e for e in scanned if is_change(e)][:wanted]
    return audit(entries, reads=reads, scanned=len(scanned))


@registry.command(
    "tpu token",
    "Store a new Hugging Face token in Secret Manager (opens a form)",
    role=Role.ADMIN,
    opens_form=True,
)
def tpu_token(ctx: Context) -> Reply:
    """Open the token form; the submission is checked and stored by the view listener."""
    if ctx.open_modal is None:
        raise BadInput("the token form opens from the slash command only", "type /tpu token")
    ctx.open_modal(token_modal(ctx.channel_id, ctx.services.settings.hf_token_secret, ctx.deployment))
    return form_opened()


# Hugging Face user access tokens look like "hf_" followed by letters and digits
# (https://huggingface.co/docs/hub/security-tokens).
HF_TOKEN_SHAPE = linear(r"^hf_[A-Za-z0-9]{20,100}$")


def token_problem(token: str) -> str | None:
    """Why a pasted token is refused (shown in the form), or None when it has the right shape."""
    if not HF_TOKEN_SHAPE.match(token.strip()):
        return "That does not look like a Hugging Face token (hf_ followed by letters and digits)."
    return None


def store_token(ctx: Context, token: str) -> Reply:
    """Store the token as a new Secret Manager version. The token appears in no reply, log or error."""
    secret = ctx.services.settings.hf_token_secret
    version = ctx.services.secrets.add_version(secret, token.strip())
    return token_stored(ctx.user_id, version)
