"""The alert tick at fleet scale and with history: `python -m bot serve` in its own process, the SIMULATED
Google (TPU API) and Slack each in theirs, each tick's own figures read from the bot's `/metrics`
(`tpu_chatops_alert_tick_seconds` and `tpu_chatops_alert_tick_cpu_seconds`, the CPU time of the tick's
thread), parsed with prometheus-client's parser: the bench polls it every POLL_S and takes each rise of the
tick count by one as one tick (its wall and CPU seconds are the rise of the sums).

Cases: 10, 100 and 1,000 queued resources in three zones (ACTIVE flex-start requests whose max run duration
ends 1 to 180 minutes from now, so many are inside an expiry alert's window on every tick, and waiting
requests with a valid-until), each on a fresh state store holding one day of alert history; and 1,000 on a
store holding a year of it (every day, one sent and resolved alert and one last observation per resource,
of resources long gone). The day and the year at 1,000 run at the same time, two bots on the same simulated
TPU API, ticking every 2.0 and 2.3 s: their ticks interleave, so a change in the machine's load falls on
both, and a tick that met one of the other bot's is left out (the count of those is printed). The first
ticks (which post the alerts due, and forget what is older than ALERT_RETENTION_DAYS) are reported apart
from the steady ticks after them; each figure is the median of the steady ticks with their spread
(lowest-highest). Baseline in the same run: the 10-resource tick.

Goals (issue: alert ticks that grow with the fleet, not with history): a 1,000-resource steady tick under
1 s and under 0.3 s of the bot's CPU; a year of history costs no more per tick than a day.

Run: `.venv/bin/python bench/alerts.py` (about 3 minutes on 2 cores). Last line:
RESULT t10_ms=<steady tick, 10> t100_ms=<...> t1000_ms=<...> cpu1000_ms=<...> year1000_ms=<...>
year_cpu1000_ms=<...> year_ratio=<year / day at 1,000, wall> year_cpu_ratio=<the same, CPU>
first1000_ms=<first tick at 1,000>
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
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
YEAR_INTERVAL_S = 2.3
"""ALERT_INTERVAL_S of the bot with a year of history, beside the day's: not a multiple of 2.0, so that the
two bots' ticks meet only now and then."""
STEADY_TICKS = 15
"""Steady ticks counted per bot (and not met by the other bot's)."""
POLL_S = 0.1
READ_ROUNDS = 50
"""Rounds of the ledger reads measured in this process (`ledger_reads`)."""


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


def ledger_reads(resources: int, rounds: int) -> dict[int, list[float]]:
    """The reads of a steady tick (`ResourceChecks.tick`: the listed resources' last observations, the week's
    open and held-back alerts, the mutes, which of the due keys are known), in this process on two SQLite
    stores that differ only by history: a day of it and a year pruned as the first tick prunes it
    (ALERT_RETENTION_DAYS), both with the same `resources` live resources observed, a third of them with an
    open alert. `rounds` rounds, day and year one after the other in each. Returns days -> CPU seconds of
    this thread per tick's reads."""
    from sqlalchemy import insert

    from bot.oncall.delivery import OncallOptions
    from ops.alerts.ledger import AlertLedger, ledger_table, observations_table
    from ops.store.state import Store

    now = datetime.now(UTC)
    live = [f"{ZONES[i % len(ZONES)]}/bench-qr-{i:04d}@2026-12-01T00:00:00Z" for i in range(resources)]
    due = [f"{resource}|expiry|{minutes}" for resource in live for minutes in (60, 15)]
    ledgers: dict[int, AlertLedger] = {}
    with tempfile.TemporaryDirectory(prefix="bench-ledger-") as folder:
        for days in (1, 365):
            database = Path(folder, f"{days}.db")
            seed_history(database, resources, days)
            store = Store(f"sqlite:///{database}")
            with store.engine.begin() as conn:
                conn.execute(
                    insert(observations_table),
                    [{"resource": r, "state": "ACTIVE", "nodes": "{}", "at": now} for r in live],
                )
                conn.execute(
                    insert(ledger_table),
                    [{"key": f"{r}|expiry|60", "kind": "expiry", "resource": r, "status": "sent",
                      "at": now - timedelta(minutes=30), "text": ""} for r in live[::3]],
                )  # fmt: skip
            ledger = AlertLedger(store)
            ledger.prune(now=now, keep_days=OncallOptions().retention_days, listed=live, zones=ZONES)
            ledgers[days] = ledger
        week = now - timedelta(days=7)
        spent: dict[int, list[float]] = {days: [] for days in ledgers}
        for _ in range(rounds):
            for days, ledger in ledgers.items():
                started = time.thread_time()
                ledger.observations(live)
                ledger.open_alerts(since=week)
                ledger.rows(since=week, status="undelivered")
                ledger.mutes(now)
                ledger.known(due)
                spent[days].append(time.thread_time() - started)
        for ledger in ledgers.values():
            ledger.engine.dispose()
    return spent


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


@dataclass
class Tick:
    """One tick: when the bench saw it end (monotonic seconds, within POLL_S), its wall and CPU seconds."""

    ended: float
    wall_s: float
    cpu_s: float

    def meets(self, other: Tick) -> bool:
        """Whether the two ticks ran at the same time (within a poll)."""
        return (
            self.ended - self.wall_s - POLL_S < other.ended
            and other.ended - other.wall_s - POLL_S < self.ended
        )


@dataclass
class Bot:
    """A bot under test: its /metrics URL, what it was polled last, its ticks and its first ticks' mean."""

    label: str
    url: str
    last: tuple[int, float, float] = (0, 0.0, 0.0)
    ticks: list[Tick] = field(default_factory=list)
    first_s: float = 0.0

    def poll(self) -> None:
        """Read /metrics; a tick count up by one since the last poll is one more Tick (two or more in one
        poll cannot be told apart and are left out)."""
        seen, now = tick_figures(self.url), time.monotonic()
        if seen[0] == self.last[0] + 1:
            self.ticks.append(Tick(now, seen[1] - self.last[1], seen[2] - self.last[2]))
        self.last = seen


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """The first quartile, the median and the third quartile of `values`."""
    first, median, third = statistics.quantiles(values, n=4, method="inclusive")
    return first, median, third


def spread(values: list[float]) -> str:
    """Seconds, in milliseconds: the median, the middle half (quartiles) and all (lowest-highest)."""
    first, median, third = (1000 * value for value in quartiles(values))
    return (
        f"{median:.0f} ms (middle half {first:.0f}-{third:.0f}, all {1000 * min(values):.0f}-"
        f"{1000 * max(values):.0f})"
    )


def ratio_range(year: list[float], day: list[float]) -> str:
    """The ratio of the medians of `year` to `day`, and how far the middle halves let it go."""
    y1, ym, y3 = quartiles(year)
    d1, dm, d3 = quartiles(day)
    return f"{ym / dm:.2f} (middle halves: {y1 / d3:.2f}-{y3 / d1:.2f})"


def run_case(resources: int, histories: list[tuple[int, float]]) -> list[dict[str, Any]]:
    """Bots against one simulated TPU API of `resources` queued resources, one per (days of history, tick
    interval) of `histories`, all at once: each bot's first ticks' mean wall time and its steady ticks
    (STEADY_TICKS each, those that met another bot's tick left out), seconds."""
    secret = secrets.token_hex(16)
    with (
        SimProcess(make_gcp, resources) as gcp,
        SimProcess(make_slack) as slack,
        tempfile.TemporaryDirectory(prefix="bench-alerts-") as state,
        contextlib.ExitStack() as running,
    ):
        bots: list[Bot] = []
        rows = []
        for index, (days, interval_s) in enumerate(histories):
            database = Path(state, f"state-{index}.db")
            rows.append(seed_history(database, resources, days))
            port = free_port()
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
                "ALERT_INTERVAL_S": str(interval_s),
            }
            log = Path(state, f"bot-{index}.log")
            process = start_bot(env, log)
            running.callback(stop, process)
            url = f"http://127.0.0.1:{port}"
            wait_ready(url, process, log, timeout_s=600)  # the first ticks post what is due meanwhile
            bots.append(Bot(f"{days} day(s)", url))
        # The first ticks post what is due, forget old history and may run while the bot warms up.
        deadline = time.monotonic() + 300
        while any(tick_figures(bot.url)[0] < 2 for bot in bots):
            if time.monotonic() > deadline:
                raise SystemExit(f"a bot did not tick twice within 300 s: {log.read_text()[-3000:]}")
            time.sleep(0.2)
        for bot in bots:
            bot.last = tick_figures(bot.url)
            bot.first_s = bot.last[1] / bot.last[0]
        deadline = time.monotonic() + 120 + STEADY_TICKS * 2 * YEAR_INTERVAL_S
        while any(len(kept(bot, bots)) < STEADY_TICKS for bot in bots) and time.monotonic() < deadline:
            for bot in bots:
                bot.poll()
            time.sleep(POLL_S)
    out = []
    for bot, history_rows in zip(bots, rows, strict=True):
        steady = kept(bot, bots)[:STEADY_TICKS]
        if not steady:
            raise SystemExit(f"{bot.label}: no steady tick measured")
        out.append(
            {
                "label": bot.label,
                "history_rows": history_rows,
                "first_s": bot.first_s,
                "wall": [t.wall_s for t in steady],
                "cpu": [t.cpu_s for t in steady],
                "met": len(bot.ticks) - len(kept(bot, bots)),
            }
        )
    return out


def kept(bot: Bot, bots: list[Bot]) -> list[Tick]:
    """`bot`'s ticks that met no tick of another of `bots`."""
    others = [tick for other in bots if other is not bot for tick in other.ticks]
    return [tick for tick in bot.ticks if not any(tick.meets(other) for other in others)]


def main() -> None:
    # Stopped from outside (SIGTERM), still stop the bot and the simulators (the `finally` blocks).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args()
    load_before = os.getloadavg()
    reads = ledger_reads(1000, READ_ROUNDS)
    results: dict[tuple[int, int], dict[str, Any]] = {}
    for resources, histories in ((10, [(1, INTERVAL_S)]), (100, [(1, INTERVAL_S)])):
        (results[(resources, 1)],) = run_case(resources, histories)
    results[(1000, 1)], results[(1000, 365)] = run_case(1000, [(1, INTERVAL_S), (365, YEAR_INTERVAL_S)])
    for (resources, days), figures in results.items():
        print(
            f"{resources:>5} queued resources, {days:>3} day(s) of history "
            f"({figures['history_rows']:,.0f} ledger rows): first ticks {figures['first_s'] * 1000:.0f} ms "
            f"each; {len(figures['wall'])} steady ticks ({figures['met']} left out: they met the other "
            f"bot's): wall {spread(figures['wall'])}, CPU {spread(figures['cpu'])}",
            flush=True,
        )
    median = {
        case: (statistics.median(f["wall"]), statistics.median(f["cpu"])) for case, f in results.items()
    }
    base = median[(10, 1)][0]
    day, year = results[(1000, 1)], results[(1000, 365)]
    wall_ratio = median[(1000, 365)][0] / median[(1000, 1)][0]
    cpu_ratio = median[(1000, 365)][1] / median[(1000, 1)][1]
    print(
        f"ratios to the 10-resource tick: 100: {median[(100, 1)][0] / base:.1f}x, "
        f"1,000: {median[(1000, 1)][0] / base:.1f}x"
    )
    print(
        f"a year of history / a day at 1,000, ticking at the same time: wall "
        f"{ratio_range(year['wall'], day['wall'])}, CPU {ratio_range(year['cpu'], day['cpu'])}"
    )
    print(
        f"the tick's ledger reads at 1,000 resources, {READ_ROUNDS} rounds in this process: a day of history "
        f"{spread(reads[1])} of CPU, a year {spread(reads[365])}; year / day "
        f"{ratio_range(reads[365], reads[1])}"
    )
    print(
        "load average "
        + " ".join(f"{v:.2f}" for v in load_before)
        + " at the start, "
        + " ".join(f"{v:.2f}" for v in os.getloadavg())
        + f" at the end ({os.cpu_count()} cores)"
    )
    print(
        f"RESULT t10_ms={base * 1000:.0f} t100_ms={median[(100, 1)][0] * 1000:.0f} "
        f"t1000_ms={median[(1000, 1)][0] * 1000:.0f} cpu1000_ms={median[(1000, 1)][1] * 1000:.0f} "
        f"year1000_ms={median[(1000, 365)][0] * 1000:.0f} "
        f"year_cpu1000_ms={median[(1000, 365)][1] * 1000:.0f} year_ratio={wall_ratio:.2f} "
        f"year_cpu_ratio={cpu_ratio:.2f} first1000_ms={day['first_s'] * 1000:.0f} "
        f"reads_year_ratio={statistics.median(reads[365]) / statistics.median(reads[1]):.2f}"
    )


if __name__ == "__main__":
    main()
