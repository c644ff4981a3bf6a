"""The docker daemon of the SIMULATED TPU VM (`sim.host`): containers (absent / created / running / exited
/ restarting) with their logs, images (`sim.host.images`), and the `docker inspect|logs|start|stop|restart|
rm|rename|run|exec|pull|image inspect` subcommands the bot sends. A failing container replays a real
failure log from `sim.cases`. A process outside docker may hold the vLLM port (`stale_server`): the
linked container, started, exits at once with vLLM's bind error, while that process (the linked
VllmSimulator) goes on answering. A container run with Docker's gcplogs log driver sends every line it prints
to the linked Cloud Logging of its `gcp-project` (a GcpSimulator), as the driver does, unless the VM's service
account may not write logs (`log_writer: false`): then the driver fails to start. Nothing here runs docker, a
TPU or vLLM.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sim import scenario as scenarios
from sim.cases import missing_case_line, read_case
from sim.gcp import GcpSimulator
from sim.host.bench import bench_serve
from sim.host.container import Container, docker_time, healthy_startup_lines, is_traceback
from sim.host.images import DEFAULT_REGISTRY, Images
from sim.host.shell import NotAllowed
from sim.vllm import VllmSimulator

# The log options Docker's gcplogs driver takes (moby daemon/logger/gcplogs/gcplogging.go, ValidateLogOpts),
# and those of the local copy any driver takes from Docker Engine 20.10 (dual logging,
# https://docs.docker.com/engine/logging/dual-logging/).
GCPLOGS_OPTS = {
    "gcp-project",
    "labels",
    "labels-regex",
    "env",
    "env-regex",
    "gcp-log-cmd",
    "gcp-meta-zone",
    "gcp-meta-name",
    "gcp-meta-id",
}
CACHE_OPTS = {"cache-disabled", "cache-max-size", "cache-max-file", "cache-compress"}
# The driver's Ping (an entries.write) refused, as Cloud Logging refuses a caller without
# logging.logEntries.create (roles/logging.logWriter); moby wraps it when the container's logger starts
# (daemon/container: "failed to initialize logging driver", gcplogging.go: "unable to connect or
# authenticate with Google Cloud Logging").
GCPLOGS_DENIED = (
    "failed to initialize logging driver: unable to connect or authenticate with Google Cloud Logging: rpc "
    "error: code = PermissionDenied desc = Permission 'logging.logEntries.create' denied on resource (or it "
    "may not exist)."
)
# docker run options that may be given more than once.
_REPEATED = {"-e", "--env", "--log-opt", "--label", "-l"}


class DockerEngine:
    """The docker daemon of the simulated VM: its containers and their life, its images, and the `docker`
    subcommands listed in the package docstring of `sim.host`.

    Args:
        config: the host scenario mapping (with DEFAULTS filled in).
        vllm: the VllmSimulator linked to `config["linked_container"]`, or None.
        journal: the VM's journal (unit -> lines); dockerd writes to "docker.service".
        lock: the host simulator's lock; every call happens while it is held (the linked vLLM's exit
            callback takes it itself).
    """

    def __init__(
        self,
        config: dict[str, Any],
        vllm: VllmSimulator | None,
        journal: dict[str, list[str]],
        lock: threading.RLock,
    ) -> None:
        self.config = config
        self.vllm = vllm
        self._journal = journal
        self._lock = lock
        self.containers: dict[str, Container] = {}
        self.run_failing_log: str | None = config["run_failing_log"]
        self._cases = Path(config["cases_dir"]) if config["cases_dir"] else None
        registry = config.get("registry") or DEFAULT_REGISTRY
        self.images = Images(list(config["images"] or []), registry, self._case_lines)
        self.images.rate_limited = bool(config["pull_rate_limited"])
        self.images.disk_full = bool(config.get("disk_full"))
        self.stale_server = bool(config.get("stale_server"))
        self.log_writer = bool(config["log_writer"])
        self.cloud_logging: dict[str, GcpSimulator] = {}  # project -> its Cloud Logging, for gcplogs
        self.runs: list[list[str]] = []  # the arguments of every `docker run`, after `run`
        if vllm is not None:
            vllm.on_exit.append(self._vllm_exited)
        for spec in config["containers"] or []:
            self._load_container(spec)
        self._docker_journal(
            "dockerd started: API listen on /run/docker.sock",
            datetime.now(UTC) + scenarios.duration(str(config["booted"])),
        )

    def crash(self, name: str, case_file: str | Path) -> None:
        """Make a running container exit now (exit code 1) with the case file's log appended (a name: a
        file of `sim.cases`; a Path: that file).

        Raises:
            KeyError: no such container; OSError: the Path cannot be read.
        """
        container = self.containers[name]
        now = datetime.now(UTC)
        lines = (
            case_file.read_text().splitlines() if isinstance(case_file, Path) else self._case_lines(case_file)
        )
        container.write((now, line) for line in lines)
        self._exit(container, 1)

    def state_of(self, name: str) -> str:
        """The container's state ("absent", "created", "running", "exited", "restarting")."""
        container = self.containers.get(name)
        if container is None:
            return "absent"
        self.refresh(container)
        return container.state

    # -- docker commands -----------------------------------------------------------------------------------

    def run(self, sub: str, args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
        """Run `docker SUB ARGS` with the environment `env`: (exit status, stdout, stderr).

        Raises:
            NotAllowed: a subcommand or option the simulator does not serve.
        """
        handlers = {
            "inspect": self._inspect,
            "logs": self._logs,
            "start": self._start_cmd,
            "stop": self._stop_cmd,
            "restart": self._restart_cmd,
            "rm": self._rm_cmd,
            "rename": self._rename_cmd,
            "exec": self._exec_cmd,
            "pull": self._pull_cmd,
            "image": self._image_cmd,
        }
        if sub == "run":
            return self._run_cmd(args, env)
        if sub not in handlers:
            raise NotAllowed(f"docker {sub}")
        return handlers[sub](args)

    @staticmethod
    def _options(
        args: list[str], with_value: set[str], flags: set[str], repeated: dict[str, list[str]] | None = None
    ) -> tuple[dict[str, str], list[str]]:
        """Parse docker-style options up to `--` or the first positional argument; the values of an option
        given more than once (`_REPEATED`) are collected in `repeated`, in order."""
        opts: dict[str, str] = {}
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "--":
                return opts, args[i + 1 :]
            if not arg.startswith("-"):
                return opts, args[i:]
            name, eq, value = arg.partition("=")
            if name in with_value:
                if not eq:
                    if i + 1 >= len(args):
                        raise NotAllowed(f"docker option {name} without a value")
                    i += 1
                    value = args[i]
                if repeated is not None and name in _REPEATED:
                    repeated.setdefault(name, []).append(value)
                opts[name] = value
            elif name in flags and not eq:
                opts[name] = ""
            else:
                raise NotAllowed(f"docker option {name}")
            i += 1
        return opts, []

    def _target(self, names: list[str]) -> tuple[str, Container | None]:
        """The one container a command names: (its name, the container or None when there is none)."""
        if len(names) != 1:
            raise NotAllowed("docker needs exactly one container name")
        return names[0], self.containers.get(names[0])

    @staticmethod
    def _no_such(name: str) -> tuple[int, str, str]:
        return 1, "", f"Error response from daemon: No such container: {name}\n"

    def _inspect(self, args: list[str]) -> tuple[int, str, str]:
        opts, names = self._options(args, {"--type"}, set())
        if opts.get("--type", "container") != "container":
            raise NotAllowed("docker inspect --type")
        name, c = self._target(names)
        if c is None:
            return 1, "[]\n", f"Error: No such container: {name}\n"
        item = {
            "Id": c.id,
            "Created": docker_time(c.created),
            "Path": c.command[0] if c.command else "vllm",
            "Args": c.command[1:],
            "State": {
                "Status": c.state,
                "Running": c.running,
                "Paused": False,
                "Restarting": c.state == "restarting",
                "OOMKilled": False,
                "Dead": False,
                "Pid": 4242 if c.running else 0,
                "ExitCode": c.exit_code,
                "Error": "",
                "StartedAt": docker_time(c.started),
                "FinishedAt": docker_time(c.finished),
            },
            "Image": "sha256:" + secrets.token_hex(32),
            "Name": "/" + c.name,
            "RestartCount": c.restart_count,
            "HostConfig": {
                "Privileged": True,
                "NetworkMode": "host",
                "ShmSize": 16 * 1024**3,
                "LogConfig": {"Type": c.log_driver, "Config": dict(c.log_opts)},
            },
            "Config": {"Image": c.image, "Cmd": c.command, "Labels": dict(c.labels)},
        }
        return 0, json.dumps([item], indent=4) + "\n", ""

    def _logs(self, args: list[str]) -> tuple[int, str, str]:
        opts, names = self._options(args, {"--tail", "--since", "-n"}, {"-t", "--timestamps"})
        name, c = self._target(names)
        if c is None:
            return self._no_such(name)
        lines = c.logs
        since = opts.get("--since")
        if since:
            match = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", since)
            if not match or not since:
                return 1, "", f'invalid value for "since": {since}\n'
            h, m, s = (int(g or 0) for g in match.groups())
            cutoff = datetime.now(UTC) - timedelta(hours=h, minutes=m, seconds=s)
            lines = [(t, line) for t, line in lines if t >= cutoff]
        tail = opts.get("--tail", opts.get("-n", "all"))
        if tail != "all":
            count = int(tail)
            lines = lines[-count:] if count > 0 else []
        timed = "-t" in opts or "--timestamps" in opts  # docker's RFC3339Nano prefix, on both streams
        shown = [(f"{t:%Y-%m-%dT%H:%M:%S.%f}000Z {line}" if timed else line, line) for t, line in lines]
        out = "".join(text + "\n" for text, line in shown if not is_traceback(line))
        err = "".join(text + "\n" for text, line in shown if is_traceback(line))
        return 0, out, err  # vLLM's logger writes stdout, Python tracebacks stderr; the bot merges with 2>&1

    def _start_cmd(self, args: list[str]) -> tuple[int, str, str]:
        _, names = self._options(args, set(), set())
        name, c = self._target(names)
        if c is None:
            return (
                1,
                "",
                f"Error response from daemon: No such container: {name}\n"
                f"Error: failed to start containers: {name}\n",
            )
        if not c.running:
            refused = self._logger_refusal(c)
            if refused:
                failed = f"Error: failed to start containers: {name}\n"
                return 1, "", f"Error response from daemon: {refused}\n{failed}"
            c.restart_count = 0  # as docker restart (moby daemon/start.go)
            self._boot(c)
        return 0, name + "\n", ""

    def _stop_cmd(self, args: list[str]) -> tuple[int, str, str]:
        _, names = self._options(args, {"--time", "-t"}, set())
        name, c = self._target(names)
        if c is None:
            return self._no_such(name)
        if c.running:
            c.write([(datetime.now(UTC), "(APIServer pid=1) INFO:     Shutting down")])
            self._exit(c, 0)
        return 0, name + "\n", ""

    def _restart_cmd(self, args: list[str]) -> tuple[int, str, str]:
        _, names = self._options(args, {"--time", "-t"}, set())
        name, c = self._target(names)
        if c is None:
            return self._no_such(name)
        if c.running:
            self._exit(c, 0)
        c.restart_count = 0  # a manual restart resets the count (moby daemon/start.go, see sim.host)
        self._boot(c)
        return 0, name + "\n", ""

    def _rm_cmd(self, args: list[str]) -> tuple[int, str, str]:
        opts, names = self._options(args, set(), {"-f", "--force"})
        name, c = self._target(names)
        if c is None:
            return (0, "", "") if opts else self._no_such(name)
        if c.running and not opts:
            return (
                1,
                "",
                f'Error response from daemon: cannot remove container "/{name}": container is running: '
                "stop the container before removing or force remove\n",
            )
        if c.running:
            self._exit(c, 137)
        del self.containers[name]
        self._docker_journal(f"container {c.id[:12]} ({name}) removed")
        return 0, name + "\n", ""

    def _rename_cmd(self, args: list[str]) -> tuple[int, str, str]:
        _, names = self._options(args, set(), set())
        if len(names) != 2:
            raise NotAllowed("docker rename needs CONTAINER NEW_NAME")
        old, new = names
        c = self.containers.get(old)
        if c is None:
            return self._no_such(old)
        if new in self.containers:
            return (
                1,
                "",
                "Error response from daemon: Error when allocating new name: Conflict. The container name "
                f'"/{new}" is already in use by container "{self.containers[new].id}". You have to remove '
                "(or rename) that container to be able to reuse that name.\n",
            )
        del self.containers[old]
        c.name = new
        self.containers[new] = c
        self._docker_journal(f"container {c.id[:12]} renamed from {old} to {new}")
        return 0, "", ""

    def _pull_cmd(self, args: list[str]) -> tuple[int, str, str]:
        _, rest = self._options(args, set(), {"-q", "--quiet"})
        if len(rest) != 1:
            raise NotAllowed("docker pull needs exactly one image")
        return self.images.pull(rest[0])

    def _image_cmd(self, args: list[str]) -> tuple[int, str, str]:
        if args[:1] != ["inspect"]:
            raise NotAllowed("docker image (only inspect)")
        _, rest = self._options(args[1:], set(), set())
        if len(rest) != 1:
            raise NotAllowed("docker image inspect needs exactly one image")
        return self.images.inspect(rest[0])

    def _run_cmd(self, args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
        repeated: dict[str, list[str]] = {}
        opts, rest = self._options(
            args,
            {"--name", "--net", "--network", "--shm-size", "-v", "--volume", "--log-driver", *_REPEATED},
            {"-d", "--detach", "--privileged", "--rm", "-t", "-i"},
            repeated,
        )
        if not rest:
            raise NotAllowed("docker run without an image")
        self.runs.append(list(args))
        image, command = rest[0], rest[1:]
        name = opts.get("--name") or f"sim_{secrets.token_hex(3)}"
        driver = opts.get("--log-driver", "json-file")
        log_opts = dict(opt.partition("=")[::2] for opt in repeated.get("--log-opt", []))
        invalid = self._log_opts_refusal(driver, log_opts)
        if invalid:  # checked when the container is created: none is
            return 125, "", f"docker: Error response from daemon: {invalid}.\nSee 'docker run --help'.\n"
        if name in self.containers:
            existing = self.containers[name]
            return (
                125,
                "",
                f'docker: Error response from daemon: Conflict. The container name "/{name}" is already '
                f'in use by container "{existing.id}". You have to remove (or rename) that container to be '
                "able to reuse that name.\nSee 'docker run --help'.\n",
            )
        if not self.images.has(image):
            refused = self.images.run_pull(image)
            if refused is not None:
                return refused[0], "", refused[1]
        labels = repeated.get("--label", []) + repeated.get("-l", [])
        c = Container(name=name, image=image, command=command, log_driver=driver, log_opts=log_opts)
        c.labels = dict(label.partition("=")[::2] for label in labels)
        if command[:2] == ["vllm", "serve"] and len(command) > 2:
            c.model = command[2]
            flags = {
                command[i]: command[i + 1] for i in range(3, len(command) - 1) if command[i].startswith("--")
            }
            c.max_model_len = int(flags.get("--max-model-len", c.max_model_len))
            c.tensor_parallel_size = int(flags.get("--tensor-parallel-size", c.tensor_parallel_size))
            c.port = int(flags.get("--port", c.port))
        passed = set(repeated.get("-e", []) + repeated.get("--env", []))
        c.has_token = bool(env.get("HF_TOKEN")) and "HF_TOKEN" in passed
        c.api_key = env.get("VLLM_API_KEY") if "VLLM_API_KEY" in passed else None
        if self.vllm is not None and name == self.config["linked_container"]:
            self.vllm.config["api_key"] = c.api_key  # vLLM serves with --api-key from VLLM_API_KEY
        c.failing_log = self.run_failing_log
        self.containers[name] = c
        logger = self._logger_refusal(c)
        if logger:  # created (the CLI prints its id), then its logger fails as it starts: it stays "created"
            return 125, c.id + "\n", f"docker: Error response from daemon: {logger}\n"
        self._boot(c)
        return 0, c.id + "\n", ""

    @staticmethod
    def _log_opts_refusal(driver: str, log_opts: dict[str, str]) -> str:
        """Why the daemon refuses the log options of a container it is asked to create ("" when none)."""
        if driver != "gcplogs" and (driver != "json-file" or log_opts):
            raise NotAllowed(f"docker run --log-driver {driver} with options {sorted(log_opts)}")
        unknown = sorted(set(log_opts) - GCPLOGS_OPTS - CACHE_OPTS)
        return f'"{unknown[0]}" is not a valid option for the gcplogs driver' if unknown else ""

    def _logger_refusal(self, c: Container) -> str:
        """Why the container's log driver cannot start ("" when it can): gcplogs on a VM whose service
        account may not write logs."""
        return GCPLOGS_DENIED if c.log_driver == "gcplogs" and not self.log_writer else ""

    def _log_sink(self, c: Container) -> Callable[[list[tuple[datetime, str]]], None] | None:
        """Where the container's log driver sends what it prints, from its start: for gcplogs, the linked
        Cloud Logging of its `gcp-project` (None without one: the lines leave the VM for a project no
        simulator serves). The entries carry the labels `--log-opt labels=` names, the container's name,
        image and creation time, and this VM's zone and instance name (gcplogging.go, from the metadata
        server)."""
        cloud = self.cloud_logging.get(c.log_opts.get("gcp-project", ""))
        if c.log_driver != "gcplogs" or cloud is None:
            return None
        named = [key for key in c.log_opts.get("labels", "").split(",") if key in c.labels]
        metadata = {key: c.labels[key] for key in named}
        container = {"name": c.name, "image": c.image, "created": c.created}
        zone, instance = str(self.config["zone"]), str(self.config["hostname"])

        def send(lines: list[tuple[datetime, str]]) -> None:
            cloud.write_container_lines(
                lines, container=container, zone=zone, instance_name=instance, labels=metadata
            )

        return send

    def _exec_cmd(self, args: list[str]) -> tuple[int, str, str]:
        _, rest = self._options(args, set(), {"-i", "-t"})
        if not rest:
            raise NotAllowed("docker exec without a container")
        name, command = rest[0], rest[1:]
        c = self.containers.get(name)
        if c is None:
            return self._no_such(name)
        if command[:3] != ["vllm", "bench", "serve"]:
            raise NotAllowed("docker exec (only vllm bench serve)")
        if not c.running:
            return 1, "", f"Error response from daemon: container {c.id} is not running\n"
        engine_dead = self.vllm is not None and self.vllm.mode == "engine-dead"
        return bench_serve(c, command[3:], self.config, reachable=self._ready(c) and not engine_dead)

    # -- container life ------------------------------------------------------------------------------------

    def _load_container(self, spec: dict[str, Any]) -> None:
        now = datetime.now(UTC)
        state = str(spec.get("state", "running"))
        if state == "absent":
            return
        c = Container(
            name=str(spec["name"]),
            image=str(spec.get("image", "vllm/vllm-tpu:gemma4")),
            state=state,
            exit_code=int(spec.get("exit_code", 0)),
            restart_count=int(spec.get("restart_count", 0)),
            model=str(spec.get("model", "google/gemma-4-31B-it")),
            max_model_len=int(spec.get("max_model_len", 16384)),
            tensor_parallel_size=int(spec.get("tensor_parallel_size", 8)),
            port=int(spec.get("port", 8000)),
            failing_log=spec.get("failing_log"),
            # booted by the startup script, with gcplogs unless Docker refused it; no project option, so
            # nothing it prints is sent again to the linked Cloud Logging, which holds its output already
            log_driver=str(spec.get("log_driver", "gcplogs")),
        )
        c.command = ["vllm", "serve", c.model, "--max-model-len", str(c.max_model_len)]
        started = now + scenarios.duration(spec.get("started", "-1h"))
        c.created = started - timedelta(seconds=5)
        if state != "created":
            c.started = started
            # history: a real boot takes about 10 minutes (docs/vllm.md §4.1); never stamp lines in the future
            boot = max(0.0, min(600.0, (now - started).total_seconds() - 1))
            early = [item for item in self._startup(c, started, boot) if item[0] == started]
            if c.failing_log:
                finished = now + scenarios.duration(spec.get("finished", "-1m"))
                c.logs = early + [(finished, line) for line in self._case_lines(c.failing_log)]
                for _ in range(c.restart_count if state == "restarting" else 0):
                    c.logs += early + [(finished, line) for line in self._case_lines(c.failing_log)]
                if state == "exited":
                    c.finished = finished
                    c.exit_code = int(spec.get("exit_code", 1))
            else:
                c.logs = self._startup(c, started, boot)
                if self.vllm is not None and c.name == self.config["linked_container"]:
                    self.vllm.process_started = started  # the API server is the container's process
                if state == "exited":
                    c.finished = now + scenarios.duration(spec.get("finished", "-1m"))
                    c.logs.append((c.finished, "(APIServer pid=1) INFO:     Shutting down"))
        self.containers[c.name] = c

    def _startup(self, c: Container, started: datetime, boot_s: float) -> list[tuple[datetime, str]]:
        return healthy_startup_lines(
            started,
            model=c.model,
            max_model_len=c.max_model_len,
            tensor_parallel_size=c.tensor_parallel_size,
            port=c.port,
            boot_s=boot_s,
        )

    def _boot(self, c: Container) -> None:
        """Start a container: early start-up lines now; later the rest (healthy) or the failing log."""
        now, mono = datetime.now(UTC), time.monotonic()
        c.state, c.started, c.finished, c.exit_code = "running", now, None, 0
        c.pending = []
        c.fail_at = c.ready_at = None
        self._docker_journal(f"container {c.id[:12]} ({c.name}) started")
        boot_s = float(self.config["boot_s"])
        lines = self._startup(c, now, boot_s)
        failing = c.failing_log
        holder = next(
            (o for o in self.containers.values() if o is not c and o.running and o.image.startswith("vllm/")),
            None,
        )
        if holder is not None:
            failing = "vllm-tpu-device-busy.log"  # only one process can own the TPU (docs/vllm.md §4.3)
        elif self._port_held(c):
            failing = "vllm-port-in-use.log"  # vLLM binds its port before it loads anything
        elif not c.has_token:
            failing = "vllm-hf-gated-repo-401.log"
        early = [(t, line) for t, line in lines if t == now]
        c.log_sink = self._log_sink(c)  # the logger starts with the container
        c.write(early)
        link = self.vllm is not None and c.name == self.config["linked_container"]
        if failing:
            delay = float(self.config["fail_after_s"])
            due = now + timedelta(seconds=delay)
            c.pending = [(mono + delay, due, line) for line in self._case_lines(failing)]
            c.fail_at = mono + delay
            c.failing_log = failing
            if link and self.vllm is not None and not self._port_held(c):
                self.vllm.stop()
            if delay <= 0:
                self.refresh(c)
        else:
            c.pending = [(mono + boot_s, t, line) for t, line in lines if t != now]
            c.ready_at = mono + boot_s
            if link and self.vllm is not None:
                self.vllm.set_mode("booting", boot_s=boot_s)
                self.vllm.restart_process(
                    now
                )  # the API server is the container's main process: counters at 0

    def _exit(self, c: Container, code: int) -> None:
        c.state, c.exit_code, c.finished = "exited", code, datetime.now(UTC)
        c.pending, c.fail_at, c.ready_at = [], None, None
        self._docker_journal(f"container {c.id[:12]} ({c.name}) exited with code {code}")
        if self.vllm is not None and c.name == self.config["linked_container"] and not self._port_held(c):
            self.vllm.stop()

    def _port_held(self, c: Container) -> bool:
        """Whether a process outside docker holds the linked container's port (then the linked
        VllmSimulator is that process, and the container's life does not stop it)."""
        return self.stale_server and c.name == self.config["linked_container"]

    def _vllm_exited(self) -> None:
        """The linked vLLM API server stopped after its engine died: its container exits with it."""
        with self._lock:
            c = self.containers.get(str(self.config["linked_container"]))
            if c is None or not c.running:
                return
            now = datetime.now(UTC)
            c.write(
                [
                    (now, "(APIServer pid=1) ERROR: EngineCore encountered an issue. Shutting down."),
                    (now, "(APIServer pid=1) INFO:     Shutting down"),
                ]
            )
            self._exit(c, 1)

    def refresh(self, c: Container) -> None:
        """Apply what is due by now to `c`: boot lines printed, a failing container exited."""
        mono = time.monotonic()
        due = [item for item in c.pending if item[0] <= mono]
        if due:
            c.pending = [item for item in c.pending if item[0] > mono]
            c.write((when, line) for _, when, line in due)
        if c.fail_at is not None and mono >= c.fail_at and c.running:
            c.write((when, line) for _, when, line in c.pending)
            self._exit(c, 1)

    def _ready(self, c: Container) -> bool:
        return (
            c.state == "running"
            and c.fail_at is None
            and (c.ready_at is None or time.monotonic() >= c.ready_at)
        )

    def _case_lines(self, case_file: str) -> list[str]:
        text = read_case(case_file, self._cases)
        return [missing_case_line(case_file, self._cases)] if text is None else text.splitlines()

    def _docker_journal(self, message: str, when: datetime | None = None) -> None:
        when = when or datetime.now(UTC)
        line = (
            f"{when.strftime('%b %d %H:%M:%S')} {self.config['hostname']} dockerd[812]: "
            f'time="{when.strftime("%Y-%m-%dT%H:%M:%S.%f")}Z" level=info msg="{message}"'
        )
        self._journal.setdefault("docker.service", []).append(line)
