"""The fault matrix's SSH family (tests/faults/matrix.py): every command with the TPU VM's SSH server
refusing, rejecting the bot's key, answering too slowly, or presenting another host key."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from ops.vllm.ssh import RemoteHost
from sim.demo import Demo
from sim.host import generate_ed25519_key
from tests.faults.matrix import COMMANDS, check_family, queued_resources, run_cells, still_up


def test_ssh_faults(world: Demo, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.WARNING)
    before = queued_resources(world)
    # There is no setting for the SSH command timeout (60 s): shorten it for this world.
    original = world.bot.services.remote

    def quick_remote(host: str | None = None, *, timeout_s: float | None = None) -> RemoteHost:
        remote = original(host, timeout_s=timeout_s)
        remote.command_timeout_s = min(1.5, timeout_s or 1.5)
        remote.connect_timeout_s = min(2.0, timeout_s or 2.0)
        return remote

    monkeypatch.setattr(world.bot.services, "remote", quick_remote)
    faults: dict[str, tuple[Callable[[], None], Callable[[], None]]] = {
        "refused": (world.host.stop, world.host.start),
        "auth failed": (lambda: world.host.set_reject_auth(True), lambda: world.host.set_reject_auth(False)),
        "command timeout": (
            lambda: world.host.set_command_delay(5.0),
            lambda: world.host.set_command_delay(0),
        ),
    }
    for name, (inject, clear) in faults.items():
        inject()
        run_cells(world, "ssh", name, COMMANDS)
        clear()
        still_up(world, "ssh", name)
    check_family(world, before, "ssh", caplog)


def test_ssh_host_key_changed(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    other = generate_ed25519_key()
    with Demo(
        google_timeout_s=1.0, http_timeout_s=1.0, ssh_host_keys=[f"{other.get_name()} {other.get_base64()}"]
    ) as demo:
        before = queued_resources(demo)
        outcomes = run_cells(demo, "ssh", "host key changed", COMMANDS)
        still_up(demo, "ssh", "host key changed")
        for line in ("/vllm status", "/vllm logs --tail 20"):
            cell = next(o for o in outcomes if o.command == line)
            assert not cell.problems
        check_family(demo, before, "ssh", caplog)
