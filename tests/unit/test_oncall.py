"""Pure logic of trustworthy alerts: SLO rules and windowed measures, idle watch and stop schedule, routing,
mute subjects, maintenance windows, the automatic-recovery budget and ownership, and their settings."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from bot.config import ConfigError, load_settings
from bot.oncall.routing import Router, parse_routes, severity_of
from bot.oncall.scheduler import AlertScheduler
from bot.slack.render import to_mrkdwn
from ops.alerts.ledger import Alert, mute_subjects
from ops.alerts.planned import MaintenanceWindows
from ops.cost.idle import IdleWatch, parse_schedule
from ops.store.state import Store
from ops.tpu.model import ZoneListing, queued_resource_from_api
from ops.tpu.ownership import created_by_bot
from ops.tpu.recovery import RecoveryBudget, dead_reason
from ops.vllm.slo import SloRule, SloWatch, Snapshot, evaluate_slo, load_rules, measure, parse_rules
from tests.unit.test_alerts import FakeSlack, FakeVllm

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
TTFT_BUCKETS = ("0.1", "0.5", "1.0", "2.5", "5.0", "+Inf")


def scrape(
    *,
    ttft: dict[str, float] | None = None,
    finished: dict[str, float] | None = None,
    generated: float = 100,
    waiting: float = 0,
    kv: float = 0.3,
    preemptions: float = 0,
) -> str:
    """A vLLM /metrics body in the exposed names (labels sorted, counters with _total)."""
    labels = 'engine="0",model_name="m"'
    lines = [
        f"vllm:num_requests_waiting{{{labels}}} {waiting}",
        f"vllm:kv_cache_usage_perc{{{labels}}} {kv}",
        f"vllm:generation_tokens_total{{{labels}}} {generated}",
        f"vllm:num_preemptions_total{{{labels}}} {preemptions}",
    ]
    for reason, count in (finished or {"stop": 0}).items():
        lines.append(f'vllm:request_success_total{{{labels},finished_reason="{reason}"}} {count}')
    for le, count in (ttft or {}).items():
        lines.append(f'vllm:time_to_first_token_seconds_bucket{{{labels},le="{le}"}} {count}')
    return "\n".join(lines) + "\n"


def cumulative(fast: int, slow: int) -> dict[str, float]:
    """TTFT buckets with `fast` requests under 0.1 s and `slow` ones between 2.5 and 5 s."""
    return {"0.1": fast, "0.5": fast, "1.0": fast, "2.5": fast, "5.0": fast + slow, "+Inf": fast + slow}


def test_windowed_measures_use_counter_deltas() -> None:
    old = Snapshot.from_text(scrape(ttft=cumulative(100, 0), finished={"stop": 100, "error": 0}), NOW)
    new = Snapshot.from_text(
        scrape(ttft=cumulative(100, 20), finished={"stop": 115, "error": 5}, waiting=3),
        NOW + timedelta(minutes=5),
    )
    window = timedelta(minutes=5)
    p95 = measure([old, new], "ttft_p95_s", window)
    assert p95 is not None and 2.5 < p95 <= 5.0  # only the 20 slow requests are in the window
    assert measure([old, new], "error_rate", window) == pytest.approx(0.25)
    assert measure([old, new], "waiting_requests", window) == 3
    assert measure([old, new], "kv_cache_usage", window) == pytest.approx(0.3)
    assert measure([new], "ttft_p95_s", window) is None  # one scrape: no window
    stalled = Snapshot.from_text(scrape(generated=100, waiting=4), NOW + timedelta(minutes=5))
    assert measure([old, stalled], "generation_stalled", window) == 4
    restarted = Snapshot.from_text(scrape(ttft=cumulative(3, 0)), NOW + timedelta(minutes=5))
    assert measure([old, restarted], "ttft_p95_s", window) is None  # counters went down: a restart


def test_slo_rule_fires_after_its_hold_once_and_resolves_with_its_length() -> None:
    rule = SloRule("ttft", "ttft_p95_s", 1.0, hold=timedelta(minutes=2), window=timedelta(minutes=5))
    watch, sent = SloWatch(), []
    fast, slow = 0, 0
    for minute in range(0, 12):
        if 1 <= minute <= 5:
            slow += 10
        else:
            fast += 10
        now = NOW + timedelta(minutes=minute)
        snapshot = Snapshot.from_text(scrape(ttft=cumulative(fast, slow)), now)
        alerts, watch = evaluate_slo(snapshot, watch, [rule], now, endpoint="http://10.0.0.2:8000")
        sent += [(minute, a) for a in alerts]
    (fired_at, fired), (resolved_at, resolved) = sent
    assert fired_at == 3 and fired.kind == "slo" and fired.severity == "warning"
    assert "TTFT p95" in fired.title and "above 1.00 s for 2 min" in fired.title
    assert resolved.resolves == fired.key and resolved.kind == "slo_ok"
    # slow requests from minute 1 to 5; at minute 10 the 5-minute window holds only fast ones
    assert resolved_at == 10 and "lasted 9 min" in resolved.title
    assert evaluate_slo(None, watch, [rule], NOW, endpoint="x") == ([], watch)


def test_rules_file_is_validated_with_one_line(tmp_path: Path) -> None:
    rules = parse_rules({"rules": [{"name": "q", "metric": "waiting_requests", "above": 5, "for": "1m"}]})
    assert rules == (SloRule("q", "waiting_requests", 5.0, timedelta(minutes=1)),)
    bad = [
        ({"rules": []}, "rules: List should have at least 1 item"),
        ({"rules": [{"name": "x", "metric": "ttft", "above": 1}]}, "unknown metric 'ttft'"),
        (
            {"rules": [{"name": "x", "metric": "error_rate", "above": "high"}]},
            "above: Input should be a valid number",
        ),
        ({"rules": [{"name": "x", "metric": "error_rate", "above": 1, "for": "soon"}]}, "not a duration"),
        ({"rules": [{"name": "x", "metric": "error_rate", "above": 1, "severity": "page"}]}, "severity"),
        (
            {"rules": [{"name": "x", "metric": "error_rate", "above": 1, "when": 1}]},
            "when: Extra inputs are not permitted",
        ),
    ]
    for data, message in bad:
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            parse_rules(data)
    path = tmp_path / "rules.yaml"
    path.write_text("rules: [")
    with pytest.raises(ValueError, match=r"rules\.yaml:1: not valid YAML"):
        load_rules(path)
    with pytest.raises(ConfigError, match=r"^SLO_RULES_FILE: .*not valid YAML"):
        _settings(slo_rules_file=str(path))


def _settings(**changes: object) -> object:
    base = {
        "slack_bot_token": "xoxb-1",
        "slack_signing_secret": "s",
        "gcp_project": "demo-project",
        "tpu_zones": "us-east5-a",
    }
    return load_settings(_env_file=None, **{**base, **changes})


@pytest.mark.parametrize(
    ("changes", "line"),
    [
        ({"alert_routes": "slo"}, "ALERT_ROUTES: 'slo' is not KIND=CHANNEL"),
        ({"alert_routes": "pager=C0PAGE01"}, "ALERT_ROUTES: 'pager' is neither an alert kind"),
        ({"alert_routes": "critical=#oncall"}, "ALERT_ROUTES: '#oncall' is not a channel id"),
        ({"idle_alert_after": "1m"}, "IDLE_ALERT_AFTER: give at least 5m"),
        ({"idle_stop_at": "weekdays 20:00"}, "IDLE_STOP_AT: 'weekdays 20:00' is not [DAYS ]HH:MM"),
        ({"alert_mention_group": "U0USER01"}, "ALERT_MENTION_GROUP"),
    ],
)
def test_bad_oncall_settings_are_one_line(changes: dict[str, object], line: str) -> None:
    with pytest.raises(ConfigError) as err:
        _settings(**changes)
    assert str(err.value).startswith(line)


def test_routes_by_kind_then_severity_and_mentions_critical() -> None:
    routes = parse_routes(["critical=C0PAGE01", "expiry=C0COST01", "slo=C0SLO001"])
    router = Router("C0ALERTS", routes, "S0ONCALL")
    down = Alert("k", "vllm_down", "vllm:u", "", "", "down")
    expiry5 = Alert("k", "expiry", "r", "qr", "z", "t", threshold=5)
    stale = Alert("k", "stale", "r", "qr", "z", "t")
    slo_critical = Alert("k", "slo", "vllm:u", "", "", "t", severity="critical")
    assert router.channel(down) == "C0PAGE01" and to_mrkdwn(router.mention(down)) == "<!subteam^S0ONCALL> "
    assert severity_of(expiry5) == "critical" and router.channel(expiry5) == "C0COST01"  # kind wins
    assert router.channel(stale) == "C0ALERTS" and router.mention(stale) == ""
    assert router.channel(slo_critical) == "C0SLO001"
    assert severity_of(Alert("k", "state", "r", "qr", "z", "t", state="FAILED")) == "critical"
    assert severity_of(Alert("k", "state", "r", "qr", "z", "t", state="ACTIVE")) == "info"


def test_mute_subjects_cover_resource_node_endpoint_and_kind() -> None:
    preempted = Alert("k", "preempted", "z/qr@t", "qr", "z", "t", node="qr-node")
    assert mute_subjects(preempted) == {"preempted", "qr", "qr-node"}
    down = Alert("k", "vllm_down", "vllm:http://10.0.0.2:8000", "", "", "t")
    assert mute_subjects(down) == {"vllm_down", "vllm", "http://10.0.0.2:8000"}


def test_idle_watch_and_stop_schedule() -> None:
    watch = IdleWatch().observe(300, NOW)
    watch = watch.observe(300, NOW + timedelta(hours=2))
    assert watch.idle_for(NOW + timedelta(hours=2)) == timedelta(hours=2)
    assert watch.observe(301, NOW + timedelta(hours=3)).idle_for(NOW + timedelta(hours=3)) == timedelta(0)
    assert IdleWatch.from_json(watch.to_json()) == watch
    schedule = parse_schedule("mon-fri 20:00, sat 08:00")
    monday_night = datetime(2026, 11, 30, 21, 0, tzinfo=UTC)  # a Monday
    assert schedule.latest(monday_night) == datetime(2026, 11, 30, 20, 0, tzinfo=UTC)
    sunday = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    assert schedule.latest(sunday) == datetime(2026, 12, 5, 8, 0, tzinfo=UTC)  # Saturday 08:00
    assert parse_schedule("fri-mon 23:30").entries[0][0] == {4, 5, 6, 0}
    with pytest.raises(ValueError, match="25:00"):
        parse_schedule("25:00")


def test_maintenance_window_closes_once(tmp_path: Path) -> None:
    windows = MaintenanceWindows(Store(f"sqlite:///{tmp_path / 'state.db'}"))
    assert windows.current() is None
    windows.open(
        "vllm restart", by="U1", now=NOW, timeout=timedelta(minutes=30), channel="C1", thread_ts="1.2"
    )
    opened = windows.current()
    assert opened is not None and opened.deadline == NOW + timedelta(minutes=30) and opened.thread_ts == "1.2"
    assert windows.close("serving", now=NOW + timedelta(minutes=11))
    assert not windows.close("stuck", now=NOW + timedelta(minutes=12))  # another replica lost the race
    assert windows.current() is None and (windows.get() or opened).outcome == "serving"


def test_recovery_budget_caps_attempts_and_spend(tmp_path: Path) -> None:
    budget = RecoveryBudget(Store(f"sqlite:///{tmp_path / 'state.db'}"), max_per_day=2, max_usd_per_day=100)
    assert budget.refusal(60, NOW) is None
    budget.record("z/qr@t1", 60, "ok", now=NOW)
    assert "would pass AUTO_RECOVER_MAX_USD_PER_DAY" in (budget.refusal(60, NOW) or "")
    budget.record("z/qr@t2", 10, "ok", now=NOW)
    assert "cap AUTO_RECOVER_MAX_PER_DAY=2" in (budget.refusal(1, NOW) or "")
    assert budget.refusal(60, NOW + timedelta(days=1)) is None  # a new UTC day


def test_ownership_comes_from_the_node_label_and_death_from_state() -> None:
    raw = {
        "name": "projects/p/locations/us-east5-a/queuedResources/qr",
        "tpu": {"nodeSpec": [{"nodeId": "qr-node", "node": {"labels": {"managed-by": "tpu-chatops"}}}]},
        "state": {"state": "SUSPENDED", "stateInitiator": "SERVICE"},
    }
    mine = queued_resource_from_api(raw)
    assert created_by_bot(mine) and dead_reason(mine) == "SUSPENDED (by SERVICE)"
    theirs = replace(mine, labels={"managed-by": "someone-else"})
    assert not created_by_bot(theirs)
    assert dead_reason(replace(mine, state="ACTIVE")) is None


def test_a_muted_outage_and_its_end_are_both_suppressed(tmp_path: Path) -> None:
    clock = SimpleNamespace(now=NOW)
    client = FakeVllm(["refused"] * 3 + ["ready"])
    services = SimpleNamespace(
        tpu=SimpleNamespace(list_queued_resources=lambda zones: ZoneListing(())),
        store=Store(f"sqlite:///{tmp_path / 'state.db'}"),
        settings=SimpleNamespace(tpu_zones=["us-east5-a"]),
        now=lambda: clock.now,
        vllm=lambda: (client, SimpleNamespace(url="http://10.0.0.2:8000")),
    )
    slack = FakeSlack()
    scheduler = AlertScheduler.build(
        cast(Any, services), cast(Any, slack), "C0ALERTS", clock=lambda: clock.now
    )
    scheduler.ledger.mute("vllm", NOW + timedelta(hours=1), by="U1")
    results = []
    for _ in range(4):
        clock.now += timedelta(minutes=1)
        results.append(scheduler.tick())
    assert [r.suppressed for r in results] == [0, 0, 1, 1] and slack.calls == []
