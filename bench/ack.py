"""Ack time of signed slash commands while every simulated backend takes 2 s.

100 `/tpu status` slash commands are sent over HTTP, first one after the other (the baseline, same run),
then all at once from 100 threads. Slack needs the HTTP answer (the ack) within 3 s; the work happens after
it. Each command's final answer, delivered through its response_url, is awaited and counted.

Last line: RESULT p50_ms=<x> p99_ms=<y> limit_ms=3000 answered=<n>/100   (target: p99 under 100 ms)
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from sim.console import SlackUser
from sim.demo import Demo

N = 100
BACKEND_S = 2.0
ANSWER_WAIT_S = 120.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def ack(demo: Demo, user: SlackUser, rid: str) -> float:
    body = user.slash_body("/tpu", "status", rid)
    started = time.perf_counter()
    response = user.post_signed(body, "application/x-www-form-urlencoded")
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise SystemExit(f"HTTP {response.status_code} for {rid}")
    return elapsed


def answered(demo: Demo, rids: list[str]) -> int:
    deadline = time.monotonic() + ANSWER_WAIT_S
    wanted = set(rids)
    while time.monotonic() < deadline:
        got = {
            m.response_id for m in list(demo.slack.messages) if m.response_id in wanted and not m.in_progress
        }
        if got == wanted:
            break
        time.sleep(0.2)
    return len(
        {m.response_id for m in list(demo.slack.messages) if m.response_id in wanted and not m.in_progress}
    )


def main() -> None:
    with Demo() as demo:  # the default WORKER_THREADS (16): work queues, acks stay fast
        demo.gcp.inject_fault(".*", 200, delay_s=BACKEND_S, count=10_000_000)
        demo.vllm.set_latency(BACKEND_S)
        users = [SlackUser(demo.server.url, demo.signing_secret, demo.slack) for _ in range(N)]
        # Baseline: the same 100 requests, one after the other.
        seq_rids = [f"seq{i}" for i in range(N)]
        sequential = [ack(demo, users[0], rid) for rid in seq_rids]
        seq_answered = answered(demo, seq_rids)
        print(
            f"sequential: p50 {statistics.median(sequential):.1f} ms, "
            f"p99 {percentile(sequential, 99):.1f} ms, "
            f"answered {seq_answered}/{N}"
        )
        con_rids = [f"con{i}" for i in range(N)]
        with ThreadPoolExecutor(max_workers=N) as pool:
            concurrent = list(pool.map(lambda i: ack(demo, users[i], con_rids[i]), range(N)))
        got = answered(demo, con_rids)
        for user in users:
            user.close()
    p50, p99 = statistics.median(concurrent), percentile(concurrent, 99)
    print(f"concurrent: p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {max(concurrent):.1f} ms, answered {got}/{N}")
    print(f"RESULT p50_ms={p50:.1f} p99_ms={p99:.1f} limit_ms=3000 answered={got}/{N}")


if __name__ == "__main__":
    main()
