"""A SIMULATED TPU VM reachable over SSH (a paramiko server on 127.0.0.1): for the demo and the tests.

Nothing here runs docker, a TPU or vLLM. The simulator answers the command shapes that
`ops.remote.TEMPLATES` sends (parsed with a small shell-word lexer and `shlex`), keeps a state machine of
docker containers (absent / created / running / exited / restarting), and replays real failure logs from
sim/cases/ (package data) when a scenario says a container fails. Anything else gets exit 127
"command not allowed in simulator". Every command string received is recorded in `commands`.

Supported shapes (an optional `sudo -n [--preserve-env=HF_TOKEN[,VLLM_API_KEY]]` prefix is accepted
everywhere):
    docker inspect --type container -- NAME
    docker logs --tail N [--since DURATION] -- NAME 2>&1 [| grep -F -e TEXT]
    docker start|stop [--time N]|restart [--time N]|rm -f -- NAME
    HF_TOKEN="$(gcloud secrets versions access latest --secret=S)" || exit 3; export HF_TOKEN;
        [VLLM_API_KEY="$(gcloud ... --secret=K)" || exit 4; export VLLM_API_KEY;]
        docker run -d --name NAME [--privileged --net=host --shm-size X -v A:B -e VAR ...] -- IMAGE
            vllm serve MODEL ...
    (a container given VLLM_API_KEY makes the linked vLLM simulator require that key, like `--api-key`)
    docker exec -- NAME vllm bench serve --model M --num-prompts N --random-input-len L
        --random-output-len L --max-concurrency C ...
    journalctl -u UNIT -n N --no-pager

Scenario keys (the `host` section; defaults in `DEFAULTS`):
    hostname           VM hostname shown in journal lines
    user               the one SSH user accepted (public keys are added with `authorize`)
    boot_s             seconds a started healthy vLLM container takes to print `Application startup complete.`
                       and, when a VllmSimulator is linked, to stop refusing connections (real: ~10 minutes)
    fail_after_s       seconds a failing container runs before it exits with its failing log
    linked_container   the container whose state drives the linked VllmSimulator
    secrets            Secret Manager secret names the VM can read (the HF token)
    secret_values      name -> value of those the VM reads as the vLLM API key (default: a random value)
    images             images already pulled on the VM
    pull_rate_limited  true: pulling any other image fails (docker-pull-rate-limit.log)
    run_failing_log    a case file that every newly created container fails with, or null
    cases_dir          where case files live (default: the package data of sim.cases)
    kv_capacity_tokens KV-cache capacity used by the benchmark model (concurrency is capped by it)
    bench              {prefill_tok_per_s, decode_step_ms, decode_ms_per_seq}: the benchmark's made-up speed
    containers         list of {name, image, state, started, finished, exit_code, restart_count, model,
                       max_model_len, tensor_parallel_size, port, failing_log}; times relative to now ("-45m")
    journal            unit -> list of extra journal lines

Real limits enforced (each with its source in the code):
    - `docker start` / `docker restart` reset the container's RestartCount to 0 (moby: daemon/start.go calls
      `container.ResetRestartManager(true)`, which zeroes RestartCount; only the restart policy counts up).
    - vLLM logs to stdout (vllm/logger.py: the default handler streams to `ext://sys.stdout`); Python
      tracebacks go to stderr. `docker logs` replays each on its own stream, so the bot needs `2>&1`.
    - docker needs the docker group or sudo: without either, every docker command fails with the daemon
      socket's "permission denied" (docs.docker.com/engine/install/linux-postinstall); `sudo -n` fails with
      "sudo: a password is required" when the user has no passwordless sudo (sudo(8), `-n`).
    - a linked VllmSimulator whose engine died and whose API server exited takes its container down with it
      (the container's main process is the API server).

More scenario keys:
    docker_group       true (default): the SSH user is in the docker group; false: only sudo reaches docker
    sudo               "nopasswd" (default, as on Google's images for OS Login admins) or "password"

Controls (thread-safe): `authorize(pkey)`, `set_run_failing_log(case)`, `set_pull_rate_limited(flag)`,
`crash(name, case)`, `container_state(name)`, `commands`, `set_reject_auth(flag)`,
`set_command_delay(seconds)`; `stop()` then `start()` refuses connections meanwhile (same port).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import re
import secrets
import shlex
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
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

from sim import scenario as scenarios
from sim.cases import missing_case_line, read_case
from sim.vllm import VllmSimulator

__all__ = [
    "DEFAULTS",
    "NOT_ALLOWED",
    "HostSimulator",
    "bench_output",
    "generate_ed25519_key",
    "healthy_startup_lines",
]

log = logging.getLogger(__name__)


DEFAULTS: dict[str, Any] = {
    "hostname": "t1v-n-gemma4-w-0",
    "user": "tpu-chatops",
    "boot_s": 3.0,
    "fail_after_s": 0.5,
    "linked_container": "vllm",
    "secrets": ["hf-token"],
    "secret_values": {},
    "images": ["vllm/vllm-tpu:gemma4"],
    "pull_rate_limited": False,
    "run_failing_log": None,
    "cases_dir": None,
    "kv_capacity_tokens": 262144,
    "bench": {"prefill_tok_per_s": 40000.0, "decode_step_ms": 18.0, "decode_ms_per_seq": 0.12},
    "containers": [],
    "journal": {},
    "docker_group": True,
    "sudo": "nopasswd",
}

# The Docker CLI's error when the user may not open the daemon socket (docs.docker.com/engine/install/
# linux-postinstall, "Manage Docker as a non-root user").
DOCKER_SOCKET_DENIED = (
    "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: "
    'Get "http://%2Fvar%2Frun%2Fdocker.sock/v1.47/containers/json": dial unix /var/run/docker.sock: '
    "connect: permission denied\n"
)
SUDO_PASSWORD_REQUIRED = "sudo: a password is required\n"  # sudo -n without NOPASSWD (sudo(8))

NOT_ALLOWED = "command not allowed in simulator"


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


# -- a tiny shell-word lexer -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Tok:
    raw: str  # as written (quotes included) for words; the operator for operators
    op: bool

    @property
    def word(self) -> str:
        parts = shlex.split(self.raw)
        return parts[0] if parts else ""


_OPS = ("||", "&&", ">&", "|", ";", "&", ">", "<")


def _lex(command: str) -> list[_Tok]:
    """Split a command line into words (quotes kept in `raw`) and unquoted operators.

    Raises:
        ValueError: unbalanced quotes or a newline.
    """
    tokens: list[_Tok] = []
    word: list[str] = []
    i, n = 0, len(command)

    def flush() -> None:
        if word:
            tokens.append(_Tok("".join(word), False))
            word.clear()

    while i < n:
        ch = command[i]
        if ch == "'":
            end = command.find("'", i + 1)
            if end < 0:
                raise ValueError("unbalanced single quote")
            word.append(command[i : end + 1])
            i = end + 1
        elif ch == '"':
            j = i + 1
            while j < n and command[j] != '"':
                j += 2 if command[j] == "\\" else 1
            if j >= n:
                raise ValueError("unbalanced double quote")
            word.append(command[i : j + 1])
            i = j + 1
        elif ch == "\\":
            word.append(command[i : i + 2])
            i += 2
        elif ch in " \t":
            flush()
            i += 1
        elif ch == "\n":
            raise ValueError("newline")
        elif ch in "|&;<>":
            flush()
            op = next(o for o in _OPS if command.startswith(o, i))
            tokens.append(_Tok(op, True))
            i += len(op)
        else:
            word.append(ch)
            i += 1
    flush()
    return tokens


def _expands(raw: str) -> bool:
    """True if a shell would expand something in this word ($, backticks, or unquoted globs)."""
    i, quote = 0, ""
    while i < len(raw):
        ch = raw[i]
        if quote == "'":
            quote = "" if ch == "'" else quote
        elif ch == "\\":
            i += 1
        elif ch in "$`":
            return True
        elif ch == "'" and not quote:
            quote = "'"
        elif ch == '"':
            quote = "" if quote == '"' else '"'
        elif ch in "*?[~" and not quote:
            return True
        i += 1
    return False


class _Exit(Exception):
    def __init__(self, status: int) -> None:
        self.status = status


class _NotAllowed(Exception):
    pass


@dataclass
class _Simple:
    words: list[_Tok]
    stderr_to_stdout: bool = False


def _split(tokens: list[_Tok], op: str) -> list[list[_Tok]]:
    parts: list[list[_Tok]] = [[]]
    for tok in tokens:
        if tok.op and tok.raw == op:
            parts.append([])
        else:
            parts[-1].append(tok)
    return parts


def _simple(tokens: list[_Tok]) -> _Simple:
    """One simple command: words plus the only redirection allowed, `2>&1`."""
    out = _Simple([])
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if (
            not tok.op
            and tok.raw == "2"
            and i + 2 < len(tokens)
            and tokens[i + 1].op
            and tokens[i + 1].raw == ">&"
            and tokens[i + 2].raw == "1"
        ):
            out.stderr_to_stdout = True
            i += 3
            continue
        if tok.op:
            raise _NotAllowed(tok.raw)
        out.words.append(tok)
        i += 1
    if not out.words:
        raise _NotAllowed("empty command")
    return out


# -- logs ---------------------------------------------------------------------------------------------------


def _stamp(when: datetime) -> str:
    return when.strftime("%m-%d %H:%M:%S")


def healthy_startup_lines(
    started: datetime,
    *,
    model: str = "google/gemma-4-31B-it",
    max_model_len: int = 16384,
    tensor_parallel_size: int = 8,
    port: int = 8000,
    version: str = "0.19.1",
    boot_s: float = 600.0,
) -> list[tuple[datetime, str]]:
    """Realistic (SIMULATED) vLLM start-up log lines with their times, ending with
    `Application startup complete.`

    Line formats follow real vLLM V1 logs on TPU (process prefixes `(APIServer pid=1)` and
    `(EngineCore_DP0 pid=N)`, docs/vllm.md §2.4). The first half is stamped at `started`, the rest at
    `started + boot_s`.
    """
    ready = started + timedelta(seconds=boot_s)
    api, core = "(APIServer pid=1)", "(EngineCore_DP0 pid=281)"
    kv_tokens = 262144
    early = [
        f"INFO {_stamp(started)} [__init__.py:241] Automatically detected platform tpu.",
        f"{api} INFO {_stamp(started)} [api_server.py:1839] vLLM API server version {version}",
        f"{api} INFO {_stamp(started)} [utils.py:328] non-default args: {{'model_tag': '{model}', 'host': "
        f"'0.0.0.0', 'port': {port}, 'enable_auto_tool_choice': True, 'tool_call_parser': 'gemma4', 'model': "
        f"'{model}', 'max_model_len': {max_model_len}, 'reasoning_parser': 'gemma4', 'tensor_parallel_size': "
        f"{tensor_parallel_size}, 'disable_chunked_mm_input': True}}",
        f"{api} INFO {_stamp(started)} [model.py:547] Resolved architecture: Gemma4ForConditionalGeneration",
        f"{api} INFO {_stamp(started)} [model.py:1510] Using max model len {max_model_len}",
        f"{core} INFO {_stamp(started)} [core.py:654] Waiting for init message from front-end.",
        f"{core} INFO {_stamp(started)} [core.py:76] Initializing a V1 LLM engine (v{version}) with config: "
        f"model='{model}', tensor_parallel_size={tensor_parallel_size}, max_seq_len={max_model_len}, "
        "device_config=tpu, enable_prefix_caching=True",
        f"{core} INFO {_stamp(started)} [tpu_worker.py:221] Init worker | rank=0 | node_id=0 | "
        "is_driver_worker=True",
        f"{core} INFO {_stamp(started)} [tpu_model_runner.py:1401] Loading model from scratch...",
    ]
    late = [
        f"{core} INFO {_stamp(ready)} [default_loader.py:267] Loading weights took 92.41 seconds",
        f"{core} INFO {_stamp(ready)} [kv_cache_utils.py:1087] GPU KV cache size: {kv_tokens:,} tokens",
        f"{core} INFO {_stamp(ready)} [kv_cache_utils.py:1091] Maximum concurrency for "
        f"{max_model_len:,} tokens per request: {kv_tokens / max_model_len:.2f}x",
        f"{core} INFO {_stamp(ready)} [tpu_model_runner.py:1712] Compilation finished in 371.55 [secs].",
        f"{core} INFO {_stamp(ready)} [core.py:214] init engine (profile, create kv cache, warmup model) "
        "took 486.12 seconds",
        f"{api} INFO {_stamp(ready)} [api_server.py:1634] Supported_tasks: ['generate']",
        f"{api} INFO {_stamp(ready)} [api_server.py:1912] Starting vLLM API server 0 on http://0.0.0.0:{port}",
        f"{api} INFO {_stamp(ready)} [launcher.py:34] Available routes are:",
        f"{api} INFO {_stamp(ready)} [launcher.py:42] Route: /health, Methods: GET",
        f"{api} INFO {_stamp(ready)} [launcher.py:42] Route: /v1/chat/completions, Methods: POST",
        f"{api} INFO:     Started server process [1]",
        f"{api} INFO:     Waiting for application startup.",
        f"{api} INFO:     Application startup complete.",
    ]
    return [(started, line) for line in early] + [(ready, line) for line in late]


_TRACEBACK = re.compile(r"^(Traceback \(most recent call last\):|  File \"|    \S)")


def _is_traceback(line: str) -> bool:
    """A line of a Python traceback (what the interpreter prints to stderr), not of vLLM's logger."""
    return bool(_TRACEBACK.match(line))


def _docker_time(when: datetime | None) -> str:
    if when is None:
        return "0001-01-01T00:00:00Z"
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"


@dataclass
class _Container:
    name: str
    image: str
    state: str = "created"
    id: str = field(default_factory=lambda: secrets.token_hex(32))
    created: datetime = field(default_factory=lambda: datetime.now(UTC))
    started: datetime | None = None
    finished: datetime | None = None
    exit_code: int = 0
    restart_count: int = 0
    model: str = "google/gemma-4-31B-it"
    max_model_len: int = 16384
    tensor_parallel_size: int = 8
    port: int = 8000
    failing_log: str | None = None
    has_token: bool = True
    api_key: str | None = None
    command: list[str] = field(default_factory=list)
    logs: list[tuple[datetime, str]] = field(default_factory=list)
    pending: list[tuple[float, datetime, str]] = field(default_factory=list)
    fail_at: float | None = None
    ready_at: float | None = None  # monotonic time when startup completes (healthy containers)

    @property
    def running(self) -> bool:
        return self.state in ("running", "restarting")


# -- the simulator ------------------------------------------------------------------------------------------


class HostSimulator:
    """A SIMULATED TPU VM: an SSH server (paramiko) on a local port answering the bot's docker commands.

    Args:
        scenario_host: the scenario's `host` mapping (keys in the module docstring; missing keys take
            DEFAULTS).
        host: address to bind.
        port: port to bind; 0 picks a free one (read it back from `port`).
        vllm: an optional VllmSimulator linked to `linked_container`: docker stop/rm (or a failure) make it
            refuse connections; docker start/restart/run put it in "booting" for `boot_s` seconds, then ready.
    """

    def __init__(
        self,
        scenario_host: dict[str, Any] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        vllm: VllmSimulator | None = None,
    ) -> None:
        self.config: dict[str, Any] = {**DEFAULTS, **(scenario_host or {})}
        self.host = host
        self._port = port
        self.vllm = vllm
        self.user = str(self.config["user"])
        self.commands: list[str] = []
        self._host_key = generate_ed25519_key()
        self._authorized: list[bytes] = []
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._transports: set[paramiko.Transport] = set()
        self._secrets = set(self.config["secrets"] or [])
        self._images = set(self.config["images"] or [])
        self._pull_rate_limited = bool(self.config["pull_rate_limited"])
        self._run_failing_log: str | None = self.config["run_failing_log"]
        self._cases = Path(self.config["cases_dir"]) if self.config["cases_dir"] else None
        self._journal: dict[str, list[str]] = {
            unit: list(lines) for unit, lines in (self.config["journal"] or {}).items()
        }
        self._containers: dict[str, _Container] = {}
        self._reject_auth = False
        self._command_delay_s = 0.0
        if vllm is not None:
            vllm.on_exit.append(self._vllm_exited)
        for spec in self.config["containers"] or []:
            self._load_container(spec)
        self._docker_journal(
            "dockerd started: API listen on /run/docker.sock", datetime.now(UTC) - timedelta(hours=2)
        )

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
            linked = self._containers.get(str(self.config["linked_container"]))
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
            self._run_failing_log = case_file

    def set_pull_rate_limited(self, flag: bool) -> None:
        """Make pulls of images not yet on the VM fail with Docker Hub's rate-limit error."""
        with self._lock:
            self._pull_rate_limited = flag

    def crash(self, name: str, case_file: str) -> None:
        """Make a running container exit now (exit code 1) with the case file's log appended.

        Raises:
            KeyError: no such container.
        """
        with self._lock:
            container = self._containers[name]
            now = datetime.now(UTC)
            container.logs.extend((now, line) for line in self._case_lines(case_file))
            self._exit(container, 1)

    def set_reject_auth(self, flag: bool) -> None:
        """True: every public-key authentication fails (as if the bot's key were removed from the VM)."""
        with self._lock:
            self._reject_auth = flag

    def set_command_delay(self, seconds: float) -> None:
        """Seconds every exec request waits before it runs (0: none); for command-timeout faults. The wait
        ends early when the client closes the channel or the simulator stops."""
        with self._lock:
            self._command_delay_s = max(0.0, float(seconds))

    def container_state(self, name: str) -> str:
        """The container's state ("absent", "created", "running", "exited", "restarting")."""
        with self._lock:
            container = self._containers.get(name)
            if container is None:
                return "absent"
            self._refresh(container)
            return container.state

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
            for container in self._containers.values():
                self._refresh(container)
            try:
                tokens = _lex(command)
                return self._run_list(tokens)
            except (_NotAllowed, ValueError) as exc:
                return 127, "", f"bash: {exc}: {NOT_ALLOWED}\n"
            except _Exit as exc:
                return exc.status, "", ""

    def _run_list(self, tokens: list[_Tok]) -> tuple[int, str, str]:
        env: dict[str, str] = {}
        out_all: list[str] = []
        err_all: list[str] = []
        status = 0
        for statement in _split(tokens, ";"):
            if not statement:
                continue
            chain = _split(statement, "||")
            for k, part in enumerate(chain):
                if any(t.op and t.raw == "&&" for t in part):
                    raise _NotAllowed("&&")
                try:
                    status, out, err = self._run_pipeline(part, env)
                except _Exit as exc:
                    return exc.status, "".join(out_all), "".join(err_all)
                out_all.append(out)
                err_all.append(err)
                if status == 0 and k < len(chain) - 1:
                    break
        return status, "".join(out_all), "".join(err_all)

    def _run_pipeline(self, tokens: list[_Tok], env: dict[str, str]) -> tuple[int, str, str]:
        stages = [_simple(part) for part in _split(tokens, "|")]
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

    def _run_simple(self, words: list[_Tok], env: dict[str, str], stdin: str) -> tuple[int, str, str]:
        first = words[0]
        substitution = re.fullmatch(r'(HF_TOKEN|VLLM_API_KEY)="\$\((.*)\)"', first.raw)
        if substitution and len(words) == 1:
            return self._read_secret(shlex.split(substitution.group(2)), env, substitution.group(1))
        if any(_expands(w.raw) for w in words):
            raise _NotAllowed("shell expansion")
        args = [w.word for w in words]
        if args[0] == "export" and args[1:] and set(args[1:]) <= {"HF_TOKEN", "VLLM_API_KEY"}:
            return 0, "", ""
        if args[0] == "exit" and len(args) == 2 and args[1].isdigit():
            raise _Exit(int(args[1]))
        keep_token = True
        root = False
        if args[0] == "sudo":
            if args[1:2] != ["-n"]:
                raise _NotAllowed("sudo without -n")
            if self.config["sudo"] != "nopasswd":
                return 1, "", SUDO_PASSWORD_REQUIRED
            args, root = args[2:], True
            keep_token = False  # sudo resets the environment...
            if args and args[0] in ("--preserve-env=HF_TOKEN", "--preserve-env=HF_TOKEN,VLLM_API_KEY"):
                args, keep_token = args[1:], True  # ...unless asked to keep it
        if not args:
            raise _NotAllowed("sudo")
        if args[0] == "docker" and len(args) > 1:
            if not root and not self.config["docker_group"]:
                return 1, "", DOCKER_SOCKET_DENIED
            kept = env if keep_token else {}
            return self._docker(args[1], args[2:], kept)
        if args[0] == "journalctl":
            return self._journalctl(args[1:])
        if args[0] == "grep":
            return self._grep(args[1:], stdin)
        raise _NotAllowed(args[0])

    def _read_secret(self, argv: list[str], env: dict[str, str], variable: str) -> tuple[int, str, str]:
        prefix = ["gcloud", "secrets", "versions", "access", "latest"]
        if argv[:5] != prefix or len(argv) != 6 or not argv[5].startswith("--secret="):
            raise _NotAllowed("gcloud")
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

    # -- docker --------------------------------------------------------------------------------------------

    def _docker(self, sub: str, args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
        handlers = {
            "inspect": self._inspect,
            "logs": self._logs,
            "start": self._start_cmd,
            "stop": self._stop_cmd,
            "restart": self._restart_cmd,
            "rm": self._rm_cmd,
            "exec": self._exec_cmd,
        }
        if sub == "run":
            return self._run_cmd(args, env)
        if sub not in handlers:
            raise _NotAllowed(f"docker {sub}")
        return handlers[sub](args)

    @staticmethod
    def _options(args: list[str], with_value: set[str], flags: set[str]) -> tuple[dict[str, str], list[str]]:
        """Parse docker-style options up to `--` or the first positional argument."""
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
                        raise _NotAllowed(f"docker option {name} without a value")
                    i += 1
                    value = args[i]
                repeated = name in ("-e", "--env") and name in opts
                opts[name] = f"{opts[name]},{value}" if repeated else value  # -e may repeat
            elif name in flags and not eq:
                opts[name] = ""
            else:
                raise _NotAllowed(f"docker option {name}")
            i += 1
        return opts, []

    def _one(self, names: list[str]) -> str:
        if len(names) != 1:
            raise _NotAllowed("docker needs exactly one container name")
        return names[0]

    @staticmethod
    def _no_such(name: str) -> tuple[int, str, str]:
        return 1, "", f"Error response from daemon: No such container: {name}\n"

    def _inspect(self, args: list[str]) -> tuple[int, str, str]:
        opts, names = self._options(args, {"--type"}, set())
        if opts.get("--type", "container") != "container":
            raise _NotAllowed("docker inspect --type")
        name = self._one(names)
        c = self._containers.get(name)
        if c is None:
            return 1, "[]\n", f"Error: No such container: {name}\n"
        item = {
            "Id": c.id,
            "Created": _docker_time(c.created),
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
                "StartedAt": _docker_time(c.started),
                "FinishedAt": _docker_time(c.finished),
            },
            "Image": "sha256:" + secrets.token_hex(32),
            "Name": "/" + c.name,
            "RestartCount": c.restart_count,
            "HostConfig": {"Privileged": True, "NetworkMode": "host", "ShmSize": 16 * 1024**3},
            "Config": {"Image": c.image, "Cmd": c.command},
        }
        return 0, json.dumps([item], indent=4) + "\n", ""

    def _logs(self, args: list[str]) -> tuple[int, str, str]:
        opts, names = self._options(args, {"--tail", "--since", "-n"}, {"-t", "--timestamps"})
        name = self._one(names)
        c = self._containers.get(name)
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
        out = "".join(line + "\n" for _, line in lines if not _is_traceback(line))
        err = "".join(line + "\n" for _, line in lines if _is_traceback(line))
        return 0, out, err  # vLLM's logger writes stdout, Python tracebacks stderr; the bot merges with 2>&1

    def _grep(self, args: list[str], stdin: str) -> tuple[int, str, str]:
        if len(args) != 3 or args[:2] != ["-F", "-e"]:
            raise _NotAllowed("grep (only grep -F -e TEXT)")
        text = args[2]
        kept = [line for line in stdin.splitlines() if text in line]
        return (0 if kept else 1), "".join(line + "\n" for line in kept), ""

    def _start_cmd(self, args: list[str]) -> tuple[int, str, str]:
        _, names = self._options(args, set(), set())
        name = self._one(names)
        c = self._containers.get(name)
        if c is None:
            return (
                1,
                "",
                f"Error response from daemon: No such container: {name}\n"
                f"Error: failed to start containers: {name}\n",
            )
        if not c.running:
            c.restart_count = 0  # as docker restart (moby daemon/start.go)
            self._boot(c)
        return 0, name + "\n", ""

    def _stop_cmd(self, args: list[str]) -> tuple[int, str, str]:
        _, names = self._options(args, {"--time", "-t"}, set())
        name = self._one(names)
        c = self._containers.get(name)
        if c is None:
            return self._no_such(name)
        if c.running:
            c.logs.append((datetime.now(UTC), "(APIServer pid=1) INFO:     Shutting down"))
            self._exit(c, 0)
        return 0, name + "\n", ""

    def _restart_cmd(self, args: list[str]) -> tuple[int, str, str]:
        _, names = self._options(args, {"--time", "-t"}, set())
        name = self._one(names)
        c = self._containers.get(name)
        if c is None:
            return self._no_such(name)
        if c.running:
            self._exit(c, 0)
        c.restart_count = 0  # a manual restart resets the count (moby daemon/start.go, see module docstring)
        self._boot(c)
        return 0, name + "\n", ""

    def _rm_cmd(self, args: list[str]) -> tuple[int, str, str]:
        opts, names = self._options(args, set(), {"-f", "--force"})
        name = self._one(names)
        c = self._containers.get(name)
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
        del self._containers[name]
        self._docker_journal(f"container {c.id[:12]} ({name}) removed")
        return 0, name + "\n", ""

    def _run_cmd(self, args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
        opts, rest = self._options(
            args,
            {"--name", "--net", "--network", "--shm-size", "-v", "--volume", "-e", "--env"},
            {"-d", "--detach", "--privileged", "--rm", "-t", "-i"},
        )
        if not rest:
            raise _NotAllowed("docker run without an image")
        image, command = rest[0], rest[1:]
        name = opts.get("--name") or f"sim_{secrets.token_hex(3)}"
        if name in self._containers:
            existing = self._containers[name]
            return (
                125,
                "",
                f'docker: Error response from daemon: Conflict. The container name "/{name}" is already '
                f'in use by container "{existing.id}". You have to remove (or rename) that container to be '
                "able to reuse that name.\nSee 'docker run --help'.\n",
            )
        if image not in self._images:
            if self._pull_rate_limited:
                text = "\n".join(self._case_lines("docker-pull-rate-limit.log"))
                return 125, "", f"Unable to find image '{image}' locally\n{text}\nSee 'docker run --help'.\n"
            self._images.add(image)
        c = _Container(name=name, image=image, command=command)
        if command[:2] == ["vllm", "serve"] and len(command) > 2:
            c.model = command[2]
            flags = {
                command[i]: command[i + 1] for i in range(3, len(command) - 1) if command[i].startswith("--")
            }
            c.max_model_len = int(flags.get("--max-model-len", c.max_model_len))
            c.tensor_parallel_size = int(flags.get("--tensor-parallel-size", c.tensor_parallel_size))
            c.port = int(flags.get("--port", c.port))
        passed = set((opts.get("-e", "") + "," + opts.get("--env", "")).split(","))
        c.has_token = bool(env.get("HF_TOKEN")) and "HF_TOKEN" in passed
        c.api_key = env.get("VLLM_API_KEY") if "VLLM_API_KEY" in passed else None
        if self.vllm is not None and name == self.config["linked_container"]:
            self.vllm.config["api_key"] = c.api_key  # vLLM serves with --api-key from VLLM_API_KEY
        c.failing_log = self._run_failing_log
        self._containers[name] = c
        self._boot(c)
        return 0, c.id + "\n", ""

    def _exec_cmd(self, args: list[str]) -> tuple[int, str, str]:
        _, rest = self._options(args, set(), {"-i", "-t"})
        if not rest:
            raise _NotAllowed("docker exec without a container")
        name, command = rest[0], rest[1:]
        c = self._containers.get(name)
        if c is None:
            return self._no_such(name)
        if command[:3] != ["vllm", "bench", "serve"]:
            raise _NotAllowed("docker exec (only vllm bench serve)")
        if not c.running:
            return 1, "", f"Error response from daemon: container {c.id} is not running\n"
        return self._bench(c, command[3:])

    # -- container life ------------------------------------------------------------------------------------

    def _load_container(self, spec: dict[str, Any]) -> None:
        now = datetime.now(UTC)
        state = str(spec.get("state", "running"))
        if state == "absent":
            return
        c = _Container(
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
                if state == "exited":
                    c.finished = now + scenarios.duration(spec.get("finished", "-1m"))
                    c.logs.append((c.finished, "(APIServer pid=1) INFO:     Shutting down"))
        self._containers[c.name] = c

    def _startup(self, c: _Container, started: datetime, boot_s: float) -> list[tuple[datetime, str]]:
        return healthy_startup_lines(
            started,
            model=c.model,
            max_model_len=c.max_model_len,
            tensor_parallel_size=c.tensor_parallel_size,
            port=c.port,
            boot_s=boot_s,
        )

    def _boot(self, c: _Container) -> None:
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
            (
                o
                for o in self._containers.values()
                if o is not c and o.running and o.image.startswith("vllm/")
            ),
            None,
        )
        if holder is not None:
            failing = "vllm-tpu-device-busy.log"  # only one process can own the TPU (docs/vllm.md §4.3)
        elif not c.has_token:
            failing = "vllm-hf-gated-repo-401.log"
        early = [(t, line) for t, line in lines if t == now]
        c.logs.extend(early)
        link = self.vllm is not None and c.name == self.config["linked_container"]
        if failing:
            delay = float(self.config["fail_after_s"])
            due = now + timedelta(seconds=delay)
            c.pending = [(mono + delay, due, line) for line in self._case_lines(failing)]
            c.fail_at = mono + delay
            c.failing_log = failing
            if link and self.vllm is not None:
                self.vllm.stop()
            if delay <= 0:
                self._refresh(c)
        else:
            c.pending = [(mono + boot_s, t, line) for t, line in lines if t != now]
            c.ready_at = mono + boot_s
            if link and self.vllm is not None:
                self.vllm.set_mode("booting", boot_s=boot_s)

    def _exit(self, c: _Container, code: int) -> None:
        c.state, c.exit_code, c.finished = "exited", code, datetime.now(UTC)
        c.pending, c.fail_at, c.ready_at = [], None, None
        self._docker_journal(f"container {c.id[:12]} ({c.name}) exited with code {code}")
        if self.vllm is not None and c.name == self.config["linked_container"]:
            self.vllm.stop()

    def _vllm_exited(self) -> None:
        """The linked vLLM API server stopped after its engine died: its container exits with it."""
        with self._lock:
            c = self._containers.get(str(self.config["linked_container"]))
            if c is None or not c.running:
                return
            now = datetime.now(UTC)
            c.logs.append((now, "(APIServer pid=1) ERROR: EngineCore encountered an issue. Shutting down."))
            c.logs.append((now, "(APIServer pid=1) INFO:     Shutting down"))
            self._exit(c, 1)

    def _refresh(self, c: _Container) -> None:
        mono = time.monotonic()
        due = [item for item in c.pending if item[0] <= mono]
        if due:
            c.pending = [item for item in c.pending if item[0] > mono]
            c.logs.extend((when, line) for _, when, line in due)
        if c.fail_at is not None and mono >= c.fail_at and c.running:
            c.logs.extend((when, line) for _, when, line in c.pending)
            self._exit(c, 1)

    def _ready(self, c: _Container) -> bool:
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
                raise _NotAllowed(f"journalctl {args[i]}")
        if unit is None or not pager:
            raise _NotAllowed("journalctl (only -u UNIT -n N --no-pager)")
        if "." not in unit:
            unit += ".service"
        lines = self._journal.get(unit, [])[-count:] if count else []
        if not lines:
            return 0, "-- No entries --\n", ""
        return 0, "".join(line + "\n" for line in lines), ""

    # -- benchmark -----------------------------------------------------------------------------------------

    def _bench(self, c: _Container, args: list[str]) -> tuple[int, str, str]:
        opts: dict[str, str] = {}
        for i in range(0, len(args), 2):
            if not args[i].startswith("--") or i + 1 >= len(args):
                raise _NotAllowed(f"vllm bench serve {args[i]}")
            opts[args[i]] = args[i + 1]
        try:
            n = int(opts.get("--num-prompts", "1000"))
            input_len = int(opts.get("--random-input-len", "1024"))
            output_len = int(opts.get("--random-output-len", "128"))
            concurrency = int(opts.get("--max-concurrency", str(n)))
        except ValueError:
            return 2, "", "vllm bench serve: error: argument: invalid int value\n"
        model = opts.get("--model", c.model)
        if not self._ready(c) or (self.vllm is not None and self.vllm.mode == "engine-dead"):
            return (
                1,
                "",
                (
                    "ValueError: Initial test run failed - Please make sure benchmark arguments are "
                    f"correctly specified. Error: Cannot connect to host 127.0.0.1:{c.port} ssl:default "
                    "[Connect call failed]\n"
                ),
            )
        if model != c.model:
            return (
                1,
                "",
                (
                    "ValueError: Initial test run failed - Please make sure benchmark arguments are "
                    f"correctly specified. Error: Not Found: The model `{model}` does not exist.\n"
                ),
            )
        text = bench_output(
            num_prompts=n,
            input_len=input_len,
            output_len=output_len,
            max_concurrency=concurrency,
            kv_capacity_tokens=int(self.config["kv_capacity_tokens"]),
            **{k: float(v) for k, v in (self.config["bench"] or {}).items()},
        )
        now = datetime.now(UTC)
        running = min(concurrency, n)
        usage = min(100.0, 100 * running * (input_len + output_len) / int(self.config["kv_capacity_tokens"]))
        c.logs.append(
            (
                now,
                f"(APIServer pid=1) INFO {_stamp(now)} [loggers.py:127] Engine 000: Avg prompt throughput: "
                f"{running * input_len / 5:.1f} tokens/s, Avg generation throughput: "
                f"{running * 40:.1f} tokens/s, Running: {running} reqs, Waiting: {max(0, n - running)} reqs, "
                f"GPU KV cache usage: {usage:.1f}%, "
                "Prefix cache hit rate: 0.0%",
            )
        )
        progress = f"100%|██████████| {n}/{n} [00:42<00:00,  {n / 42:.2f}it/s]\n"
        return 0, text, progress


def bench_output(
    *,
    num_prompts: int,
    input_len: int,
    output_len: int,
    max_concurrency: int,
    kv_capacity_tokens: int = 262144,
    prefill_tok_per_s: float = 40000.0,
    decode_step_ms: float = 18.0,
    decode_ms_per_seq: float = 0.12,
) -> str:
    """SIMULATED `vllm bench serve` console output, in the real format (vllm/benchmarks/serve.py, see
    tests/fixtures/cases/vllm-bench-serve.txt), with figures derived from the parameters by a toy model:
    effective concurrency c = min(max_concurrency, num_prompts, kv_capacity // (input+output));
    TPOT = decode_step_ms + decode_ms_per_seq * c; TTFT = input/prefill rate scaled by contention;
    requests run in ceil(num_prompts / c) waves.
    """
    n, c = (
        num_prompts,
        max(1, min(max_concurrency, num_prompts, kv_capacity_tokens // (input_len + output_len))),
    )
    tpot = decode_step_ms + decode_ms_per_seq * c
    ttft = 1000.0 * input_len / prefill_tok_per_s * (1 + 0.5 * (c - 1))
    e2e = ttft + max(0, output_len - 1) * tpot
    duration = math.ceil(n / c) * e2e / 1000.0
    total_in, total_out = n * input_len, n * output_len

    def row(label: str, value: float | int, fmt: str = "") -> str:
        return "{:<40} {:<10{}}".format(label, value, fmt).rstrip() + "\n"

    head = (
        "Starting initial single prompt test run...\n"
        "Initial test run completed. Starting main benchmark run...\n"
        "Traffic request rate: inf\n"
        "Burstiness factor: 1.0 (Poisson process)\n"
        f"Maximum request concurrency: {max_concurrency}\n"
    )
    body = "{s:{c}^{n}}\n".format(s=" Serving Benchmark Result ", n=50, c="=")
    body += row("Successful requests:", n)
    body += row("Failed requests:", 0)
    body += row("Maximum request concurrency:", max_concurrency)
    body += row("Benchmark duration (s):", duration, ".2f")
    body += row("Total input tokens:", total_in)
    body += row("Total generated tokens:", total_out)
    body += row("Request throughput (req/s):", n / duration, ".2f")
    body += row("Output token throughput (tok/s):", total_out / duration, ".2f")
    body += row("Peak output token throughput (tok/s):", c * 1000.0 / tpot, ".2f")
    body += row("Peak concurrent requests:", float(c), ".2f")
    body += row("Total token throughput (tok/s):", (total_in + total_out) / duration, ".2f")
    for header, name, mean, median, p99 in (
        ("Time to First Token", "TTFT", ttft * 1.05, ttft, ttft * 1.9),
        ("Time per Output Token (excl. 1st token)", "TPOT", tpot, tpot * 0.97, tpot * 1.4),
        ("Inter-token Latency", "ITL", tpot, tpot * 0.9, tpot * 3.4),
    ):
        body += "{s:{c}^{n}}\n".format(s=header, n=50, c="-")
        body += row(f"Mean {name} (ms):", mean, ".2f")
        body += row(f"Median {name} (ms):", median, ".2f")
        body += row(f"P99 {name} (ms):", p99, ".2f")
    body += "=" * 50 + "\n"
    return head + body


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
