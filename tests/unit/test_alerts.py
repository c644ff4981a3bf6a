"""ops.alerts.ledger: evaluation edge cases, the vLLM watcher, the exactly-once ledger;
bot.oncall.scheduler with fakes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from sqlalchemy import event, select

from bot.oncall.scheduler import AlertScheduler, parse_key
from bot.slack.gateway import SlackGateway
from ops.alerts.ledger import (
    Alert,
    AlertLedger,
    Observation,
    evaluate,
    identity,
    kv_table,
    lapsed_countdowns,
    qr_alert,
    subject_alert,
)
from ops.alerts.placement import place_open_alerts
from ops.store.state import Store
from ops.tpu.model import NodeInfo, QueuedResourceInfo, ZoneListing
from ops.tpu.ownership import SEARCH_KEY
from ops.tpu.recovery import RecoveryBudget
from ops.vllm.watch import VllmCheck, VllmWatch, evaluate_vllm
from tests import prune_cases

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CREATED = NOW - timedelta(hours=3)


def node(state: str = "READY", name: str = "qr-node") -> NodeInfo:
    return NodeInfo(name, "us-east5-a", state, None, "", "v6e-8", "v2-alpha-tpuv6e", (), (), CREATED, None)


def qr(
    state: str = "ACTIVE",
    *,
    left: timedelta | None = None,
    valid_until: datetime | None = None,
    created: datetime = CREATED,
    nodes: tuple[NodeInfo, ...] = (),
    **extra: Any,
) -> QueuedResourceInfo:
    base = QueuedResourceInfo(
        name="qr",
        zone="us-east5-a",
        state=state,
        state_initiator="USER",
        provisioning_model="flex-start",
        accelerator_type="v6e-8",
        runtime_version="v2-alpha-tpuv6e",
        create_time=created,
        node_ids=("qr-node",),
        nodes=nodes,
        termination_time=None if left is None else NOW + left,
        valid_until=valid_until,
        max_run_duration=None,
        error=None,
    )
    return replace(base, **extra)


def kinds(alerts: list[Alert]) -> list[tuple[str, int | None]]:
    return [(a.kind, a.threshold) for a in alerts]


@pytest.mark.parametrize(
    ("left_min", "want", "superseded"),
    [
        (61, None, ()),
        (60, 60, ()),
        (40, 60, ()),
        (15, 15, (60,)),
        (14.5, 15, (60,)),
        (3, 5, (60, 15)),
        (0.5, 5, (60, 15)),
        (0, None, ()),
        (-10, None, ()),
    ],
)
def test_only_the_most_urgent_crossed_threshold(
    left_min: float, want: int | None, superseded: tuple[int, ...]
) -> None:
    alerts = evaluate([qr(left=timedelta(minutes=left_min))], NOW)
    if want is None:
        assert alerts == []
        return
    (alert,) = alerts
    base = identity(qr())
    assert alert.kind == "expiry" and alert.threshold == want and alert.buttons
    assert alert.key == f"{base}|expiry|{want}"
    assert set(alert.supersedes) == {f"{base}|expiry|{t}" for t in superseded}


@pytest.mark.parametrize(
    ("left", "want", "title"),
    [
        (timedelta(minutes=17), None, ""),  # more than one evaluation before the 15-minute threshold
        (timedelta(minutes=16), 15, "in 16 min"),  # the last evaluation before it: due now, real time left
        (timedelta(minutes=15, seconds=40), 15, "in 16 min"),
        (timedelta(minutes=14, seconds=50), 15, "in 15 min"),  # rounded, never floored to "14 min"
        (timedelta(minutes=6), 5, "in 6 min"),
        (timedelta(seconds=20), 5, "in under a minute"),
    ],
)
def test_a_countdown_fires_at_the_last_evaluation_before_its_threshold_with_the_real_time_left(
    left: timedelta, want: int | None, title: str
) -> None:
    alerts = evaluate([qr(left=left)], NOW, lead=timedelta(minutes=1))
    if want is None:
        assert kinds(alerts) == [("expiry", 60)]
        return
    (alert,) = alerts
    assert alert.threshold == want and alert.title.endswith(title)
    with pytest.raises(ValueError):
        evaluate([qr()], NOW, lead=timedelta(minutes=-1))


def _open_row(resource: QueuedResourceInfo, kind: str, key_suffix: str = "15") -> Any:
    base = identity(resource)
    return SimpleNamespace(key=f"{base}|{kind}|{key_suffix}", kind=kind, resource=base, text="`qr` ends soon")


def test_countdowns_that_no_longer_apply_resolve_with_the_new_state() -> None:
    waiting = qr("WAITING_FOR_RESOURCES", valid_until=NOW + timedelta(minutes=10))
    running = qr(left=timedelta(minutes=10), name="run")
    rows = [_open_row(waiting, "valid_until"), _open_row(running, "expiry", "60")]
    # Still in the states their deadlines belong to: nothing lapses.
    assert lapsed_countdowns(rows, [waiting, running], ["us-east5-a"]) == []
    for state in ("SUSPENDED", "FAILED", "ACTIVE", "DELETING"):
        (lapsed,) = lapsed_countdowns(rows[:1], [replace(waiting, state=state)], ["us-east5-a"])
        assert lapsed.kind == "lapsed" and lapsed.resolves == rows[0].key
        assert lapsed.key == f"{rows[0].key}|lapsed"
        assert lapsed.title == f"`qr` ends soon: no longer applies: now {state}"
    (suspended,) = lapsed_countdowns(rows[1:], [replace(running, state="SUSPENDED")], ["us-east5-a"])
    assert suspended.title.endswith("no longer applies: now SUSPENDED")
    # Not listed: deleted where the zone answered; unknown (left open) where it did not.
    (deleted,) = lapsed_countdowns(rows[:1], [], ["us-east5-a"])
    assert deleted.title.endswith("no longer applies: deleted")
    assert lapsed_countdowns(rows, [], ["europe-west4-a"]) == []
    # Other kinds are not countdowns.
    assert lapsed_countdowns([_open_row(waiting, "stale", "")], [], ["us-east5-a"]) == []


def test_open_alerts_are_placed_by_identity_not_by_name() -> None:
    """An alert of `qr` created at 09:00 is gone once `qr` is listed with another create time (recreated, the
    new one its successor) or not at all (deleted, or DELETING); a zone that did not answer and a vLLM
    alert keep theirs."""
    before, after = qr(), qr(created=NOW - timedelta(hours=1))
    old_row, new_row = _open_row(before, "stale", ""), _open_row(after, "maintenance", "qr-node")
    vllm = SimpleNamespace(
        key="vllm:http://10.0.0.2:8000|vllm_down|", kind="vllm_down", resource="vllm:http://10.0.0.2:8000"
    )
    placed = place_open_alerts([old_row, new_row, vllm], [after], ["us-east5-a"])
    assert placed.current == [new_row, vllm]
    (gone,) = placed.gone
    assert (gone.row, gone.zone, gone.name, gone.successor) == (old_row, "us-east5-a", "qr", after)
    (deleted,) = place_open_alerts([old_row], [replace(before, state="DELETING")], ["us-east5-a"]).gone
    assert deleted.successor is None
    unknown = place_open_alerts([old_row], [], ["europe-west4-a"])
    assert unknown.current == [old_row] and unknown.gone == []


def test_key_names_the_resource_its_create_time_kind_and_threshold() -> None:
    (alert,) = evaluate([qr(left=timedelta(minutes=10))], NOW)
    assert alert.key == "us-east5-a/qr@2026-11-30T09:00:00Z|expiry|15"
    assert parse_key(alert.key) == ("us-east5-a", "qr", "2026-11-30T09:00:00Z")
    recreated = evaluate([qr(left=timedelta(minutes=10), created=NOW - timedelta(hours=1))], NOW)
    assert recreated[0].key != alert.key


def test_expiry_falls_back_to_create_time_plus_max_run_duration() -> None:
    running = qr(max_run_duration=timedelta(hours=3, minutes=10))  # ends NOW + 10 min
    assert kinds(evaluate([running], NOW)) == [("expiry", 15)]
    waiting = qr("WAITING_FOR_RESOURCES", max_run_duration=timedelta(hours=3, minutes=10))
    assert evaluate([waiting], NOW) == []


def test_valid_until_counts_only_while_waiting() -> None:
    deadline = NOW + timedelta(minutes=50)
    assert kinds(evaluate([qr("WAITING_FOR_RESOURCES", valid_until=deadline)], NOW)) == [("valid_until", 60)]
    assert evaluate([qr("ACTIVE", valid_until=deadline)], NOW) == []


def test_custom_thresholds_and_bad_input() -> None:
    assert kinds(evaluate([qr(left=timedelta(minutes=25))], NOW, thresholds=(30, 10))) == [("expiry", 30)]
    with pytest.raises(ValueError):
        evaluate([qr()], NOW.replace(tzinfo=None))
    with pytest.raises(ValueError):
        evaluate([qr()], NOW, thresholds=(0,))


def test_deleting_resources_give_nothing() -> None:
    previous = {identity(qr()): Observation("ACTIVE")}
    assert evaluate([qr("DELETING", left=timedelta(minutes=3))], NOW, previous=previous) == []


def test_state_changes() -> None:
    base = identity(qr())
    previous = {base: Observation("WAITING_FOR_RESOURCES")}
    (change,) = evaluate([qr("PROVISIONING")], NOW, previous=previous)
    assert change.key == f"{base}|state|WAITING_FOR_RESOURCES->PROVISIONING"
    assert evaluate([qr("WAITING_FOR_RESOURCES")], NOW, previous=previous) == []
    failed = evaluate([qr("FAILED", error="stockout in zone")], NOW, previous=previous)
    assert "FAILED: stockout in zone" in failed[0].title
    suspended = evaluate([qr("SUSPENDED", state_initiator="SERVICE")], NOW, previous=previous)
    assert "initiated by SERVICE" in suspended[0].title


def test_first_sighting_is_a_baseline_unless_created_after_watching_began() -> None:
    assert evaluate([qr("ACTIVE")], NOW, previous={}) == []
    assert evaluate([qr("ACTIVE")], NOW, previous={}, watch_since=NOW - timedelta(hours=1)) == []
    new = evaluate([qr("ACTIVE")], NOW, previous={}, watch_since=CREATED - timedelta(minutes=1))
    assert [a.key.split("|", 1)[1] for a in new] == ["state|NEW->ACTIVE"]


def test_node_preempted_once() -> None:
    base = identity(qr())
    previous = {base: Observation("ACTIVE", {"qr-node": "READY"})}
    (alert,) = evaluate([qr(nodes=(node("PREEMPTED"),))], NOW, previous=previous)
    assert alert.kind == "preempted" and "qr-node" in alert.title
    again = {base: Observation("ACTIVE", {"qr-node": "PREEMPTED"})}
    assert evaluate([qr(nodes=(node("PREEMPTED"),))], NOW, previous=again) == []


def test_node_gone_under_an_active_queued_resource() -> None:
    base = identity(qr())
    previous = {base: Observation("ACTIVE", {"qr-node": "READY"})}
    (alert,) = evaluate([qr("ACTIVE", nodes=())], NOW, previous=previous)
    assert alert.kind == "node_gone" and "`qr-node` is gone" in alert.title
    assert evaluate([qr("ACTIVE", nodes=())], NOW, previous={base: Observation("ACTIVE", {})}) == []


def test_stale_after_a_day() -> None:
    old = qr("SUSPENDED", created=NOW - timedelta(hours=25))
    assert kinds(evaluate([old], NOW)) == [("stale", None)]
    assert evaluate([qr("FAILED", created=NOW - timedelta(hours=23))], NOW) == []
    assert evaluate([qr("ACTIVE", created=NOW - timedelta(days=3))], NOW) == []


def test_vllm_down_after_n_failures_then_resolved_with_outage_length() -> None:
    watch = VllmWatch()
    sent: list[Alert] = []
    for minute in range(5):
        alerts, watch = evaluate_vllm(
            VllmCheck(False, "refused"), watch, NOW + timedelta(minutes=minute), endpoint="http://v:8000"
        )
        sent += alerts
    assert [a.kind for a in sent] == ["vllm_down"]  # at the third failure, once
    watch = VllmWatch.from_json(watch.to_json())  # survives a restart
    alerts, watch = evaluate_vllm(
        VllmCheck(True), watch, NOW + timedelta(minutes=12), endpoint="http://v:8000"
    )
    (up,) = alerts
    assert up.resolves == sent[0].key and "12 min" in up.title
    assert watch.failures == 0 and watch.alerted is None


def test_vllm_kv_cache_streak_and_rising_preemptions() -> None:
    watch = VllmWatch()
    kinds_seen: list[str] = []
    for minute, (usage, preempted) in enumerate([(0.95, 0), (0.97, 0), (0.99, 2), (0.99, 2), (0.5, 5)]):
        alerts, watch = evaluate_vllm(
            VllmCheck(True, "", usage, preempted), watch, NOW + timedelta(minutes=minute), endpoint="u"
        )
        kinds_seen += [a.kind for a in alerts]
    assert kinds_seen == ["kv_cache", "preemptions", "preemptions"]


def test_ledger_claims_once_across_store_objects(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    first, second = AlertLedger(Store(url)), AlertLedger(Store(url))
    (alert,) = evaluate([qr(left=timedelta(minutes=3))], NOW)
    assert first.claim(alert, "sending", now=NOW)
    assert not second.claim(alert, "sending", now=NOW)
    first.mark_sent(alert.key, "C1", "1.000001")
    assert second.get(alert.key) is not None and second.counts() == {"sent": 1}
    assert second.open_alerts(since=NOW - timedelta(hours=1))[0].key == alert.key
    second.acknowledge(alert.key, "U1")
    assert first.open_alerts(since=NOW - timedelta(hours=1)) == []
    first.release(alert.key)  # only an unsent claim is released
    assert first.get(alert.key) is not None
    assert first.watch_since(NOW) == second.watch_since(NOW + timedelta(hours=1)) == NOW


def test_ledger_mutes_and_observations(tmp_path: Path) -> None:
    ledger = AlertLedger(Store(f"sqlite:///{tmp_path / 'state.db'}"))
    ledger.mute("qr", NOW + timedelta(hours=2), by="U1")
    assert set(ledger.mutes(NOW)) == {"qr"}
    assert ledger.mutes(NOW + timedelta(hours=3)) == {}
    assert ledger.unmute("qr") and not ledger.unmute("qr")
    ledger.observe("r", Observation("ACTIVE", {"n": "READY"}), now=NOW, channel="C1", ts="1.1")
    ledger.observe_many({"r": Observation("SUSPENDED"), "s": Observation("FAILED")}, now=NOW)
    assert ledger.observations()["r"] == Observation("SUSPENDED", {})
    assert set(ledger.observations(["s", "unknown"])) == {"s"}  # only what a tick listed
    assert ledger.thread("r") == ("C1", "1.1")


def test_ledger_knows_recorded_keys_in_one_read_of_any_size(tmp_path: Path) -> None:
    ledger = AlertLedger(Store(f"sqlite:///{tmp_path / 'state.db'}"))
    (alert,) = evaluate([qr(left=timedelta(minutes=3))], NOW)
    assert ledger.claim(alert, "sending", now=NOW)
    many = [f"k{i}" for i in range(1_200)]  # more keys than one IN list holds
    assert ledger.known([*many, alert.key, alert.key]) == {alert.key}
    assert ledger.known([]) == set()


def test_ledger_prunes_only_old_history_of_resources_gone_from_zones_that_answered(tmp_path: Path) -> None:
    ledger = AlertLedger(Store(f"sqlite:///{tmp_path / 'state.db'}"))
    old = NOW - timedelta(days=40)
    for resource in ("us-east5-a/gone@x", "us-east5-a/alive@x", "europe-west4-a/silent@x"):
        alert = subject_alert(f"{resource}|stale", "stale", resource, "")
        assert ledger.claim(alert, "suppressed", now=old)
        ledger.observe(resource, Observation("FAILED"), now=old)
    recent = subject_alert("us-east5-a/recent@x|stale", "stale", "us-east5-a/recent@x", "")
    assert ledger.claim(recent, "suppressed", now=NOW - timedelta(days=2))
    sending = subject_alert("us-east5-a/gone@x|expiry|5", "expiry", "us-east5-a/gone@x", "")
    assert ledger.claim(sending, "sending", now=old)

    assert ledger.prune(now=NOW, keep_days=30, listed=["us-east5-a/alive@x"], zones=["us-east5-a"]) == (1, 1)
    left = {row.resource for row in ledger.rows()}
    # kept: listed now, in a zone that did not answer, recent, and a claim whose post is under way
    assert left == {
        "us-east5-a/alive@x",
        "europe-west4-a/silent@x",
        "us-east5-a/recent@x",
        "us-east5-a/gone@x",
    }
    assert ledger.get(sending.key) is not None
    assert set(ledger.observations()) == {"us-east5-a/alive@x", "europe-west4-a/silent@x"}
    assert ledger.prune(now=NOW, keep_days=30, listed=[], zones=[]) == (0, 0)


def test_a_prune_does_not_forget_another_deployments_live_resource(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")
    prune_cases.check_a_prune_forgets_only_its_own_history(store)
    store.close()


def test_an_observation_older_than_its_observers_is_forgotten_by_the_deployment_that_lists_it(
    tmp_path: Path,
) -> None:
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")
    prune_cases.check_an_observation_made_before_observers_were_recorded(store)
    store.close()


@contextmanager
def event_listening(engine: Any, name: str, statements: list[str]) -> Iterator[None]:
    """Collect the SQL statements `engine` runs inside the block."""

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    event.listen(engine, name, record)
    try:
        yield
    finally:
        event.remove(engine, name, record)


class FakeSlack:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def chat_postMessage(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("post", kwargs))
        return {"ok": True, "ts": f"1.{len(self.calls):06d}"}

    def chat_update(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("update", kwargs))
        return {"ok": True, "ts": kwargs["ts"]}


def test_scheduler_posts_once_updates_state_message_in_place_and_honours_mutes(tmp_path: Path) -> None:
    clock = SimpleNamespace(now=NOW)
    listing = {"resources": (qr("WAITING_FOR_RESOURCES", max_run_duration=timedelta(hours=4)),)}
    tpu = SimpleNamespace(list_queued_resources=lambda zones: ZoneListing(listing["resources"]))
    services = SimpleNamespace(
        tpu=tpu,
        store=Store(f"sqlite:///{tmp_path / 'state.db'}"),
        settings=SimpleNamespace(tpu_zones=["us-east5-a"]),
        now=lambda: clock.now,
    )
    slack = FakeSlack()
    scheduler = AlertScheduler.build(
        cast(Any, services),
        SlackGateway(cast(Any, slack)),
        "C0ALERTS",
        clock=lambda: clock.now,
        vllm_checks=False,
    )
    assert scheduler.tick().sent == 0  # baseline
    listing["resources"] = (qr("PROVISIONING"),)
    assert scheduler.tick().sent == 1
    # spot: the model with a sourced price here (flex-start has none, so its alerts carry no cost line)
    active = qr("ACTIVE", left=timedelta(minutes=12), nodes=(node(),), provisioning_model="spot")
    listing["resources"] = (active,)
    result = scheduler.tick()
    assert (result.sent, result.superseded) == (2, 1)  # state change + 15-minute alert; 60 superseded
    inserts = []
    with event_listening(services.store.engine, "before_cursor_execute", inserts):
        again = scheduler.tick()
    assert (again.sent, again.duplicate) == (0, 1)  # nothing twice: the countdown is known
    assert not [sql for sql in inserts if "INSERT INTO alert_ledger" in sql]  # and no insert tried for it
    posts = [kw for kind, kw in slack.calls if kind == "post"]
    updates = [kw for kind, kw in slack.calls if kind == "update"]
    # one state message (the first post, ts 1.000001), each transition in its thread; one expiry alert
    assert sorted(str(kw.get("thread_ts")) for kw in posts) == ["1.000001", "1.000001", "None", "None"]
    assert len(updates) == 1 and "ACTIVE" in updates[0]["text"] and updates[0]["ts"] == "1.000001"
    (expiry,) = [kw for kw in posts if any(b["type"] == "actions" for b in kw["blocks"])]
    buttons = [e["action_id"] for b in expiry["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert buttons == ["alert_delete", "alert_snooze", "alert_ack"]
    assert "Cost so far: $" in expiry["blocks"][0]["text"]["text"]
    scheduler.ledger.mute("qr", NOW + timedelta(hours=1), by="U1")
    clock.now = NOW + timedelta(minutes=8)
    result = scheduler.tick()
    assert (result.sent, result.suppressed) == (0, 1)


def test_scheduler_resolves_a_countdown_in_place_when_its_resource_is_suspended(tmp_path: Path) -> None:
    clock = SimpleNamespace(now=NOW)
    running = qr(left=timedelta(minutes=12), nodes=(node(),))
    listing = {"resources": (running,)}
    services = SimpleNamespace(
        tpu=SimpleNamespace(list_queued_resources=lambda zones: ZoneListing(listing["resources"])),
        store=Store(f"sqlite:///{tmp_path / 'state.db'}"),
        settings=SimpleNamespace(tpu_zones=["us-east5-a"]),
        now=lambda: clock.now,
    )
    slack = FakeSlack()
    scheduler = AlertScheduler.build(
        cast(Any, services),
        SlackGateway(cast(Any, slack)),
        "C0ALERTS",
        clock=lambda: clock.now,
        vllm_checks=False,
    )
    assert scheduler.tick().sent == 1  # the 15-minute countdown
    (countdown,) = scheduler.ledger.open_alerts(since=NOW - timedelta(days=1))
    listing["resources"] = (replace(running, state="SUSPENDED", nodes=()),)
    clock.now = NOW + timedelta(minutes=1)
    scheduler.tick()
    assert scheduler.ledger.open_alerts(since=NOW - timedelta(days=1)) == []
    updates = [kw for kind, kw in slack.calls if kind == "update" and kw["ts"] == countdown.ts]
    assert len(updates) == 1 and "no longer applies: now SUSPENDED" in updates[0]["text"]
    clock.now = NOW + timedelta(minutes=2)
    scheduler.tick()  # resolved once
    assert len([kw for kind, kw in slack.calls if kind == "update" and kw["ts"] == countdown.ts]) == 1


def test_a_running_capacity_searchs_requests_get_no_alerts_until_it_ends(tmp_path: Path) -> None:
    clock = SimpleNamespace(now=NOW)
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")
    request = qr(
        "WAITING_FOR_RESOURCES",
        valid_until=NOW + timedelta(minutes=50),
        created=NOW + timedelta(seconds=5),  # created after watching began: would be announced
        labels={SEARCH_KEY: "r0search"},
    )
    listing = {"resources": ()}
    services = SimpleNamespace(
        tpu=SimpleNamespace(list_queued_resources=lambda zones: ZoneListing(listing["resources"])),
        store=store,
        settings=SimpleNamespace(tpu_zones=["us-east5-a"]),
        now=lambda: clock.now,
    )
    slack = FakeSlack()
    scheduler = AlertScheduler.build(
        cast(Any, services),
        SlackGateway(cast(Any, slack)),
        "C0ALERTS",
        clock=lambda: clock.now,
        vllm_checks=False,
    )
    scheduler.tick()  # watching begins
    store.acquire_operation(["p/search/qr"], "r0search", "U1", "tpu find qr", ttl_s=600, now=NOW)
    listing["resources"] = (request,)
    clock.now = NOW + timedelta(minutes=1)
    assert scheduler.tick().sent == 0  # neither "NEW -> WAITING" nor a valid-until countdown
    store.release_operation("r0search")  # the search ended and kept it
    clock.now = NOW + timedelta(minutes=2)
    result = scheduler.tick()
    posts = [kw["text"] for kind, kw in slack.calls if kind == "post"]
    assert result.sent == 1 and "stops waiting for capacity (valid-until) in 48 min" in posts[0]


def test_the_tick_lead_is_the_last_gap_between_ticks_at_most_half_the_smallest_threshold(
    tmp_path: Path,
) -> None:
    services = SimpleNamespace(store=Store(f"sqlite:///{tmp_path / 'state.db'}"), now=lambda: NOW)
    gateway = SlackGateway(cast(Any, FakeSlack()))
    resources = AlertScheduler.build(cast(Any, services), gateway, "C0", interval_s=60).resources
    assert resources.lead(NOW) == timedelta(seconds=60)  # no tick yet: the interval
    assert resources.lead(NOW + timedelta(minutes=2)) == timedelta(minutes=2)  # a faster clock (the demo)
    assert resources.lead(NOW + timedelta(hours=1)) == timedelta(minutes=2, seconds=30)  # after a stall


class FakeVllm:
    def __init__(self, states: list[str]) -> None:
        self.states = states

    def __enter__(self) -> FakeVllm:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def health(self) -> Any:
        return SimpleNamespace(state=self.states.pop(0), detail="connection refused")

    def metrics_text(self) -> str:
        return (
            'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.2\n'
            'vllm:num_preemptions_total{engine="0",model_name="m"} 0.0\n'
            'vllm:num_requests_running{engine="0",model_name="m"} 0.0\n'
            'vllm:num_requests_waiting{engine="0",model_name="m"} 0.0\n'
            'vllm:generation_tokens_total{engine="0",model_name="m"} 10.0\n'
        )


def test_scheduler_vllm_outage_is_posted_once_and_resolved_in_place(tmp_path: Path) -> None:
    clock = SimpleNamespace(now=NOW)
    client = FakeVllm(["refused"] * 4 + ["ready"])
    services = SimpleNamespace(
        tpu=SimpleNamespace(list_queued_resources=lambda zones: ZoneListing(())),
        store=Store(f"sqlite:///{tmp_path / 'state.db'}"),
        settings=SimpleNamespace(tpu_zones=["us-east5-a"]),
        now=lambda: clock.now,
        vllm=lambda: (client, SimpleNamespace(url="http://10.0.0.2:8000")),
    )
    slack = FakeSlack()
    scheduler = AlertScheduler.build(
        cast(Any, services), SlackGateway(cast(Any, slack)), "C0ALERTS", clock=lambda: clock.now
    )
    sent = []
    for _ in range(5):
        clock.now += timedelta(minutes=1)
        sent.append(scheduler.tick().sent)
    assert sent == [0, 0, 1, 0, 1]
    (post,) = [kw for kind, kw in slack.calls if kind == "post"]
    (update,) = [kw for kind, kw in slack.calls if kind == "update"]
    assert "is down" in post["text"] and update["ts"] == "1.000001"
    assert "recovered after 4 min" in update["text"]  # first failure at +1 min, recovery at +5


def test_digest_once_a_day(tmp_path: Path) -> None:
    running = qr("ACTIVE", left=timedelta(hours=2))
    services = SimpleNamespace(
        tpu=SimpleNamespace(list_queued_resources=lambda zones: ZoneListing((running,))),
        store=Store(f"sqlite:///{tmp_path / 'state.db'}"),
        settings=SimpleNamespace(tpu_zones=["us-east5-a"]),
        now=lambda: NOW,
    )
    slack = FakeSlack()
    scheduler = AlertScheduler.build(
        cast(Any, services), SlackGateway(cast(Any, slack)), "C0ALERTS", clock=lambda: NOW
    )
    assert scheduler.digest() is not None
    assert scheduler.digest() is None
    (post,) = [kw for _, kw in slack.calls]
    assert "Running: 1 (`qr`)" in post["text"]
    # A flex-start resource has no price row: the on-demand row bounds it, labelled, never "$0.00".
    assert "Cost in the last 24 h: at most $64.80 (no flex-start row for v6e in us-east5" in post["text"]


def test_posted_urls_carry_no_credentials() -> None:
    from bot.oncall.checks import _public_url

    assert _public_url("http://user:s3cret@10.0.0.2:8000/v?token=x") == "http://10.0.0.2:8000/v"


def test_a_named_deployments_ledger_is_its_own_and_the_default_one_reads_everything(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")
    single, staging = AlertLedger(store), AlertLedger(store, "staging")
    production = AlertLedger(store, "prod")
    down = subject_alert("vllm:http://s:8000@t|vllm_down|3", "vllm_down", "vllm:http://s:8000", "down")
    stale = qr_alert(qr("FAILED"), "stale", "", "stale")
    assert staging.claim(down, "sending", now=NOW) and production.claim(stale, "sending", now=NOW)
    staging.mark_sent(down.key, "C0STAGING1", "1.1")
    production.mark_sent(stale.key, "C0ALERTS01", "1.2")
    since = NOW - timedelta(days=1)
    assert [r.key for r in staging.open_alerts(since=since)] == [down.key]
    assert [r.key for r in production.open_alerts(since=since)] == [stale.key]
    assert {r.key for r in single.open_alerts(since=since)} == {down.key, stale.key}
    # Read at once for a fleet, each deployment gets what its own ledger reads.
    at_once = AlertLedger.open_alerts_by_deployment(
        store, ["staging", "prod", "idle", "default"], since=since
    )
    for ledger in (staging, production, AlertLedger(store, "idle"), single):
        assert at_once[ledger.deployment] == ledger.open_alerts(since=since)
    assert not production.claim(down, "sending", now=NOW)  # keys stay unique across deployments
    staging.set_value("vllm_watch", '{"failures": 2}')
    assert production.get_value("vllm_watch") is None and single.get_value("vllm_watch") is None
    single.set_value("vllm_watch", "{}")  # the single deployment's name, exactly as before deployments
    with store.engine.connect() as conn:
        names = set(conn.execute(select(kv_table.c.name)).scalars())
    assert {"vllm_watch", "vllm_watch@staging"} <= names
    again = subject_alert("vllm:http://s:8000@u|vllm_down|3", "vllm_down", "vllm:http://s:8000", "down")
    assert staging.claim(again, "sending", now=NOW)
    staging.release(again.key)  # a failed post: the next tick claims it again
    assert staging.claim(again, "sending", now=NOW)


def test_a_named_deployments_recovery_budget_counts_its_own_attempts(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")
    staging = RecoveryBudget(store, max_per_day=1, max_usd_per_day=100, deployment="staging")
    production = RecoveryBudget(store, max_per_day=1, max_usd_per_day=100, deployment="production")
    staging.record("us-east5-b/gemma4-staging@t", 10, "ok", now=NOW)
    assert "cap AUTO_RECOVER_MAX_PER_DAY=1" in (staging.refusal(1, NOW) or "")
    assert production.refusal(1, NOW) is None
    single = RecoveryBudget(store, max_per_day=1, max_usd_per_day=100)
    assert [a.resource for a in single.today(NOW)] == ["staging:us-east5-b/gemma4-staging@t"]


def test_an_alert_channel_is_bound_only_to_the_one_deployment_it_serves() -> None:
    from bot.services import Fleet
    from bot.slack.app import _bind_alert_channels

    def watcher(name: str, channel: str) -> AlertScheduler:
        return cast(AlertScheduler, SimpleNamespace(deployment=name, channel=channel))

    services: dict[str, Any] = {"production": object(), "staging": object(), "bench": object()}
    fleet = Fleet(services, {"C0STAGING1": "staging"})
    shared = [watcher("staging", "C0SHARED01"), watcher("bench", "C0SHARED01")]
    _bind_alert_channels(fleet, [watcher("production", "C0PRODALR1"), *shared])
    # production's own alert channel acts on it; a shared one stays unbound (a click there would be a guess)
    assert fleet.channels == {"C0STAGING1": "staging", "C0PRODALR1": "production"}
    single = Fleet({"default": cast(Any, object())})
    _bind_alert_channels(single, [watcher("default", "C0ALERTS01")])
    assert single.channels == {}  # one deployment: nothing to choose, nothing changes


HISTORY_TABLES = ("alert_ledger", "alert_observations", "alert_owners")


def _seed_gone(store: Store, deployment: str, days: int = 30, per_day: int = 50) -> None:
    """`days` of history of resources long gone: per day, `per_day` alerts sent and resolved (owned by
    `deployment` when it is named) and their last observations."""
    from sqlalchemy import insert

    from ops.alerts.ledger import ledger_table, observations_table, owners_table

    ledger, owners, seen = [], [], []
    for day in range(1, days + 1):
        at = NOW - timedelta(days=day)
        for index in range(per_day):
            resource = f"us-east5-a/gone-{day}-{index}@{at:%Y%m%dT%H%M%S}"
            key = f"{resource}|expiry|60"
            ledger.append(
                {"key": key, "kind": "expiry", "resource": resource, "status": "sent", "at": at, "text": "",
                 "resolved_at": at + timedelta(hours=1)}
            )  # fmt: skip
            owners.append({"key": key, "deployment": deployment})
            seen.append({"resource": resource, "state": "ACTIVE", "nodes": "{}", "at": at})
    with store.engine.begin() as conn:
        conn.execute(insert(ledger_table), ledger)
        conn.execute(insert(observations_table), seen)
        if deployment != "default":
            conn.execute(insert(owners_table), owners)


@pytest.mark.parametrize("deployment", ["default", "staging"])
def test_a_steady_tick_reads_no_row_of_history_it_does_not_evaluate(tmp_path: Path, deployment: str) -> None:
    """Every statement of a steady tick searches an index keyed by what it evaluates (the listed
    resources, their alert keys, the open alerts): none scans the ledger, the observations or the owners,
    and none lists every key a deployment ever owned (SQLite's EXPLAIN QUERY PLAN)."""
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")
    _seed_gone(store, deployment)
    listing = ZoneListing((qr(left=timedelta(minutes=40), nodes=(node(),)),))
    services = SimpleNamespace(
        tpu=SimpleNamespace(list_queued_resources=lambda zones: listing),
        store=store,
        settings=SimpleNamespace(tpu_zones=["us-east5-a"]),
        now=lambda: NOW,
    )
    scheduler = AlertScheduler.build(
        cast(Any, services), SlackGateway(cast(Any, FakeSlack())), "C0ALERTS", clock=lambda: NOW,
        vllm_checks=False, deployment=deployment,
    )  # fmt: skip
    assert scheduler.tick().sent == 1  # the 60-minute countdown; the hourly prune runs on this first tick
    executed: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        executed.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", record)
    try:
        assert scheduler.tick().duplicate == 1
    finally:
        event.remove(store.engine, "before_cursor_execute", record)
    reads = [(sql, params) for sql, params in executed if sql.lstrip().upper().startswith("SELECT")]
    assert any("alert_ledger" in sql for sql, _ in reads)
    with store.engine.connect() as conn:
        raw = conn.connection.driver_connection
        assert raw is not None
        for sql, params in reads:
            plan = [str(row[-1]) for row in raw.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall()]
            scans = [step for step in plan if step.startswith("SCAN") and step.split()[1] in HISTORY_TABLES]
            assert not scans and not any(step.startswith("LIST SUBQUERY") for step in plan), (sql, plan)
            if "acked_by IS NULL" in sql:  # the open alerts: by the index that leaves resolved ones out
                assert any("ix_alert_ledger_open" in step for step in plan), plan
    store.close()
