"""`/fleet` over 50 deployments against the slowest deployment's own `/tpu status`, and `/tpu list
--all-zones` over 10 zones.

Every process is separate, as in bench/ack.py: the SIMULATED Google API, vLLM and Slack each run in their
own process (`bench.simproc`), the bot is `python -m bot serve` (HTTP mode, DEPLOYMENTS_FILE of 50
deployments) pointed at them, and this process is the load generator posting signed slash commands.

World: 10 zones, each answering its TPU API calls after its own delay (0.10 s to 0.37 s, 0.03 s apart);
50 deployments, deployment N with one ACTIVE queued resource in zone N mod 10 as its primary; one vLLM
server answering every call after 0.2 s. Each command is timed end to end, from the signed slash command
to its final answer arriving at the Slack simulator; the bot's CPU (its worker processes' included) and
the simulators' are read from /proc/PID/stat around it. All deployments are in one project, so the five
deployments of a zone share its listing (one `queuedResources.list` and `nodes.list` per zone); each
deployment reads its own /health and /metrics.

Baseline (same run): `/tpu status --deployment dep-NN` of one deployment per zone; the slowest of their
medians is the floor a concurrent `/fleet` can reach. `/tpu list --all-zones` is reported beside it.
The commands run in ROUNDS rounds after a warm-up one, each round every zone's `/tpu status` and then
`/fleet`, so a change in the machine's load falls on both sides of the ratio; each figure is printed as
its median and its spread (lowest-highest), with the load average at the start and the end.

Every `/fleet` is checked: its answer arrives with exactly one `fleet.txt` (Slack holds about 24 of the
50 deployments in one message; the bot uploads the whole answer before the message that names it) and
the two together show all 50 primaries; anything else stops the bench with what was received.

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
ROUNDS = 7
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


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of process `pid` and of its running children (the bot's worker processes: work moved
    there is still the bot's), from /proc/PID/task/TID/children (proc(5))."""
    children = {
        int(child)
        for task in Path(f"/proc/{pid}/task").iterdir()
        for child in (task / "children").read_text().split()
    }
    return cpu_s(pid) + sum(cpu_s(child) for child in children if Path(f"/proc/{child}").exists())


class Commands:
    """Signed slash commands to the bot; each timed until its final answer reaches the Slack simulator."""

    def __init__(self, url: str, secret: str, slack: SimProcess, pid: int, sims: list[int]) -> None:
        self.url, self.secret, self.slack, self.pid, self.sims = url, secret, slack, pid, sims
        self.sent = 0
        self.sims_cpu_s = 0.0  # the simulators' CPU seconds during the last command

    def run(self, command: str, text: str) -> tuple[float, float, str]:
        """Returns (seconds, bot CPU seconds, answer text)."""
        self.sent += 1
        response_id = f"fleet{self.sent}"
        body = slash_body(self.slack.url, text, response_id)
        body = body.replace("command=%2Ftpu", f"command=%2F{command}")
        sims_before = sum(cpu_s(pid) for pid in self.sims)
        cpu_before, started = tree_cpu_s(self.pid), time.perf_counter()
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
        seconds, cpu = time.perf_counter() - started, tree_cpu_s(self.pid) - cpu_before
        self.sims_cpu_s = sum(cpu_s(pid) for pid in self.sims) - sims_before
        return seconds, cpu, text_out


def run_fleet(commands: Commands, slack: SimProcess) -> tuple[float, float]:
    """One `/fleet`, checked: (seconds, bot CPU seconds). Its whole answer is uploaded before the message
    that names it, so once the message is in, exactly one new `fleet.txt` must be there too."""
    seen = len(slack.call(files_named, "fleet.txt"))
    seconds, cpu, text = commands.run("fleet", "")
    files = slack.call(files_named, "fleet.txt")[seen:]
    shown = "\n".join([text, *files])
    listed = sum(1 for index in range(DEPLOYMENTS) if f"{name_of(index)}-qr" in shown)
    if len(files) != 1 or listed != DEPLOYMENTS:
        raise SystemExit(
            f"/fleet showed {listed} of {DEPLOYMENTS} primaries with {len(files)} fleet.txt file(s) "
            f"at its answer:\n{text[-3000:]}"
        )
    return seconds, cpu


class Figures:
    """Seconds and bot CPU seconds of the runs of one command."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self.cpu: list[float] = []

    def add(self, run: tuple[float, float]) -> None:
        self.seconds.append(run[0])
        self.cpu.append(run[1])

    @property
    def median_s(self) -> float:
        return statistics.median(self.seconds)

    @property
    def median_cpu(self) -> float:
        return statistics.median(self.cpu)

    def line(self) -> str:
        """Median and spread (lowest-highest) of the wall and CPU seconds."""
        return (
            f"{self.median_s:6.3f} s ({min(self.seconds):.3f}-{max(self.seconds):.3f})  "
            f"bot CPU {self.median_cpu:.3f} s ({min(self.cpu):.3f}-{max(self.cpu):.3f})"
        )


def load() -> str:
    return "load average " + " ".join(f"{value:.2f}" for value in os.getloadavg())


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
            commands = Commands(url, secret, slack, bot.pid, [gcp.pid, vllm.pid, slack.pid])
            per_zone = {zone: Figures() for zone in ZONES}
            fleet, listed, sims = Figures(), Figures(), []
            started_load = load()
            for round_ in range(ROUNDS + 1):  # the first round warms up and is not counted
                counted = round_ > 0
                for index, zone in enumerate(ZONES):
                    status = commands.run("tpu", f"status --deployment {name_of(index)}")
                    if counted:
                        per_zone[zone].add(status[:2])
                one = run_fleet(commands, slack)
                if counted:
                    fleet.add(one)
                    sims.append(commands.sims_cpu_s)
            for round_ in range(ROUNDS + 1):
                every_zone = commands.run("tpu", "list --all-zones")
                if round_ > 0:
                    listed.add(every_zone[:2])
            ended_load = load()
        finally:
            stop(bot)
    print(f"{ROUNDS} rounds after a warm-up; each figure: median (lowest-highest)")
    for zone, figures in per_zone.items():
        print(f"/tpu status of a deployment in {zone:<21} {figures.line()}")
    slowest = max(figures.median_s for figures in per_zone.values())
    print(f"/fleet ({DEPLOYMENTS} deployments, every primary shown, one fleet.txt each) {fleet.line()}")
    print(
        f"  ratio to the slowest /tpu status: median {fleet.median_s / slowest:.2f} "
        f"(lowest-highest {min(fleet.seconds) / slowest:.2f}-{max(fleet.seconds) / slowest:.2f})"
    )
    print(
        f"  the simulators' CPU during each /fleet (they share the {os.cpu_count()} cores): median "
        f"{statistics.median(sims):.3f} s ({min(sims):.3f}-{max(sims):.3f})"
    )
    print(f"/tpu list --all-zones ({len(ZONES)} zones) {listed.line()}")
    print(f"{started_load} at the start, {ended_load} at the end ({os.cpu_count()} cores)")
    print(
        f"RESULT fleet_s={fleet.median_s:.3f} slowest_status_s={slowest:.3f} "
        f"ratio={fleet.median_s / slowest:.2f} fleet_cpu_s={fleet.median_cpu:.3f} "
        f"list_all_zones_s={listed.median_s:.3f}"
    )


if __name__ == "__main__":
    main()
