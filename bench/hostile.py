"""Signed ack latency while hostile unsigned bodies are being refused, against the same acks without them.

Every part in its own process: the SIMULATED Google API, vLLM and Slack (`bench.simproc`), the bot as
`python -m bot serve` (HTTP mode, text logs as in production) pointed at them, and the hostile load from an
independent process (`python bench/hostile.py --load URL`): 16 senders, each posting, one after another, an
unsigned 60 KB JSON body whose value is `password: x` and 60,000 spaces (the body that stalled the bot for
67 s before the signature gate and linear redaction) with a made-up signature.

The probe sends one signed `/tpu list` every PROBE_GAP_S and times its HTTP answer (the ack; the listing
itself is answered through the response_url afterwards, and counted). Baseline: SAMPLES probes with no
other load. Then the same probes while the 16 senders run. `/healthz` is timed once per probe as well.

Last line: RESULT baseline_p95_ms=<b> hostile_p95_ms=<h> ratio=<h/b> hostile_max_ms=<m>
healthz_max_ms=<z> refused=<401s>/<hostile requests> answered=<n>/<probes>
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.ack import (
    bot_env,
    final_answers,
    free_port,
    gcp_facts,
    make_gcp,
    make_slack,
    make_vllm,
    signed_headers,
    slash_body,
    start_bot,
    stop,
    wait_ready,
)
from bench.simproc import SimProcess

SENDERS = 16
SAMPLES = 40
PROBE_GAP_S = 0.25
HOSTILE_BODY = json.dumps({"type": "event_callback", "text": "password: x" + " " * 60_000}).encode()


# ---- the hostile load (its own process)
def load(url: str, stop_file: Path) -> None:
    """Post the hostile body from SENDERS threads until `stop_file` exists; print the statuses as JSON."""
    counts: dict[str, int] = {}
    lock = threading.Lock()

    def sender() -> None:
        with httpx.Client(timeout=300) as client:
            while not stop_file.exists():
                headers = {
                    "Content-Type": "application/json",
                    "X-Slack-Request-Timestamp": str(int(time.time())),
                    "X-Slack-Signature": "v0=" + "0" * 64,
                }
                try:
                    response = client.post(f"{url}/slack/events", content=HOSTILE_BODY, headers=headers)
                    status = str(response.status_code)
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                with lock:
                    counts[status] = counts.get(status, 0) + 1

    threads = [threading.Thread(target=sender) for _ in range(SENDERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps(counts), flush=True)


# ---- the probe
def probe(url: str, secret: str, slack_url: str, label: str) -> tuple[list[float], list[float], list[str]]:
    """SAMPLES signed `/tpu list` acks and `/healthz` answers, in ms; the response ids used."""
    acks: list[float] = []
    health: list[float] = []
    ids: list[str] = []
    with httpx.Client(timeout=300) as client:
        for index in range(SAMPLES):
            response_id = f"{label}{index}"
            body = slash_body(slack_url, "list", response_id)
            headers = {"Content-Type": "application/x-www-form-urlencoded", **signed_headers(secret, body)}
            started = time.perf_counter()
            response = client.post(f"{url}/slack/events", content=body, headers=headers)
            acks.append((time.perf_counter() - started) * 1000)
            if response.status_code != 200:
                raise SystemExit(f"probe {response_id}: HTTP {response.status_code} {response.text[:200]}")
            ids.append(response_id)
            started = time.perf_counter()
            client.get(f"{url}/healthz").raise_for_status()
            health.append((time.perf_counter() - started) * 1000)
            time.sleep(PROBE_GAP_S)
    return acks, health, ids


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def answered(slack: SimProcess, ids: list[str], wait_s: float = 60.0) -> int:
    deadline = time.monotonic() + wait_s
    got = 0
    while time.monotonic() < deadline:
        got = sum(slack.call(final_answers, response_id) >= 1 for response_id in ids)
        if got == len(ids):
            break
        time.sleep(0.5)
    return got


def main() -> None:
    secret = secrets.token_hex(16)
    with (
        SimProcess(make_gcp) as gcp,
        SimProcess(make_vllm) as vllm,
        SimProcess(make_slack) as slack,
        tempfile.TemporaryDirectory(prefix="bench-hostile-") as state,
    ):
        facts = gcp.call(gcp_facts)
        port = free_port()
        env = bot_env(secret, port, facts, slack.url, gcp.url, vllm.url, state)
        env["LOG_FORMAT"] = "text"
        log = Path(state, "bot.log")
        bot = start_bot(env, log)
        try:
            url = f"http://127.0.0.1:{port}"
            print(f"bot ready in {wait_ready(url, bot, log):.1f} s", flush=True)
            base_acks, base_health, base_ids = probe(url, secret, slack.url, "base")
            stop_file = Path(state, "stop")
            loader = subprocess.Popen(
                [sys.executable, __file__, "--load", url, str(stop_file)], stdout=subprocess.PIPE, text=True
            )
            try:
                time.sleep(2.0)  # every sender has a body in flight
                hot_acks, hot_health, hot_ids = probe(url, secret, slack.url, "hostile")
            finally:
                stop_file.touch()
                out, _ = loader.communicate(timeout=600)
            counts = json.loads(out.strip().splitlines()[-1])
            done = answered(slack, base_ids + hot_ids)
            log_bytes = log.stat().st_size
        finally:
            stop(bot)
    refused = counts.get("401", 0)
    total = sum(counts.values())
    base, hot = p95(base_acks), p95(hot_acks)
    print(
        f"baseline (no other load): ack p50 {statistics.median(base_acks):.1f} ms, p95 {base:.1f} ms, "
        f"max {max(base_acks):.1f} ms; /healthz max {max(base_health):.1f} ms"
    )
    print(
        f"with {SENDERS} hostile senders ({total} bodies of {len(HOSTILE_BODY):,} bytes, statuses {counts}): "
        f"ack p50 {statistics.median(hot_acks):.1f} ms, p95 {hot:.1f} ms, max {max(hot_acks):.1f} ms; "
        f"/healthz max {max(hot_health):.1f} ms; bot log {log_bytes:,} bytes"
    )
    print(
        f"RESULT baseline_p95_ms={base:.1f} hostile_p95_ms={hot:.1f} ratio={hot / base:.2f} "
        f"hostile_max_ms={max(hot_acks):.1f} healthz_max_ms={max(hot_health):.1f} refused={refused}/{total} "
        f"answered={done}/{2 * SAMPLES}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--load", nargs=2, metavar=("URL", "STOP_FILE"))
    args = parser.parse_args()
    if args.load:
        load(args.load[0], Path(args.load[1]))
    else:
        main()
