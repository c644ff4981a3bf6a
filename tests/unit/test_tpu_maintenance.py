"""TPU host maintenance (`Node.upcomingMaintenance`): parsing, when its alert is due, when it is over, and the
catalogue's fix filled for the node (the perform-maintenance command given whole only where it works)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from ops.alerts.ledger import LedgerRow
from ops.diagnosis.notices import can_start_early, maintenance_finding
from ops.tpu.maintenance import KIND, OVER_KIND, maintenance_alerts, maintenance_over
from ops.tpu.model import NodeInfo, QueuedResourceInfo, maintenance_from_api, node_from_api

NOW = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)
WINDOW = {
    "type": "SCHEDULED",
    "canReschedule": True,
    "windowStartTime": "2026-12-01T04:00:00Z",
    "windowEndTime": "2026-12-01T08:00:00Z",
    "latestWindowStartTime": "2026-12-01T04:00:01Z",
    "maintenanceStatus": "PENDING",
}


def _node(maintenance: dict[str, object] | None = None, accelerator: str = "v6e-8") -> NodeInfo:
    raw: dict[str, object] = {
        "name": "projects/p/locations/us-east5-a/nodes/gemma4-qr-node",
        "state": "READY",
        "health": "HEALTHY",
        "acceleratorType": accelerator,
    }
    if maintenance is not None:
        raw["upcomingMaintenance"] = maintenance
    return node_from_api(raw)


def _qr(node: NodeInfo, state: str = "ACTIVE") -> QueuedResourceInfo:
    return QueuedResourceInfo(
        "gemma4-qr", "us-east5-a", state, None, "flex-start", node.accelerator_type, "v2-alpha-tpuv6e",
        datetime(2026, 11, 30, tzinfo=UTC), (node.name,), (node,), None, None, None, None,
    )  # fmt: skip


def test_the_api_fields_are_read_and_unknown_values_dropped() -> None:
    parsed = maintenance_from_api(WINDOW)
    assert parsed is not None
    assert (parsed.kind, parsed.status, parsed.can_reschedule) == ("SCHEDULED", "PENDING", True)
    assert parsed.window_start == datetime(2026, 12, 1, 4, tzinfo=UTC)
    assert parsed.latest_start == datetime(2026, 12, 1, 4, 0, 1, tzinfo=UTC)
    unknown = maintenance_from_api({"type": "UNKNOWN_TYPE", "maintenanceStatus": "UNKNOWN"})
    assert unknown is not None and (unknown.kind, unknown.status, unknown.window_start) == ("", "", None)
    assert maintenance_from_api({}) is None and _node().maintenance is None


@pytest.mark.parametrize(
    ("now", "due"),
    [
        (NOW - timedelta(hours=21), False),  # 25 h ahead, lead 24 h
        (NOW - timedelta(hours=20), True),  # 24 h ahead
        (NOW + timedelta(hours=5), True),  # inside the window
        (NOW + timedelta(hours=9), True),  # still announced past its end: told as under way, never dropped
    ],
)
def test_the_alert_is_due_within_the_lead_or_while_under_way(now: datetime, due: bool) -> None:
    found = maintenance_alerts([_qr(_node(WINDOW))], now, lead=timedelta(hours=24))
    assert bool(found) == due
    if due:
        (alert,) = found
        assert alert.kind == KIND and alert.node == "gemma4-qr-node" and alert.name == "gemma4-qr"
        assert alert.key.endswith("|maintenance|gemma4-qr-node@2026-12-01T04:00:00Z")


def test_one_event_is_one_key_from_pending_to_ongoing() -> None:
    pending = maintenance_alerts([_qr(_node(WINDOW))], NOW)
    ongoing = {**WINDOW, "maintenanceStatus": "ONGOING", "canReschedule": False}
    running = maintenance_alerts([_qr(_node(ongoing))], NOW + timedelta(hours=5))
    assert [a.key for a in pending] == [a.key for a in running]
    assert "in 4 h 0 min" in pending[0].title and "under way" in running[0].title


def test_the_alert_carries_the_facts_and_the_catalogue_fix() -> None:
    (alert,) = maintenance_alerts([_qr(_node(WINDOW))], NOW)
    assert "window 2026-12-01 04:00 to 08:00 UTC" in alert.title and alert.severity == "warning"
    assert "can be started early: yes" in alert.text
    assert "perform-maintenance gemma4-qr --node-names gemma4-qr-node --zone us-east5-a" in alert.text
    assert "/tpu find" in alert.text and "/vllm start" in alert.text
    unscheduled = maintenance_alerts([_qr(_node({**WINDOW, "type": "UNSCHEDULED"}))], NOW)
    assert unscheduled[0].severity == "critical"


@pytest.mark.parametrize(
    ("window", "accelerator"),
    [
        ({**WINDOW, "canReschedule": False}, "v6e-8"),
        ({**WINDOW, "maintenanceStatus": "ONGOING"}, "v6e-8"),
        (WINDOW, "v6e-4"),  # manual start: v6e-8 (2x4) and larger only
        (WINDOW, "v5litepod-8"),
    ],
)
def test_the_command_is_given_whole_only_where_it_works(window: dict[str, object], accelerator: str) -> None:
    node = _node(window, accelerator)
    assert node.maintenance is not None and not can_start_early(node, node.maintenance)
    finding = maintenance_finding(_qr(node), node)
    assert finding is not None and finding.family == "tpu-maintenance-scheduled"
    assert "--node-names" not in finding.fix and "when canReschedule is true" in finding.fix


def test_deleting_resources_and_nodes_without_maintenance_give_nothing() -> None:
    assert maintenance_alerts([_qr(_node(WINDOW), state="DELETING")], NOW) == []
    assert maintenance_alerts([_qr(_node())], NOW) == []


def _row(key: str) -> LedgerRow:
    resource = key.split("|", 1)[0]
    return LedgerRow(
        key, KIND, resource, "sent", NOW, "`gemma4-qr` ...: maintenance", None, "1.1", None, None
    )


@pytest.mark.parametrize(
    ("listed", "why"),
    [
        ([], "the queued resource is gone"),
        ("no-maintenance", "over; node `gemma4-qr-node` is READY, HEALTHY"),
        ("moved", "moved: window 2026-12-02 04:00 to 08:00 UTC"),
    ],
)
def test_an_event_no_longer_announced_resolves_its_alert(listed: object, why: str) -> None:
    (alert,) = maintenance_alerts([_qr(_node(WINDOW))], NOW)
    if listed == "no-maintenance":
        resources = [_qr(_node())]
    elif listed == "moved":
        later = {**WINDOW, "windowStartTime": "2026-12-02T04:00:00Z", "windowEndTime": "2026-12-02T08:00:00Z"}
        resources = [_qr(_node(later))]
    else:
        resources = []
    (over,) = maintenance_over([_row(alert.key)], resources, ["us-east5-a"])
    assert over.kind == OVER_KIND and over.resolves == alert.key and over.title.endswith(why)
    assert over.key == f"{alert.key}|over"


def test_an_event_still_announced_or_unread_is_not_over() -> None:
    node = _node(WINDOW)
    (alert,) = maintenance_alerts([_qr(node)], NOW)
    ongoing = replace(node, maintenance=replace(node.maintenance, status="ONGOING"))  # type: ignore[type-var]
    assert maintenance_over([_row(alert.key)], [_qr(ongoing)], ["us-east5-a"]) == []
    assert maintenance_over([_row(alert.key)], [], []) == []  # its zone did not answer
