"""The bot's own SSH key: the `ssh-keys` metadata line derived from it (public part only), the create body
that carries it, and the SSH_KEY_PATH rule of the settings (pure logic on files the tests write)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import paramiko
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import ValidationError

from bot.__main__ import main
from bot.config import Settings
from ops.errors import BadInput
from ops.tpu.model import KEY_COMMENT, CreateSpec, load_key, queued_resource_body, ssh_keys_entry


def _write_key(path: Path, password: bytes | None = None) -> Ed25519PrivateKey:
    key = Ed25519PrivateKey.generate()
    encryption = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, encryption)
    )
    return key


def test_entry_is_user_type_public_base64_and_comment_never_the_private_key(tmp_path: Path) -> None:
    path = tmp_path / "id_ed25519"
    key = _write_key(path)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    entry = ssh_keys_entry(str(path), "tpu-chatops")
    assert entry == f"tpu-chatops:{public.decode()} {KEY_COMMENT}"
    assert entry.startswith("tpu-chatops:ssh-ed25519 AAAA") and entry.endswith(" tpu-chatops")
    secret = paramiko.Ed25519Key.from_private_key_file(str(path))
    assert secret.get_base64() in entry  # the public blob
    assert "PRIVATE" not in entry and path.read_text().splitlines()[1] not in entry


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "cannot read the SSH key"),
        ("encrypted", "is encrypted with a passphrase"),
        (
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKD6Aq7xM3zexPXck5fOf81xVzHPvRuT+g2pG+PUH4ow x\n",
            "is not an SSH",
        ),
        ("not a key\n", "is not an SSH private key"),
    ],
)
def test_unusable_keys_are_refused_naming_the_file(
    tmp_path: Path, content: str | None, expected: str
) -> None:
    path = tmp_path / "key"
    if content == "encrypted":
        _write_key(path, b"passphrase")
    elif content is not None:
        path.write_text(content)
    with pytest.raises(BadInput) as refused:
        load_key(str(path))
    assert expected in refused.value.message and str(path) in refused.value.message
    assert "docs/ssh.md" in refused.value.hint


def test_create_body_carries_ssh_keys_next_to_the_startup_script() -> None:
    spec = CreateSpec(
        name="gemma4-qr",
        node_id="gemma4-qr-node",
        zone="us-east5-a",
        accelerator_type="v6e-8",
        runtime_version="v2-alpha-tpuv6e",
        provisioning_model="flex-start",
        max_run_duration=timedelta(hours=4),
        valid_until=None,
        startup_script="#!/bin/bash",
        ssh_keys="tpu-chatops:ssh-ed25519 AAAA tpu-chatops",
    )
    node = queued_resource_body(spec, "p")["tpu"]["nodeSpec"][0]["node"]
    assert node["metadata"] == {
        "startup-script": "#!/bin/bash",
        "ssh-keys": "tpu-chatops:ssh-ed25519 AAAA tpu-chatops",
    }
    bare = queued_resource_body(CreateSpec(**{**spec.__dict__, "startup_script": "", "ssh_keys": ""}), "p")
    assert "metadata" not in bare["tpu"]["nodeSpec"][0]["node"]


def test_settings_refuse_an_unusable_ssh_key_path(tmp_path: Path) -> None:
    base = {
        "slack_bot_token": "xoxb-1",
        "slack_signing_secret": "s" * 32,
        "gcp_project": "demo-project",
        "tpu_zones": ["us-east5-a"],
    }
    with pytest.raises(ValidationError, match="cannot read the SSH key"):
        Settings(_env_file=None, ssh_key_path=str(tmp_path / "missing"), **base)  # type: ignore[call-arg]
    path = tmp_path / "id_ed25519"
    _write_key(path)
    settings = Settings(_env_file=None, ssh_key_path=str(path), **base)  # type: ignore[call-arg]
    assert settings.ssh_key_path == str(path)


def test_the_ssh_key_command_prints_the_metadata_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "id_ed25519"
    _write_key(path)
    monkeypatch.chdir(tmp_path)  # no .env here
    env = {
        "SLACK_BOT_TOKEN": "xoxb-1",
        "SLACK_SIGNING_SECRET": "s" * 32,
        "GCP_PROJECT": "demo-project",
        "TPU_ZONES": "us-east5-a",
        "SSH_USER": "ops-bot",
        "SSH_KEY_PATH": str(path),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["ssh-key"]) == 0
    assert capsys.readouterr().out == ssh_keys_entry(str(path), "ops-bot") + "\n"
    monkeypatch.setenv("SSH_KEY_PATH", str(tmp_path / "missing"))
    assert main(["ssh-key"]) == 2
    assert "SSH_KEY_PATH: cannot read the SSH key" in capsys.readouterr().err
