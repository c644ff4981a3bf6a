"""The local demo: SIMULATED Slack, Google Cloud and vLLM on 127.0.0.1, and the real bot in HTTP mode."""

from __future__ import annotations

import secrets
import tempfile
import threading
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType
from typing import Any

import paramiko
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bot.config import Settings
from bot.services import Fleet, Services
from bot.slack.app import Bot, HttpServer, build
from ops.store.state import Store
from sim import scenario as scenarios
from sim.console import DEMO_CHANNEL, DEMO_USER, SlackUser
from sim.gcp import GcpSimulator
from sim.history import seed as seed_history
from sim.host import HostSimulator, generate_ed25519_key
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

    `close()` stops everything that was started, in reverse order; a start that fails half-way stops what
    it had started before raising.

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
        self._started = ExitStack()
        try:
            self._start(scenario_path, speed, alerts, overrides)
        except BaseException:
            self._started.close()
            raise

    def _start(
        self, scenario_path: str | Path | None, speed: float | None, alerts: bool, overrides: dict[str, Any]
    ) -> None:
        started = self._started
        self.scenario = scenarios.load(scenario_path)
        self._state_dir = tempfile.TemporaryDirectory(prefix="tpu-chatops-demo-")
        started.callback(self._state_dir.cleanup)
        token = "xoxb-simulated-" + secrets.token_hex(8)
        self.signing_secret = secrets.token_hex(16)
        self.gcp = GcpSimulator(self.scenario, speed=speed)
        self.vllm = VllmSimulator(self.scenario["vllm"], clock=self.gcp.now)
        # One host key for every deployment's simulated VM: the bot pins host keys in one setting.
        host_key = generate_ed25519_key()
        self.host = HostSimulator(self.scenario.get("host"), vllm=self.vllm, host_key=host_key)
        self.host.link_cloud_logging(self.gcp)  # what a container run with gcplogs prints reaches /logs
        # The bot was invited to the demo channel, the alert channel and staging's channel; any other
        # channel is not joined.
        joined = [DEMO_CHANNEL, ALERTS_CHANNEL]
        if "staging" in self.scenario:
            joined.append(self.scenario["staging"]["channel"])
        self.slack = SlackSimulator(token, channels=joined)
        self.slack.workspace.configure(self.scenario.get("slack") or {})
        for simulator in (self.gcp, self.vllm, self.host, self.slack):
            simulator.start()
            started.callback(simulator.stop)
        key_path = Path(self._state_dir.name) / "ssh_key"
        key_path.write_bytes(
            Ed25519PrivateKey.generate().private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
            )
        )
        key_path.chmod(0o600)
        client_key = paramiko.Ed25519Key(filename=str(key_path))
        self.host.authorize(client_key)
        zones = list(self.scenario["google"].get("zones", {})) or ["us-east5-a"]
        self.staging: _Staging | None = None
        if "staging" in self.scenario:
            self.staging = _Staging(self.scenario["staging"], speed, host_key=host_key, client_key=client_key)
            started.callback(self.staging.stop)
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
            "production": False,  # a local demo on simulators, whatever the machine (a Kubernetes pod...)
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
            # A simulated container fails within `fail_after_s` (0.5 s): a restart need not watch it longer.
            "vllm_replace_settle_s": 1.0,
        }
        if self.staging is not None:
            fields["deployments_file"] = self.staging.write_deployments(Path(self._state_dir.name))
        fields.update(overrides)
        self.settings = Settings(_env_file=None, **fields)  # type: ignore[call-arg]
        store = Store(self.settings.state_database_url)

        def services_of(settings: Settings) -> Services:
            services = Services.from_settings(settings, store=store)
            services.now = self.gcp.now  # one simulated clock for every deployment
            return services

        self.fleet = Fleet.from_settings(self.settings, services_of)
        started.callback(store.close)
        for each in self.fleet.services.values():
            started.callback(each.close)
        self.bot: Bot = build(self.settings, self.fleet.first, fleet=self.fleet)
        started.callback(self.bot.close)
        if alerts and self.bot.alerts is not None:
            self.bot.alerts.start()
        if alerts and self.bot.sampler is not None:
            self.bot.sampler.start()
        self._seed_history()
        self.server = HttpServer(self.bot, "127.0.0.1", 0, threads=self.settings.worker_threads)
        self._serving = threading.Thread(target=self.server.serve_forever, name="bot-http", daemon=True)
        self._serving.start()
        started.callback(self._stop_serving)
        self.user = SlackUser(self.server.url, self.signing_secret, self.slack)
        started.callback(self.user.close)

    def _stop_serving(self) -> None:
        self.server.close()
        self._serving.join(timeout=5)

    def _seed_history(self) -> None:
        """SIMULATED past hours of metrics (the scenario's `vllm.history`), so charts show something."""
        if self.bot.sampler is None:
            return
        for name, services in self.fleet.services.items():
            section = (
                self.scenario["vllm"] if services is self.fleet.first else self.scenario["staging"]["vllm"]
            )
            if section.get("history"):
                seed_history(self.bot.sampler.history, name, section["history"], self.gcp.now())

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
        ) + (self.staging.banner() if self.staging is not None else "")

    def close(self) -> None:
        """Stop the bot, its server and the simulators, and delete the demo's state directory."""
        self._started.close()

    def __enter__(self) -> Demo:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class _Staging:
    """The scenario's `staging` deployment: its own SIMULATED Google project, vLLM server and TPU VM (SSH).

    Args:
        spec: the scenario's `staging` section (`host`: its VM, keys as in `sim.host`).
        speed: simulated seconds per real second, as production's.
        host_key: the SSH host key the VM presents (production's: the bot pins one set of host keys).
        client_key: the bot's SSH key, authorized on the VM.
    """

    def __init__(
        self, spec: dict[str, Any], speed: float | None, *, host_key: paramiko.PKey, client_key: paramiko.PKey
    ) -> None:
        self.spec = spec
        self.gcp = GcpSimulator({"project": spec["project"], "google": spec.get("google") or {}}, speed=speed)
        self.vllm = VllmSimulator(spec.get("vllm") or {}, clock=self.gcp.now)
        self.host = HostSimulator(spec.get("host"), vllm=self.vllm, host_key=host_key)
        self.host.link_cloud_logging(self.gcp)
        self.host.authorize(client_key)
        self.gcp.start()
        try:
            self.vllm.start()
            self.host.start()
        except BaseException:
            self.stop()
            raise

    def write_deployments(self, directory: Path) -> str:
        """Write the demo's DEPLOYMENTS_FILE: production (the environment, bound to the console's
        channel) and staging. Returns its path."""
        spec = self.spec
        qr = (spec["google"].get("queued_resources") or [{}])[0]
        staging = {
            "name": "staging",
            "project": spec["project"],
            "zones": list(spec["google"].get("zones") or {}),
            "primary": spec.get("primary", qr.get("name")),
            "accelerator_type": qr.get("node", {}).get("accelerator_type", "v6e-4"),
            "model": self.vllm.config["model"],
            "tensor_parallel_size": spec.get("tensor_parallel_size", 4),
            "max_model_len": self.vllm.config["max_model_len"],
            "vllm_port": int(self.vllm.url.rsplit(":", 1)[1]),
            "google_api_endpoint": self.gcp.url,
            "alert_channel": spec["channel"],
            "channels": [spec["channel"]],
            "ssh_host": self.host.host,
            "ssh_port": self.host.port,
        }
        path = directory / "deployments.yaml"
        document = {"deployments": [{"name": "production", "channels": [DEMO_CHANNEL]}, staging]}
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        return str(path)

    def banner(self) -> str:
        return (
            f"\nSecond deployment `staging` (channel {self.spec['channel']}): "
            f"Google emulator at {self.gcp.url} (project {self.spec['project']}), "
            f"vLLM simulator at {self.vllm.url} "
            f"(model {self.vllm.config['model']}), "
            f"TPU VM SSH simulator at {self.host.host}:{self.host.port} "
            f"(node {self.host.config['node_id']}).\nType `channel {self.spec['channel']}` to talk in its "
            f"channel, `/fleet` to see both."
        )

    def stop(self) -> None:
        self.host.stop()
        self.vllm.stop()
        self.gcp.stop()
