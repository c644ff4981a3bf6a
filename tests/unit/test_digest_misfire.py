"""The daily digest runs late rather than never, and once, after the process stalled at its scheduled time.

The handed case (tests/fixtures/cases/apscheduler-misfire.txt): with APScheduler's default misfire grace of
1 s, a cron job whose process was busy for 2 s at the scheduled time is skipped with only a warning.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from apscheduler.schedulers.background import BackgroundScheduler

from bot.oncall.scheduler import DIGEST_MISFIRE_GRACE_S, AlertScheduler
from bot.slack.gateway import SlackGateway
from ops.store.state import Store
from ops.tpu.model import ZoneListing
from sim.slack import SlackSimulator

CASE = Path(__file__).resolve().parent.parent / "fixtures" / "cases" / "apscheduler-misfire.txt"
TOKEN = "xoxb-test-digest"  # the simulator's token
CHANNEL = "C0ALERTS"


def _wait_for(predicate: Any, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def _stalled_job(scheduler: BackgroundScheduler, runs: list[datetime], **options: Any) -> None:
    """A job due every 10 s that the process slept through for a minute: seven run times, the last 5 s ago
    (so even the newest is missed by more than APScheduler's default grace of 1 s), none in the future."""
    now = datetime.now(UTC)
    scheduler.add_job(
        lambda: runs.append(datetime.now(UTC)),
        "interval",
        seconds=10,
        start_date=now - timedelta(seconds=65),
        end_date=now - timedelta(seconds=5),
        next_run_time=now - timedelta(seconds=65),
        **options,
    )


def test_the_case_default_grace_skips_a_run_missed_by_seconds(caplog: pytest.LogCaptureFixture) -> None:
    assert "was missed by" in CASE.read_text()
    scheduler = BackgroundScheduler(timezone=UTC)
    scheduler.start(paused=True)
    runs: list[datetime] = []
    try:
        with caplog.at_level(logging.WARNING, logger="apscheduler"):
            _stalled_job(scheduler, runs)
            scheduler.resume()
            assert _wait_for(lambda: "was missed by" in caplog.text)
            # The scheduler's thread removes the job past its end date after logging the misfire; shutting
            # down before that makes its removal race the shutdown's (a JobLookupError in its thread).
            assert _wait_for(lambda: not scheduler.get_jobs())
    finally:
        scheduler.shutdown(wait=True)
    assert runs == []


def test_digest_job_options_run_a_minute_late_once() -> None:
    scheduler = BackgroundScheduler(timezone=UTC)
    scheduler.start(paused=True)
    runs: list[datetime] = []
    try:
        _stalled_job(scheduler, runs, misfire_grace_time=DIGEST_MISFIRE_GRACE_S, coalesce=True)
        scheduler.resume()
        assert _wait_for(lambda: len(runs) >= 1)
        time.sleep(0.3)
        assert _wait_for(lambda: not scheduler.get_jobs())
    finally:
        scheduler.shutdown(wait=True)
    assert len(runs) == 1  # seven missed run times coalesced into one


def test_alert_scheduler_posts_the_digest_once_after_a_one_minute_stall(tmp_path: Path) -> None:
    now = datetime(2026, 11, 30, 9, 1, tzinfo=UTC)
    services = SimpleNamespace(
        tpu=SimpleNamespace(list_queued_resources=lambda zones: ZoneListing(())),
        store=Store(f"sqlite:///{tmp_path / 'state.db'}"),
        settings=SimpleNamespace(tpu_zones=["us-east5-a"]),
        now=lambda: now,
    )
    slack = SlackSimulator(TOKEN, channels=[CHANNEL]).start()
    gateway = SlackGateway.connect(TOKEN, slack.api_url)
    alerts = AlertScheduler.build(cast(Any, services), gateway, CHANNEL, interval_s=3600, vllm_checks=False)
    alerts.start()
    try:
        assert alerts._scheduler is not None
        # The first tick runs at start; let it finish (it takes the same lease) before the digest is due.
        tick = alerts._scheduler.get_job("alerts-tick")
        assert _wait_for(lambda: tick.next_run_time > datetime.now(UTC) + timedelta(seconds=60))
        time.sleep(0.2)
        digest = alerts._scheduler.get_job("alerts-digest")
        # The process was stalled through 09:00 and wakes up a minute later.
        digest.modify(next_run_time=datetime.now(UTC) - timedelta(seconds=60))
        alerts._scheduler.wakeup()
        assert slack.wait_for(lambda m: "Daily digest" in m.text, timeout=5) is not None
        time.sleep(0.3)
    finally:
        alerts.shutdown()
        slack.stop()
    posts = [m for m in slack.messages if m.kind == "post"]
    assert len(posts) == 1 and "Daily digest" in posts[0].text
