"""The local demo: SIMULATED Slack, Google Cloud and vLLM on 127.0.0.1, and the real bot in HTTP mode."""

from __future__ import annotations

import secrets
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bot.app import Bot, HttpServer, build
from bot.config import Settings
from bot.services import Services
from sim import scenario as scenarios
from sim.console import DEMO_CHANNEL, DEMO_USER, SlackUser
from sim.gcp import GcpSimulator
from sim.host import HostSimulator
from sim.slack import SlackSimulator
from sim.vllm import VllmSimulator

BANNER = """\
tpu-chatops demo: everything below is SIMULATED on 127.0.0.1.
  Slack:        simulator at {slack}
  Google Cloud: emulator at {gcp} (project {project}, zones {zones})
  vLLM:         simulator at {vllm} (model {model})
  TPU VM:       SSH simulator at 127.0.0.1:{ssh} (docker, journalctl; host key pinned)
  Bot:          real bot, HTTP mode, at {bot}/slack/events (signed requests)
You are {user} (admin). Others are viewers: `click Confirm as U0VIEWER01` clicks as one of them.
Alerts go to channel {alerts}; `--speed 60` makes a simulated hour pass in a real minute.
Nothing here touches a real Slack workspace, Google project or TPU."""


ALERTS_CHANNEL = "C0ALERTS01"


class Demo:
    """Start the simulators and the bot; `user` sends requests as a Slack user. Use as a context manager.

    The simulated Google world keeps its own clock (`speed` simulated seconds per real second), and the bot
    reads the time from it, so expiry alerts, ages and confirmations all follow simulated time.

    Args:
        scenario_path: a scenario YAML file, or None for the bundled default.
        speed: simulated seconds per real second (None: the scenario's `google.time_speed`, else 1).
        alerts: start the alert scheduler (posting to ALERTS_CHANNEL) as `serve` does.
        overrides: extra Settings fields (e.g. worker_threads) for tests and benchmarks.
    """

    def __init__(
        self,
        scenario_path: str | Path | None = None,
        *,
        speed: float | None = None,
        alerts: bool = False,
        **overrides: Any,
    ) -> None:
        self.scenario = scenarios.load(scenario_path)
        self._state_dir = tempfile.TemporaryDirectory(prefix="tpu-chatops-demo-")
        token = "xoxb-simulated-" + secrets.token_hex(8)
        self.signing_secret = secrets.token_hex(16)
        self.gcp = GcpSimulator(self.scenario, speed=speed)
        self.vllm = VllmSimulator(self.scenario["vllm"])
        self.host = HostSimulator(self.scenario.get("host"), vllm=self.vllm)
        # The bot was invited to the demo channel and the alert channel; any other channel is not joined.
        self.slack = SlackSimulator(token, channels=[DEMO_CHANNEL, ALERTS_CHANNEL])
        self.gcp.start()
        self.vllm.start()
        self.host.start()
        self.slack.start()
        key_path = Path(self._state_dir.name) / "ssh_key"
        key_path.write_bytes(
            Ed25519PrivateKey.generate().private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
            )
        )
        key_path.chmod(0o600)
        self.host.authorize(paramiko.Ed25519Key(filename=str(key_path)))
        zones = list(self.scenario["google"].get("zones", {})) or ["us-east5-a"]
        vllm_port = int(self.vllm.url.rsplit(":", 1)[1])
        fields: dict[str, Any] = {
            "slack_bot_token": token,
            "slack_signing_secret": self.signing_secret,
            "slack_app_token": None,
            "slack_api_url": self.slack.api_url,
            "bot_mode": "http",
            "bot_host": "127.0.0.1",
            "gcp_project": self.scenario["project"],
            "tpu_zones": zones,
            "google_api_endpoint": self.gcp.url,
            "vllm_base_url": None,
            "vllm_port": vllm_port,
            "vllm_model": self.scenario["vllm"].get("model", "google/gemma-4-31B-it"),
            "state_database_url": f"sqlite:///{self._state_dir.name}/state.db",
            "admins": [DEMO_USER],
            "capacity_poll_s": 0.5,
            "ssh_host": "127.0.0.1",
            "ssh_port": self.host.port,
            "ssh_user": self.host.user,
            "ssh_key_path": str(key_path),
            "ssh_host_keys": [f"{kind} {b64}" for kind, b64 in self.host.pinned_host_keys.items()],
            "vllm_container": self.host.config["linked_container"],
            "alert_channel": ALERTS_CHANNEL,
            "alert_interval_s": 2.0,
        }
        fields.update(overrides)
        self.settings = Settings(_env_file=None, **fields)  # type: ignore[call-arg]
        services = Services.from_settings(self.settings)
        services.now = self.gcp.now
        self.bot: Bot = build(self.settings, services)
        if alerts and self.bot.alerts is not None:
            self.bot.alerts.start()
        self.server = HttpServer(self.bot, "127.0.0.1", 0, threads=self.settings.worker_threads)
        self._serving = threading.Thread(target=self.server.serve_forever, name="bot-http", daemon=True)
        self._serving.start()
        self.user = SlackUser(self.server.url, self.signing_secret, self.slack)

    def banner(self) -> str:
        s = self.settings
        return BANNER.format(
            slack=self.slack.url,
            gcp=self.gcp.url,
            project=s.gcp_project,
            zones=", ".join(s.tpu_zones),
            vllm=self.vllm.url,
            model=s.vllm_model,
            bot=self.server.url,
            user=DEMO_USER,
            ssh=self.host.port,
            alerts=ALERTS_CHANNEL,
        )

    def close(self) -> None:
        self.user.close()
        self.server.close()
        self.bot.close()
        self.slack.stop()
        self.host.stop()
        self.vllm.stop()
        self.gcp.stop()
        self._state_dir.cleanup()

    def __enter__(self) -> Demo:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
