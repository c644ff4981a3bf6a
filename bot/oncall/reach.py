"""Whether alerts reach their channel: the one line `/alerts list`, App Home and `/tpu status` show while
Slack refuses a deployment's alert channel (or its token), with the fault catalogue's cause and fix.

The refusals are recorded by the alert job (`bot.oncall.delivery`) in `ops.alerts.outbox`; this module only
reads them, so every surface, on any replica, says the same.
"""

from __future__ import annotations

from bot.slack.gateway import Refusal
from bot.slack.render import channel_link, utc
from ops.alerts.outbox import ALL_CHANNELS, AlertOutbox, DeliveryProblem
from ops.diagnosis.notices import refusal_finding
from ops.store.state import Store

__all__ = ["problem_line", "reach_lines"]


def problem_line(problem: DeliveryProblem, held: int = 0) -> str:
    """One mrkdwn line: where alerts cannot go since when, the catalogue's cause and fix, and how many
    alerts are held back meanwhile."""
    where = "any channel" if problem.channel == ALL_CHANNELS else channel_link(problem.channel)
    finding = refusal_finding(Refusal(problem.code, problem.needed, problem.provided).slack_text)
    cause = finding.cause if finding else f"Slack answers `{problem.code}`"
    fix = f" *Fix:* {finding.fix}." if finding else ""
    kept = f" {held} alert(s) held back, posted once it works." if held else ""
    return f":warning: *Alerts cannot reach {where}* since {utc(problem.since)}: {cause}.{fix}{kept}"


def reach_lines(store: Store, deployment: str) -> list[str]:
    """The `problem_line` of every refusal recorded for `deployment` ([] while alerts get through)."""
    outbox = AlertOutbox(store, deployment)
    problems = outbox.problems()
    if not problems:
        return []
    return [problem_line(p, len(outbox.held(p.channel))) for p in problems]
