"""Ack time of signed slash commands, the bot against the floor of its own HTTP stack.

Every process is separate: the SIMULATED Google API, vLLM and Slack each run in their own process
(`bench.simproc`), the bot is `python -m bot serve` (HTTP mode) pointed at them, and the load comes from
a client that posts 500 signed `/tpu status` slash commands, 100 at a time, each with its own `trigger_id`
and `response_url` as Slack sends them (the bot runs a trigger_id once, so one body repeated, as
ApacheBench sends it, would be 499 replays). The client is asyncio on raw sockets with every request built
and signed before the burst starts, so it costs little CPU beside the server it measures.

Floor (same run, measured the same way): an empty Bolt app whose only listener acks, on the same waitress
server (same threads and connection limit), in its own process (`python bench/ack.py --floor ...`); its p99
is that of its second burst.

Bursts: `fast`, the first burst after `/readyz` says ready, with fast backends (the simulators answer at
once: each command's work runs while the burst is still being acked); `slow`, once the first one's work has
finished, with every Google call and every vLLM call taking 2 s (the work outlasts the burst); `busy`, slow
backends and a `/logs analyze` over 200,000 log entries running (its reads and template mining in the bot's
worker process). p99 is the 99th percentile (nearest rank) of the total time per request (connect to the
last byte of the answer), in ms. `answered` counts the final answers the Slack simulator got for the fast
and slow bursts' commands.

Last line: RESULT floor_p99_ms=<f> fast_p99_ms=<a> slow_p99_ms=<s> busy_p99_ms=<b> fast_ratio=<a/f>
slow_ratio=<s/f> answered=<n>/1000 ready_s=<r>
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.simproc import SimProcess
from sim import scenario as scenarios
from sim.gcp import GcpSimulator
from sim.slack import SlackSimulator
from sim.vllm import VllmSimulator

N = 500
CONCURRENCY = 100
BACKEND_S = 2.0
ANSWER_WAIT_S = 300.0
USER = "U0DEMOUSER1"
LOG_ENTRIES = 200_000
TOKEN = "xoxb-simulated-bench"
CHANNEL = "C0DEMOCHAN1"  # the bot is a member (the Slack simulator enforces membership)


# ---- simulators (run in their own processes)
def make_gcp() -> GcpSimulator:
    scenario = scenarios.load(None)
    logs = scenario["google"].setdefault("logs", {})
    logs["stream"] = {"count": LOG_ENTRIES, "window": "1h", "error_share": 0.005, "error_kinds": 40}
    return GcpSimulator(scenario)


def make_vllm() -> VllmSimulator:
    return VllmSimulator(scenarios.load(None)["vllm"])


def make_slack() -> SlackSimulator:
    return SlackSimulator(TOKEN, channels=[CHANNEL])


def gcp_facts(sim: GcpSimulator) -> dict[str, Any]:
    return {"project": sim.project, "zones": sorted(sim.world.zones)}


def gcp_slow(sim: GcpSimulator, seconds: float) -> None:
    sim.inject_fault(r"^/v[12]", 200, delay_s=seconds, count=10_000_000)


def vllm_slow(sim: VllmSimulator, seconds: float) -> None:
    sim.set_latency(seconds)


def final_answers(sim: SlackSimulator, response_id: str) -> int:
    return sum(1 for m in list(sim.messages) if m.response_id == response_id and not m.in_progress)


def burst_answers(sim: SlackSimulator, burst_id: str) -> int:
    """Final answers posted to the response_urls of burst `burst_id` (ids "<burst_id>-<i>")."""
    prefix = f"{burst_id}-"
    done = [m for m in list(sim.messages) if not m.in_progress]
    return sum(1 for m in done if (m.response_id or "").startswith(prefix))


# ---- the floor: an empty Bolt app on the same server
def floor_server(port: int, signing_secret: str, slack_url: str, threads: int) -> None:
    from slack_bolt import App
    from slack_bolt.adapter.wsgi import SlackRequestHandler
    from slack_sdk import WebClient
    from waitress.server import create_server

    # As the bot's app: a client of the Slack simulator (auth.test once, at construction).
    app = App(signing_secret=signing_secret, client=WebClient(token=TOKEN, base_url=f"{slack_url}/api/"))

    @app.command("/tpu")
    def _ack(ack: Any) -> None:
        ack()

    handler = SlackRequestHandler(app, path="/slack/events")

    def application(environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("PATH_INFO") == "/readyz":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ready\n"]
        return handler(environ, start_response)

    create_server(
        application, host="127.0.0.1", port=port, threads=threads, connection_limit=1000, ident="floor"
    ).run()


# ---- load
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def slash_body(slack_url: str, text: str, response_id: str) -> str:
    """A slash-command form body with the fields Slack sends (as `sim.console.SlackUser.slash_body`); its
    `response_url` ends in `response_id`, and its `trigger_id` starts with it."""
    return urlencode(
        {
            "token": "simulated-verification-token",
            "team_id": "T0DEMOTEAM",
            "team_domain": "demo",
            "channel_id": CHANNEL,
            "channel_name": "tpu-ops",
            "user_id": USER,
            "user_name": "demo-user",
            "command": "/tpu",
            "text": text,
            "api_app_id": "A0DEMOAPP1",
            "is_enterprise_install": "false",
            "response_url": f"{slack_url}/response/{response_id}",
            "trigger_id": f"{response_id}.T0DEMOTEAM.simulated",
        }
    )


def signed_headers(secret: str, body: str) -> dict[str, str]:
    from slack_sdk.signature import SignatureVerifier

    ts = str(int(time.time()))
    signature = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": signature or ""}


def burst(url: str, secret: str, slack_url: str, text: str, burst_id: str) -> float:
    """N signed `/tpu text` slash commands to `url`, CONCURRENCY at a time, request i answering to
    response_url ".../response/<burst_id>-<i>"; returns the 99th percentile of their times in ms.

    Raises:
        SystemExit: a request failed or was not answered 200.
    """
    host, port = urlsplit(url).hostname or "127.0.0.1", urlsplit(url).port or 80
    requests = []
    for i in range(N):
        body = slash_body(slack_url, text, f"{burst_id}-{i}")
        head = ["POST /slack/events HTTP/1.1", f"Host: {host}:{port}", "Connection: close"]
        head += ["Content-Type: application/x-www-form-urlencoded", f"Content-Length: {len(body)}"]
        head += [f"{key}: {value}" for key, value in signed_headers(secret, body).items()]
        requests.append(("\r\n".join(head) + "\r\n\r\n" + body).encode())

    async def one(request: bytes, gate: asyncio.Semaphore) -> tuple[float, bytes]:
        async with gate:
            started = time.perf_counter()
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(request)
            answer = await reader.read()
            elapsed = time.perf_counter() - started
            writer.close()
            return elapsed, answer.split(b"\r\n", 1)[0]

    async def run() -> list[tuple[float, bytes]]:
        gate = asyncio.Semaphore(CONCURRENCY)
        return await asyncio.wait_for(asyncio.gather(*(one(r, gate) for r in requests)), 120)

    results = asyncio.run(run())
    failed = [status for _, status in results if not status.startswith(b"HTTP/1.1 200")]
    if failed:
        raise SystemExit(f"{len(failed)} of {N} requests failed: {sorted(set(failed))[:3]}")
    times = sorted(elapsed for elapsed, _ in results)
    return 1000 * times[math.ceil(0.99 * len(times)) - 1]


def wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 120) -> float:
    """Seconds until the bot's /readyz answers 200; exits the bench if the bot exits or `timeout_s` passes."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        if proc.poll() is not None:
            raise SystemExit(f"exited: {log.read_text()[-3000:]}")
        try:
            if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                return time.perf_counter() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"not ready within {timeout_s:.0f} s: {log.read_text()[-3000:]}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def bot_env(
    secret: str, port: int, facts: dict[str, Any], slack_url: str, gcp_url: str, vllm_url: str, state: str
) -> dict[str, str]:
    """The environment of `python -m bot serve` in HTTP mode on `port`, pointed at the simulators, its
    state database in the folder `state` (this process's own SLACK_/GCP_/VLLM_/TPU_ settings dropped)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "GCP_", "VLLM_", "TPU_"))}
    env.update(
        {
            "SLACK_BOT_TOKEN": TOKEN,
            "SLACK_SIGNING_SECRET": secret,
            "SLACK_API_URL": f"{slack_url}/api/",
            "BOT_MODE": "http",
            "BOT_HOST": "127.0.0.1",
            "BOT_PORT": str(port),
            "GCP_PROJECT": facts["project"],
            "TPU_ZONES": ",".join(facts["zones"]),
            "GOOGLE_API_ENDPOINT": gcp_url,
            "VLLM_BASE_URL": vllm_url,
            "STATE_DATABASE_URL": f"sqlite:///{state}/state.db",
            "ADMINS": USER,
        }
    )
    return env


def start_bot(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`python -m bot serve` in its own process, its output in `log`."""
    with log.open("w") as sink:
        return subprocess.Popen([sys.executable, "-m", "bot", "serve"], env=env, stdout=sink, stderr=sink)


def wait_answers(slack: SimProcess, burst_id: str, wanted: int) -> int:
    """Waits up to ANSWER_WAIT_S for `wanted` final answers to burst `burst_id`; returns how many came."""
    deadline = time.monotonic() + ANSWER_WAIT_S
    got = 0
    while time.monotonic() < deadline:
        got = slack.call(burst_answers, burst_id)
        if got >= wanted:
            break
        time.sleep(0.5)
    return got


def main() -> None:
    secret = secrets.token_hex(16)
    with (
        SimProcess(make_gcp) as gcp,
        SimProcess(make_vllm) as vllm,
        SimProcess(make_slack) as slack,
        tempfile.TemporaryDirectory(prefix="bench-ack-") as state,
    ):
        facts = gcp.call(gcp_facts)

        # The floor first, then the bot: never both at once.
        port = free_port()
        log = Path(state, "floor.log")
        with log.open("w") as sink:
            floor = subprocess.Popen(
                [sys.executable, __file__, "--floor", str(port), secret, slack.url], stdout=sink, stderr=sink
            )
        try:
            wait_ready(f"http://127.0.0.1:{port}", floor, log)
            url = f"http://127.0.0.1:{port}"
            floor_cold = burst(url, secret, slack.url, "status", "floor1")
            floor_p99 = burst(url, secret, slack.url, "status", "floor2")
        finally:
            stop(floor)
        print(
            f"floor (empty Bolt app, same server): p99 {floor_cold:.0f} ms, second burst {floor_p99:.0f} ms"
        )

        port = free_port()
        log = Path(state, "bot.log")
        bot = start_bot(bot_env(secret, port, facts, slack.url, gcp.url, vllm.url, state), log)
        try:
            url = f"http://127.0.0.1:{port}"
            ready_s = wait_ready(url, bot, log)
            print(f"bot ready in {ready_s:.1f} s")
            fast = burst(url, secret, slack.url, "status", "fast")
            answered = wait_answers(slack, "fast", N)
            gcp.call(gcp_slow, BACKEND_S)
            vllm.call(vllm_slow, BACKEND_S)
            slow = burst(url, secret, slack.url, "status", "slow")
            answered += wait_answers(slack, "slow", N)
            body = slash_body(slack.url, "analyze --since 1h", "analyze-0")
            body = body.replace("command=%2Ftpu", "command=%2Flogs")
            response = httpx.post(
                f"{url}/slack/events",
                content=body,
                headers={"Content-Type": "application/x-www-form-urlencoded", **signed_headers(secret, body)},
            )
            response.raise_for_status()
            time.sleep(3.0)  # the analysis is reading and mining by now
            busy = burst(url, secret, slack.url, "status", "busy")
            analysis_done = wait_answers(slack, "analyze", 1)
            wait_answers(slack, "busy", N)
        finally:
            stop(bot)
    print(
        f"bot: fast backends p99 {fast:.0f} ms, slow {slow:.0f} ms, busy {busy:.0f} ms "
        f"(/logs analyze answered: {analysis_done == 1}); ratios to the floor: fast {fast / floor_p99:.2f}, "
        f"slow {slow / floor_p99:.2f}, busy {busy / floor_p99:.2f}"
    )
    print(
        f"RESULT floor_p99_ms={floor_p99:.0f} fast_p99_ms={fast:.0f} slow_p99_ms={slow:.0f} "
        f"busy_p99_ms={busy:.0f} fast_ratio={fast / floor_p99:.2f} slow_ratio={slow / floor_p99:.2f} "
        f"answered={answered}/{2 * N} ready_s={ready_s:.1f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--floor", nargs=3, metavar=("PORT", "SECRET", "SLACK_URL"))
    args = parser.parse_args()
    if args.floor:
        floor_server(int(args.floor[0]), args.floor[1], args.floor[2], threads=16)
    else:
        main()
