"""Serving SLO rules on vLLM's Prometheus metrics: windowed measures, rules that must hold for a while, and
alerts that resolve in place with how long they lasted. Pure apart from `load_rules` (reads a YAML file).

Each alert tick scrapes `/metrics` once. `Snapshot.from_text` keeps the cumulative figures a window needs
(histogram buckets of TTFT and end-to-end latency, finished requests by reason, generation tokens,
preemptions) and the gauges (waiting requests, KV-cache usage). `measure` compares the newest snapshot with
the one a window earlier (counters and histograms are cumulative since the server started, so a window
needs the difference of two scrapes; names at https://docs.vllm.ai/en/latest/usage/metrics.html), and
`evaluate_slo` applies the rules.

Metric names a rule may use (all "higher is worse"; a rule holds while the value is above its threshold):
    ttft_p95_s           p95 time to first token over the window, seconds (`vllm:time_to_first_token_seconds`)
    e2e_p95_s            p95 end-to-end request latency over the window, seconds
                         (`vllm:e2e_request_latency_seconds`)
    waiting_requests     requests waiting to be scheduled now (`vllm:num_requests_waiting`)
    error_rate           share 0..1 of requests finished with reason "error" over the window
                         (`vllm:request_success_total{finished_reason="error"}` / all finished)
    kv_cache_usage       KV-cache blocks in use now, fraction 0..1 (`vllm:kv_cache_usage_perc`)
    preemptions          engine preemptions during the window (`vllm:num_preemptions_total` delta)
    generation_stalled   requests waiting while no token was generated during the window, else 0
                         (`vllm:generation_tokens_total` unchanged, `vllm:num_requests_waiting` > 0)
A measure without data (no request finished in the window, a single scrape, a counter that went down
because the server restarted) is None, and a rule on it does not hold.

Rules file (YAML), e.g.::

    rules:
      - name: ttft-p95
        metric: ttft_p95_s
        above: 2.0        # threshold, in the metric's unit
        for: 5m           # how long it must hold before the alert (0s: at the first scrape)
        window: 5m        # the measuring window of windowed metrics (default 5m)
        severity: warning # info | warning | critical
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ops.alerts.alert import Alert
from ops.datafile import DataFileError, check, load
from ops.linear import linear
from ops.times import from_rfc3339, parse_duration, rfc3339
from ops.vllm.metrics import histogram_quantile, samples_by_name

__all__ = [
    "DEFAULT_RULES",
    "METRICS",
    "SEVERITIES",
    "SloRule",
    "SloWatch",
    "Snapshot",
    "evaluate_slo",
    "load_rules",
    "measure",
    "parse_rules",
]

SEVERITIES = ("info", "warning", "critical")

# metric -> (label for messages, unit formatter)
METRICS: dict[str, tuple[str, str]] = {
    "ttft_p95_s": ("TTFT p95", "s"),
    "e2e_p95_s": ("end-to-end latency p95", "s"),
    "waiting_requests": ("requests waiting", ""),
    "error_rate": ("error rate", "%"),
    "kv_cache_usage": ("KV cache usage", "%"),
    "preemptions": ("preemptions in the window", ""),
    "generation_stalled": ("requests waiting with no token generated", ""),
}

_NAME = linear(r"^[a-z0-9][a-z0-9_-]{0,39}$")


@dataclass(frozen=True)
class SloRule:
    """One serving rule: `metric` above `threshold` for `hold` raises an alert of `severity`.

    Attributes:
        name: short id used in alert keys and `/alerts mute` (lowercase letters, digits, - and _).
        metric: one of METRICS.
        threshold: in the metric's unit (seconds, requests, fraction 0..1).
        hold: how long the rule must hold before the alert (timedelta(0): at the first scrape).
        window: measuring window of windowed metrics.
        severity: "info", "warning" or "critical".
    """

    name: str
    metric: str
    threshold: float
    hold: timedelta = timedelta(minutes=5)
    window: timedelta = timedelta(minutes=5)
    severity: str = "warning"


# Starting points; a team replaces them with SLO_RULES_FILE. Thresholds are this project's defaults for an
# interactive chat deployment, not vLLM figures.
DEFAULT_RULES: tuple[SloRule, ...] = (
    SloRule("ttft-p95", "ttft_p95_s", 2.0),
    SloRule("e2e-p95", "e2e_p95_s", 60.0),
    SloRule("queue", "waiting_requests", 20),
    SloRule("errors", "error_rate", 0.05),
    SloRule("stalled", "generation_stalled", 0, hold=timedelta(minutes=2), severity="critical"),
)


class _RuleEntry(BaseModel):
    """One `rules:` entry of a rules file (format in the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    metric: str
    above: float = Field(strict=True, ge=0)
    hold: str = Field("5m", alias="for")
    window: str = "5m"
    severity: Literal["info", "warning", "critical"] = "warning"

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if not _NAME.match(name):
            raise ValueError(f"name {name!r} must be 1-40 lowercase letters, digits, - or _")
        return name

    @field_validator("metric")
    @classmethod
    def _metric(cls, metric: str) -> str:
        if metric not in METRICS:
            raise ValueError(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")
        return metric

    @field_validator("hold", "window")
    @classmethod
    def _duration(cls, word: str) -> str:
        parse_duration(word.strip())  # ValueError: names the word and an example
        return word.strip()

    @field_validator("window")
    @classmethod
    def _positive(cls, word: str) -> str:
        if parse_duration(word) <= timedelta(0):
            raise ValueError("window must be longer than 0s")
        return word


class _RulesFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: list[_RuleEntry] = Field(min_length=1)


def _rules(parsed: _RulesFile) -> tuple[SloRule, ...]:
    rules: list[SloRule] = []
    for entry in parsed.rules:
        if entry.name in {r.name for r in rules}:
            raise DataFileError(f"rule {entry.name}: duplicate name")
        hold, window = parse_duration(entry.hold), parse_duration(entry.window)
        rules.append(SloRule(entry.name, entry.metric, entry.above, hold, window, entry.severity))
    return tuple(rules)


def parse_rules(data: Any) -> tuple[SloRule, ...]:
    """Validate the parsed YAML of a rules file (a mapping with a non-empty `rules` list).

    Raises:
        ops.datafile.DataFileError (a ValueError): each problem as "rules[i].field: what"; a name used
            twice.
    """
    return _rules(check(data, _RulesFile))


def load_rules(path: str | Path) -> tuple[SloRule, ...]:
    """Read and validate a rules YAML file (format in the module docstring).

    Raises:
        ops.datafile.DataFileError (a ValueError): unreadable file, not YAML, or each invalid field as
            "FILE:LINE: rules[i].field: what"; a name used twice.
    """
    parsed, _ = load(path, _RulesFile)
    return _rules(parsed)


# ---- snapshots and measures ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """The cumulative and instantaneous figures of one scrape (summed over engines; KV usage: maximum).

    Buckets map the upper bound `le` as text ("0.5", "+Inf") to the cumulative count.
    """

    at: str  # ISO 8601 UTC
    ttft: dict[str, float] = field(default_factory=dict)
    e2e: dict[str, float] = field(default_factory=dict)
    finished: dict[str, float] = field(default_factory=dict)
    generation_tokens: float | None = None
    preemptions: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None

    @classmethod
    def from_text(cls, text: str, now: datetime) -> Snapshot:
        """Read a `/metrics` body (Prometheus text format; `_created` samples ignored).

        Raises:
            ValueError: not Prometheus text format.
        """
        ttft: dict[str, float] = defaultdict(float)
        e2e: dict[str, float] = defaultdict(float)
        finished: dict[str, float] = defaultdict(float)
        sums: dict[str, float] = defaultdict(float)
        seen: set[str] = set()
        kv: float | None = None
        for name, series in samples_by_name(text).items():
            for labels, value in series:
                if name == "vllm:time_to_first_token_seconds_bucket":
                    ttft[labels.get("le", "")] += value
                elif name == "vllm:e2e_request_latency_seconds_bucket":
                    e2e[labels.get("le", "")] += value
                elif name == "vllm:request_success_total":
                    finished[labels.get("finished_reason", "")] += value
                elif name in ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"):
                    kv = value if kv is None else max(kv, value)
                elif name in (
                    "vllm:generation_tokens_total",
                    "vllm:num_preemptions_total",
                    "vllm:num_requests_waiting",
                ):
                    sums[name] += value
                    seen.add(name)

        def total(name: str) -> float | None:
            return sums[name] if name in seen else None

        return cls(
            at=rfc3339(now),
            ttft=dict(ttft),
            e2e=dict(e2e),
            finished=dict(finished),
            generation_tokens=total("vllm:generation_tokens_total"),
            preemptions=total("vllm:num_preemptions_total"),
            waiting=total("vllm:num_requests_waiting"),
            kv_cache_usage=kv,
        )

    @property
    def time(self) -> datetime:
        return from_rfc3339(self.at)

    @property
    def requests(self) -> float:
        """Requests finished since the server started (all reasons)."""
        return sum(self.finished.values())


def _le(text: str) -> float:
    return math.inf if text in ("+Inf", "Inf", "inf") else float(text)


def _delta_p95(new: Mapping[str, float], old: Mapping[str, float]) -> float | None:
    pairs = [(_le(le), count - old.get(le, 0.0)) for le, count in new.items()]
    if not pairs or any(count < 0 for _, count in pairs):
        return None  # no histogram, or the server restarted (counts went down)
    if max(count for _, count in pairs) <= 0:
        return None  # no request finished in the window
    return histogram_quantile(0.95, pairs)


def _baseline(history: Sequence[Snapshot], now: datetime, window: timedelta) -> Snapshot | None:
    """The newest snapshot at least `window` old, else the oldest one (a partial window)."""
    older = [s for s in history[:-1] if s.time <= now - window]
    if older:
        return older[-1]
    return history[0] if len(history) > 1 else None


def measure(history: Sequence[Snapshot], metric: str, window: timedelta) -> float | None:
    """The value of `metric` (see METRICS) at the newest snapshot of `history` (oldest first), or None."""
    if not history:
        return None
    new = history[-1]
    if metric == "waiting_requests":
        return new.waiting
    if metric == "kv_cache_usage":
        return new.kv_cache_usage
    old = _baseline(history, new.time, window)
    if old is None:
        return None
    if metric == "ttft_p95_s":
        return _delta_p95(new.ttft, old.ttft)
    if metric == "e2e_p95_s":
        return _delta_p95(new.e2e, old.e2e)
    if metric == "error_rate":
        done = new.requests - old.requests
        errors = new.finished.get("error", 0.0) - old.finished.get("error", 0.0)
        return errors / done if done > 0 and errors >= 0 else None
    if metric == "preemptions":
        if new.preemptions is None or old.preemptions is None or new.preemptions < old.preemptions:
            return None
        return new.preemptions - old.preemptions
    if metric == "generation_stalled":
        if new.generation_tokens is None or old.generation_tokens is None or new.waiting is None:
            return None
        stalled = new.generation_tokens == old.generation_tokens and new.waiting > 0
        return new.waiting if stalled else 0.0
    raise ValueError(f"unknown metric {metric!r}")


def show(metric: str, value: float) -> str:
    """A value in the metric's unit for a message: "3.20 s", "12", "7%"."""
    unit = METRICS[metric][1]
    if unit == "s":
        return f"{value:.2f} s"
    if unit == "%":
        return f"{value:.0%}"
    return f"{value:g}"


# ---- rule state and alerts -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SloWatch:
    """What the SLO watcher remembers between ticks (JSON in the alert store).

    history: recent snapshots, oldest first (as dicts); since: rule name -> when it started holding (ISO);
    alerted: rule name -> key of its open alert.
    """

    history: tuple[dict[str, Any], ...] = ()
    since: dict[str, str] = field(default_factory=dict)
    alerted: dict[str, str] = field(default_factory=dict)

    def snapshots(self) -> list[Snapshot]:
        return [Snapshot(**item) for item in self.history]

    def to_json(self) -> str:
        return json.dumps({"history": list(self.history), "since": self.since, "alerted": self.alerted})

    @classmethod
    def from_json(cls, text: str | None) -> SloWatch:
        if not text:
            return cls()
        data = json.loads(text)
        return cls(tuple(data.get("history", ())), dict(data.get("since", {})), dict(data.get("alerted", {})))


def _ago(delta: timedelta) -> str:
    minutes = max(0, int(delta.total_seconds() // 60))
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min"


def evaluate_slo(
    snapshot: Snapshot | None,
    watch: SloWatch,
    rules: Sequence[SloRule],
    now: datetime,
    *,
    endpoint: str,
) -> tuple[list[Alert], SloWatch]:
    """Apply `rules` after a new scrape. Pure.

    A rule that holds (value above threshold) for at least its `hold` raises one alert (kind "slo", keyed
    by the rule and the time it started holding). When it stops holding (or has no data), a recovery Alert
    with `resolves` = that key says how long it lasted. `snapshot` None (no scrape) changes nothing.

    Args:
        snapshot: this tick's scrape, or None.
        watch: the previous state; rules: the rules; now: timezone-aware UTC.
        endpoint: the vLLM URL without credentials (alerts' resource is "vllm:<endpoint>").

    Returns:
        (alerts to post, new state). The history keeps what the longest window needs.
    """
    if snapshot is None:
        return [], watch
    longest = max((max(r.window, r.hold) for r in rules), default=timedelta(minutes=5))
    kept = watch.snapshots()
    recent = [s for s in kept if s.time > now - longest]
    older = [s for s in kept if s.time <= now - longest]
    history = older[-1:] + recent + [snapshot]  # the newest older one is the baseline of a full window
    since, alerted = dict(watch.since), dict(watch.alerted)
    resource = f"vllm:{endpoint}"
    alerts: list[Alert] = []
    for rule in rules:
        value = measure(history, rule.metric, rule.window)
        label = METRICS[rule.metric][0]
        holding = value is not None and value > rule.threshold
        if holding:
            assert value is not None
            start = since.setdefault(rule.name, snapshot.at)
            began = from_rfc3339(start)
            if now - began >= rule.hold and rule.name not in alerted:
                key = f"{resource}|slo|{rule.name}@{start}"
                alerted[rule.name] = key
                alerts.append(
                    Alert(
                        key,
                        "slo",
                        resource,
                        "",
                        "",
                        f"SLO `{rule.name}`: {label} {show(rule.metric, value)} above "
                        f"{show(rule.metric, rule.threshold)} for {_ago(now - began)}",
                        f"vLLM at `{endpoint}`; rule: {rule.metric} > {rule.threshold:g} for "
                        f"{_ago(rule.hold)} over {_ago(rule.window)}",
                        severity=rule.severity,
                    )
                )
            continue
        started = since.pop(rule.name, "")
        open_key = alerted.pop(rule.name, "")
        if open_key and started:
            began = from_rfc3339(started)
            now_text = "no data" if value is None else show(rule.metric, value)
            alerts.append(
                Alert(
                    f"{open_key}|resolved",
                    "slo_ok",
                    resource,
                    "",
                    "",
                    f"SLO `{rule.name}` back within its threshold ({label} now {now_text}); "
                    f"lasted {_ago(now - began)}",
                    resolves=open_key,
                    severity=rule.severity,
                )
            )
    return alerts, SloWatch(tuple(asdict(s) for s in history), since, alerted)
