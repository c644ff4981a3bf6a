"""TPU host maintenance in the demo world: the Google simulator announces it on the primary's node
(`Node.upcomingMaintenance`, read through the real client library), `/tpu describe` and `/tpu status` show
it, the alert is posted once before the window with the catalogue's fix, resolved in place when the
maintenance is over, and `/alerts mute maintenance` silences it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.oncall.scheduler import AlertScheduler
from sim.demo import ALERTS_CHANNEL, Demo
from sim.slack import Message

NODE = "gemma4-qr-node"


@pytest.fixture
def lead_world() -> Iterator[Demo]:
    """A demo of the test's own alerting one hour ahead of a maintenance window (the primary, flex-start,
    runs about 150 more minutes: the windows below fit inside)."""
    with Demo(maintenance_alert_lead="1h") as world:
        yield world


def _scheduler(demo: Demo) -> AlertScheduler:
    assert demo.bot.alerts is not None
    return demo.bot.alerts


def _maintenance_posts(demo: Demo) -> list[Message]:
    return [
        m
        for m in demo.slack.messages
        if m.kind == "post" and m.channel == ALERTS_CHANNEL and "host maintenance" in m.text
    ]


def test_maintenance_shows_alerts_once_and_resolves_in_place(lead_world: Demo) -> None:
    demo = lead_world
    scheduler = _scheduler(demo)
    demo.gcp.schedule_maintenance("us-east5-a", NODE, starts_in=100 * 60, lasts=30 * 60)
    scheduler.tick()
    assert _maintenance_posts(demo) == []  # 100 min ahead, the lead is 1 h

    lines, answered = demo.user.run("/tpu describe gemma4-qr")
    described = "\n".join(lines)
    assert answered and "Host maintenance" in described and "SCHEDULED, PENDING" in described
    assert "can be started early: yes" in described
    assert f"perform-maintenance gemma4-qr --node-names {NODE} --zone us-east5-a" in described
    lines, answered = demo.user.run("/tpu status")
    shown = ":construction: scheduled host maintenance in 1h 3"  # 1h 40m, less the real seconds passed
    assert answered and any(shown in line for line in lines), lines

    demo.gcp.advance(45 * 60)
    scheduler.tick()
    scheduler.tick()
    (alert,) = _maintenance_posts(demo)
    title = "`gemma4-qr` (us-east5-a): scheduled host maintenance on node `gemma4-qr-node` in 5"
    assert title in alert.text and "min (window " in alert.text  # 55 min, less the real seconds passed
    assert "perform-maintenance" in alert.render() and "/tpu find" in alert.render()

    demo.gcp.advance(60 * 60)  # inside the window: ONGOING, still one alert
    scheduler.tick()
    assert len(_maintenance_posts(demo)) == 1
    lines, _ = demo.user.run("/tpu describe gemma4-qr")
    described = "\n".join(lines).split("Queued resource gemma4-qr", 1)[-1]  # the answer, not the alerts
    assert "ONGOING" in described and "UNHEALTHY_MAINTENANCE" in described and "--node-names" not in described

    demo.gcp.advance(30 * 60)  # past the window's end
    scheduler.tick()
    updates = [m for m in demo.slack.messages if m.kind == "update" and m.ts == alert.ts]
    assert (
        updates
        and "Resolved" in updates[-1].render()
        and "over; node `gemma4-qr-node` is READY" in (updates[-1].render())
    )
    assert len(_maintenance_posts(demo)) == 1


def test_a_muted_maintenance_alert_is_suppressed(lead_world: Demo) -> None:
    demo = lead_world
    scheduler = _scheduler(demo)
    lines, answered = demo.user.run("/alerts mute maintenance 2h")
    assert answered and any("muted until" in line for line in lines), lines
    demo.gcp.schedule_maintenance("us-east5-a", NODE, starts_in=30 * 60, lasts=10 * 60)
    assert scheduler.tick().suppressed >= 1
    assert _maintenance_posts(demo) == []
    demo.gcp.advance(45 * 60)
    scheduler.tick()  # over: its resolution is suppressed too (nobody saw the alert)
    assert not [
        m for m in demo.slack.messages if "host maintenance" in m.text and m.channel == ALERTS_CHANNEL
    ]
