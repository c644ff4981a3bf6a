"""Capacity search: one zone at a time against four at once, on the simulated 12-zone world.

World (`sim/scenarios/find12.yaml`, simulated time sped up 120x): 8 zones fail a flex-start v6e-8 request
permanently (4 do not offer v6e-8, 4 do not offer flex-start), 3 are stocked out (each request waits until
its valid-until, 10 simulated minutes, then FAILS), 1 has capacity 5 simulated minutes after a request and
provisions in 1 more. Every run uses the real clients against one emulator; the capacity zone comes last
in the list. Before any create a search drops the zones whose `acceleratorTypes.list` lacks v6e-8 (listed in
parallel) and the zones its memory holds as permanent failures (flex-start is not in any API listing: a
zone learns it from a failed request).

Runs, in order:
  sequential   parallel=1, fresh zone memory (the baseline: one zone at a time)
  first        parallel=4, fresh zone memory (a bot's first search: it still learns flex-start refusals)
  parallel     parallel=4, the zone memory the first parallel search left (every later search)
After each run every zone is listed: any queued resource besides the winner is a leftover. The winner is
then deleted so the next run starts from the same world.

Each search is timed to capacity: from its start until the winner is seen ACTIVE (`SearchResult.found_s`);
the total, which adds deleting the other requests and verifying they are gone, is printed beside it.

Last line: RESULT sequential_s=<x> parallel_s=<y> floor_s=<f> leftover=<n>
  (floor_s: the capacity zone's delay until ACTIVE, its provisioning included (the simulator's `after`:
   PROVISIONING starts `provisioning` before it), in real seconds: no search can be faster;
   leftover: queued resources left besides the winners, summed over all runs; target 0)
"""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path

from ops.store.state import Store
from ops.tpu.api import TpuOps
from ops.tpu.capacity import CapacitySearch, SearchResult
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


def run_search(tpu: TpuOps, parallel: int, state_db: str) -> tuple[SearchResult, int]:
    """One search with the zone memory in `state_db`; returns (result, queued resources left besides the
    winner)."""
    store = Store(f"sqlite:///{state_db}")
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
    print(
        f"{label}: capacity after {result.found_s or 0:.2f} s (with cleanup {result.elapsed_s:.2f} s), "
        f"winner {winner}, leftover {leftover}"
    )
    for zone, state in result.zones.items():
        print(f"    {zone:<20} {state}")


def main() -> None:
    scenario = load(SCENARIO)
    zone_spec = scenario["google"]["zones"][CAPACITY_ZONE]["capacity"]
    with GcpSimulator(scenario) as gcp, tempfile.TemporaryDirectory(prefix="bench-find-") as state_dir:
        floor = duration(zone_spec["after"])
        floor_s = floor.total_seconds() / gcp.speed
        tpu = TpuOps(gcp.project, api_endpoint=gcp.url, num_retries=0, timeout_s=10)
        sequential, left_seq = run_search(tpu, 1, f"{state_dir}/sequential.db")
        report("sequential (parallel=1, fresh zone memory)", sequential, left_seq)
        first, left_first = run_search(tpu, 4, f"{state_dir}/parallel.db")
        report("first search (parallel=4, fresh zone memory)", first, left_first)
        parallel, left_par = run_search(tpu, 4, f"{state_dir}/parallel.db")
        report("parallel=4 (zone memory of the first search)", parallel, left_par)
        tpu.close()
    seq_s, first_s, par_s = (r.found_s or r.elapsed_s for r in (sequential, first, parallel))
    print(
        f"simulated time x{gcp.speed:g}; valid-until {VALID_UNTIL}; floor {floor} simulated; "
        f"parallel/floor {par_s / floor_s:.2f} (first search {first_s / floor_s:.2f}); "
        f"speed-up over sequential {seq_s / par_s:.1f}x"
    )
    print(
        f"RESULT sequential_s={seq_s:.2f} parallel_s={par_s:.2f} floor_s={floor_s:.2f} "
        f"leftover={left_seq + left_first + left_par}"
    )


if __name__ == "__main__":
    main()
