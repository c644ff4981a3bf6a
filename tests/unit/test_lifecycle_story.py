"""One lifecycle story: "serving after" is said once, after the work finished and when the server it brought
up answers; a window whose work failed or still runs never says so; an old table gains the new columns."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from sqlalchemy import Column, DateTime, MetaData, String, Table, Text, create_engine

from bot.oncall.maintenance import planned_work
from bot.oncall.scheduler import AlertScheduler
from bot.slack.gateway import SlackGateway
from ops.alerts.planned import MaintenanceWindows
from ops.store.state import Store
from ops.tpu.model import ZoneListing
from tests.unit.test_alerts import FakeSlack

NOW = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


class Health:
    """A vLLM client whose /health is always `state`."""

    def __init__(self, state: str) -> None:
        self.state = state

    def __enter__(self) -> Health:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def health(self) -> Any:
        return SimpleNamespace(state=self.state, detail="")

    def metrics_text(self) -> str:
        return ""


def _world(tmp_path: Path, target_endpoint: dict[str, object]) -> tuple[Any, FakeSlack, Any]:
    clock = SimpleNamespace(now=NOW)
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")
    services = SimpleNamespace(
        tpu=SimpleNamespace(list_queued_resources=lambda zones: ZoneListing(())),
        store=store,
        settings=SimpleNamespace(tpu_zones=["us-east5-a"], maintenance_timeout_min=30),
        now=lambda: clock.now,
        vllm=lambda: (Health("ready"), SimpleNamespace(url="http://old:8000")),  # the server of before
        vllm_at=lambda endpoint: Health("ready"),
        endpoints=SimpleNamespace(of=lambda name: target_endpoint.get(name)),
    )
    slack = FakeSlack()
    scheduler = AlertScheduler.build(
        cast(Any, services), SlackGateway(cast(Any, slack)), "C0ALERTS", clock=lambda: clock.now
    )
    ctx = SimpleNamespace(
        services=services, progress=None, channel_id="C1", user_id="U1", deployment="default"
    )
    return scheduler, slack, SimpleNamespace(ctx=ctx, clock=clock)


def _said(slack: FakeSlack) -> list[str]:
    return [str(kw.get("text", "")) for _, kw in slack.calls]


def test_no_serving_is_said_while_the_work_runs_nor_for_another_resource_s_server(tmp_path: Path) -> None:
    endpoints: dict[str, object] = {}
    scheduler, slack, w = _world(tmp_path, endpoints)
    with planned_work(cast(Any, w.ctx), "recovery of gemma4-old", ("C1", "1.1"), target="gemma4-old"):
        w.clock.now += timedelta(minutes=1)
        scheduler.tick()  # the deployment's old server answers: not the work's result
        assert not [t for t in _said(slack) if "serving" in t]
    for _ in range(3):  # done, but gemma4-old has no node yet: the primary answering is not its server
        w.clock.now += timedelta(minutes=1)
        scheduler.tick()
    assert not [t for t in _said(slack) if "serving" in t]
    endpoints["gemma4-old"] = SimpleNamespace(url="http://new:8000")
    w.clock.now += timedelta(minutes=1)
    scheduler.tick()
    scheduler.tick()
    (serving,) = [t for t in _said(slack) if "serving" in t]
    assert serving.startswith("vLLM serving after 5 min (recovery of gemma4-old)")


def test_a_failed_step_never_announces_serving(tmp_path: Path) -> None:
    scheduler, slack, w = _world(tmp_path, {})
    with pytest.raises(RuntimeError), planned_work(cast(Any, w.ctx), "vllm restart", ("C1", "1.1")):
        w.clock.now += timedelta(seconds=5)
        scheduler.tick()
        raise RuntimeError("docker run failed")
    w.clock.now += timedelta(minutes=1)
    scheduler.tick()
    assert not [t for t in _said(slack) if "serving" in t]
    window = MaintenanceWindows(w.ctx.services.store).get()
    assert window is not None and window.outcome == "failed" and window.work_done_at is None


def test_work_that_never_finishes_is_said_so_at_the_deadline(tmp_path: Path) -> None:
    scheduler, slack, w = _world(tmp_path, {})

    @contextmanager
    def bot_died() -> Any:  # the work's process stopped: the window was opened, never marked done
        MaintenanceWindows(w.ctx.services.store).open(
            "vllm restart", by="U1", now=NOW, timeout=timedelta(minutes=30), channel="C1", thread_ts="1.1"
        )
        yield

    with bot_died():
        pass
    w.clock.now += timedelta(minutes=31)
    scheduler.tick()
    (stuck,) = [t for t in _said(slack) if "did not finish" in t]
    assert "vllm restart" in stuck and "serving" not in stuck


def test_a_table_of_an_older_release_gains_the_new_columns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    old = MetaData()
    Table(
        "maintenance_windows", old,
        Column("deployment", String(64), primary_key=True), Column("reason", Text, nullable=False),
        Column("opened_by", String(32), nullable=False),
        Column("opened_at", DateTime(timezone=True), nullable=False),
        Column("deadline", DateTime(timezone=True), nullable=False),
        Column("channel", String(32)), Column("thread_ts", String(32)),
        Column("closed_at", DateTime(timezone=True)), Column("outcome", String(32)),
    )  # fmt: skip
    old.create_all(create_engine(url))
    windows = MaintenanceWindows(create_engine(url))
    windows.open("tpu create q", by="U1", now=NOW, timeout=timedelta(minutes=30), target="q")
    windows.work_done(now=NOW + timedelta(minutes=1))
    window = windows.current()
    assert window is not None and window.target == "q" and window.work_done_at == NOW + timedelta(minutes=1)
