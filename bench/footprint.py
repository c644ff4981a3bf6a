"""The bot's memory and start-up: `python -m bot manifest`, start to `/healthz` and `/readyz`, RSS at ready,
idle once the warm-up has finished, and after 1,000 commands.

`python -m bot serve` runs as a subprocess (HTTP mode) with its environment pointing at the SIMULATED
Slack, Google, vLLM and TPU VM of a Demo world; start-up is timed from the spawn to the first 200 from
`/healthz`, then from `/readyz`; idle is measured once its log says "warmed up in" (the worker
processes too) and 2 s more have passed. RSS is VmRSS from /proc/<pid>/status, of the bot's own process.
`python -m bot manifest --url ...` is timed as the best of 3 runs.

Baselines in the same run: a bare interpreter (its RSS, and `python -c pass` timed as the manifest is); an
empty Bolt app on the same waitress server (`bench/ack.py --floor`, its RSS once it answers); and what the
model client adds (`import openai` over the bare interpreter). `ready_ratio` is the bot's RSS at ready over
the empty Bolt app's plus openai's.

Last line: RESULT manifest_s=<m> interpreter_s=<p> healthz_s=<h> ready_s=<r> ready_mb=<a> idle_mb=<i>
after_mb=<b> bolt_mb=<f> openai_mb=<o> ready_ratio=<a/(f+o)>
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.ack import make_slack
from bench.simproc import SimProcess
from sim.console import SlackUser
from sim.demo import Demo

ACK_BENCH = Path(__file__).resolve().parent / "ack.py"
WARMED = "warmed up in"
MANIFEST = [sys.executable, "-m", "bot", "manifest", "--url", "https://bot.example.com/slack/events"]

COMMANDS = 1000
LINES = ["/tpu list", "/vllm metrics", "/tpu config gcloud", "/vllm models", "/tpu status"]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bot_env(demo: Demo, port: int) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "GCP_", "VLLM_", "SSH_", "TPU_"))
    }
    s = demo.settings
    env.update(
        {
            "SLACK_BOT_TOKEN": s.slack_bot_token.get_secret_value()
            if hasattr(s.slack_bot_token, "get_secret_value")
            else str(s.slack_bot_token),
            "SLACK_SIGNING_SECRET": demo.signing_secret,
            "SLACK_API_URL": str(s.slack_api_url),
            "BOT_MODE": "http",
            "BOT_HOST": "127.0.0.1",
            "BOT_PORT": str(port),
            "GCP_PROJECT": s.gcp_project,
            "TPU_ZONES": ",".join(s.tpu_zones),
            "GOOGLE_API_ENDPOINT": str(s.google_api_endpoint),
            "VLLM_PORT": str(s.vllm_port),
            "VLLM_MODEL": s.vllm_model,
            "STATE_DATABASE_URL": s.state_database_url.replace("state.db", "footprint.db"),
            "ADMINS": ",".join(s.admins),
            "SSH_HOST": "127.0.0.1",
            "SSH_PORT": str(s.ssh_port),
            "SSH_USER": s.ssh_user,
            "SSH_KEY_PATH": str(s.ssh_key_path),
            "SSH_HOST_KEYS": ",".join(s.ssh_host_keys),
            "VLLM_CONTAINER": s.vllm_container,
        }
    )
    return env


def best_of_3(command: list[str]) -> float:
    """The shortest wall time of 3 runs of `command`, in seconds (it must exit 0)."""
    times = []
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=os.environ | {"BOT_MODE": "http"})
        times.append(time.perf_counter() - started)
    return min(times)


def idle_rss(imports: str) -> float:
    """RSS in MB of an interpreter that ran `imports` (Python statements) and now sleeps."""
    code = f"{imports}\nimport time\nprint('ready', flush=True)\ntime.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        return rss_mb(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def bolt_rss() -> float:
    """RSS in MB of the empty Bolt app of bench/ack.py once it answers (against that bench's Slack
    simulator, in its own process)."""
    port = free_port()
    with SimProcess(make_slack) as slack:
        proc = subprocess.Popen([sys.executable, str(ACK_BENCH), "--floor", str(port), "x" * 32, slack.url])
        try:
            return _answering_rss(proc, port)
        finally:
            proc.kill()
            proc.wait()


def _answering_rss(proc: subprocess.Popen[bytes], port: int) -> float:
    """RSS in MB of `proc` one second after its `/readyz` on `port` answers 200 (at most 60 s)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("the empty Bolt app exited")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                time.sleep(1.0)
                return rss_mb(proc.pid)
        except httpx.HTTPError:
            time.sleep(0.05)
    raise SystemExit("the empty Bolt app did not answer within 60 s")


def wait_for(url: str, proc: subprocess.Popen[bytes], log: Path, started: float) -> float:
    """Seconds from `started` until `url` answers 200; exits the bench if the bot exits or 120 s pass."""
    while time.perf_counter() - started < 120:
        if proc.poll() is not None:
            raise SystemExit(f"bot exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return time.perf_counter() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.02)
    raise SystemExit(f"{url} did not answer 200 within 120 s: {log.read_text()[-2000:]}")


def main() -> None:
    manifest_s, interpreter_s = best_of_3(MANIFEST), best_of_3([sys.executable, "-c", "pass"])
    print(f"python -m bot manifest: {manifest_s:.2f} s (best of 3); bare interpreter {interpreter_s:.2f} s")
    bare = idle_rss("pass")
    openai_mb = idle_rss("import openai") - bare
    print(f"baseline: bare python interpreter RSS {bare:.1f} MB; import openai adds {openai_mb:.1f} MB")
    with Demo() as demo, tempfile.NamedTemporaryFile("w+", suffix=".log") as log_file:
        bolt_mb = bolt_rss()
        print(f"baseline: empty Bolt app on waitress RSS {bolt_mb:.1f} MB")
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        log = Path(log_file.name)
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve"],
            env=bot_env(demo, port),
            stdout=subprocess.DEVNULL,
            # A file, not a pipe: an unread pipe fills up and blocks the bot's logging.
            stderr=log_file,
        )
        try:
            healthz_s = wait_for(url + "/healthz", proc, log, started)
            ready_s = wait_for(url + "/readyz", proc, log, started)
            ready_mb = rss_mb(proc.pid)
            while WARMED not in log.read_text():
                if time.perf_counter() - started > 180 or proc.poll() is not None:
                    raise SystemExit(f"no {WARMED!r} in the bot's log: {log.read_text()[-2000:]}")
                time.sleep(0.2)
            time.sleep(2.0)
            idle = rss_mb(proc.pid)
            print(
                f"start to /healthz {healthz_s:.2f} s, to /readyz {ready_s:.2f} s; "
                f"RSS at ready {ready_mb:.1f} MB, idle after the warm-up {idle:.1f} MB"
            )
            user = SlackUser(url, demo.signing_secret, demo.slack)
            rids = [f"fp{i}" for i in range(COMMANDS)]

            def send(i: int) -> int:
                line = LINES[i % len(LINES)]
                command, _, text = line.partition(" ")
                return user.post_signed(
                    user.slash_body(command, text, rids[i]), "application/x-www-form-urlencoded"
                ).status_code

            with ThreadPoolExecutor(max_workers=8) as pool:
                statuses = list(pool.map(send, range(COMMANDS)))
            wanted = set(rids)
            deadline = time.monotonic() + 180
            done: set[str | None] = set()
            while time.monotonic() < deadline:
                done = {m.response_id for m in list(demo.slack.messages) if m.response_id in wanted}
                if len(done) == COMMANDS:
                    break
                time.sleep(0.5)
            user.close()
            time.sleep(1.0)
            after = rss_mb(proc.pid)
            ok = sum(1 for s in statuses if s == 200)
            print(f"{COMMANDS} commands: {ok} acked, {len(done)} answered; RSS after {after:.1f} MB")
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    ratio = ready_mb / (bolt_mb + openai_mb)
    print(
        f"RESULT manifest_s={manifest_s:.2f} interpreter_s={interpreter_s:.2f} healthz_s={healthz_s:.2f} "
        f"ready_s={ready_s:.2f} ready_mb={ready_mb:.1f} idle_mb={idle:.1f} after_mb={after:.1f} "
        f"bolt_mb={bolt_mb:.1f} openai_mb={openai_mb:.1f} ready_ratio={ratio:.2f}"
    )


if __name__ == "__main__":
    main()
