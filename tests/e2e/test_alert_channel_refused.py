"""An alert channel Slack refuses, in the demo world (real bot over signed Slack requests, the Slack simulator
answering as Slack does): the alert job stops sending there, `/alerts list`, App Home and `/tpu status` say
why with the catalogue's fix, the alerts due meanwhile are held and delivered once the channel works.

The alert scheduler is the one the bot's start-up builds; the tests call its `tick()` while moving the
simulated clock.
"""

from __future__ import annotations

import json
import time

from bot.oncall.scheduler import AlertScheduler
from sim.demo import ALERTS_CHANNEL, Demo


def _scheduler(demo: Demo) -> AlertScheduler:
    assert demo.bot.alerts is not None
    return demo.bot.alerts


def _attempts(demo: Demo) -> int:
    """chat.postMessage calls the bot made to the alert channel."""
    return sum(
        1
        for method, args in demo.slack.calls
        if method == "chat.postMessage" and args.get("channel") == ALERTS_CHANNEL
    )


def _home(demo: Demo) -> str:
    """The App Home the bot publishes for the demo user (after an `app_home_opened` event), as JSON text."""
    demo.slack.home_views.pop(demo.user.user_id, None)
    payload = json.loads(demo.user.mention_body("x", "1.000003"))
    payload["event"] = {
        "type": "app_home_opened",
        "user": demo.user.user_id,
        "channel": "D0DEMO0001",
        "tab": "home",
        "event_ts": f"{time.time():.6f}",
    }
    payload["event_id"] = f"EvHOME{time.monotonic_ns() % 10**8:08d}"
    assert demo.user.post_signed(json.dumps(payload), "application/json").status_code == 200
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and demo.user.user_id not in demo.slack.home_views:
        time.sleep(0.1)
    return json.dumps(demo.slack.home_views[demo.user.user_id])


def test_an_archived_alert_channel_holds_alerts_and_says_so_everywhere(world: Demo) -> None:
    demo = world
    scheduler = _scheduler(demo)
    demo.slack.workspace.archive(ALERTS_CHANNEL)
    first = scheduler.tick()  # the day-old FAILED gemma4-old: a "stale" alert for the alert channel
    assert first.held == 1 and first.failed == 0 and _attempts(demo) == 1
    for _ in range(3):  # no retry before the re-check is due
        demo.gcp.advance(60)
        assert scheduler.tick().held == 0
    assert _attempts(demo) == 1
    assert not [m for m in demo.slack.messages if m.channel == ALERTS_CHANNEL]

    lines, answered = demo.user.run("/alerts list")
    listed = "\n".join(lines)
    assert answered and "Alerts cannot reach" in listed and "archived" in listed
    assert "unarchive the channel" in listed and "ALERT_CHANNEL" in listed and "1 alert held back" in listed
    assert "Undelivered" in listed and "`gemma4-old`" in listed
    lines, answered = demo.user.run("/tpu status")
    assert answered and any("Alerts cannot reach" in line and "unarchive" in line for line in lines)
    home = _home(demo)
    assert "Alerts cannot reach" in home and "unarchive the channel" in home

    demo.slack.workspace.unarchive(ALERTS_CHANNEL)
    demo.gcp.advance(5 * 60)  # ALERT_DELIVERY_RECHECK_S: 300
    again = scheduler.tick()
    assert again.sent == 1
    (delivered,) = [
        m for m in demo.slack.messages if m.channel == ALERTS_CHANNEL and "`gemma4-old`" in m.text
    ]
    assert "Held back since" in delivered.render() and "is_archived" in delivered.render()
    lines, _ = demo.user.run("/alerts list")
    listed = "\n".join(lines)
    assert "Alerts cannot reach" not in listed and "Undelivered" not in listed and "`gemma4-old`" in listed
    scheduler.tick()
    stale = [m for m in demo.slack.messages if m.channel == ALERTS_CHANNEL and "`gemma4-old`" in m.text]
    assert len(stale) == 1  # delivered once


def test_a_missing_scope_names_the_scope_and_alerts_test_rechecks(world: Demo) -> None:
    demo = world
    scheduler = _scheduler(demo)
    demo.slack.workspace.revoke_scope("chat:write")
    assert scheduler.tick().held == 1
    (line,) = scheduler.open_summary(demo.gcp.now())[:1]
    assert "chat:write" in line and "reinstall the app" in line and "SLACK_BOT_TOKEN" in line

    demo.slack.workspace.grant_scope("chat:write")
    assert scheduler.post_test(demo.user.user_id)  # `/alerts test`: a post that gets through re-checks
    assert any(m.channel == ALERTS_CHANNEL and "`gemma4-old`" in m.text for m in demo.slack.messages)
    assert not [line for line in scheduler.open_summary(demo.gcp.now()) if "cannot reach" in line]


def test_a_channel_still_refused_at_the_recheck_stays_held(world: Demo) -> None:
    demo = world
    scheduler = _scheduler(demo)
    demo.slack.workspace.archive(ALERTS_CHANNEL)
    scheduler.tick()
    demo.gcp.advance(5 * 60)
    scheduler.tick()  # the re-check: one attempt, refused again
    assert _attempts(demo) == 2
    (problem,) = scheduler.outbox.problems()
    assert (problem.code, problem.attempts) == ("is_archived", 2)
    assert [h.channel for h in scheduler.outbox.held()] == [ALERTS_CHANNEL]


def test_a_revoked_token_holds_every_channel_until_auth_test_passes(world: Demo) -> None:
    demo = world
    scheduler = _scheduler(demo)
    demo.slack.workspace.revoke_token("account_inactive")
    assert scheduler.tick().held == 1
    (problem,) = scheduler.outbox.problems()
    assert (problem.channel, problem.code) == ("*", "account_inactive")
    (line,) = scheduler.open_summary(demo.gcp.now())[:1]
    assert "any channel" in line and "SLACK_BOT_TOKEN" in line
    demo.gcp.advance(5 * 60)
    before = len(demo.slack.calls)
    scheduler.tick()  # the re-check: auth.test, still refused, so nothing is posted
    assert [method for method, _ in demo.slack.calls[before:]] == ["auth.test"]
    demo.slack.workspace.revoke_token("")
    demo.gcp.advance(5 * 60)
    assert scheduler.tick().sent >= 1
    assert scheduler.outbox.problems() == [] and scheduler.outbox.held() == []
    assert any(m.channel == ALERTS_CHANNEL and "`gemma4-old`" in m.text for m in demo.slack.messages)
