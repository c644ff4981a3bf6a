"""A container the bot runs sends its output to Cloud Logging as the startup script's does: the bot's
`docker run` over real SSH (paramiko, host key pinned) on the SIMULATED TPU VM (sim.host) carries Docker's
gcplogs driver, the project and the VM's own node and worker labels (read from its tpu-env metadata), and
its lines reach the Google simulator's Cloud Logging, read back with the real google-cloud-logging client
by the bot's node filter. Where Docker refuses the driver, the container still runs, with the default
driver, and the route says why."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from ops.errors import OpsError, QuotaExceeded
from ops.gcp.cloudlogs import LogEntry, build_filter, fetch
from ops.vllm.container import VllmContainer, VllmSpec
from ops.vllm.dockerrun import UNKNOWN_NODE
from ops.vllm.ssh import RemoteHost
from sim import scenario
from sim.gcp import GcpSimulator
from sim.host import HostSimulator, generate_ed25519_key
from sim.vllm import VllmSimulator

PROJECT = "vmlogs-project"
NODE = "gemma4-qr-node"


@pytest.fixture
def world() -> Iterator[tuple[HostSimulator, GcpSimulator, RemoteHost]]:
    gcp = GcpSimulator({"project": PROJECT, "google": {"logs": {"noise": {"count": 0}, "audit": False}}})
    vllm = VllmSimulator({**scenario.load()["vllm"], "latency_s": 0.0})
    host_config: dict[str, Any] = {**scenario.load()["host"], "boot_s": 0.3, "fail_after_s": 0.2}
    host = HostSimulator(host_config, vllm=vllm)
    host.link_cloud_logging(gcp)
    key = generate_ed25519_key()
    host.authorize(key)
    with gcp, vllm, host:
        remote = RemoteHost(
            host.host, host.port, user=host.user, pkey=key, pinned_host_keys=host.pinned_host_keys
        )
        yield host, gcp, remote
        remote.close()


def _options(argv: list[str], name: str) -> list[str]:
    return [argv[i + 1] for i, word in enumerate(argv[:-1]) if word == name]


def _node_entries(gcp: GcpSimulator, node: str) -> list[LogEntry]:
    query = build_filter(timedelta(minutes=10), project=PROJECT, node=node, now=gcp.now())
    return list(fetch(PROJECT, query, api_endpoint=gcp.url))


def test_a_restarted_container_logs_to_cloud_logging_labelled_with_the_vms_node(
    world: tuple[HostSimulator, GcpSimulator, RemoteHost],
) -> None:
    host, gcp, remote = world
    container = VllmContainer(remote, "vllm")
    assert _node_entries(gcp, NODE) == []  # the startup script's container (before the link) wrote none here
    outcome = container.restart(VllmSpec(project=PROJECT), settle_s=0.4)
    assert outcome.replaced and outcome.status.running
    run = host.docker_runs[-1]
    assert _options(run, "--log-driver") == ["gcplogs"]
    assert _options(run, "--log-opt") == [
        f"gcp-project={PROJECT}",
        "labels=tpu_node,tpu_worker_id",
        "cache-disabled=false",
    ]
    assert _options(run, "--label") == [f"tpu_node={NODE}", "tpu_worker_id=0"]
    assert container.log_route is not None and container.log_route.cloud_logging
    assert (container.log_route.node, container.log_route.worker) == (NODE, 0)
    assert container.status().log_driver == "gcplogs"

    entries = _node_entries(gcp, NODE)  # the bot's own filter: the node label of the container's entries
    messages = [e.message for e in entries]
    assert any(m.endswith("Application startup complete.") for m in messages)  # printed during the settle
    assert any("Automatically detected platform tpu." in m for m in messages)
    assert {(e.log_name, e.resource_type, e.node_id, e.worker_id) for e in entries} == {
        (f"projects/{PROJECT}/logs/gcplogs-docker-driver", "gce_instance", NODE, "0")
    }
    # the shape the scenario gives the startup script's container lines (sim.gcp: payload container)
    written = [b for b in gcp.log_entries() if b["logName"].endswith("/gcplogs-docker-driver")]
    startup = gcp.add_log_entry("a line of the startup script's container", payload="container", node_id=NODE)
    for body in written:
        assert set(body) == set(startup) and "severity" not in body
        assert set(body["jsonPayload"]) == set(startup["jsonPayload"])
        assert body["jsonPayload"]["container"]["metadata"] == startup["jsonPayload"]["container"]["metadata"]
        assert body["jsonPayload"]["container"]["name"] == "/vllm"
    # docker logs still reads it (Docker's local copy beside the driver)
    assert container.logs(tail=1).strip().endswith("Application startup complete.")


def test_docker_refusing_gcplogs_still_starts_vllm_with_the_default_driver(
    world: tuple[HostSimulator, GcpSimulator, RemoteHost],
) -> None:
    host, gcp, remote = world
    host.set_log_writer(False)  # the VM's service account lacks roles/logging.logWriter
    container = VllmContainer(remote, "vllm")
    outcome = container.restart(VllmSpec(project=PROJECT), settle_s=0.4)
    assert outcome.replaced and outcome.status.running
    tried, ran = host.docker_runs[-2:]
    assert "--log-driver" in tried and "--log-driver" not in ran and "--label" not in ran
    assert "docker rm -f -- vllm" in host.commands  # the container docker created, whose driver failed
    route = container.log_route
    assert route is not None and not route.cloud_logging
    assert route.refused is not None and "failed to initialize logging driver" in route.refused
    assert "logging.logEntries.create" in route.refused
    assert container.status().log_driver == "json-file"  # docker inspect's HostConfig.LogConfig.Type
    assert _node_entries(gcp, NODE) == []
    assert container.logs(tail=1).strip().endswith("Application startup complete.")


@pytest.mark.parametrize(
    ("node_id", "worker_id"),
    [(None, 0), ("Bad_Name", 99999), ("x'; touch PWNED; echo '", "$(id)")],  # None: not a TPU VM
)
def test_a_vm_without_a_tpu_node_labels_the_entries_as_the_startup_script_does(
    world: tuple[HostSimulator, GcpSimulator, RemoteHost], node_id: str | None, worker_id: object
) -> None:
    host, gcp, remote = world
    host.config["node_id"], host.config["worker_id"] = node_id, worker_id
    container = VllmContainer(remote, "vllm")
    assert container.restart(VllmSpec(project=PROJECT), settle_s=0.2).replaced
    assert _options(host.docker_runs[-1], "--label") == [f"tpu_node={UNKNOWN_NODE}", "tpu_worker_id=0"]
    assert container.log_route is not None and container.log_route.node == UNKNOWN_NODE
    assert _node_entries(gcp, UNKNOWN_NODE)


def test_start_of_a_missing_container_runs_it_with_gcplogs_too(
    world: tuple[HostSimulator, GcpSimulator, RemoteHost],
) -> None:
    host, gcp, remote = world
    container = VllmContainer(remote, "vllm")
    container.rm()
    assert container.start(VllmSpec(project=PROJECT)).running
    assert "--log-driver" in host.docker_runs[-1] and _node_entries(gcp, NODE)
    assert container.log_route is not None and container.log_route.cloud_logging


def test_a_spec_without_a_project_keeps_dockers_default_driver(
    world: tuple[HostSimulator, GcpSimulator, RemoteHost],
) -> None:
    host, _, remote = world
    container = VllmContainer(remote, "vllm")
    assert container.restart(VllmSpec(), settle_s=0.2).replaced
    assert "--log-driver" not in host.docker_runs[-1] and container.log_route is None
    assert not [c for c in host.commands if c.startswith("curl ")]


def _rate_limited_once(host: HostSimulator) -> None:
    """The VM has no image yet, and the registry rate-limits its first pull only (Docker Hub's
    toomanyrequests)."""
    images = host.docker.images
    images.present.clear()
    images.rate_limited = True
    pull = images.run_pull

    def once(image: str) -> tuple[int, str] | None:
        refused = pull(image)
        images.rate_limited = False
        return refused

    images.run_pull = once  # type: ignore[method-assign]


def test_a_rate_limited_pull_is_not_run_again_at_once_and_says_when_to_try(
    world: tuple[HostSimulator, GcpSimulator, RemoteHost],
) -> None:
    """The registry refuses pulls until its window has passed: the run is not made again at once (a second
    pull would be refused too and count against the limit); the refusal says the window, and a start once
    the registry takes pulls again runs with the log driver."""
    host, gcp, remote = world
    container = VllmContainer(remote, "vllm")
    container.rm()
    _rate_limited_once(host)
    runs = len(host.docker_runs)
    with pytest.raises(QuotaExceeded) as refused:
        container.start(VllmSpec(project=PROJECT))
    assert len(host.docker_runs) == runs + 1, host.docker_runs[runs:]
    assert "does not retry at once" in refused.value.hint and "6 hours" in refused.value.hint, refused.value
    assert "requests per minute" in refused.value.hint
    assert container.start(VllmSpec(project=PROJECT)).running  # the window has passed
    assert "--log-driver" in host.docker_runs[-1]
    assert container.log_route is not None and container.log_route.cloud_logging
    assert _node_entries(gcp, NODE)


@pytest.mark.parametrize(
    ("image", "rate_limited", "error", "said"),
    [
        ("vllm/vllm-tpu:latest", True, QuotaExceeded, "pull rate limit"),
        ("vllm/vllm-tpu:no-such-tag", False, OpsError, "does not exist in the registry"),
        ("nobody/private-vllm:1", False, OpsError, "the registry refused the image"),
    ],
)
def test_a_refused_pull_is_reported_as_what_it_is_not_as_a_refused_log_driver(
    world: tuple[HostSimulator, GcpSimulator, RemoteHost],
    image: str,
    rate_limited: bool,
    error: type[OpsError],
    said: str,
) -> None:
    host, _, remote = world
    container = VllmContainer(remote, "vllm")
    container.rm()
    host.docker.images.present.clear()
    host.set_pull_rate_limited(rate_limited)
    runs = len(host.docker_runs)
    with pytest.raises(error) as raised:
        container.start(VllmSpec(project=PROJECT, image=image))
    assert said in raised.value.hint and "logging" not in raised.value.hint
    tried = host.docker_runs[runs:]
    assert all("--log-driver" in argv for argv in tried)  # never run without Cloud Logging for this
    assert len(tried) == 1  # neither a rate limit nor a wrong tag is run again at once
    assert container.log_route is None
