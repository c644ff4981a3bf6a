"""One alert to post, as data: no store, no clients (the ledger that records alerts is `ops.alerts.ledger`).

Kept apart from `ops.alerts.ledger` so that reading the settings (`bot.oncall.routing`, `ops.vllm.slo`) does
not import the
state store's SQL layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

__all__ = ["Alert"]


@dataclass(frozen=True)
class Alert:
    """One alert to post (or to record as suppressed when its resource is muted).

    Attributes:
        key: unique "resource|kind|threshold" string (see the module docstring).
        kind: "expiry" (termination time), "valid_until" (queueing deadline), "state" (a state change),
            "preempted" (a node), "node_gone" (a node NOT_FOUND under an ACTIVE queued resource), "stale"
            (SUSPENDED/FAILED over a day), "vllm_down" (down, or wedged), "kv_cache", "preemptions", "test",
            "maintenance" (TPU host maintenance announced, `ops.tpu.maintenance`).
        resource: identity "zone/name@create" or, for vLLM, "vllm:<url>".
        name, zone: the queued resource ("" for vLLM alerts).
        title: one line; text: the details (mrkdwn).
        threshold: minutes before the deadline for expiry kinds; None otherwise.
        deadline: the deadline of expiry kinds; None otherwise.
        state, previous: new and old state for "state" alerts.
        supersedes: keys of less urgent thresholds (already passed) to record as superseded.
        buttons: whether to offer Delete now / Snooze 1 h / Acknowledge.
        resolves: for a recovery: the key of the alert it resolves (its message is updated).
        severity: "info", "warning" or "critical"; "" takes the kind's default (see `bot.oncall.routing`).
        node: the node an alert is about ("" when none), so a mute of the node silences it.
    """

    key: str
    kind: str
    resource: str
    name: str
    zone: str
    title: str
    text: str = ""
    threshold: int | None = None
    deadline: datetime | None = None
    state: str = ""
    previous: str = ""
    supersedes: tuple[str, ...] = ()
    buttons: bool = False
    resolves: str | None = None
    severity: str = ""
    node: str = ""
