"""`/logs analyze` over a busy hour within Cloud Logging's read quota, against naive full paging.

World (SIMULATED, the Google simulator in its own process): 1,000,000 `tpu_worker` entries in the last hour,
0.5% at ERROR in 40 kinds (the real ERROR lines of sim/cases, Zipf shares), the rest vLLM/TPU
INFO/WARNING noise; the simulator enforces Logging's read quota (60 `entries.list` calls a minute per
project, a 429 beyond) and 1,000 entries a page. The quota clock is SIMULATED time: the simulator's clock
only moves when a reader waits (a pacing or back-off sleep advances it), so waiting for quota costs no real
time and both readers are charged the same way.

Planned (the bot's way, `ops.gcp.logplan.read_window` into `llm.logsum.TemplateStream`, in this process):
every error (past 15 pages, a sample of about 5,000 of the older ones), one page of the rest, a
`sample(insertId, 0.001)` probe, then a sample of about 20,000.
Naive baseline (same run, same world): page through every entry of the window, 1,000 a call, waiting out
each 429 (5 simulated seconds at a time); it reads and parses each page and keeps nothing (so its memory
is not measured: holding the entries, as the old command did, took 246 MB per 100,000). Above
NAIVE_MAX_ENTRIES it is computed, not run, and says so: entries / 1,000 reads, at the quota's 60 a minute
(serving 10,000 pages of a 10,000,000-entry window takes the simulator longer than the planned read and
the world's generation together).

Figures:
  reads          entries.list requests of the planned read that were answered (429s are counted apart),
                 counted by the reader where the client sends them (its own next-page requests included)
  sim_reads      entries.list requests the simulator answered during the planned read: the proof of reads
  wall_s         real seconds of the planned read and mining
  coverage       share of the error kinds holding >= 0.1% of the errors whose template the summary has
                 (message kinds: traceback frame and source lines fold into their exception's kind)
  count_error    worst relative error of the estimated counts: the window's total and each error
                 template's count
  peak_extra_mb  peak RSS of this process during the planned read and mining minus its RSS before

Last line: RESULT entries=1000000 reads=<r> sim_reads=<n> wall_s=<s> coverage=<c> count_error=<e>
peak_extra_mb=<m> (on one line)
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.simproc import SimProcess
from llm.logsum import TemplateStream
from ops.diagnosis.families import is_traceback_line
from ops.gcp.cloudlogs import ReadQuota, build_filter
from ops.gcp.logplan import read_window
from sim.gcp import GcpSimulator

TOTAL = 1_000_000
NAIVE_MAX_ENTRIES = 1_000_000
"""Entries in the window unless `--entries N` says otherwise (the 10M case: `--entries 10000000`)."""
START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
PROJECT = "bench-logs"


def scenario(total: int) -> dict[str, Any]:
    stream = {"count": total, "window": "1h", "error_share": 0.005, "error_kinds": 40, "seed": 7}
    return {
        "project": PROJECT,
        "google": {"logs": {"noise": {"count": 0}, "audit": False, "stream": stream}},
        "vllm": {},
    }


NAIVE_BACKOFF_S = 5.0


def _fixed_clock() -> datetime:
    return START


def make_sim(total: int) -> GcpSimulator:
    """The simulator with `total` entries in the window, its clock frozen at START (only `advance` moves
    it)."""
    return GcpSimulator(scenario(total), now=_fixed_clock)


def sim_now(sim: GcpSimulator) -> float:
    return (sim.now() - START).total_seconds()


def sim_advance(sim: GcpSimulator, seconds: float) -> None:
    sim.advance(seconds)


def sim_reads(sim: GcpSimulator) -> int:
    return sim.log_reads_served()


def error_truth(sim: GcpSimulator) -> tuple[int, dict[str, int]]:
    """(entries in the window, count of each distinct ERROR text)."""
    with sim.world.lock:
        counts = Counter(
            str(e.body.get("textPayload")) for e in sim.world.logs if e.body.get("severity") == "ERROR"
        )
        return len(sim.world.logs), dict(counts)


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def naive(sim: SimProcess, query: str) -> tuple[int, int, float, float]:
    """Page through everything: (reads, 429s, simulated seconds, real seconds)."""
    started, sim_started = time.perf_counter(), sim.call(sim_now)
    reads = throttled = 0
    token: str | None = None
    with httpx.Client(base_url=sim.url, timeout=120) as client:
        while True:
            body: dict[str, Any] = {
                "resourceNames": [f"projects/{PROJECT}"],
                "filter": query,
                "orderBy": "timestamp desc",
                "pageSize": 1000,
            }
            if token:
                body["pageToken"] = token
            response = client.post("/v2/entries:list", json=body)
            if response.status_code == 429:
                throttled += 1
                sim.call(sim_advance, NAIVE_BACKOFF_S)
                continue
            response.raise_for_status()
            page = json.loads(response.content)
            reads += 1
            token = page.get("nextPageToken")
            if not token:
                break
    return reads, throttled, sim.call(sim_now) - sim_started, time.perf_counter() - started


def main(total: int) -> None:
    query = build_filter(timedelta(hours=1), project=PROJECT, now=START)
    print("starting the Google simulator (its own process) with the generated stream ...", flush=True)
    with SimProcess(make_sim, total) as sim:
        entries, truth = sim.call(error_truth)
        errors = sum(truth.values())
        print(f"window: {entries:,} entries, {errors:,} at ERROR in {len(truth)} distinct texts")
        quota = ReadQuota(60, clock=lambda: sim.call(sim_now), sleep=lambda s: sim.call(sim_advance, s))
        stream = TemplateStream()
        before = rss_mb()
        sim_started, served_before = sim.call(sim_now), sim.call(sim_reads)
        started = time.perf_counter()
        report = read_window(PROJECT, query, stream.add, quota=quota, api_endpoint=sim.url, deadline_s=600)
        summary = stream.summary()
        wall_s = time.perf_counter() - started
        planned_sim_s = sim.call(sim_now) - sim_started
        served = sim.call(sim_reads) - served_before
        peak_extra = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before
        print(
            f"planned: {report.reads} reads ({report.throttled} throttled), {report.error_entries:,} errors "
            f"read, {report.older_errors_read:,} older ones at a sample fraction of "
            f"{report.older_errors_fraction:.4g}, {report.rest_read:,} of the rest at "
            f"{report.sample_fraction:.4g}; "
            f"{planned_sim_s:.0f} simulated s, {wall_s:.1f} real s; partial: {report.missing or 'no'}; "
            f"the simulator answered {served} entries.list requests"
        )
        # Truth per template: each ERROR text belongs to the template Drain matches it to.
        truth_by_template: Counter[int] = Counter()
        kinds_total: Counter[str] = Counter()
        kind_template: dict[str, int | None] = {}
        for text, count in truth.items():
            template = summary.template_of(text)
            kind_template[text] = template.template_id if template and template.is_error else None
            if template is not None:
                truth_by_template[template.template_id] += count
            kinds_total[text] += count
        # A traceback's frame and source lines are folded into their exception's template by design: they
        # are part of that kind, not kinds of their own, so coverage counts message kinds only.
        important = [
            text
            for text, count in kinds_total.items()
            if count >= 0.001 * errors and not is_traceback_line(text)
        ]
        coverage = sum(kind_template[text] is not None for text in important) / len(important)
        by_id = {t.template_id: t for t in summary.templates}
        count_errors = [abs(summary.total_entries - entries) / entries]
        for template_id, count in truth_by_template.items():
            if template_id in by_id and by_id[template_id].is_error:
                count_errors.append(abs(by_id[template_id].count - count) / count)
        count_error = max(count_errors)
        print(
            f"templates: {len(summary.templates)}; estimated entries {summary.total_entries:,} "
            f"(true {entries:,}); error kinds >= 0.1% of the errors: {len(important)} texts"
        )
        if entries <= NAIVE_MAX_ENTRIES:
            n_reads, n_throttled, naive_sim_s, naive_wall = naive(sim, query)
            print(
                f"naive full paging (baseline): {n_reads} reads, {n_throttled} answered 429, "
                f"{naive_sim_s / 60:.1f} simulated minutes of quota, {naive_wall:.1f} real s"
            )
        else:
            pages = math.ceil(entries / 1000)
            print(
                f"naive full paging (baseline, computed, not run above {NAIVE_MAX_ENTRIES:,} entries): "
                f"{pages} reads of 1,000, at least {pages / 60:.1f} minutes of quota at 60 reads a minute"
            )
    rate = report.reads / max(planned_sim_s / 60, 1.0)
    print(f"planned reads per simulated minute: {rate:.0f} (quota 60)")
    print(
        f"RESULT entries={entries} reads={report.reads} sim_reads={served} wall_s={wall_s:.1f} "
        f"coverage={coverage:.3f} count_error={count_error:.3f} peak_extra_mb={peak_extra:.0f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="/logs analyze's planned read against naive paging")
    parser.add_argument(
        "--entries", type=int, default=TOTAL, help="entries in the window (default 1,000,000)"
    )
    main(parser.parse_args().entries)
