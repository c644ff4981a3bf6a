"""Test helper: a real OpenSSH server (Debian's `/usr/sbin/sshd`) on 127.0.0.1 with throwaway keys.

Not a conftest: import it from the tests that need it. Every session is forced through a wrapper
(`ForceCommand`) that logs `$SSH_ORIGINAL_COMMAND` (exactly what the server received) and then runs it with
`bash -c` (what sshd itself would do for root, whose shell is bash) with `<tmp>/bin` first on PATH, so tests
can put fake `docker`, `grep` or `journalctl` programs there that log the argv they got.

If sshd is missing the test is skipped ("OpenSSH server (sshd) not installed"), unless the environment
variable CI is "true": then it fails. Install with `apt-get update && apt-get install -y openssh-server`.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import paramiko
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

SSHD = "/usr/sbin/sshd"

# A fake program (bash, to start fast): appends one record to $ARGV_LOG: fields ended by \x1f (arguments
# are printable, validated by ops.vllm.ssh), the record by \x1e: "HF=1" or "HF=0" (HF_TOKEN set in
# its
# environment), its name, then its arguments. Then it behaves per program (grep: the real one; docker logs:
# prints container.log; gcloud: prints a fake token; curl: the TPU VM's tpu-env attribute). The fake docker
# keeps its containers as files in containers/ (`vllm` exists at first; run, rm, rename change them) and
# answers like docker's CLI: "No such
# container", "No such image" (only vllm/vllm-tpu:gemma4 is on the VM), and a pull of a tag named
# "does-not-exist" refused with "manifest unknown" (exit 1).
_FAKE = r"""#!/bin/bash
name="${0##*/}"
printf -v record '%s\037' "HF=$([ -n "$HF_TOKEN" ] && echo 1 || echo 0)" "$name" "$@"
printf '%s\036' "$record" >> "$ARGV_LOG"  # one write: pipeline stages log at the same time
boxes="$FAKE_ROOT/containers"
last="${@: -1}"
case "$name $1" in
  "grep "*) exec /bin/grep "$@" ;;
  "docker logs") cat "$FAKE_ROOT/container.log" ;;
  "docker inspect")
    if [ ! -e "$boxes/$last" ]; then echo '[]'; echo "Error: No such container: $last" >&2; exit 1; fi
    echo '[{"State": {"Status": "running", "Running": true,
    "StartedAt": "2026-01-01T00:00:00Z"}, "Config": {"Image": "vllm/vllm-tpu:gemma4"}, "RestartCount": 0}]' ;;
  "docker run") touch "$boxes/$4"; echo 0000000000000000000000000000000000000000000000000000000000000000 ;;
  "docker rm") rm -f "$boxes/$last"; echo "$last" ;;
  "docker rename")
    if [ ! -e "$boxes/$3" ]; then echo "Error response from daemon: No such container: $3" >&2; exit 1; fi
    mv "$boxes/$3" "$boxes/$4" ;;
  "docker image")
    if [ "$last" != vllm/vllm-tpu:gemma4 ]; then
      echo '[]'; echo "Error response from daemon: No such image: $last" >&2; exit 1
    fi
    echo '[{"Id": "sha256:0"}]' ;;
  "docker pull")
    case "$last" in
      *:does-not-exist)
        printf 'Error response from daemon: manifest for %s not found: %s\n' "$last" \
          "manifest unknown: manifest unknown" >&2
        exit 1 ;;
      *) echo "Status: Downloaded newer image for $last" ;;
    esac ;;
  "docker "*) echo "$last" ;;
  "journalctl "*) echo "-- No entries --" ;;
  "gcloud "*) echo hf_FAKE_TOKEN_FOR_TESTS ;;
  "curl "*) printf "ACCELERATOR_TYPE: 'v6e-8'\nNODE_ID: 'gemma4-qr-node'\nWORKER_ID: '0'\n" ;;
esac
"""

# ForceCommand wrapper: record the original command, then run it like sshd would.
_WRAPPER = """#!/bin/bash
printf '%s\\0' "$SSH_ORIGINAL_COMMAND" >> "{root}/received.log"
export PATH="{root}/bin:$PATH" ARGV_LOG="{root}/argv.log" FAKE_ROOT="{root}"
exec /bin/bash -c "$SSH_ORIGINAL_COMMAND"
"""


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _ed25519_pem() -> tuple[str, str]:
    """(private key in OpenSSH PEM, "ssh-ed25519 AAAA...") for a new key."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private, public.decode()


def require_sshd() -> None:
    """Skip (or fail when CI=true) if OpenSSH's sshd is not installed."""
    if os.access(SSHD, os.X_OK):
        return
    message = "OpenSSH server (sshd) not installed"
    if os.environ.get("CI") == "true":
        pytest.fail(message + ": CI must install openssh-server")
    pytest.skip(message)


@dataclass(frozen=True)
class FakeCall:
    """One run of a fake program: argv = [program name, arg1, ...]; hf_token = HF_TOKEN was in its env."""

    argv: list[str]
    hf_token: bool


class OpenSSHServer:
    """A real sshd on 127.0.0.1:<free port> (or another loopback address: `host`, e.g. a simulated node's
    127.34.x.y). Use as a context manager.

    Attributes (after start):
        root: the temp directory (keys, config, logs, `bin/` for fake programs).
        port: the listening port.
        user: the login user (the current user; root is allowed with PermitRootLogin prohibit-password).
        client_key: the paramiko key authorized to log in.
        client_key_path: its private key file.
        host_key_type, host_key_b64: the server's public host key.
    """

    def __init__(self, host: str = "127.0.0.1") -> None:
        require_sshd()
        self.host = host
        self._tmp = tempfile.TemporaryDirectory(prefix="tpu-chatops-sshd-")
        self.root = Path(self._tmp.name)
        self.port = 0
        self.user = getpass.getuser()
        self._proc: subprocess.Popen[bytes] | None = None
        host_private, host_public = _ed25519_pem()
        client_private, client_public = _ed25519_pem()
        self.host_key_type, self.host_key_b64 = host_public.split()[:2]
        self.client_key_path = self.root / "client_key"
        self._write(self.client_key_path, client_private, 0o600)
        self.client_key = paramiko.Ed25519Key.from_private_key_file(str(self.client_key_path))
        self._write(self.root / "host_key", host_private, 0o600)
        self._write(self.root / "host_key.pub", host_public + "\n", 0o644)
        self._write(self.root / "authorized_keys", client_public + "\n", 0o600)
        self._write(self.root / "wrapper.sh", _WRAPPER.format(root=self.root), 0o755)
        (self.root / "bin").mkdir()
        for name in ("docker", "grep", "journalctl", "gcloud", "curl"):
            self._write(self.root / "bin" / name, _FAKE, 0o755)
        self._write(self.root / "container.log", "", 0o644)
        (self.root / "containers").mkdir()
        self._write(self.root / "containers" / "vllm", "", 0o644)
        self.root.chmod(0o755)

    @staticmethod
    def _write(path: Path, text: str, mode: int) -> None:
        path.write_text(text)
        path.chmod(mode)

    def start(self) -> OpenSSHServer:
        """Start sshd and wait until it accepts connections (about 0.1 s)."""
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # privilege separation directory
        self.port = _free_port(self.host)
        config = self.root / "sshd_config"
        self._write(
            config,
            "\n".join(
                [
                    f"Port {self.port}",
                    f"ListenAddress {self.host}",
                    f"HostKey {self.root}/host_key",
                    f"PidFile {self.root}/sshd.pid",
                    f"AuthorizedKeysFile {self.root}/authorized_keys",
                    "StrictModes no",
                    "PermitRootLogin prohibit-password",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "PrintMotd no",
                    f"ForceCommand {self.root}/wrapper.sh",
                    # bash reads ~/.bashrc when started by sshd; keep the login user's (slow) one out
                    f"SetEnv HOME={self.root}",
                    "LogLevel VERBOSE",
                    "",
                ]
            ),
            0o644,
        )
        self._log = open(self.root / "sshd.log", "wb")  # noqa: SIM115 - closed in stop()
        self._proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(config)], stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {(self.root / 'sshd.log').read_text()[-2000:]}")
            with contextlib.suppress(OSError), socket.create_connection((self.host, self.port), 0.2):
                return self
            time.sleep(0.02)
        self.stop()
        raise RuntimeError("sshd did not start listening within 10 s")

    def stop(self) -> None:
        """Stop sshd (SIGTERM, then SIGKILL) and delete the temp directory."""
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
            self._log.close()
        self._tmp.cleanup()

    def __enter__(self) -> OpenSSHServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- what the server side saw --

    def known_hosts(self, path: Path | None = None, *, key_b64: str | None = None) -> Path:
        """Write a known_hosts file for this server (optionally with another key) and return its path."""
        path = path or self.root / "known_hosts"
        path.write_text(f"[{self.host}]:{self.port} {self.host_key_type} {key_b64 or self.host_key_b64}\n")
        return path

    def received(self) -> list[str]:
        """Every command string sshd received ($SSH_ORIGINAL_COMMAND), in order."""
        path = self.root / "received.log"
        if not path.exists():
            return []
        return [c for c in path.read_text().split("\0") if c]

    def calls(self) -> list[FakeCall]:
        """Every fake program run, in order."""
        path = self.root / "argv.log"
        if not path.exists():
            return []
        calls = []
        for record in path.read_bytes().decode().split("\x1e"):
            fields = record.split("\x1f")[:-1]
            if fields:
                calls.append(FakeCall(argv=fields[1:], hf_token=fields[0] == "HF=1"))
        return calls

    def argv(self) -> list[list[str]]:
        """The argv of every fake program run: [program name, arg1, arg2, ...]."""
        return [call.argv for call in self.calls()]

    def set_container_log(self, text: str) -> None:
        """What the fake `docker logs` prints."""
        (self.root / "container.log").write_text(text)

    def sshd_log(self) -> str:
        """sshd's own log (-e)."""
        return (self.root / "sshd.log").read_text()
