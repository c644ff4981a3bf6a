"""The bot's memory and start-up: RSS idle, RSS after 1,000 commands, and cold start to ready.

`python -m bot serve` runs as a subprocess (HTTP mode) with its environment pointing at the simulators of
a Demo world; start-up is timed from the spawn to the first 200 from `/healthz`. RSS is VmRSS from
/proc/<pid>/status. Baseline in the same run: the RSS of a bare `python -c "import time; time.sleep(60)"`.

Last line: RESULT idle_mb=<a> after_mb=<b> start_s=<c>
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

from sim.console import SlackUser
from sim.demo import Demo

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


def main() -> None:
    baseline = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    time.sleep(1.0)
    print(f"baseline: bare python interpreter RSS {rss_mb(baseline.pid):.1f} MB")
    baseline.kill()
    baseline.wait()
    with Demo() as demo, tempfile.NamedTemporaryFile("w+", suffix=".log") as log_file:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve"],
            env=bot_env(demo, port),
            stdout=subprocess.DEVNULL,
            # A file, not a pipe: an unread pipe fills up and blocks the bot's logging.
            stderr=log_file,
        )
        try:
            start_s = -1.0
            while time.perf_counter() - started < 60:
                if proc.poll() is not None:
                    raise SystemExit(f"bot exited: {Path(log_file.name).read_text()[-2000:]}")
                try:
                    if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                        start_s = time.perf_counter() - started
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.02)
            if start_s < 0:
                raise SystemExit("the bot did not answer /healthz within 60 s")
            time.sleep(2.0)
            idle = rss_mb(proc.pid)
            print(f"cold start to /healthz: {start_s:.2f} s; idle RSS {idle:.1f} MB")
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
    print(f"RESULT idle_mb={idle:.1f} after_mb={after:.1f} start_s={start_s:.2f}")


if __name__ == "__main__":
    main()
