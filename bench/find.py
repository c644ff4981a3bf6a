"""Capacity search: one zone at a time against four at once, on the simulated 12-zone world.

World (`sim/scenarios/find12.yaml`, simulated time sped up 120x): 8 zones fail a flex-start v6e-8 request
permanently (type or flex-start not offered), 3 are stocked out (each request waits until its valid-until,
10 simulated minutes, then FAILS), 1 has capacity 5 simulated minutes after a request. Both runs use the
real clients against one emulator, each with a fresh zone memory; the capacity zone comes last in the list.
After each run every zone is listed: any queued resource besides the winner is a leftover. The winner is
then deleted so the next run starts from the same world.

Last line: RESULT sequential_s=<x> parallel_s=<y> best_zone_s=<z> leftover=<n>
  (best_zone_s: the capacity zone's own provisioning delay in real seconds, the floor for any search;
   leftover: queued resources left besides the winners, summed over both runs; target 0)
"""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path

from ops.capacity import CapacitySearch, SearchResult
from ops.store import Store
from ops.tpu import TpuOps
from sim.gcp import GcpSimulator
from sim.scenario import duration, load

SCENARIO = Path(__file__).resolve().parent.parent / "sim" / "scenarios" / "find12.yaml"
ZONES = [  # permanent failures and stockouts interleaved, the zone with capacity last
    "asia-east1-a",
    "us-east1-d",
    "asia-east1-c",
    "europe-west1-b",
    "asia-northeast1-b",
    "europe-west4-b",
    "us-central1-a",
    "europe-west4-a",
    "us-central1-b",
    "us-west4-a",
    "us-south1-a",
    "us-east5-a",
]
CAPACITY_ZONE = "us-east5-a"
VALID_UNTIL = timedelta(minutes=10)
POLL_S = 0.05


def run_search(gcp: GcpSimulator, tpu: TpuOps, parallel: int, state_dir: str) -> tuple[SearchResult, int]:
    """One search with a fresh store; returns (result, queued resources left besides the winner)."""
    store = Store(f"sqlite:///{state_dir}/find-{parallel}.db")
    search = CapacitySearch(tpu, store, poll_s=POLL_S, operation_timeout_s=60, delete_timeout_s=60)
    result = search.run(
        "gemma4-find",
        "v6e-8",
        "flex-start",
        ZONES,
        parallel=parallel,
        max_run_duration=timedelta(hours=4),
        valid_until=VALID_UNTIL,
    )
    listing = tpu.list_queued_resources(ZONES, with_nodes=False)
    winner = (result.winner.zone, result.winner.name) if result.winner else None
    left = [(qr.zone, qr.name) for qr in listing.resources if (qr.zone, qr.name) != winner]
    if result.winner is not None:
        tpu.delete_queued_resource(
            result.winner.name, result.winner.zone, force=True, timeout_s=60, poll_s=POLL_S
        )
    store.close()
    return result, len(left)


def report(label: str, result: SearchResult, leftover: int) -> None:
    winner = f"{result.winner.name} in {result.winner.zone}" if result.winner else "none"
    print(f"{label}: {result.elapsed_s:6.2f} s, winner {winner}, leftover {leftover}")
    for zone, state in result.zones.items():
        print(f"    {zone:<20} {state}")


def main() -> None:
    scenario = load(SCENARIO)
    zone_spec = scenario["google"]["zones"][CAPACITY_ZONE]["capacity"]
    with GcpSimulator(scenario) as gcp, tempfile.TemporaryDirectory(prefix="bench-find-") as state_dir:
        best_zone_s = duration(zone_spec["after"]).total_seconds() / gcp.speed
        tpu = TpuOps(gcp.project, api_endpoint=gcp.url, num_retries=0, timeout_s=10)
        sequential, left_seq = run_search(gcp, tpu, 1, state_dir)
        report("sequential (parallel=1)", sequential, left_seq)
        parallel, left_par = run_search(gcp, tpu, 4, state_dir)
        report("parallel=4", parallel, left_par)
        tpu.close()
    print(
        f"simulated time x{gcp.speed:g}; valid-until {VALID_UNTIL}; speed-up "
        f"{sequential.elapsed_s / parallel.elapsed_s:.1f}x"
    )
    print(
        f"RESULT sequential_s={sequential.elapsed_s:.2f} parallel_s={parallel.elapsed_s:.2f} "
        f"best_zone_s={best_zone_s:.2f} leftover={left_seq + left_par}"
    )


if __name__ == "__main__":
    main()
