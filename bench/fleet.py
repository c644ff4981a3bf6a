"""`/fleet` over 50 deployments against the slowest deployment's own `/tpu status`, and `/tpu list
--all-zones` over 10 zones.

Every process is separate, as in bench/ack.py: the SIMULATED Google API, vLLM and Slack each run in their
own process (`bench.simproc`), the bot is `python -m bot serve` (HTTP mode, DEPLOYMENTS_FILE of 50
deployments) pointed at them, and this process is the load generator posting signed slash commands.

World: 10 zones, each answering its TPU API calls after its own delay (0.10 s to 0.37 s, 0.03 s apart);
50 deployments, deployment N with one ACTIVE queued resource in zone N mod 10 as its primary; one vLLM
server answering every call after 0.2 s. Each command is timed end to end, from the signed slash command
to its final answer arriving at the Slack simulator; the bot's CPU is read from /proc/PID/stat around it.

Baseline (same run): `/tpu status --deployment dep-NN` of one deployment per zone; the slowest of their
medians is the floor a concurrent `/fleet` can reach. `/tpu list --all-zones` is reported beside it.

Run: `.venv/bin/python bench/fleet.py` (about 1 minute). Last line:
RESULT fleet_s=<median /fleet> slowest_status_s=<baseline> ratio=<fleet / baseline> fleet_cpu_s=<bot CPU
per /fleet> list_all_zones_s=<median /tpu list --all-zones>   (target: ratio at most 1.2)
"""

from __future__ import annotations

import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.ack import USER, bot_env, free_port, signed_headers, slash_body, start_bot, stop, wait_ready
from bench.simproc import SimProcess
from sim import scenario as scenarios
from sim.gcp import GcpSimulator
from sim.slack import SlackSimulator
from sim.vllm import VllmSimulator

ZONES = (
    "us-east5-a",
    "us-east5-b",
    "us-east5-c",
    "us-central1-a",
    "us-central1-b",
    "us-west4-a",
    "europe-west4-a",
    "europe-west4-b",
    "asia-northeast1-b",
    "southamerica-east1-c",
)
ZONE_DELAY_S = {zone: 0.10 + 0.03 * index for index, zone in enumerate(ZONES)}
VLLM_DELAY_S = 0.2
DEPLOYMENTS = 50
RUNS = 5
TOKEN = "xoxb-simulated-bench"
CHANNEL = "C0DEMOCHAN1"


def name_of(index: int) -> str:
    return f"dep-{index:02d}"


def make_gcp() -> GcpSimulator:
    """The default world with 10 zones and one ACTIVE queued resource per deployment."""
    scenario = scenarios.load(None)
    google = scenario["google"]
    offer = {
        "accelerator_types": ["v6e-1", "v6e-4", "v6e-8"],
        "capacity": "available",
        "quota": {"TPUV6EPerProjectPerZoneForTPUAPI": 64, "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI": 64},
    }
    google["zones"] = {zone: dict(offer) for zone in ZONES}
    google["operations"] = []
    google["queued_resources"] = [
        {
            "name": f"{name_of(index)}-qr",
            "zone": ZONES[index % len(ZONES)],
            "state": "ACTIVE",
            "state_initiator": "USER",
            "provisioning_model": "FLEX_START",
            "max_run_duration": "4h",
            "created": "-90m",
            "node": {
                "id": f"{name_of(index)}-node",
                "accelerator_type": "v6e-8",
                "runtime_version": "v2-alpha-tpuv6e",
                "state": "READY",
                "health": "HEALTHY",
                "internal_ip": "127.0.0.1",
                "external_ip": "127.0.0.1",
            },
        }
        for index in range(DEPLOYMENTS)
    ]
    return GcpSimulator(scenario)


def gcp_facts(sim: GcpSimulator) -> dict[str, Any]:
    return {"project": sim.project, "zones": sorted(sim.world.zones)}


def gcp_slow(sim: GcpSimulator) -> None:
    for zone, delay in ZONE_DELAY_S.items():
        sim.inject_fault(rf"/locations/{zone}/", 200, delay_s=delay, count=10_000_000)


def make_vllm() -> VllmSimulator:
    return VllmSimulator(scenarios.load(None)["vllm"])


def vllm_slow(sim: VllmSimulator) -> None:
    sim.set_latency(VLLM_DELAY_S)


def make_slack() -> SlackSimulator:
    return SlackSimulator(TOKEN, channels=[CHANNEL])


def answered(sim: SlackSimulator, response_id: str) -> str | None:
    """The final answer to `response_id`'s response_url (its texts and blocks), or None yet."""
    from sim.slack import render_block

    texts = [
        "\n".join([message.text, *(render_block(block) for block in message.blocks)])
        for message in list(sim.messages)
        if message.response_id == response_id and not message.in_progress
    ]
    return "\n".join(texts) if texts else None


def files_named(sim: SlackSimulator, filename: str) -> list[str]:
    """The contents of every file named `filename` uploaded so far (a long answer goes out as a file)."""
    return [m.content.decode() for m in list(sim.messages) if m.filename == filename]


def wait_file(slack: SimProcess, filename: str, seen: int) -> str:
    """The content of the first file named `filename` after the `seen` already uploaded (at most 30 s)."""
    deadline = time.monotonic() + 30
    while len(files := slack.call(files_named, filename)) <= seen:
        if time.monotonic() > deadline:
            return ""
        time.sleep(0.05)
    return files[seen]


def deployments_file(folder: str) -> str:
    path = Path(folder, "deployments.yaml")
    deployments = [
        {"name": name_of(index), "zones": [ZONES[index % len(ZONES)]], "primary": f"{name_of(index)}-qr"}
        for index in range(DEPLOYMENTS)
    ]
    path.write_text(yaml.safe_dump({"deployments": deployments}))
    return str(path)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` (fields 14 and 15 of /proc/PID/stat, proc(5))."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Commands:
    """Signed slash commands to the bot; each timed until its final answer reaches the Slack simulator."""

    def __init__(self, url: str, secret: str, slack: SimProcess, pid: int) -> None:
        self.url, self.secret, self.slack, self.pid = url, secret, slack, pid
        self.sent = 0

    def run(self, command: str, text: str) -> tuple[float, float, str]:
        """Returns (seconds, bot CPU seconds, answer text)."""
        self.sent += 1
        response_id = f"fleet{self.sent}"
        body = slash_body(self.slack.url, text, response_id)
        body = body.replace("command=%2Ftpu", f"command=%2F{command}")
        cpu_before, started = cpu_s(self.pid), time.perf_counter()
        response = httpx.post(
            f"{self.url}/slack/events",
            content=body,
            headers={"Content-Type": "application/x-www-form-urlencoded"} | signed_headers(self.secret, body),
        )
        response.raise_for_status()
        while (text_out := self.slack.call(answered, response_id)) is None:
            if time.perf_counter() - started > 60:
                raise SystemExit(f"no answer to /{command} {text}")
            time.sleep(0.005)
        return time.perf_counter() - started, cpu_s(self.pid) - cpu_before, text_out


def median_of(commands: Commands, command: str, text: str) -> tuple[float, float]:
    """Median seconds and median bot CPU seconds of RUNS runs (after one warm-up run)."""
    commands.run(command, text)
    runs = [commands.run(command, text) for _ in range(RUNS)]
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def main() -> None:
    secret = secrets.token_hex(16)
    with (
        SimProcess(make_gcp) as gcp,
        SimProcess(make_vllm) as vllm,
        SimProcess(make_slack) as slack,
        tempfile.TemporaryDirectory(prefix="bench-fleet-") as state,
    ):
        facts = gcp.call(gcp_facts)
        gcp.call(gcp_slow)
        vllm.call(vllm_slow)
        port = free_port()
        env = bot_env(secret, port, facts, slack.url, gcp.url, vllm.url, state)
        env["DEPLOYMENTS_FILE"] = deployments_file(state)
        env["ADMINS"] = USER
        log = Path(state, "bot.log")
        bot = start_bot(env, log)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_ready(url, bot, log, timeout_s=300)
            commands = Commands(url, secret, slack, bot.pid)
            per_zone = {}
            for index, zone in enumerate(ZONES):
                per_zone[zone] = median_of(commands, "tpu", f"status --deployment {name_of(index)}")
            fleet_s, fleet_cpu = median_of(commands, "fleet", "")
            seen = len(slack.call(files_named, "fleet.txt"))
            _, _, fleet_text = commands.run("fleet", "")
            fleet_text += wait_file(slack, "fleet.txt", seen)
            list_s, list_cpu = median_of(commands, "tpu", "list --all-zones")
        finally:
            stop(bot)
    for zone, (seconds, cpu) in per_zone.items():
        print(f"/tpu status of a deployment in {zone:<21} {seconds:6.3f} s  bot CPU {cpu:.3f} s")
    slowest = max(seconds for seconds, _ in per_zone.values())
    listed = sum(1 for index in range(DEPLOYMENTS) if f"{name_of(index)}-qr" in fleet_text)
    shown = f"{DEPLOYMENTS} deployments, {listed} primaries shown"
    print(f"/fleet ({shown}) {fleet_s:.3f} s  bot CPU {fleet_cpu:.3f} s")
    print(f"/tpu list --all-zones ({len(ZONES)} zones) {list_s:.3f} s  bot CPU {list_cpu:.3f} s")
    if listed != DEPLOYMENTS:
        raise SystemExit(f"/fleet showed {listed} of {DEPLOYMENTS} primaries:\n{fleet_text[-3000:]}")
    print(
        f"RESULT fleet_s={fleet_s:.3f} slowest_status_s={slowest:.3f} ratio={fleet_s / slowest:.2f} "
        f"fleet_cpu_s={fleet_cpu:.3f} list_all_zones_s={list_s:.3f}"
    )


if __name__ == "__main__":
    main()
