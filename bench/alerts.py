"""The alert tick at fleet scale and with history: `python -m bot serve` in its own process, the SIMULATED
Google (TPU API) and Slack each in theirs, the tick's own figures read from the bot's `/metrics`
(`tpu_chatops_alert_tick_seconds` and `tpu_chatops_alert_tick_cpu_seconds`, the CPU time of the tick's
thread), parsed with prometheus-client's parser.

Cases: 10, 100 and 1,000 queued resources in three zones (ACTIVE flex-start requests whose max run duration
ends 1 to 180 minutes from now, so many are inside an expiry alert's window on every tick, and waiting
requests with a valid-until), each on a fresh state store holding one day of alert history; then 1,000 on a
store holding a year of it (every day, one sent alert and one last observation per resource, of resources
long gone). The first tick (which posts the alerts due) is reported apart from the steady ticks after it.
Baseline in the same run: the 10-resource tick.

Goals (issue: alert ticks that grow with the fleet, not with history): a 1,000-resource steady tick under
1 s and under 0.3 s of the bot's CPU; a year of history costs no more per tick than a day.

Run: `.venv/bin/python bench/alerts.py` (about 3 minutes on 2 cores). Last line:
RESULT t10_ms=<steady tick, 10> t100_ms=<...> t1000_ms=<...> cpu1000_ms=<...> year1000_ms=<...>
year_ratio=<year / day at 1,000> first1000_ms=<first tick at 1,000>
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.ack import TOKEN, free_port, start_bot, stop, wait_ready
from bench.simproc import SimProcess
from sim import scenario as scenarios
from sim.gcp import GcpSimulator
from sim.slack import SlackSimulator

ZONES = ("us-east5-a", "asia-northeast1-b", "europe-west4-a")
CHANNEL = "C0ALERTS01"
INTERVAL_S = 2.0
"""ALERT_INTERVAL_S of the bot under test: a tick every 2 s, so a case takes seconds, not minutes."""
STEADY_TICKS = 5


def make_gcp(count: int) -> GcpSimulator:
    """The default world's zones with `count` queued resources of this bench in place of its own."""
    scenario = scenarios.load(None)
    google = scenario["google"]
    google["operations"] = []
    resources = []
    for index in range(count):
        zone = ZONES[index % len(ZONES)]
        name = f"bench-qr-{index:04d}"
        node = {"id": f"{name}-node", "accelerator_type": "v6e-8", "runtime_version": "v2-alpha-tpuv6e"}
        if index % 5 == 4:
            resources.append(
                {
                    "name": name,
                    "zone": zone,
                    "state": "WAITING_FOR_RESOURCES",
                    "state_initiator": "USER",
                    "provisioning_model": "FLEX_START",
                    "max_run_duration": "4h",
                    "valid_until": f"{30 + index % 150}m",
                    "created": "-30m",
                    "node": node,
                }
            )
            continue
        left_min = 1 + index % 180
        resources.append(
            {
                "name": name,
                "zone": zone,
                "state": "ACTIVE",
                "state_initiator": "USER",
                "provisioning_model": "FLEX_START",
                "max_run_duration": "4h",
                "created": f"-{240 - left_min}m",
                "node": {**node, "state": "READY", "health": "HEALTHY", "internal_ip": "127.0.0.1"},
            }
        )
    google["queued_resources"] = resources
    return GcpSimulator(scenario)


def make_slack() -> SlackSimulator:
    return SlackSimulator(TOKEN, channels=[CHANNEL])


def gcp_project(sim: GcpSimulator) -> str:
    return str(sim.project)


def seed_history(database: Path, resources: int, days: int) -> int:
    """Write `days` of history into the state store at `database`: per day and resource, one sent expiry
    alert and one last observation, of resources long gone. Returns the ledger rows written."""
    from sqlalchemy import insert

    from ops.alerts.ledger import ledger_table, observations_table
    from ops.store.state import Store

    store = Store(f"sqlite:///{database}")
    now = datetime.now(UTC)
    ledger: list[dict[str, Any]] = []
    observed: list[dict[str, Any]] = []
    for day in range(1, days + 1):
        at = now - timedelta(days=day)
        for index in range(resources):
            resource = f"us-east5-a/gone-{day:03d}-{index:04d}@{at:%Y%m%dT%H%M%S}"
            ledger.append(
                {
                    "key": f"expiry:{resource}:60",
                    "kind": "expiry",
                    "resource": resource,
                    "status": "sent",
                    "at": at,
                    "text": f"gone-{day:03d}-{index:04d} ends in 60 minutes",
                    "channel": CHANNEL,
                    "ts": f"{at.timestamp():.6f}",
                    "resolved_at": at + timedelta(hours=1),
                }
            )
            observed.append({"resource": resource, "state": "ACTIVE", "nodes": json.dumps({}), "at": at})
    with store.engine.begin() as conn:
        for start in range(0, len(ledger), 10_000):
            conn.execute(insert(ledger_table), ledger[start : start + 10_000])
            conn.execute(insert(observations_table), observed[start : start + 10_000])
    store.close()
    return len(ledger)


def tick_figures(url: str) -> tuple[int, float, float]:
    """(ticks, wall seconds, CPU seconds) so far, from the bot's /metrics."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    figures = {"count": 0.0, "sum": 0.0, "cpu": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "tpu_chatops_alert_tick_seconds_count":
                figures["count"] = sample.value
            elif sample.name == "tpu_chatops_alert_tick_seconds_sum":
                figures["sum"] = sample.value
            elif sample.name == "tpu_chatops_alert_tick_cpu_seconds_sum":
                figures["cpu"] = sample.value
    return int(figures["count"]), figures["sum"], figures["cpu"]


def wait_ticks(url: str, ticks: int, timeout_s: float) -> tuple[int, float, float]:
    deadline = time.monotonic() + timeout_s
    while True:
        seen = tick_figures(url)
        if seen[0] >= ticks or time.monotonic() > deadline:
            return seen
        time.sleep(0.2)


def run_case(resources: int, history_days: int) -> dict[str, float]:
    """One bot against `resources` queued resources and `history_days` of history: the first tick's wall
    time and the steady ticks' mean wall and CPU time, seconds."""
    secret = secrets.token_hex(16)
    with (
        SimProcess(make_gcp, resources) as gcp,
        SimProcess(make_slack) as slack,
        tempfile.TemporaryDirectory(prefix="bench-alerts-") as state,
    ):
        database = Path(state, "state.db")
        rows = seed_history(database, resources, history_days)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("SLACK_", "GCP_", "VLLM_", "TPU_", "ALERT"))
        }
        env |= {
            "SLACK_BOT_TOKEN": TOKEN,
            "SLACK_SIGNING_SECRET": secret,
            "SLACK_API_URL": f"{slack.url}/api/",
            "BOT_MODE": "http",
            "BOT_HOST": "127.0.0.1",
            "BOT_PORT": str(port),
            "GCP_PROJECT": gcp.call(gcp_project),
            "TPU_ZONES": ",".join(ZONES),
            "GOOGLE_API_ENDPOINT": gcp.url,
            # No vLLM: the tick's vLLM check finds the endpoint down, as it would between deployments.
            "VLLM_BASE_URL": f"http://127.0.0.1:{free_port()}",
            "STATE_DATABASE_URL": f"sqlite:///{database}",
            "ALERT_CHANNEL": CHANNEL,
            "ALERT_INTERVAL_S": str(INTERVAL_S),
        }
        log = Path(state, "bot.log")
        bot = start_bot(env, log)
        try:
            wait_ready(url, bot, log, timeout_s=600)  # the first ticks post what is due meanwhile
            # The first ticks post what is due (and may run while the bot warms up): measure after them.
            first = wait_ticks(url, 2, 300)
            steady = wait_ticks(url, first[0] + STEADY_TICKS, 60 + STEADY_TICKS * 30)
        finally:
            stop(bot)
    ticks = steady[0] - first[0]
    if first[0] < 1 or ticks < 1:
        raise SystemExit(
            f"the bot ticked {steady[0]} times: {log.read_text()[-3000:] if log.exists() else ''}"
        )
    return {
        "history_rows": rows,
        "first_s": first[1] / first[0],
        "steady_s": (steady[1] - first[1]) / ticks,
        "steady_cpu_s": (steady[2] - first[2]) / ticks,
    }


def main() -> None:
    # Stopped from outside (SIGTERM), still stop the bot and the simulators (the `finally` blocks).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args()
    cases = [(10, 1), (100, 1), (1000, 1), (1000, 365)]
    results: dict[tuple[int, int], dict[str, float]] = {}
    for resources, days in cases:
        figures = run_case(resources, days)
        results[(resources, days)] = figures
        print(
            f"{resources:>5} queued resources, {days:>3} day(s) of history "
            f"({figures['history_rows']:,.0f} ledger rows): first ticks "
            f"{figures['first_s'] * 1000:.0f} ms each; steady tick "
            f"{figures['steady_s'] * 1000:.0f} ms, {figures['steady_cpu_s'] * 1000:.0f} ms CPU",
            flush=True,
        )
    base = results[(10, 1)]["steady_s"]
    day, year = results[(1000, 1)], results[(1000, 365)]
    print(
        f"ratios to the 10-resource tick: 100: {results[(100, 1)]['steady_s'] / base:.1f}x, "
        f"1,000: {day['steady_s'] / base:.1f}x; a year of history / a day at 1,000: "
        f"{year['steady_s'] / day['steady_s']:.2f}"
    )
    print(
        f"RESULT t10_ms={base * 1000:.0f} t100_ms={results[(100, 1)]['steady_s'] * 1000:.0f} "
        f"t1000_ms={day['steady_s'] * 1000:.0f} cpu1000_ms={day['steady_cpu_s'] * 1000:.0f} "
        f"year1000_ms={year['steady_s'] * 1000:.0f} year_ratio={year['steady_s'] / day['steady_s']:.2f} "
        f"first1000_ms={day['first_s'] * 1000:.0f}"
    )


if __name__ == "__main__":
    main()
