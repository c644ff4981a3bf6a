"""Replace, don't remove: `VllmContainer.restart` over real SSH (paramiko, host key pinned) against the
SIMULATED TPU VM. The image is pulled while the old container serves; a refused pull touches nothing and
says docker's own words; a new container that fails to start is removed and the old one comes back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ops.container import VllmContainer, VllmSpec
from ops.errors import OpsError, QuotaExceeded
from ops.ssh import RemoteHost
from ops.vllm import VllmClient
from sim import scenario
from sim.host import HostSimulator, generate_ed25519_key
from sim.vllm import VllmSimulator

SETTLE_S = 1.0


@pytest.fixture
def vllm() -> Iterator[VllmSimulator]:
    sim = VllmSimulator({**scenario.load()["vllm"], "latency_s": 0.0}).start()
    yield sim
    sim.stop()


@pytest.fixture
def world(vllm: VllmSimulator) -> Iterator[tuple[HostSimulator, RemoteHost]]:
    cfg: dict[str, Any] = {**scenario.load()["host"], "boot_s": 0.3, "fail_after_s": 0.2}
    host = HostSimulator(cfg, vllm=vllm).start()
    key = generate_ed25519_key()
    host.authorize(key)
    remote = RemoteHost(
        host.host, host.port, user=host.user, pkey=key, pinned_host_keys=host.pinned_host_keys
    )
    yield host, remote
    remote.close()
    host.stop()


def restart(remote: RemoteHost, image: str, vllm: VllmSimulator) -> Any:
    spec = VllmSpec(image=image, port=int(vllm.url.rsplit(":", 1)[1]))
    return VllmContainer(remote, "vllm").restart(spec, settle_s=SETTLE_S)


def _changes(host: HostSimulator) -> list[str]:
    """The commands that would change a container (anything but reading and pulling)."""
    reads = ("docker inspect", "docker image inspect", "docker pull", "docker logs")
    return [c for c in host.commands if not c.startswith(reads)]


@pytest.mark.parametrize(
    ("image", "setup", "words"),
    [
        (
            "vllm/vllm-tpu:does-not-exist",
            None,
            "manifest for vllm/vllm-tpu:does-not-exist not found: manifest unknown",
        ),
        ("someone/private-vllm:v1", None, "pull access denied for someone/private-vllm"),
        ("vllm/vllm-tpu:nightly", "rate", "toomanyrequests: You have reached your pull rate limit"),
        ("vllm/vllm-tpu:nightly", "disk", "failed to register layer: write /var/lib/docker/tmp/"),
    ],
    ids=["no-such-tag", "no-such-repository", "rate-limited", "disk-full"],
)
def test_a_refused_pull_touches_nothing_and_says_dockers_words(
    world: tuple[HostSimulator, RemoteHost], vllm: VllmSimulator, image: str, setup: str | None, words: str
) -> None:
    host, remote = world
    before = VllmContainer(remote, "vllm").status()
    if setup == "rate":
        host.set_pull_rate_limited(True)
    if setup == "disk":
        host.set_disk_full(True)
    with pytest.raises(OpsError) as refused:
        restart(remote, image, vllm)
    assert words in refused.value.message and "vllm was not touched" in refused.value.message
    assert "See 'docker" not in refused.value.message
    if setup == "rate":
        assert isinstance(refused.value, QuotaExceeded)
    if setup == "disk":
        assert (
            "no space left on device" in refused.value.message and "docker system prune" in refused.value.hint
        )
    assert _changes(host) == []
    after = VllmContainer(remote, "vllm").status()
    assert after.running and after.started_at == before.started_at and after.image == before.image
    with VllmClient(vllm.url, timeout_s=2) as client:
        assert client.health().state == "ready"


def test_a_new_tag_is_pulled_then_the_old_container_is_replaced(
    world: tuple[HostSimulator, RemoteHost], vllm: VllmSimulator
) -> None:
    host, remote = world
    outcome = restart(remote, "vllm/vllm-tpu:nightly", vllm)
    assert outcome.replaced and outcome.pulled and outcome.previous_image == "vllm/vllm-tpu:gemma4"
    assert outcome.status.running and outcome.status.image == "vllm/vllm-tpu:nightly"
    assert host.container_state("vllm-previous") == "absent"
    order = [c.split(" --")[0].split(" -- ")[0] for c in host.commands if "docker" in c]
    pull, stop = order.index("docker pull"), order.index("docker stop")
    assert order.index("docker image inspect") < pull < stop, order  # pulled while the old one served
    assert (
        stop < order.index("docker rename") < max(i for i, c in enumerate(order) if c.startswith("docker rm"))
    )


def test_a_new_container_that_fails_at_once_is_removed_and_the_old_one_comes_back(
    world: tuple[HostSimulator, RemoteHost], vllm: VllmSimulator
) -> None:
    host, remote = world
    before = VllmContainer(remote, "vllm").status()
    host.set_run_failing_log("vllm-kv-cache-insufficient.log")  # every new container fails like this
    outcome = restart(remote, "vllm/vllm-tpu:nightly", vllm)
    assert not outcome.replaced and outcome.restored and outcome.error is not None
    assert "exited with code 1 at once" in outcome.error.message
    assert "ValueError: To serve at least one request" in outcome.error.message
    assert outcome.status.running and outcome.status.image == before.image
    assert host.container_state("vllm-previous") == "absent"


def test_a_port_held_by_another_process_is_named(
    world: tuple[HostSimulator, RemoteHost], vllm: VllmSimulator
) -> None:
    """Something outside docker holds the vLLM port: the new container exits with vLLM's bind error, which
    the outcome names; the old container is put back (it cannot bind either, and says the same)."""
    host, remote = world
    host.set_stale_server(True)
    outcome = restart(remote, "vllm/vllm-tpu:gemma4", vllm)
    assert outcome.restored and outcome.error is not None
    assert "OSError: [Errno 98] Address already in use" in outcome.error.message
    assert outcome.status.image == "vllm/vllm-tpu:gemma4" and not outcome.pulled
    with VllmClient(vllm.url, timeout_s=2) as client:
        assert client.health().state == "ready"  # the other process still answers


def test_an_aside_copy_left_by_an_interrupted_replace_is_cleared_first(
    world: tuple[HostSimulator, RemoteHost], vllm: VllmSimulator
) -> None:
    host, remote = world
    assert host.execute("docker stop -- vllm-longctx")[0] == 0
    assert host.execute("docker rename -- vllm-longctx vllm-previous")[0] == 0
    outcome = restart(remote, "vllm/vllm-tpu:gemma4", vllm)
    assert outcome.replaced and host.container_state("vllm-previous") == "absent"


def test_the_simulated_docker_speaks_dockers_words(world: tuple[HostSimulator, RemoteHost]) -> None:
    host, _ = world
    assert host.execute("docker image inspect -- vllm/vllm-tpu:nope") == (
        1,
        "[]\n",
        "Error response from daemon: No such image: vllm/vllm-tpu:nope\n",
    )
    status, out, err = host.execute("docker pull -- vllm/vllm-tpu:nightly")
    assert status == 0 and err == ""
    assert out.startswith("nightly: Pulling from vllm/vllm-tpu\n")
    assert (
        "Status: Downloaded newer image for vllm/vllm-tpu:nightly\ndocker.io/vllm/vllm-tpu:nightly\n" in out
    )
    assert "Status: Image is up to date" in host.execute("docker pull -- vllm/vllm-tpu:nightly")[1]
    status, _, err = host.execute("docker rename -- vllm vllm-longctx")
    assert status == 1 and 'Conflict. The container name "/vllm-longctx" is already in use' in err
    assert (
        host.execute("docker rename -- nothing x")[2]
        == "Error response from daemon: No such container: nothing\n"
    )
    status, _, err = host.execute(
        "docker run -d --name fresh -e HF_TOKEN -- vllm/vllm-tpu:nope vllm serve google/gemma-4-31B-it"
    )
    assert status == 125
    assert err == (
        "Unable to find image 'vllm/vllm-tpu:nope' locally\n"
        "docker: Error response from daemon: manifest for vllm/vllm-tpu:nope not found: manifest unknown: "
        "manifest unknown.\nSee 'docker run --help'.\n"
    )
