"""`/tpu status` fetches its sources concurrently: wall time against the slowest and the sum of the sources.

Each simulated source gets its own latency (three TPU zones and the vLLM server). The baseline, measured in
the same run, calls each source alone, one after the other: their sum is what a sequential dashboard would
take, and the slowest is the floor for a concurrent one. The command is timed end to end, from the signed
slash command to the answer arriving at the Slack simulator.

Last line: RESULT wall_s=<w> slowest_s=<s> sum_s=<t> ratio=<w/s>   (target: ratio at most 1.2)
"""

from __future__ import annotations

import statistics
import time

from sim.demo import Demo

ZONE_LATENCY_S = {"us-east5-a": 0.4, "asia-northeast1-b": 0.7, "europe-west4-a": 1.0}
VLLM_LATENCY_S = 0.5
RUNS = 5


def slow_down(demo: Demo) -> None:
    for zone, delay in ZONE_LATENCY_S.items():
        demo.gcp.inject_fault(rf"/locations/{zone}/", 200, count=10_000, delay_s=delay)
    demo.vllm.set_latency(VLLM_LATENCY_S)


def time_sources(demo: Demo) -> dict[str, float]:
    """Each source alone, one after the other: the TPU listing (its zones concurrently) and 3 vLLM calls."""
    services = demo.bot.services
    timings: dict[str, float] = {}
    started = time.perf_counter()
    services.tpu.list_queued_resources(services.settings.tpu_zones)
    timings["tpu listing"] = time.perf_counter() - started
    client, _ = services.vllm()
    with client:
        for name, call in (
            ("vllm health", client.health),
            ("vllm models", client.models),
            ("vllm metrics", client.metrics),
        ):
            started = time.perf_counter()
            call()
            timings[name] = time.perf_counter() - started
    return timings


def time_command(demo: Demo, run: int) -> float:
    response_id = f"bench{run}"
    started = time.perf_counter()
    body = demo.user.slash_body("/tpu", "status", response_id)
    demo.user.post_signed(body, "application/x-www-form-urlencoded")
    if demo.slack.wait_for(lambda m: m.response_id == response_id, timeout=60) is None:
        raise SystemExit("no answer to /tpu status")
    return time.perf_counter() - started


def main() -> None:
    with Demo() as demo:
        slow_down(demo)
        time_command(demo, 0)  # warm-up: clients built, endpoint discovered and cached
        sources = [time_sources(demo) for _ in range(RUNS)]
        walls = [time_command(demo, run) for run in range(1, RUNS + 1)]
    per_source = {name: statistics.median(s[name] for s in sources) for name in sources[0]}
    for name, seconds in per_source.items():
        print(f"source {name:<13} {seconds:6.3f} s (median of {RUNS})")
    wall = statistics.median(walls)
    slowest = max(per_source.values())
    total = sum(per_source.values())
    print(
        f"/tpu status wall {wall:.3f} s (median of {RUNS}); sequential baseline {total:.3f} s; "
        f"speed-up {total / wall:.2f}x"
    )
    print(f"RESULT wall_s={wall:.3f} slowest_s={slowest:.3f} sum_s={total:.3f} ratio={wall / slowest:.2f}")


if __name__ == "__main__":
    main()
