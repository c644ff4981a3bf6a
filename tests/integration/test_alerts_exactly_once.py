"""Issue 6, "Done when": the alert scheduler against the emulator with a controllable clock.

200 queued resources with random lifetimes and states, the bot process restarted at random moments (new
Store, Services and AlertScheduler on the same SQLite file), resources deleted at random moments, some
muted, and a recording Slack (the Slack simulator behind a real slack_sdk WebClient). Every due threshold
alert is posted exactly once, none after deletion; the ledger's counts are printed.
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.config import Settings
from bot.oncall.scheduler import AlertScheduler
from bot.services import Services
from bot.slack.gateway import SlackGateway
from ops.alerts.ledger import DEFAULT_THRESHOLDS, AlertLedger
from ops.store.state import Store
from sim.gcp import GcpSimulator
from sim.slack import SlackSimulator

START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
TOKEN = "xoxb-test-alerts"  # the simulator's token
CHANNEL = "C0ALERTS01"
ZONES = ["us-east5-a", "asia-northeast1-b", "us-west4-a", "europe-west4-a"]
STEP = timedelta(minutes=2)
STEPS = 180  # six simulated hours
THRESHOLD_KINDS = ("expiry", "valid_until")


class Clock:
    """A clock only the test moves."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def scenario(rng: random.Random) -> dict[str, Any]:
    qrs: list[dict[str, Any]] = []
    for i in range(200):
        name = f"qr-{i:03d}"
        roll = rng.random()
        spec: dict[str, Any] = {"name": name, "node": {"id": f"{name}-node", "accelerator_type": "v6e-8"}}
        if roll < 0.40:  # running flex-start: terminates create + max run
            spec.update(
                zone="us-east5-a",
                state="ACTIVE",
                provisioning_model="FLEX_START",
                created=f"-{rng.randint(0, 300)}m",
                max_run_duration=f"{rng.randint(30, 420)}m",
            )
        elif roll < 0.60:  # stockout: waits until valid-until, then FAILED
            spec.update(
                zone="asia-northeast1-b",
                state="WAITING_FOR_RESOURCES",
                provisioning_model="FLEX_START",
                created=f"-{rng.randint(0, 120)}m",
                valid_until=f"{rng.randint(5, 400)}m",
                max_run_duration="4h",
            )
        elif roll < 0.75:  # capacity after 90m: WAITING -> PROVISIONING -> ACTIVE -> SUSPENDED
            spec.update(
                zone="us-west4-a",
                state="WAITING_FOR_RESOURCES",
                provisioning_model="FLEX_START",
                created=f"-{rng.randint(0, 80)}m",
                valid_until=f"{rng.randint(20, 300)}m",
                max_run_duration=f"{rng.randint(30, 200)}m",
            )
        elif roll < 0.85:  # spot, preempted some time
            spec.update(
                zone="europe-west4-a",
                state="ACTIVE",
                provisioning_model="SPOT",
                created=f"-{rng.randint(0, 60)}m",
                preempt_after=f"{rng.randint(1, 300)}m",
            )
        else:  # old FAILED or SUSPENDED: stale
            spec.update(
                zone="europe-west4-a",
                state=rng.choice(["FAILED", "SUSPENDED"]),
                state_initiator="SERVICE",
                provisioning_model="FLEX_START",
                created=f"-{rng.randint(20, 40)}h",
                error={"code": 8, "message": "stockout"},
            )
        qrs.append(spec)
    return {
        "project": "alerts-project",
        "google": {
            "page_size": 1000,
            "operation_duration": "0s",
            "delete_duration": "0s",
            "zones": {
                "us-east5-a": {"accelerator_types": ["v6e-8"], "capacity": "available"},
                "asia-northeast1-b": {"accelerator_types": ["v6e-8"], "capacity": "none"},
                "us-west4-a": {
                    "accelerator_types": ["v6e-8"],
                    "capacity": {"after": "90m", "provisioning": "5m"},
                },
                "europe-west4-a": {"accelerator_types": ["v6e-8"]},
            },
            "queued_resources": qrs,
        },
    }


def due_threshold_keys(gcp: GcpSimulator, thresholds: tuple[int, ...], lead: timedelta) -> dict[str, str]:
    """What the bot must have posted after a tick now: key -> resource name (an independent oracle on the
    emulator's own state). A threshold is due from `lead` (the time to the next tick) before it."""
    due: dict[str, str] = {}
    with gcp.world.lock:
        now = gcp.now()
        gcp.world.evolve(now)
        for qr in gcp.world.queued_resources.values():
            deadlines: list[tuple[str, datetime]] = []
            if qr.state == "ACTIVE" and qr.termination_time is not None:
                deadlines.append(("expiry", qr.termination_time))
            if qr.state == "WAITING_FOR_RESOURCES" and qr.valid_until is not None:
                deadlines.append(("valid_until", qr.valid_until))
            for kind, deadline in deadlines:
                left = deadline - now
                crossed = [t for t in thresholds if timedelta(0) < left <= timedelta(minutes=t) + lead]
                if crossed:
                    key = f"{qr.zone}/{qr.qr_id}@{_iso(qr.create_time)}|{kind}|{min(crossed)}"
                    due[key] = qr.qr_id
    return due


def bot_process(gcp: GcpSimulator, slack: SlackSimulator, db: Path, clock: Clock) -> AlertScheduler:
    """A fresh "process": new Settings, Services (TpuOps, Store) and AlertScheduler on the same database."""
    fields: dict[str, Any] = {
        "slack_bot_token": TOKEN,
        "slack_signing_secret": "s" * 32,
        "gcp_project": "alerts-project",
        "tpu_zones": ZONES,
        "google_api_endpoint": gcp.url,
        "state_database_url": f"sqlite:///{db}",
        "alert_channel": CHANNEL,
    }
    settings = Settings(_env_file=None, **fields)  # type: ignore[call-arg]
    services = Services.from_settings(settings)
    services.now = clock
    client = SlackGateway.connect(TOKEN, slack.api_url)
    return AlertScheduler.build(services, client, CHANNEL, interval_s=120, clock=clock, vllm_checks=False)


def close(process: AlertScheduler) -> None:
    process.services.tpu.close()
    process.services.store.close()


def threshold_posts(slack: SlackSimulator) -> Counter[str]:
    """Alert key -> how many messages were posted with it (the Acknowledge button carries the key)."""
    posted: Counter[str] = Counter()
    for message in slack.messages:
        if message.kind != "post":
            continue
        for _, element in message.buttons():
            value = str(element.get("value", ""))
            if element.get("action_id") == "alert_ack" and value.split("|")[1] in THRESHOLD_KINDS:
                posted[value] += 1
    return posted


def test_every_due_threshold_alert_is_posted_exactly_once(tmp_path: Path) -> None:
    rng = random.Random(6)
    clock = Clock(START)
    db = tmp_path / "state.db"
    slack = SlackSimulator(TOKEN, channels=[CHANNEL]).start()
    gcp = GcpSimulator(scenario(rng), now=clock, speed=1).start()
    try:
        muted = {f"qr-{i:03d}" for i in rng.sample(range(200), 12)}
        process = bot_process(gcp, slack, db, clock)
        for name in muted:
            process.ledger.mute(name, START + timedelta(days=2), by="U0TEST0001")
        expected: dict[str, str] = {}
        deleted_at: dict[str, int] = {}  # name -> number of Slack messages when it was deleted
        restarts = 0
        for _ in range(STEPS):
            clock.now += STEP
            if rng.random() < 0.08:  # the process dies, stays down up to 40 minutes, comes back
                close(process)
                clock.now += STEP * rng.randint(0, 20)
                process = bot_process(gcp, slack, db, clock)
                restarts += 1
            expected.update(due_threshold_keys(gcp, DEFAULT_THRESHOLDS, lead=STEP))  # ticks STEP apart
            result = process.tick()
            assert not result.errors, result.errors
            if rng.random() < 0.3:
                alive = sorted(
                    (qr.zone, qr.qr_id)
                    for qr in gcp.world.queued_resources.values()
                    if qr.state != "DELETING" and qr.qr_id not in deleted_at
                )
                if alive:
                    zone, name = rng.choice(alive)
                    process.services.tpu.delete_queued_resource(name, zone, force=True, wait=False)
                    deleted_at[name] = len(slack.messages)

        posted = threshold_posts(slack)
        want = {key for key, name in expected.items() if name not in muted}
        assert set(posted) == want, (set(posted) - want, want - set(posted))
        assert all(count == 1 for count in posted.values()), [k for k, n in posted.items() if n > 1]
        for name, index in deleted_at.items():  # nothing new; an open countdown is resolved in place
            late = [m for m in slack.messages[index:] if f"`{name}`" in m.text]
            new = [m.text for m in late if m.kind != "update" or "no longer applies: " not in m.text]
            assert not new, (name, new)
        muted_posts = [m for m in slack.messages if any(f"`{name}`" in m.text for name in muted)]
        assert not muted_posts

        ledger = AlertLedger(Store(f"sqlite:///{db}"))
        rows = ledger.rows()
        by_status = Counter(r.status for r in rows if r.kind in THRESHOLD_KINDS)
        all_status = Counter(r.status for r in rows)
        assert by_status["sent"] == len(want)
        assert by_status["suppressed"] > 0 and by_status["superseded"] > 0
        assert "sending" not in all_status
        print(
            f"\nthreshold alerts: sent={by_status['sent']} skipped-as-superseded={by_status['superseded']} "
            f"suppressed={by_status['suppressed']}; all alerts: {dict(all_status)}; "
            f"restarts={restarts} deleted={len(deleted_at)} slack messages={len(slack.messages)}"
        )
        close(process)
    finally:
        gcp.stop()
        slack.stop()
