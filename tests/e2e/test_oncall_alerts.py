"""Alerts an on-call trusts, in the demo world (real bot over signed Slack requests, simulated Google, vLLM
and TPU VM): planned work is not paged, SLO rules fire and resolve in place, alert kinds reach their own
channels, a dead primary is recovered by a click and automatically, and an idle deployment is noticed.

The alert scheduler is the one the bot's start-up builds (`demo.bot.alerts`); the tests call its `tick()`
while moving the simulated clock, instead of waiting for APScheduler.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml

from bot.oncall.scheduler import AlertScheduler
from bot.slack.gateway import SlackGateway
from ops.alerts.planned import MaintenanceWindows
from ops.cost.idle import parse_schedule
from ops.tpu.model import CreateSpec
from ops.tpu.ownership import (
    SEARCH_KEY,
    USER_KEY,
    created_by_bot,
    label_value,
    operation_keys,
    ownership_labels,
)
from sim import scenario as scenarios
from sim.console import DEMO_USER
from sim.demo import ALERTS_CHANNEL, Demo
from sim.slack import Message

SLO_CHANNEL = "C0SLOCHAN1"
COST_CHANNEL = "C0COSTCHN1"
RULES = """
rules:
  - name: ttft-p95
    metric: ttft_p95_s
    above: 1.0
    for: 2m
    window: 5m
    severity: warning
"""


@pytest.fixture
def world(tmp_path: Path) -> Iterator[Demo]:
    """A fresh demo per test (the alert state is the subject), with routes, a rules file and idle alerts."""
    rules = tmp_path / "slo.yaml"
    rules.write_text(RULES)
    with Demo(
        alert_routes=[f"slo={SLO_CHANNEL}", f"expiry={COST_CHANNEL}"],
        slo_rules_file=str(rules),
        idle_alert_after="2h",
        vllm_replace_settle_s=0.6,  # a restart's watch of its new container eats into the simulated boot
    ) as world:
        world.slack.join(SLO_CHANNEL, COST_CHANNEL)  # routed channels the team invited the bot to
        yield world


@pytest.fixture
def spot_world(tmp_path: Path) -> Iterator[Demo]:
    """The demo with `gemma4-qr` on spot, the model with a sourced v6e price in us-east5 (flex-start has
    none, so its alerts carry no cost figure), and idle alerts."""
    with Demo(scenario_path=_spot_scenario(tmp_path), idle_alert_after="2h") as world:
        yield world


def _spot_scenario(tmp_path: Path) -> Path:
    """The demo's scenario with `gemma4-qr` on spot and no other vLLM client, written in `tmp_path`."""
    scenario = scenarios.load()
    (primary,) = [q for q in scenario["google"]["queued_resources"] if q["name"] == "gemma4-qr"]
    primary["provisioning_model"] = "SPOT"
    scenario["vllm"]["background_rps"] = 0.0  # no other client: the idle alert's story
    path = tmp_path / "spot.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def _scheduler(demo: Demo) -> AlertScheduler:
    assert demo.bot.alerts is not None
    return demo.bot.alerts


def _posts(demo: Demo, start: int, channel: str | None = None, *, threads: bool = False) -> list[Message]:
    """Posts since `start`; thread replies (diagnoses, state transitions) only with `threads`."""
    return [
        m
        for m in demo.slack.messages[start:]
        if m.kind == "post" and (threads or not m.thread_ts) and (channel is None or m.channel == channel)
    ]


def _chat(demo: Demo, n: int) -> None:
    """`n` chat completions through the OpenAI client, as users of the deployment would send them."""
    client = openai.OpenAI(base_url=demo.vllm.url + "/v1", api_key="unused", max_retries=0)
    for _ in range(n):
        client.chat.completions.create(
            model=demo.settings.vllm_model, messages=[{"role": "user", "content": "hello"}], max_tokens=3
        )


def test_vllm_restart_is_planned_work_not_an_outage(world: Demo) -> None:
    demo = world
    scheduler = _scheduler(demo)
    scheduler.tick()
    start = len(demo.slack.messages)
    lines, answered = demo.user.run("/vllm restart")
    assert answered, lines
    lines, answered = demo.user.run("click Confirm", timeout=60)
    assert answered, lines
    held = 0
    # vLLM loads for boot_s REAL seconds while each tick moves the simulated clock a minute: pace the ticks
    # so the simulated boot stays well inside the 30-minute window however fast the machine ticks.
    while not demo.vllm.listening and held < 20:
        demo.gcp.advance(60)
        scheduler.tick()
        held += 1
        time.sleep(0.5)
    assert held >= 3, "the health check would have failed three times in a row"
    demo.gcp.advance(60)
    scheduler.tick()
    scheduler.tick()
    texts = [m.text for m in demo.slack.messages[start:]]
    assert not [t for t in texts if "is down" in t]
    (serving,) = [m for m in _posts(demo, start, threads=True) if "serving after" in m.text]
    assert serving.thread_ts is not None and serving.channel == demo.user.channel_id
    command_message = next(m for m in demo.slack.messages if m.ts == serving.thread_ts)
    assert "vllm restart" in command_message.text
    minutes = int(serving.text.split("serving after ")[1].split(" min")[0])
    assert held <= minutes <= held + 1  # one message, when the first check after the boot succeeded


def test_slo_rule_fires_and_resolves_in_place_on_simulated_latency(world: Demo) -> None:
    demo = world
    scheduler = _scheduler(demo)
    scheduler.tick()
    start = len(demo.slack.messages)
    demo.vllm.set_reported_latency(3.0)
    for _ in range(3):
        _chat(demo, 4)
        demo.gcp.advance(60)
        scheduler.tick()
    (alert,) = _posts(demo, start, SLO_CHANNEL)
    assert "SLO `ttft-p95`: TTFT p95" in alert.text and "above 1.00 s" in alert.text
    assert all("SLO" not in m.text for m in _posts(demo, start, ALERTS_CHANNEL))

    demo.vllm.set_reported_latency(0.0)
    _chat(demo, 4)
    demo.gcp.advance(6 * 60)  # past the 5-minute window: only fast requests in it
    scheduler.tick()
    updates = [m for m in demo.slack.messages if m.kind == "update" and m.ts == alert.ts]
    assert updates, "the alert's own message is updated"
    resolved = updates[-1].render()
    assert "Resolved" in resolved and "TTFT p95 now 0." in resolved and "lasted 8 min" in resolved
    assert not [m for m in _posts(demo, start, SLO_CHANNEL) if m.ts != alert.ts]


def test_alert_kinds_reach_their_channels(world: Demo) -> None:
    demo = world
    scheduler = _scheduler(demo)
    scheduler.tick()  # the FAILED gemma4-old, a day old: kind "stale", default channel
    (stale,) = _posts(demo, 0, ALERTS_CHANNEL)
    assert "`gemma4-old`" in stale.text
    start = len(demo.slack.messages)
    demo.gcp.advance(95 * 60)  # gemma4-qr: 55 min left, kind "expiry", routed to the cost channel
    scheduler.tick()
    (expiry,) = [m for m in _posts(demo, start) if "`gemma4-qr`" in m.text and "terminates" in m.text]
    assert expiry.channel == COST_CHANNEL


def _suspend_primary(demo: Demo, scheduler: AlertScheduler) -> Message:
    """Move past gemma4-qr's max run duration (flex-start: SUSPENDED by the service); return the state
    transition posted in its thread."""
    start = len(demo.slack.messages)
    listing = demo.bot.services.tpu.list_queued_resources(["us-east5-a"])
    (qr,) = [q for q in listing.resources if q.name == "gemma4-qr"]
    assert qr.termination_time is not None
    demo.gcp.advance((qr.termination_time - demo.gcp.now()).total_seconds() + 60)
    scheduler.tick()
    return next(
        m
        for m in _posts(demo, start, threads=True)
        if "gemma4-qr" in m.text and "SUSPENDED" in m.text and m.thread_ts
    )


def _primary_state(demo: Demo) -> str:
    listing = demo.bot.services.tpu.list_queued_resources(["us-east5-a"])
    return next(q.state for q in listing.resources if q.name == "gemma4-qr")


def _auto_recovering_scheduler(demo: Demo) -> AlertScheduler:
    """A scheduler of the demo's alert channel with AUTO_RECOVER on, its other options the bot's."""
    client = SlackGateway.connect(demo.settings.slack_bot_token.get_secret_value(), demo.slack.api_url)
    return AlertScheduler.build(
        demo.bot.services,
        client,
        ALERTS_CHANNEL,
        runner=demo.bot.runner,
        options=dataclasses.replace(_scheduler(demo).options, auto_recover=True),
    )


def test_dead_primary_recovered_by_click_then_automatically(world: Demo) -> None:
    demo = world
    scheduler = _auto_recovering_scheduler(demo)
    scheduler.tick()

    # The scenario's gemma4-qr was not made by the bot: no automatic recovery, a Recover button instead.
    transition = _suspend_primary(demo, scheduler)
    assert any(e["action_id"] == "alert_recover" for _, e in transition.buttons())
    skipped = [m for m in demo.slack.messages if "Automatic recovery skipped" in m.text]
    assert skipped and "not created by the bot" in skipped[0].text
    assert skipped[0].thread_ts == transition.thread_ts

    start = len(demo.slack.messages)
    lines, answered = demo.user.run("click Recover as U0VIEWER01")
    assert answered, lines
    refusal = demo.slack.messages[-1]
    assert refusal.ephemeral and "admin" in refusal.text
    assert not [m for m in demo.slack.messages[start:] if not m.ephemeral and m.kind != "user"]

    lines, answered = demo.user.run("click Recover")
    assert answered, lines
    assert any("delete" in line.lower() and "create it again" in line for line in lines)
    lines, answered = demo.user.run("click Confirm", timeout=60)
    assert answered, lines
    assert any("deleted and recreated `gemma4-qr`" in line for line in lines)
    assert _primary_state(demo) == "ACTIVE"
    trail = demo.bot.services.store.audit(last=10)
    recover = [(e.action, e.outcome) for e in trail if e.command.startswith("tpu recover gemma4-qr")]
    assert ("result", "ok") in recover and any(action == "confirm" for action, _ in recover)
    # The recreated primary carries the ownership labels of the clicker's request, written down first.
    recreated = demo.bot.services.tpu.get_queued_resource("gemma4-qr", ["us-east5-a"])
    assert created_by_bot(recreated) and recreated.labels[USER_KEY] == label_value(DEMO_USER)
    (record,) = demo.bot.services.store.inflight(open_only=False)
    assert (record.kind, record.name, record.state) == ("recover", "gemma4-qr", "created")

    # The recreated gemma4-qr carries the bot's label: the next death is recovered without a click.
    scheduler.tick()
    _suspend_primary(demo, scheduler)
    assert _primary_state(demo) == "ACTIVE"
    announced = [m.text for m in demo.slack.messages if "utomatic" in m.text]
    assert any("Recovering `gemma4-qr` automatically" in t for t in announced)
    assert any("Automatic recovery of `gemma4-qr`: deleted and recreated" in t for t in announced)
    auto = [e for e in demo.bot.services.store.audit(last=20) if e.user_id == "auto-recover"]
    outcomes = [e.outcome for e in reversed(auto)]  # oldest first
    assert outcomes[0].startswith("refused: `gemma4-qr` was not created by the bot")
    assert outcomes[-2].startswith("started: SUSPENDED")
    assert outcomes[-1].startswith("deleted and recreated `gemma4-qr` in `us-east5-a`: now ACTIVE")


def test_idle_deployment_gets_the_idle_alert(spot_world: Demo) -> None:
    demo = spot_world
    scheduler = _scheduler(demo)
    scheduler.tick()
    start = len(demo.slack.messages)
    demo.gcp.advance(2 * 3600 + 60)  # no request for 2 h (gemma4-qr still has 29 min to run)
    scheduler.tick()
    (idle,) = [m for m in _posts(demo, start) if "served no request" in m.text]
    assert "`gemma4-qr`" in idle.text and "served no request for 2 h 1 min" in idle.text
    assert "Cost so far: $" in idle.render() and "while idle" in idle.render()
    labels = [e["text"]["text"] for _, e in idle.buttons()]
    assert labels == ["Delete", "Keep for 4 h"]
    lines, answered = demo.user.run("click Keep")
    assert answered, lines
    assert "idle" in scheduler.ledger.mutes(demo.gcp.now())
    _chat(demo, 1)
    demo.gcp.advance(60)
    scheduler.tick()
    assert len([m for m in _posts(demo, start) if "served no request" in m.text]) == 1


def test_mute_takes_any_known_subject_and_refuses_unknown_ones(world: Demo) -> None:
    demo = world
    for subject in ("gemma4-qr-node", "vllm", "slo"):
        lines, answered = demo.user.run(f"/alerts mute {subject} 1h")
        assert answered and any("muted until" in line for line in lines), lines
    lines, answered = demo.user.run("/alerts mute gemma4-typo 1h")
    assert answered
    text = "\n".join(lines)
    assert "no alert subject `gemma4-typo`" in text and "gemma4-qr" in text and "vllm_down" in text
    mutes: dict[str, Any] = _scheduler(demo).ledger.mutes(demo.gcp.now())
    assert set(mutes) == {"gemma4-qr-node", "vllm", "slo"}


def test_start_up_that_never_finishes_is_reported_stuck_then_paged(world: Demo) -> None:
    demo = world
    scheduler = _scheduler(demo)
    scheduler.tick()
    start = len(demo.slack.messages)
    lines, answered = demo.user.run("/vllm restart")
    assert answered, lines
    lines, answered = demo.user.run("click Confirm", timeout=60)
    assert answered, lines
    demo.vllm.stop()  # the simulated server never comes up again
    for minutes in (10, 10, 9):  # MAINTENANCE_TIMEOUT_MIN is 30: held until then
        demo.gcp.advance(minutes * 60)
        scheduler.tick()
    assert not [m for m in demo.slack.messages[start:] if "is down" in m.text or "stuck" in m.text]
    demo.gcp.advance(2 * 60)
    scheduler.tick()
    (stuck,) = [m for m in _posts(demo, start, threads=True) if "start-up looks stuck" in m.text]
    assert "still not serving after 31 min" in stuck.text and stuck.thread_ts is not None
    assert "Container `" in stuck.render()  # the diagnosis read over SSH
    assert "*startup-stuck*" in stuck.render()  # as /vllm status says of a running, silent start-up
    for _ in range(3):  # the window is closed: the outage is paged as usual
        demo.gcp.advance(60)
        scheduler.tick()
    assert [m for m in _posts(demo, start, ALERTS_CHANNEL) if "is down" in m.text]


def test_primary_suspended_resolves_its_countdown_and_is_one_serving_down_alert(world: Demo) -> None:
    """gemma4-qr (flex-start) reaches its max run duration: its open countdown resolves in place, and the
    transition to SUSPENDED is the outage's one alert (with no endpoint left, no vllm_down follows)."""
    demo = world
    scheduler = _scheduler(demo)
    scheduler.tick()
    qr = demo.bot.services.tpu.get_queued_resource("gemma4-qr", ["us-east5-a"])
    assert qr.termination_time is not None
    demo.gcp.advance((qr.termination_time - demo.gcp.now()).total_seconds() - 50 * 60)
    start = len(demo.slack.messages)
    scheduler.tick()
    (countdown,) = [m for m in _posts(demo, start) if "`gemma4-qr` (us-east5-a) terminates in" in m.text]
    transition = _suspend_primary(demo, scheduler)
    assert "Serving is down" in json.dumps(transition.blocks)
    for _ in range(4):  # more than the failed checks vllm_down needs
        demo.gcp.advance(60)
        scheduler.tick()
    later = demo.slack.messages[start:]
    assert not [m for m in later if "alert `vllm_down`" in json.dumps(m.blocks)]
    assert len([m for m in later if "Serving is down" in json.dumps(m.blocks)]) == 1
    lapsed = [m for m in later if "no longer applies: now SUSPENDED" in json.dumps(m.blocks)]
    assert [m.ts for m in lapsed] == [countdown.ts]  # updated in place, once
    lines, answered = demo.user.run("/alerts list")
    assert answered, lines
    opened = "\n".join(lines).split("*Open*", 1)[1].split("*Muted*", 1)[0]
    assert "gemma4-qr` (us-east5-a) terminates" not in opened


def test_recover_by_capacity_search_keeps_the_primary_name(world: Demo) -> None:
    demo = world
    scheduler = _scheduler(demo)
    scheduler.tick()
    _suspend_primary(demo, scheduler)
    lines, answered = demo.user.run("click Recover by capacity search")
    assert answered, lines
    assert any("search for capacity" in line for line in lines)
    lines, answered = demo.user.run("click Confirm", timeout=90)
    assert answered, lines
    assert any("found capacity in `us-east5-a`" in line for line in lines), lines
    assert _primary_state(demo) == "ACTIVE"
    found = demo.bot.services.tpu.get_queued_resource("gemma4-qr", ["us-east5-a"])
    assert created_by_bot(found) and found.labels[SEARCH_KEY]


def test_recover_is_refused_while_another_command_holds_the_name(world: Demo) -> None:
    demo = world
    scheduler = _scheduler(demo)
    scheduler.tick()
    _suspend_primary(demo, scheduler)
    services = demo.bot.services
    keys = operation_keys(services.settings.gcp_project, "us-east5-a", "gemma4-qr")
    services.store.acquire_operation(
        keys, "r0other", "U0OTHER001", "tpu reset gemma4-qr", ttl_s=600, now=services.now()
    )
    lines, answered = demo.user.run("click Recover")
    assert answered, lines
    lines, answered = demo.user.run("click Confirm", timeout=60)
    assert answered, lines
    assert any("`tpu reset gemma4-qr` started by" in line and "still running" in line for line in lines)
    assert _primary_state(demo) == "SUSPENDED"  # nothing was deleted


def test_scheduled_stop_proposes_delete_with_the_usual_confirmation(world: Demo) -> None:
    demo = world
    base = _scheduler(demo)
    client = SlackGateway.connect(demo.settings.slack_bot_token.get_secret_value(), demo.slack.api_url)
    just_passed = demo.gcp.now() - timedelta(minutes=5)
    options = dataclasses.replace(
        base.options, idle_after=None, idle_stop_at=parse_schedule(just_passed.strftime("%H:%M"))
    )
    scheduler = AlertScheduler.build(demo.bot.services, client, ALERTS_CHANNEL, options=options)
    start = len(demo.slack.messages)
    scheduler.tick()
    scheduler.tick()
    (stop,) = [m for m in _posts(demo, start) if "scheduled stop" in m.text]
    labels = [e["text"]["text"] for _, e in stop.buttons()]
    assert "`gemma4-qr`" in stop.text and labels == ["Delete", "Keep for 4 h"]
    lines, answered = demo.user.run("click Delete")
    assert answered, lines
    assert any("Confirm" in line for line in lines)
    lines, answered = demo.user.run("click Confirm", timeout=60)
    assert answered, lines
    assert any("Deleted queued resource `gemma4-qr`" in line for line in lines)


def test_a_dead_resource_that_only_shares_the_primarys_name_is_not_recovered_as_it(world: Demo) -> None:
    demo = world
    scheduler = _auto_recovering_scheduler(demo)
    tpu = demo.bot.services.tpu  # a second gemma4-qr, the bot's, spot in another zone: then preempted
    spec = CreateSpec(
        "gemma4-qr", "gemma4-qr-node", "europe-west4-a", "v6e-8", "v2-alpha-tpuv6e", "spot", None, None,
        labels=ownership_labels("r-twin", DEMO_USER),
    )  # fmt: skip
    tpu.wait_operation(tpu.create_queued_resource(spec), timeout_s=30)
    scheduler.tick()
    demo.gcp.preempt("europe-west4-a", "gemma4-qr-node")
    demo.gcp.advance(120)
    scheduler.tick()
    twin = tpu.get_queued_resource("gemma4-qr", ["europe-west4-a"])
    assert twin.preempted, twin.state
    assert not [e for e in demo.bot.services.store.audit(last=20) if e.user_id == "auto-recover"]
    assert not [m for m in demo.slack.messages if "Recovering `gemma4-qr` automatically" in m.text]
    assert _primary_state(demo) == "ACTIVE"  # the primary, by zone and name, is alive: nothing to recover


def _twin(demo: Demo, model: str = "spot") -> None:
    """A second `gemma4-qr`, the bot's, in europe-west4-a (a name is unique per zone only), made ACTIVE
    through the Google emulator beside the primary, ACTIVE in us-east5-a since before."""
    tpu = demo.bot.services.tpu
    spec = CreateSpec(
        "gemma4-qr", "gemma4-qr-node", "europe-west4-a", "v6e-8", "v2-alpha-tpuv6e", model, None, None,
        labels=ownership_labels("r-twin", DEMO_USER),
    )  # fmt: skip
    tpu.wait_operation(tpu.create_queued_resource(spec), timeout_s=30)
    demo.gcp.advance(600)
    assert tpu.get_queued_resource("gemma4-qr", ["europe-west4-a"]).state == "ACTIVE"


def test_the_transition_of_a_resource_that_only_shares_the_primarys_name_is_not_the_primarys(
    world: Demo,
) -> None:
    demo = world
    scheduler = _scheduler(demo)
    _twin(demo)
    scheduler.tick()
    start = len(demo.slack.messages)
    demo.gcp.preempt("europe-west4-a", "gemma4-qr-node")
    demo.gcp.advance(120)
    scheduler.tick()
    about = [m for m in _posts(demo, start, threads=True) if "europe-west4-a" in m.text]
    assert [m for m in about if m.thread_ts], [m.text for m in demo.slack.messages[start:]]
    # Neither "serving is down" nor Recover: the primary, by zone and name, still serves in us-east5-a.
    assert not [m for m in about if "Serving is down" in m.render()]
    assert not [e for m in about for _, e in m.buttons() if e["action_id"].startswith("alert_recover")]
    assert _primary_state(demo) == "ACTIVE"
    # A Recover button's resource is the primary of its watcher only in the primary's zone.
    assert scheduler.watcher_of("europe-west4-a", "gemma4-qr") is None
    assert scheduler.watcher_of("us-east5-a", "gemma4-qr") is scheduler


def test_the_idle_alert_is_about_the_primary_not_the_first_zones_resource_of_its_name(
    tmp_path: Path,
) -> None:
    # europe-west4-a first: a read by name alone takes the second gemma4-qr there for the primary.
    zones = ["europe-west4-a", "us-east5-a", "asia-northeast1-b"]
    with Demo(scenario_path=_spot_scenario(tmp_path), idle_alert_after="2h", tpu_zones=zones) as demo:
        _twin(demo)
        scheduler = _scheduler(demo)
        scheduler.tick()
        start = len(demo.slack.messages)
        demo.gcp.advance(2 * 3600 + 60)
        scheduler.tick()
        (idle,) = [m for m in _posts(demo, start) if "served no request" in m.text]
        assert "`gemma4-qr` (us-east5-a) served no request" in idle.text, idle.text


def test_a_reset_of_a_resource_that_only_shares_the_primarys_name_opens_no_maintenance_window(
    world: Demo,
) -> None:
    demo = world
    tpu = demo.bot.services.tpu  # a second gemma4-qr where there is no capacity: FAILED once its wait ends
    spec = CreateSpec(
        "gemma4-qr", "gemma4-qr-node", "asia-northeast1-b", "v6e-8", "v2-alpha-tpuv6e", "spot", None,
        timedelta(minutes=5), labels=ownership_labels("r-twin", DEMO_USER),
    )  # fmt: skip
    tpu.wait_operation(tpu.create_queued_resource(spec), timeout_s=30)
    demo.gcp.advance(600)
    assert tpu.get_queued_resource("gemma4-qr", ["asia-northeast1-b"]).state == "FAILED"
    lines, answered = demo.user.run("/tpu reset gemma4-qr --zone asia-northeast1-b")
    assert answered, lines
    lines, answered = demo.user.run("click Confirm", timeout=60)
    assert answered, lines
    assert any("reset" in line.lower() for line in lines), lines
    # Not the primary's work: the primary serves on in us-east5-a, its outage alerts are not held back.
    assert MaintenanceWindows(demo.bot.services.store).get(_scheduler(demo).deployment) is None
    assert _primary_state(demo) == "ACTIVE"
