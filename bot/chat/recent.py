"""The commands run in a conversation and how each ended, read back from the audit trail.

The runner writes every step of a command to the audit trail (`bot.commands.runner.Runner._audit`): "command"
(received), "refuse" (role or input), "confirm-requested", "confirm", "cancel", "result" ("ok" or
"error: ..."). Grouped by run, the last step is the outcome: a follow-up question ("why did the create
fail?") gets the failure as a fact, with its time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from bot.chat.subjects import words_of
from ops.store.state import AuditEntry

__all__ = ["Outcome", "outcomes", "relevant"]

# Runs not worth reading back: the questions themselves (the thread holds them) and ratings.
_SKIPPED = ("gemma chat", "gemma rate", "help")
FAILED_STATES = ("failed", "refused")


@dataclass(frozen=True)
class Outcome:
    """One command run and how it ended.

    Attributes:
        command: the command line as typed (without the slash).
        user_id: who ran it.
        at: when it was received (UTC).
        state: "failed", "refused", "succeeded", "awaiting confirmation", "confirmed", "cancelled" or
            "no outcome recorded" (still running, or the bot stopped).
        detail: the error or refusal message, "" otherwise.
        ended_at: when the last step was written (UTC).
    """

    command: str
    user_id: str
    at: datetime
    state: str
    detail: str
    ended_at: datetime

    @property
    def failed(self) -> bool:
        return self.state in FAILED_STATES

    def line(self) -> str:
        """E.g. "`/tpu create newx` by <@U1> at 05:12 UTC: failed: the primary `gemma4-qr` is already
        ACTIVE"."""
        command = self.command.replace("`", "'")
        text = f"`/{command}` by <@{self.user_id}> at {self.at:%H:%M} UTC: {self.state}"
        return text + (f": {self.detail}" if self.detail else "")


def _state(entry: AuditEntry) -> tuple[str, str]:
    outcome = entry.outcome
    if entry.action == "refuse":
        return "refused", outcome
    if entry.action == "result":
        if outcome == "ok":
            return "succeeded", ""
        return "failed", outcome.removeprefix("error: ")
    if entry.action == "confirm-requested":
        return "awaiting confirmation", ""
    if entry.action == "confirm":
        return "confirmed", ""
    if entry.action == "cancel":
        return "cancelled", outcome
    return "no outcome recorded", ""


def outcomes(entries: Sequence[AuditEntry]) -> list[Outcome]:
    """Audit lines (oldest first) grouped into runs, newest run first; questions and ratings left out.

    A "command" line starts a run; each later line with the same command text is a step of the newest run
    of that text (a Confirm click arrives as "confirm" then "result").
    """
    runs: list[Outcome] = []
    latest: dict[str, int] = {}
    for entry in entries:
        if entry.command.startswith(_SKIPPED):
            continue
        state, detail = _state(entry)
        if entry.action == "command" or entry.command not in latest:
            latest[entry.command] = len(runs)
            runs.append(Outcome(entry.command, entry.user_id, entry.at, state, detail, entry.at))
            continue
        index = latest[entry.command]
        run = runs[index]
        runs[index] = Outcome(run.command, run.user_id, run.at, state, detail, entry.at)
    return list(reversed(runs))


# Words by which a question points back at something just done ("why did that fail?").
_BACK = frozenset({"that", "it", "this", "last", "just", "previous", "command", "earlier"})
_FAILURE = frozenset({"fail", "failed", "failure", "error", "refused", "wrong", "happened", "denied", "why"})


def relevant(runs: Sequence[Outcome], question: str, limit: int = 2) -> list[Outcome]:
    """The runs (newest first) a question is about: those whose command it names by a command word
    ("why did the create fail?" -> `/tpu create ...`), else, when it points back at a failure ("why did
    that fail?"), the newest failed run; at most `limit`. [] when it is about none."""
    asked = set(words_of(question))
    named = [run for run in runs if asked & set(run.command.split()[1:2])]
    if named:
        return sorted(named, key=lambda run: not run.failed)[:limit]
    if asked & _BACK and asked & _FAILURE:
        return [run for run in runs if run.failed][:1]
    return []
