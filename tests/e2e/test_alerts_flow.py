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


def test_an_alert_of_a_recreated_resource_says_it_was_about_the_one_before(
    world: tuple[Demo, AlertScheduler],
) -> None:
    """A queued resource is known by its identity (zone, name, create time), not its name: gemma4-old's
    stale alert, once gemma4-old is deleted and created again, is about the resource before. `/alerts list`,
    App Home (`open_summary`) and `/fleet` leave it out of the open alerts and name the resource, when it was
    recreated and that the alert was about the one before; the new resource's own alerts show as usual."""
    demo, scheduler = world
    old = demo.bot.services.tpu.get_queued_resource("gemma4-old", ["europe-west4-a"])
    lines, answered = demo.user.run("/tpu delete gemma4-old --zone europe-west4-a")
    assert answered, lines
    lines, answered = demo.user.run("click Confirm", timeout=60)
    assert answered and any("Deleted queued resource `gemma4-old`" in line for line in lines), lines
    lines, answered = demo.user.run("/alerts list")
    assert answered, lines
    deleted = "_1 alert of a queued resource that no longer exists is not shown: `gemma4-old` (deleted)._"
    assert deleted in "\n".join(lines), lines

    demo.gcp.advance(60)
    lines, answered = demo.user.run("/tpu create gemma4-old --zone europe-west4-a --on-demand --allow-second")
    assert answered, lines
    lines, answered = demo.user.run("click Confirm", timeout=60)
    assert answered and any("Created queued resource `gemma4-old`" in line for line in lines), lines
    new = demo.bot.services.tpu.get_queued_resource("gemma4-old", ["europe-west4-a"])
    assert new.create_time != old.create_time
    recreated = new.create_time.strftime("%Y-%m-%d %H:%M UTC")
    expected = (
        "_1 alert of a queued resource that no longer exists is not shown: `gemma4-old` "
        f"(recreated at {recreated}; this alert was about the one before)._"
    )
    lines, answered = demo.user.run("/alerts list")
    assert answered, lines
    open_part = "\n".join(lines).split("*Open*")[1].split("*Muted*")[0]
    assert expected in open_part and "is FAILED for over a day" not in open_part, open_part
    home = scheduler.open_summary(demo.gcp.now())
    assert expected in home and not [line for line in home if "FAILED for over a day" in line], home
    lines, answered = demo.user.run("/fleet")
    assert answered, lines
    production = "\n".join(lines).split("*staging*")[0]
    assert "1 of queued resources that no longer exist: `/alerts list`" in production, production

    # The new gemma4-old's own alert (host maintenance Google announces on its node) shows as usual.
    demo.gcp.schedule_maintenance("europe-west4-a", "gemma4-old-node", starts_in=30 * 60)
    assert scheduler.tick().sent >= 1
    lines, answered = demo.user.run("/alerts list")
    assert answered, lines
    open_part = "\n".join(lines).split("*Open*")[1].split("*Muted*")[0]
    (maintenance,) = [line for line in open_part.splitlines() if "`maintenance`" in line]
    assert "gemma4-old" in maintenance and expected in open_part, open_part


def test_a_node_gone_alert_names_the_alerted_resource_not_the_primary(
    world: tuple[Demo, AlertScheduler],
) -> None:
    """gemma4-old (recreated above, not the primary) loses its node: the alert and the diagnosis in its
    thread name gemma4-old in every command they suggest, never the deployment's primary."""
    demo, scheduler = world
    qr = demo.gcp.world.queued_resources[("europe-west4-a", "gemma4-old")]
    with demo.gcp.world.lock:
        qr.node.gone = True
    demo.gcp.advance(60)
    start = len(demo.slack.messages)
    scheduler.tick()
    posted = "\n".join(m.text for m in demo.slack.messages[start:] if m.channel == CHANNEL)
    assert "`gemma4-old` (europe-west4-a): node `gemma4-old-node` is gone" in posted, posted
    assert "/tpu delete gemma4-old --force" in posted and "gemma4-qr" not in posted, posted
