"""The SIMULATED TPU VM's SSH server and command interpreter (`HostSimulator`; see the package docstring of
`sim.host` for the command shapes and scenario keys)."""

from __future__ import annotations

import contextlib
import io
import logging
import re
import secrets
import shlex
import socket
import threading
import time
from pathlib import Path
from typing import Any

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from paramiko.common import (
    AUTH_FAILED,
    AUTH_SUCCESSFUL,
    OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED,
    OPEN_SUCCEEDED,
)

from sim.gcp import GcpSimulator
from sim.host.docker import DockerEngine
from sim.host.shell import NOT_ALLOWED, NotAllowed, ShellExit, Tok, expands, lex, simple_command, split_at
from sim.vllm import VllmSimulator

log = logging.getLogger(__name__)


DEFAULTS: dict[str, Any] = {
    "hostname": "t1v-n-gemma4-w-0",
    "booted": "-2h",
    "user": "tpu-chatops",
    "boot_s": 3.0,
    "fail_after_s": 0.5,
    "linked_container": "vllm",
    "secrets": ["hf-token"],
    "secret_values": {},
    "images": ["vllm/vllm-tpu:gemma4"],
    "pull_rate_limited": False,
    "disk_full": False,
    "registry": None,
    "stale_server": False,
    "run_failing_log": None,
    "cases_dir": None,
    "kv_capacity_tokens": 262144,
    "bench": {"prefill_tok_per_s": 40000.0, "decode_step_ms": 18.0, "decode_ms_per_seq": 0.12},
    "containers": [],
    "journal": {},
    "docker_group": True,
    "sudo": "nopasswd",
    "node_id": "gemma4-qr-node",
    "worker_id": 0,
    "zone": "us-east5-a",
    "log_writer": True,
}

# The TPU VM's tpu-env instance metadata attribute, as `curl -sf --max-time 10 -H 'Metadata-Flavor: Google'`
# asks the metadata server for it (the startup script and the bot read it: ops.vllm.dockerrun.TPU_ENV_READ).
METADATA_HEADER = "Metadata-Flavor: Google"
TPU_ENV_URL = "http://metadata.google.internal/computeMetadata/v1/instance/attributes/tpu-env"

# The Docker CLI's error when the user may not open the daemon socket (docs.docker.com/engine/install/
# linux-postinstall, "Manage Docker as a non-root user").
DOCKER_SOCKET_DENIED = (
    "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: "
    'Get "http://%2Fvar%2Frun%2Fdocker.sock/v1.47/containers/json": dial unix /var/run/docker.sock: '
    "connect: permission denied\n"
)
SUDO_PASSWORD_REQUIRED = "sudo: a password is required\n"  # sudo -n without NOPASSWD (sudo(8))


def generate_ed25519_key() -> paramiko.Ed25519Key:
    """A fresh Ed25519 private key as a paramiko key (for host keys and test clients)."""
    pem = (
        Ed25519PrivateKey.generate()
        .private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
        .decode()
    )
    return paramiko.Ed25519Key(file_obj=io.StringIO(pem))


class HostSimulator:
    """A SIMULATED TPU VM: an SSH server (paramiko) on a local port answering the bot's docker commands.

    Args:
        scenario_host: the scenario's `host` mapping (keys in the docstring of `sim.host`; missing keys take
            DEFAULTS).
        host: address to bind.
        port: port to bind; 0 picks a free one (read it back from `port`).
        vllm: an optional VllmSimulator linked to `linked_container`: docker stop/rm (or a failure) make it
            refuse connections; docker start/restart/run put it in "booting" for `boot_s` seconds, then ready.
        host_key: the SSH host key to present (default: a fresh Ed25519 key); VMs given one key can be pinned
            by one `SSH_HOST_KEYS` setting, as in the demo, where every deployment's VM shares it.
    """

    def __init__(
        self,
        scenario_host: dict[str, Any] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        vllm: VllmSimulator | None = None,
        host_key: paramiko.PKey | None = None,
    ) -> None:
        self.config: dict[str, Any] = {**DEFAULTS, **(scenario_host or {})}
        self.host = host
        self._port = port
        self.vllm = vllm
        self.user = str(self.config["user"])
        self.commands: list[str] = []
        self._host_key = host_key or generate_ed25519_key()
        self._authorized: list[bytes] = []
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._transports: set[paramiko.Transport] = set()
        self._secrets = set(self.config["secrets"] or [])
        self._journal: dict[str, list[str]] = {
            unit: list(lines) for unit, lines in (self.config["journal"] or {}).items()
        }
        self._reject_auth = False
        self._command_delay_s = 0.0
        self.docker = DockerEngine(self.config, vllm, self._journal, self._lock)

    # -- lifecycle -----------------------------------------------------------------------------------------

    def start(self) -> HostSimulator:
        """Listen and serve SSH in a daemon thread (returns self); syncs a linked VllmSimulator."""
        if self._listener is not None:
            return self
        self._stopping.clear()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self._port))
        listener.listen(16)
        listener.settimeout(0.1)
        self._port = listener.getsockname()[1]
        self._listener = listener
        self._thread = threading.Thread(target=self._accept_loop, name=f"host-sim-{self._port}", daemon=True)
        self._thread.start()
        with self._lock:
            linked = self.docker.containers.get(str(self.config["linked_container"]))
            if self.vllm is not None and (linked is None or not linked.running or linked.failing_log):
                self.vllm.stop()
        return self

    def stop(self) -> None:
        """Stop listening and close every SSH connection."""
        self._stopping.set()
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            transports, self._transports = list(self._transports), set()
        for transport in transports:
            transport.close()

    def __enter__(self) -> HostSimulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port (0 before `start()` when constructed with port=0)."""
        return self._port

    @property
    def host_key(self) -> paramiko.PKey:
        """The public part of the generated host key."""
        return paramiko.PKey.from_type_string(self._host_key.get_name(), self._host_key.asbytes())

    @property
    def pinned_host_keys(self) -> dict[str, str]:
        """{key type: base64}, ready for `RemoteHost(pinned_host_keys=...)`."""
        return {self._host_key.get_name(): self._host_key.get_base64()}

    def known_hosts_line(self) -> str:
        """An OpenSSH known_hosts line for this server ("[host]:port type base64")."""
        name = self.host if self._port == 22 else f"[{self.host}]:{self._port}"
        return f"{name} {self._host_key.get_name()} {self._host_key.get_base64()}"

    # -- controls ------------------------------------------------------------------------------------------

    def authorize(self, pkey: paramiko.PKey) -> None:
        """Accept this public key for the configured user."""
        with self._lock:
            self._authorized.append(pkey.asbytes())

    def set_run_failing_log(self, case_file: str | None) -> None:
        """Make every container created from now on fail with this case file's log (None: healthy)."""
        with self._lock:
            self.docker.run_failing_log = case_file

    def set_pull_rate_limited(self, flag: bool) -> None:
        """Make pulls of images not yet on the VM fail with Docker Hub's rate-limit error."""
        with self._lock:
            self.docker.images.rate_limited = flag

    def set_disk_full(self, flag: bool) -> None:
        """Make pulls fail with a full Docker data root ("no space left on device")."""
        with self._lock:
            self.docker.images.disk_full = flag

    def set_stale_server(self, flag: bool) -> None:
        """True: a process outside docker holds the vLLM port, and the linked VllmSimulator is that process:
        it keeps answering whatever the linked container does, and the linked container, started, exits
        with vLLM's bind error (vllm-port-in-use.log)."""
        with self._lock:
            self.docker.stale_server = flag

    def crash(self, name: str, case_file: str | Path) -> None:
        """Make a running container exit now (exit code 1) with the case file's log appended.

        Args:
            name: the container.
            case_file: a case file of `sim.cases` by name, or the path of another file (a test's own case).

        Raises:
            KeyError: no such container.
        """
        with self._lock:
            self.docker.crash(name, case_file)

    def set_reject_auth(self, flag: bool) -> None:
        """True: every public-key authentication fails (as if the bot's key were removed from the VM)."""
        with self._lock:
            self._reject_auth = flag

    def set_command_delay(self, seconds: float) -> None:
        """Seconds every exec request waits before it runs (0: none); for command-timeout faults. The wait
        ends early when the client closes the channel or the simulator stops."""
        with self._lock:
            self._command_delay_s = max(0.0, float(seconds))

    def set_log_writer(self, flag: bool) -> None:
        """False: the VM's service account may not write Cloud Logging (no roles/logging.logWriter), so
        Docker's gcplogs driver cannot start: `docker run --log-driver gcplogs` leaves its container
        "created" and exits 125 with the driver's error."""
        with self._lock:
            self.docker.log_writer = flag

    def link_cloud_logging(self, cloud: GcpSimulator) -> None:
        """Send the lines of containers run with Docker's gcplogs driver and `--log-opt gcp-project=` this
        simulator's project to its Cloud Logging, as the driver does (`GcpSimulator.write_container_lines`).
        The VM prints due lines lazily (on its next command); the simulator asks for them before each
        entries.list it answers, so a read finds what the container printed by then."""
        with self._lock:
            self.docker.cloud_logging[cloud.project] = cloud
        cloud.on_log_read(self._print_due)

    def _print_due(self) -> None:
        with self._lock:
            for container in self.docker.containers.values():
                self.docker.refresh(container)

    @property
    def docker_runs(self) -> list[list[str]]:
        """The arguments of every `docker run` the VM received (after `run`), oldest first."""
        with self._lock:
            return [list(args) for args in self.docker.runs]

    def container_state(self, name: str) -> str:
        """The container's state ("absent", "created", "running", "exited", "restarting")."""
        with self._lock:
            return self.docker.state_of(name)

    # -- SSH server ----------------------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            listener = self._listener
            if listener is None:
                return
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        transport = paramiko.Transport(sock)
        transport.add_server_key(self._host_key)
        with self._lock:
            self._transports.add(transport)
        try:
            transport.start_server(server=_Interface(self))
        except (paramiko.SSHException, EOFError, OSError) as exc:
            log.debug("host-sim: SSH negotiation failed: %s", exc)
            transport.close()
            with self._lock:
                self._transports.discard(transport)

    def _is_authorized(self, username: str, key: paramiko.PKey) -> bool:
        with self._lock:
            if self._reject_auth:
                return False
            return username == self.user and key.asbytes() in self._authorized

    def _exec_channel(self, channel: paramiko.Channel, command: str) -> None:
        try:
            with self._lock:
                delay = self._command_delay_s
            deadline = time.monotonic() + delay
            while time.monotonic() < deadline and not channel.closed and not self._stopping.is_set():
                time.sleep(0.05)
            if channel.closed:
                return
            status, out, err = self.execute(command)
            channel.sendall(out.encode())
            channel.sendall_stderr(err.encode())
            channel.send_exit_status(status)
            channel.shutdown_write()
            time.sleep(0.05)  # let the exec reply go out before the close
        except (OSError, EOFError, paramiko.SSHException) as exc:
            log.debug("host-sim: channel failed: %s", exc)
        finally:
            with contextlib.suppress(Exception):
                channel.close()

    # -- command interpreter -------------------------------------------------------------------------------

    def execute(self, command: str) -> tuple[int, str, str]:
        """Run one command line as the simulated VM would; records it in `commands`.

        Returns:
            (exit status, stdout, stderr). Unknown shapes: (127, "", "...: command not allowed in simulator").
        """
        with self._lock:
            self.commands.append(command)
            for container in self.docker.containers.values():
                self.docker.refresh(container)
            try:
                tokens = lex(command)
                return self._run_list(tokens)
            except (NotAllowed, ValueError) as exc:
                return 127, "", f"bash: {exc}: {NOT_ALLOWED}\n"
            except ShellExit as exc:
                return exc.status, "", ""

    def _run_list(self, tokens: list[Tok]) -> tuple[int, str, str]:
        env: dict[str, str] = {}
        out_all: list[str] = []
        err_all: list[str] = []
        status = 0
        for statement in split_at(tokens, ";"):
            if not statement:
                continue
            chain = split_at(statement, "||")
            for k, part in enumerate(chain):
                if any(t.op and t.raw == "&&" for t in part):
                    raise NotAllowed("&&")
                try:
                    status, out, err = self._run_pipeline(part, env)
                except ShellExit as exc:
                    return exc.status, "".join(out_all), "".join(err_all)
                out_all.append(out)
                err_all.append(err)
                if status == 0 and k < len(chain) - 1:
                    break
        return status, "".join(out_all), "".join(err_all)

    def _run_pipeline(self, tokens: list[Tok], env: dict[str, str]) -> tuple[int, str, str]:
        stages = [simple_command(part) for part in split_at(tokens, "|")]
        stdin = ""
        err_all = ""
        status, out = 0, ""
        for stage in stages:
            status, out, err = self._run_simple(stage.words, env, stdin)
            if stage.stderr_to_stdout:
                out, err = out + err, ""
            err_all += err
            stdin = out
        return status, out, err_all

    def _run_simple(self, words: list[Tok], env: dict[str, str], stdin: str) -> tuple[int, str, str]:
        first = words[0]
        substitution = re.fullmatch(r'(HF_TOKEN|VLLM_API_KEY)="\$\((.*)\)"', first.raw)
        if substitution and len(words) == 1:
            return self._read_secret(shlex.split(substitution.group(2)), env, substitution.group(1))
        if any(expands(w.raw) for w in words):
            raise NotAllowed("shell expansion")
        args = [w.word for w in words]
        if args[0] == "export" and args[1:] and set(args[1:]) <= {"HF_TOKEN", "VLLM_API_KEY"}:
            return 0, "", ""
        if args[0] == "exit" and len(args) == 2 and args[1].isdigit():
            raise ShellExit(int(args[1]))
        keep_token = True
        root = False
        if args[0] == "sudo":
            if args[1:2] != ["-n"]:
                raise NotAllowed("sudo without -n")
            if self.config["sudo"] != "nopasswd":
                return 1, "", SUDO_PASSWORD_REQUIRED
            args, root = args[2:], True
            keep_token = False  # sudo resets the environment...
            if args and args[0] in ("--preserve-env=HF_TOKEN", "--preserve-env=HF_TOKEN,VLLM_API_KEY"):
                args, keep_token = args[1:], True  # ...unless asked to keep it
        if not args:
            raise NotAllowed("sudo")
        if args[0] == "docker" and len(args) > 1:
            if not root and not self.config["docker_group"]:
                return 1, "", DOCKER_SOCKET_DENIED
            kept = env if keep_token else {}
            return self.docker.run(args[1], args[2:], kept)
        if args[0] == "journalctl":
            return self._journalctl(args[1:])
        if args[0] == "curl":
            return self._tpu_env(args[1:])
        if args[0] == "grep":
            return self._grep(args[1:], stdin)
        raise NotAllowed(args[0])

    def _read_secret(self, argv: list[str], env: dict[str, str], variable: str) -> tuple[int, str, str]:
        prefix = ["gcloud", "secrets", "versions", "access", "latest"]
        if argv[:5] != prefix or len(argv) != 6 or not argv[5].startswith("--secret="):
            raise NotAllowed("gcloud")
        name = argv[5].split("=", 1)[1]
        if name not in self._secrets:
            return (
                1,
                "",
                "ERROR: (gcloud.secrets.versions.access) NOT_FOUND: Secret "
                f"[projects/demo-project/secrets/{name}] not found or has no versions.\n",
            )
        if variable == "VLLM_API_KEY":
            values = self.config.get("secret_values") or {}
            env[variable] = str(values.get(name) or secrets.token_hex(16))
        else:
            env[variable] = "hf_SIMULATED" + secrets.token_hex(8)
        return 0, "", ""

    def _tpu_env(self, args: list[str]) -> tuple[int, str, str]:
        """`curl -sf --max-time 10 -H 'Metadata-Flavor: Google' TPU_ENV_URL`: the TPU runtime's lines
        (`KEY: 'value'`); a VM without a node id has no such attribute: HTTP 404, which `-f` makes exit 22
        and `-s` keeps silent (curl(1), EXIT CODES)."""
        if args != ["-sf", "--max-time", "10", "-H", METADATA_HEADER, TPU_ENV_URL]:
            raise NotAllowed("curl (only the metadata server's tpu-env attribute)")
        node = self.config["node_id"]
        if not node:
            return 22, "", ""
        fields = {"NODE_ID": node, "WORKER_ID": self.config["worker_id"], "ZONE": self.config["zone"]}
        return 0, "".join(f"{key}: '{value}'\n" for key, value in fields.items()), ""

    def _grep(self, args: list[str], stdin: str) -> tuple[int, str, str]:
        if len(args) != 3 or args[:2] != ["-F", "-e"]:
            raise NotAllowed("grep (only grep -F -e TEXT)")
        text = args[2]
        kept = [line for line in stdin.splitlines() if text in line]
        return (0 if kept else 1), "".join(line + "\n" for line in kept), ""

    def _journalctl(self, args: list[str]) -> tuple[int, str, str]:
        unit, count, pager = None, 10, False
        i = 0
        while i < len(args):
            if args[i] == "-u" and i + 1 < len(args):
                unit, i = args[i + 1], i + 2
            elif args[i] == "-n" and i + 1 < len(args) and args[i + 1].isdigit():
                count, i = int(args[i + 1]), i + 2
            elif args[i] == "--no-pager":
                pager, i = True, i + 1
            else:
                raise NotAllowed(f"journalctl {args[i]}")
        if unit is None or not pager:
            raise NotAllowed("journalctl (only -u UNIT -n N --no-pager)")
        if "." not in unit:
            unit += ".service"
        lines = self._journal.get(unit, [])[-count:] if count else []
        if not lines:
            return 0, "-- No entries --\n", ""
        return 0, "".join(line + "\n" for line in lines), ""


class _Interface(paramiko.ServerInterface):
    """paramiko server callbacks: public-key auth for one user, session channels, exec requests only."""

    def __init__(self, sim: HostSimulator) -> None:
        self.sim = sim

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        return AUTH_SUCCESSFUL if self.sim._is_authorized(username, key) else AUTH_FAILED

    def check_channel_request(self, kind: str, chanid: int) -> int:
        if kind == "session":
            return OPEN_SUCCEEDED
        return OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        text = command.decode("utf-8", "replace") if isinstance(command, bytes) else str(command)
        threading.Thread(target=self.sim._exec_channel, args=(channel, text), daemon=True).start()
        return True
