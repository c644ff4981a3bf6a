"""The vLLM watcher: pure evaluation of one vLLM check (/health, /metrics) into alerts, with the state it
keeps between checks (persisted as JSON in the alert ledger by the scheduler)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from ops.alerts.ledger import Alert, subject_alert
from ops.times import from_rfc3339, iso_utc, minutes_text
from ops.vllm.server import WEDGED, ServingSample, serving_problem

__all__ = ["VllmCheck", "VllmWatch", "evaluate_vllm"]


@dataclass(frozen=True)
class VllmCheck:
    """One vLLM check: /health ok or not, and (when it answered) KV-cache usage 0..1, preemptions, and the
    progress signals: requests running and waiting, generated tokens since start, and whether a one-token
    probe timed out (None: no probe). `other_server` is the line of an identity verdict "other"
    (`ops.vllm.server.ServerIdentity.line`): something that is not the deployment's container answers."""

    ok: bool
    detail: str = ""
    kv_cache_usage: float | None = None
    preemptions: float | None = None
    running: float | None = None
    waiting: float | None = None
    generation_tokens: float | None = None
    probe_timed_out: bool | None = None
    other_server: str = ""


@dataclass(frozen=True)
class VllmWatch:
    """What the vLLM watcher remembers between checks (persisted as JSON by the scheduler).

    failures: consecutive failed /health checks; down_since: first failure of the current run (ISO);
    alerted: key of the open outage alert; kv_high: consecutive checks above the KV threshold;
    kv_alerted: whether the current high streak was alerted; preemptions: last count seen.
    """

    failures: int = 0
    down_since: str | None = None
    alerted: str | None = None
    kv_high: int = 0
    kv_alerted: bool = False
    preemptions: float | None = None
    tokens: float | None = None
    tokens_at: str | None = None
    wedged: bool = False
    other_server: bool = False

    def to_json(self) -> str:
        return json.dumps(self.__dict__)

    @classmethod
    def from_json(cls, text: str | None) -> VllmWatch:
        if not text:
            return cls()
        data = json.loads(text)
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def evaluate_vllm(
    check: VllmCheck,
    watch: VllmWatch,
    now: datetime,
    *,
    endpoint: str,
    failures: int = 3,
    kv_threshold: float = 0.9,
    kv_checks: int = 3,
) -> tuple[list[Alert], VllmWatch]:
    """Alerts from one vLLM check, and the new watcher state. Pure.

    `failures` failed /health checks in a row raise "vllm_down" (once per outage); a check whose /health is
    200 while requests wait, none runs and no token was generated since the last check (or a probe timed
    out) counts as failed too, and its alert says "answers /health but generates nothing"; so does a check
    whose answers come from something other than the deployment's container (`other_server`: the alert
    says "is answered by something else, not its container" and its detail who answers); the next good check
    returns a recovery Alert with `resolves` = that key and the outage length (minutes). KV-cache usage
    above `kv_threshold` (fraction 0..1) for `kv_checks` checks in a row raises "kv_cache" once per streak.
    A preemption count higher than the last one seen raises "preemptions" (keyed by the count).

    Returns:
        (alerts, new watch state).
    """
    resource = f"vllm:{endpoint}"
    alerts: list[Alert] = []
    state = dict(watch.__dict__)
    wedged = _wedged(check, watch, now)
    state.update(tokens=check.generation_tokens, tokens_at=iso_utc(now))
    other = check.other_server
    if other:  # /health 200, but from something else: the deployment's own server is down
        check = VllmCheck(False, other)
    elif wedged:  # /health 200 but no progress: an outage all the same
        check = VllmCheck(False, wedged)
    if not check.ok:
        if not watch.failures:
            state["wedged"] = bool(wedged)
            state["other_server"] = bool(other)
        state["failures"] = watch.failures + 1
        state["down_since"] = watch.down_since or iso_utc(now)
        if state["failures"] >= failures and not watch.alerted:
            key = f"{resource}@{state['down_since']}|vllm_down|{failures}"
            state["alerted"] = key
            what = WEDGED if state["wedged"] else "is down"
            if state["other_server"]:
                what = "is answered by something else, not its container"
            alerts.append(
                subject_alert(key, "vllm_down", resource, f"vLLM at `{endpoint}` {what}", check.detail)
            )
        state["kv_high"], state["kv_alerted"] = 0, False
        return alerts, VllmWatch(**state)
    if watch.alerted and watch.down_since:
        since = from_rfc3339(watch.down_since)
        alerts.append(
            subject_alert(
                f"{watch.alerted}|resolved",
                "vllm_up",
                resource,
                f"vLLM at `{endpoint}` recovered after {minutes_text(now - since, floor=True)}",
                resolves=watch.alerted,
            )
        )
    state.update(failures=0, down_since=None, alerted=None, wedged=False, other_server=False)
    if check.kv_cache_usage is not None and check.kv_cache_usage > kv_threshold:
        state["kv_high"] = watch.kv_high + 1
        if state["kv_high"] >= kv_checks and not watch.kv_alerted:
            state["kv_alerted"] = True
            alerts.append(
                subject_alert(
                    f"{resource}@{iso_utc(now)}|kv_cache|{int(kv_threshold * 100)}",
                    "kv_cache",
                    resource,
                    f"vLLM KV cache at {check.kv_cache_usage:.0%} for {state['kv_high']} checks "
                    f"(threshold {kv_threshold:.0%})",
                )
            )
    else:
        state["kv_high"], state["kv_alerted"] = 0, False
    if check.preemptions is not None:
        if watch.preemptions is not None and check.preemptions > watch.preemptions:
            alerts.append(
                subject_alert(
                    f"{resource}|preemptions|{int(check.preemptions)}",
                    "preemptions",
                    resource,
                    f"vLLM preemptions rising: {int(watch.preemptions)} -> {int(check.preemptions)} "
                    "(KV-cache pressure)",
                )
            )
        state["preemptions"] = check.preemptions
    return alerts, VllmWatch(**state)


def _wedged(check: VllmCheck, watch: VllmWatch, now: datetime) -> str:
    """The wedged verdict of `ops.vllm.server.serving_problem` from the last and this check's token counts."""
    samples = []
    if watch.tokens is not None and watch.tokens_at:
        then = from_rfc3339(watch.tokens_at)
        samples.append(ServingSample(-(now - then).total_seconds(), None, None, watch.tokens))
    samples.append(ServingSample(0.0, check.running, check.waiting, check.generation_tokens))
    return serving_problem(samples, health_ready=check.ok, probe_timed_out=check.probe_timed_out) or ""
