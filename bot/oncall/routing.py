"""Where an alert goes: channels by alert kind and severity, and who is mentioned on critical ones.

`ALERT_ROUTES` maps a kind or a severity to a channel ("critical=C0PAGE01,expiry=C0COST01"). An alert goes
to the channel of its kind if one is given, else of its severity, else `ALERT_CHANNEL`. Critical alerts
mention `ALERT_MENTION_GROUP` (a Slack user group, written `<!subteam^ID>` in a message:
https://docs.slack.dev/messaging/formatting-message-text#mentioning-groups).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot.slack.render import group_mention
from ops.alerts.alert import Alert
from ops.linear import linear

__all__ = ["KINDS", "SEVERITIES", "Router", "parse_routes", "severity_of"]

SEVERITIES = ("info", "warning", "critical")
# Every alert kind the scheduler posts (a route or a mute may name any of them).
KINDS = (
    "expiry",
    "valid_until",
    "state",
    "preempted",
    "stale",
    "vllm_down",
    "kv_cache",
    "preemptions",
    "slo",
    "idle",
    "serving",
    "stuck",
    "recovery",
    "maintenance",
)
_CHANNEL = linear(r"^[CG][A-Z0-9]{2,}$")

# Kinds whose default severity is fixed; the others are computed in `severity_of`.
_DEFAULT_SEVERITY = {
    "vllm_down": "critical",
    "preempted": "critical",
    "stale": "warning",
    "kv_cache": "warning",
    "preemptions": "warning",
    "slo": "warning",
    "idle": "info",
    "serving": "info",
    "stuck": "critical",
    "recovery": "warning",
}


def severity_of(alert: Alert) -> str:
    """The alert's severity: its own if set, else the kind's default; expiry inside 15 minutes and a
    FAILED or SUSPENDED state are critical, other expiries warnings, other state changes info."""
    if alert.severity:
        return alert.severity
    if alert.kind in ("expiry", "valid_until"):
        return "critical" if alert.threshold is not None and alert.threshold <= 15 else "warning"
    if alert.kind == "state":
        return "critical" if alert.state in ("FAILED", "SUSPENDED") else "info"
    return _DEFAULT_SEVERITY.get(alert.kind, "info")


def parse_routes(items: Sequence[str]) -> dict[str, str]:
    """Read `ALERT_ROUTES` items "KEY=CHANNEL" (KEY a kind or a severity).

    Raises:
        ValueError: a malformed item, an unknown key or a bad channel id (one line).
    """
    routes: dict[str, str] = {}
    for item in items:
        key, sep, channel = (part.strip() for part in item.partition("="))
        if not sep:
            raise ValueError(f"{item!r} is not KIND=CHANNEL or SEVERITY=CHANNEL")
        if key not in KINDS and key not in SEVERITIES:
            raise ValueError(f"{key!r} is neither an alert kind ({', '.join(KINDS)}) nor a severity")
        if not _CHANNEL.match(channel):
            raise ValueError(f"{channel!r} is not a channel id (C... or G...)")
        routes[key] = channel
    return routes


@dataclass(frozen=True)
class Router:
    """Routing of alerts.

    Args:
        default: ALERT_CHANNEL.
        routes: kind or severity -> channel id (from `parse_routes`).
        mention_group: user-group id (S...) mentioned on critical alerts, or None.
    """

    default: str
    routes: Mapping[str, str] = field(default_factory=dict)
    mention_group: str | None = None

    def channel(self, alert: Alert) -> str:
        """The channel for `alert` (kind, then severity, then the default)."""
        return self.routes.get(alert.kind) or self.routes.get(severity_of(alert)) or self.default

    def mention(self, alert: Alert) -> str:
        """A live mention of the group (`<!subteam^S…>`) and a space for a critical alert when a group is
        set, else ""."""
        if self.mention_group and severity_of(alert) == "critical":
            return f"{group_mention(self.mention_group)} "
        return ""
