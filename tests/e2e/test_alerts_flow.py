"""The demo world with alerts: `gemma4-qr` raises its 60/15/5-minute alerts as simulated time moves, and
the buttons work (Acknowledge, Snooze 1 h through `/alerts mute`, Delete now through the confirmed flow).

Uses only public objects of `sim.demo.Demo`; the alert scheduler and its listener are wired here the way
the bot's start-up wires them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from bot.oncall.scheduler import AlertScheduler
from bot.slack.gateway import SlackGateway
from bot.slack.listeners import register_alert_buttons
from sim.demo import Demo

CHANNEL = "C0ALERTS01"


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[Demo, AlertScheduler]]:
    with Demo() as demo:
        services = demo.bot.services
        services.now = demo.gcp.now  # mutes and confirmations follow simulated time
        client = SlackGateway.connect(demo.settings.slack_bot_token.get_secret_value(), demo.slack.api_url)
        scheduler = AlertScheduler.build(
            services, client, CHANNEL, clock=demo.gcp.now, vllm_checks=False, deployment="production"
        )
        register_alert_buttons(demo.bot.app, demo.bot.registry, demo.bot.runner, scheduler)
        yield demo, scheduler


def _alerts(demo: Demo, start: int) -> list[str]:
    return [
        m.text
        for m in demo.slack.messages[start:]
        if m.channel == CHANNEL and m.kind == "post" and m.thread_ts is None
    ]


def test_gemma4_qr_thresholds_and_buttons(world: tuple[Demo, AlertScheduler]) -> None:
    demo, scheduler = world
    scheduler.tick()  # baseline: gemma4-qr ends 150 min after the demo started
    (stale,) = _alerts(demo, 0)  # the FAILED gemma4-old (26 h old) holds quota
    assert "`gemma4-old`" in stale and "FAILED for over a day" in stale

    start = len(demo.slack.messages)
    demo.gcp.advance(95 * 60)  # 55 min left
    assert scheduler.tick().sent == 1
    (text,) = _alerts(demo, start)
    assert "`gemma4-qr`" in text and "terminates in 5" in text
    assert scheduler.tick().sent == 0

    lines, answered = demo.user.run("click Acknowledge")
    assert answered, lines
    assert any("Acknowledged by" in line for line in lines)
    open_kinds = [r.kind for r in scheduler.ledger.open_alerts(since=demo.gcp.now().replace(year=2000))]
    assert open_kinds == ["stale"]  # the expiry alert is acknowledged

    start = len(demo.slack.messages)
    demo.gcp.advance(42 * 60)  # 13 min left
    scheduler.tick()  # also gemma4-standby's valid-until (60 min) alert
    (text,) = [t for t in _alerts(demo, start) if "`gemma4-qr`" in t]
    assert "terminates in 12 min" in text or "terminates in 13 min" in text

    lines, answered = demo.user.run("click Snooze")
    assert answered, lines
    assert "gemma4-qr" in scheduler.ledger.mutes(demo.gcp.now())

    demo.gcp.advance(10 * 60)  # 3 min left, muted: recorded as suppressed, not posted
    start = len(demo.slack.messages)
    result = scheduler.tick()
    assert result.suppressed == 1
    assert not [t for t in _alerts(demo, start) if "`gemma4-qr`" in t]

    lines, answered = demo.user.run("/alerts unmute gemma4-qr")
    assert answered, lines
    lines, answered = demo.user.run("click Delete now")
    assert answered, lines
    assert any("Confirm" in line for line in lines)
    lines, answered = demo.user.run("click Confirm", timeout=60)
    assert answered, lines

    listing = demo.bot.services.tpu.list_queued_resources(["us-east5-a"])
    assert "gemma4-qr" not in [qr.name for qr in listing.resources if qr.state != "DELETING"]
    start = len(demo.slack.messages)
    demo.gcp.advance(60)
    scheduler.tick()
    # Nothing new is posted about the deleted resource; its open countdown is resolved in place.
    assert not [m for m in demo.slack.messages[start:] if "`gemma4-qr`" in m.text and m.kind == "post"]
    (lapsed,) = [m for m in demo.slack.messages[start:] if "`gemma4-qr`" in m.text]
    assert "terminates in 1" in lapsed.text and "no longer applies: " in lapsed.text

    lines, answered = demo.user.run("/alerts list")
    assert answered, lines
    listed = "\n".join(lines)
    assert "suppressed" in listed and "Ledger" not in listed
    open_part = listed.split("*Open*")[1].split("*Muted*")[0]
    assert "`gemma4-qr`" not in open_part, "the deleted resource's alerts are not open any more"
    assert "`gemma4-old`" in open_part  # still there, still holding quota


def test_muting_an_unknown_resource_is_refused_with_the_list(world: tuple[Demo, AlertScheduler]) -> None:
    demo, scheduler = world
    lines, answered = demo.user.run("/alerts mute no-such-qr 1h")
    assert answered, lines
    text = "\n".join(lines)
    assert "no alert subject `no-such-qr`" in text and "`gemma4-standby`" in text
    assert "no-such-qr" not in scheduler.ledger.mutes(demo.gcp.now())
    lines, answered = demo.user.run("/alerts mute gemma4-standby 1h")
    assert answered and "gemma4-standby" in scheduler.ledger.mutes(demo.gcp.now())


def test_a_muted_open_alert_says_so_where_open_alerts_are_listed(world: tuple[Demo, AlertScheduler]) -> None:
    """`/alerts list` and App Home (`AlertScheduler.open_summary`) mark an open alert its mute silences,
    with until when and by whom; unmuted, the mark is gone."""
    demo, scheduler = world
    lines, answered = demo.user.run("/alerts mute gemma4-old 2h")
    assert answered and any("muted until" in line for line in lines), lines
    until = (demo.gcp.now() + timedelta(hours=2)).strftime("%Y-%m-%d %H:%M UTC")
    mark = f":mute: muted (`gemma4-old`) until {until} by "
    lines, answered = demo.user.run("/alerts list")
    assert answered, lines
    open_part = "\n".join(lines).split("*Open*")[1].split("*Muted*")[0]
    (stale,) = [line for line in open_part.splitlines() if "`gemma4-old`" in line]
    assert mark in stale and "U0DEMOUSR1" in stale.split(mark)[1], stale
    (home,) = [line for line in scheduler.open_summary(demo.gcp.now()) if "`gemma4-old`" in line]
    assert mark in home, home
    demo.user.run("/alerts unmute gemma4-old")
    (home,) = [line for line in scheduler.open_summary(demo.gcp.now()) if "`gemma4-old`" in line]
    assert ":mute:" not in home, home
