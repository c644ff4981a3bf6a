"""SSH on a fresh project: the bot's public key goes into the ssh-keys metadata of the node it creates, and
the host key of that node is learned from its guest attributes (never trusted on first use).

Real parts: the Google simulator (sim/gcp) through the real clients (google-api-python-client for the
create, the GAPIC tpu_v2 REST client for getGuestAttributes), and a real OpenSSH server (tests/sshd.py)
listening on the simulated node's own loopback address, reached through paramiko. SIMULATED: the test plays
the VM's Google guest agent (it publishes sshd's host key with `GcpSimulator.publish_host_key`; the sshd
fixture already authorizes the bot's key, as the guest agent would from the metadata).
"""

from __future__ import annotations

import getpass
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bot.config import Settings
from bot.services import Services
from ops.diagnosis.engine import RemoteError, diagnose
from ops.errors import NotFound, PermissionDenied
from ops.tpu.api import TpuOps
from ops.tpu.model import CreateSpec, load_key, ssh_keys_entry
from ops.tpu.ownership import new_request_id, ownership_labels
from sim.gcp import GcpSimulator
from sim.host import generate_ed25519_key
from tests.sshd import OpenSSHServer, require_sshd

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
ZONE = "us-east5-a"
NAME = "gemma4-fresh"
NODE = f"{NAME}-node"


def scenario(queued_resources: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A fresh project: one zone with v6e-8 capacity, nothing created yet (unless given)."""
    return {
        "project": "fresh-project",
        "google": {
            "zones": {ZONE: {"accelerator_types": ["v6e-8"], "capacity": "available"}},
            "queued_resources": queued_resources or [],
        },
    }


@pytest.fixture
def gcp() -> Iterator[GcpSimulator]:
    require_sshd()
    with GcpSimulator(scenario(), now=lambda: NOW) as server:
        yield server


@pytest.fixture
def client_key(tmp_path: Path) -> Path:
    """The bot's own key (SSH_KEY_PATH), made before any VM exists."""
    private = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    path = tmp_path / "tpu-chatops"
    path.write_bytes(private)
    path.chmod(0o600)
    return path


def settings_for(gcp: GcpSimulator, tmp_path: Path, **fields: Any) -> Settings:
    base: dict[str, Any] = {
        "slack_bot_token": "xoxb-1-fresh",
        "slack_signing_secret": "s" * 32,
        "gcp_project": gcp.project,
        "tpu_zones": [ZONE],
        "google_api_endpoint": gcp.url,
        "state_database_url": f"sqlite:///{tmp_path / 'state.db'}",
    }
    return Settings(_env_file=None, **{**base, **fields})  # type: ignore[call-arg]


def create_node(gcp: GcpSimulator, ssh_keys: str) -> str:
    """Create the queued resource as the bot does (ownership labels, ssh-keys metadata) and wait until it is
    ACTIVE; returns the node's external IP."""
    tpu = TpuOps(gcp.project, api_endpoint=gcp.url, timeout_s=5, num_retries=0)
    try:
        spec = CreateSpec(
            name=NAME,
            node_id=NODE,
            zone=ZONE,
            accelerator_type="v6e-8",
            runtime_version="v2-alpha-tpuv6e",
            provisioning_model="flex-start",
            max_run_duration=timedelta(hours=4),
            valid_until=None,
            labels=ownership_labels(new_request_id(), "U123"),
            ssh_keys=ssh_keys,
        )
        tpu.wait_operation(tpu.create_queued_resource(spec), timeout_s=10, poll_s=0.05)
        gcp.advance(60)
        qr = tpu.get_queued_resource(NAME, [ZONE])
        assert qr.state == "ACTIVE", qr
        (node,) = qr.nodes
        return node.external_ips[0]
    finally:
        tpu.close()


def play_guest_agent(gcp: GcpSimulator, sshd: OpenSSHServer, ssh_keys: str, *, publish: bool = True) -> None:
    """SIMULATED guest agent: authorize the key of the node's ssh-keys line, publish sshd's host key."""
    (sshd.root / "authorized_keys").write_text(ssh_keys.split(":", 1)[1] + "\n")
    if publish:
        gcp.publish_host_key(ZONE, NODE, sshd.host_key_type, sshd.host_key_b64)


def test_created_node_carries_the_bots_public_key_and_ssh_trusts_its_guest_attributes(
    gcp: GcpSimulator, client_key: Path, tmp_path: Path
) -> None:
    user = getpass.getuser()  # the sshd fixture logs in as the current user
    entry = ssh_keys_entry(str(client_key), user)
    ip = create_node(gcp, entry)
    (body,) = [b for method, path, b in gcp.request_bodies if method == "POST" and "queuedResources" in path]
    metadata = body["tpu"]["nodeSpec"][0]["node"]["metadata"]
    assert metadata["ssh-keys"] == entry
    login, key_line = entry.split(":", 1)
    kind, b64, comment = key_line.split()
    assert (login, kind, comment) == (user, "ssh-ed25519", "tpu-chatops")
    assert b64 == load_key(str(client_key)).get_base64()  # the public half of SSH_KEY_PATH
    assert "PRIVATE KEY" not in str(body)

    with OpenSSHServer(host=ip) as sshd:
        play_guest_agent(gcp, sshd, entry)
        settings = settings_for(
            gcp, tmp_path, ssh_key_path=str(client_key), ssh_user=sshd.user, ssh_port=sshd.port
        )
        services = Services.from_settings(settings)
        try:
            with services.remote() as remote:
                assert remote.host == ip
                result = remote.run("journalctl", unit="docker.service", tail=5)
            assert result.exit_status == 0 and result.stdout == "-- No entries --\n"
            assert sshd.received()[-1] == "journalctl -u docker.service -n 5 --no-pager"
            assert any(f"/nodes/{NODE}:getGuestAttributes" in path for _, path in gcp.requests)

            # The VM is recreated (same address here): a stale known_hosts entry and the old key no longer
            # matter, the new guest attributes do.
            stale = sshd.known_hosts(tmp_path / "known_hosts", key_b64=generate_ed25519_key().get_base64())
            services.settings = settings_for(
                gcp,
                tmp_path,
                ssh_key_path=str(client_key),
                ssh_user=sshd.user,
                ssh_port=sshd.port,
                ssh_known_hosts_path=str(stale),
            )
            with services.remote() as remote:
                assert remote.run("journalctl", unit="docker.service", tail=1).exit_status == 0

            # Guest attributes that publish another key than the server offers: refused, and told as such.
            other = generate_ed25519_key()
            gcp.publish_host_key(ZONE, NODE, "ssh-ed25519", other.get_base64())
            with services.remote() as remote, pytest.raises(PermissionDenied) as refused:
                remote.run("journalctl", unit="docker.service", tail=1)
            message = refused.value.message
            assert "CHANGED" in message and f"node {NODE} ({ZONE})" in message
            assert f"publish ssh-ed25519 {other.fingerprint}, a different key" in message
            assert "re-learns" in refused.value.hint
            known = diagnose(RemoteError("ssh", message)).top  # the diagnosis names the host-key family
            assert known is not None and known.name == "ssh-host-key" and ip in known.conclusion
        finally:
            services.close()
            services.store.close()


def test_a_node_the_bot_did_not_make_is_never_trusted_from_guest_attributes(
    client_key: Path, tmp_path: Path
) -> None:
    require_sshd()
    foreign = {
        "name": "someone-else",
        "zone": ZONE,
        "state": "ACTIVE",
        "node": {"id": "someone-else-node", "internal_ip": "127.10.9.9", "external_ip": "127.34.9.9"},
    }
    with GcpSimulator(scenario([foreign]), now=lambda: NOW) as gcp, OpenSSHServer(host="127.34.9.9") as sshd:
        gcp.publish_host_key(ZONE, "someone-else-node", sshd.host_key_type, sshd.host_key_b64)
        fields = {"ssh_key_path": str(client_key), "ssh_user": sshd.user, "ssh_port": sshd.port}
        services = Services.from_settings(settings_for(gcp, tmp_path, **fields))
        try:
            with pytest.raises(NotFound, match="not made by the bot"):
                services.remote()  # the endpoint is never a VM the bot did not make

            # Told to SSH there (SSH_HOST) with a stale known_hosts entry: no node is vouched for.
            stale = sshd.known_hosts(tmp_path / "known_hosts", key_b64=generate_ed25519_key().get_base64())
            services.settings = settings_for(
                gcp, tmp_path, ssh_host="127.34.9.9", ssh_known_hosts_path=str(stale), **fields
            )
            with services.remote() as remote, pytest.raises(PermissionDenied) as refused:
                remote.run("journalctl", unit="docker.service", tail=1)
            assert "CHANGED" in refused.value.message
            assert "No node is known for this address" in refused.value.message
            assert not any(":getGuestAttributes" in path for _, path in gcp.requests)
        finally:
            services.close()
            services.store.close()


def test_a_vm_the_bot_recreated_is_re_learned_from_its_new_guest_attributes(
    gcp: GcpSimulator, client_key: Path, tmp_path: Path
) -> None:
    """The old VM's key was pinned (SSH_HOST_KEYS); the bot deletes and recreates the queued resource (same
    name, so here the same address), the new VM's sshd has a new host key and publishes it: the bot
    connects without anyone touching the pin."""
    entry = ssh_keys_entry(str(client_key), getpass.getuser())
    ip = create_node(gcp, entry)
    with OpenSSHServer(host=ip) as old_vm:
        play_guest_agent(gcp, old_vm, entry)
        pinned = f"{old_vm.host_key_type} {old_vm.host_key_b64}"
        fields = {"ssh_key_path": str(client_key), "ssh_user": old_vm.user, "ssh_host_keys": [pinned]}
    tpu = TpuOps(gcp.project, api_endpoint=gcp.url, timeout_s=5, num_retries=0)
    try:
        tpu.delete_queued_resource(NAME, ZONE, force=True, wait=True, poll_s=0.05)
    finally:
        tpu.close()
    assert create_node(gcp, entry) == ip
    with OpenSSHServer(host=ip) as new_vm:
        assert new_vm.host_key_b64 != old_vm.host_key_b64
        play_guest_agent(gcp, new_vm, entry, publish=False)
        services = Services.from_settings(settings_for(gcp, tmp_path, ssh_port=new_vm.port, **fields))
        try:
            with services.remote() as remote, pytest.raises(PermissionDenied) as refused:
                remote.run("journalctl", unit="docker.service", tail=1)  # first boot: nothing published yet
            message = refused.value.message
            assert "CHANGED" in message and "(from pinned keys (SSH_HOST_KEYS))" in message
            assert f"The guest attributes of node {NODE} ({ZONE}) publish no ssh-ed25519 key (yet)" in message

            gcp.publish_host_key(ZONE, NODE, new_vm.host_key_type, new_vm.host_key_b64)
            with services.remote() as remote:
                assert remote.run("journalctl", unit="docker.service", tail=1).exit_status == 0
            assert new_vm.received() == ["journalctl -u docker.service -n 1 --no-pager"]
        finally:
            services.close()
            services.store.close()
