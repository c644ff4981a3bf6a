"""ops.vllm.container.VllmContainer over real SSH (paramiko client, host key pinned) against the SIMULATED TPU
VM
(sim.host.HostSimulator), linked to the vLLM simulator. Replace, don't remove: the image is pulled while the
old container serves; a refused pull touches nothing and says docker's own words; a new container that fails
to start is removed and the old one comes back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from ops.diagnosis.engine import diagnose
from ops.errors import AlreadyExists, NotFound, OpsError, QuotaExceeded
from ops.vllm.bench import parse_bench_serve
from ops.vllm.container import BenchParams, VllmContainer, VllmSpec
from ops.vllm.server import VllmClient
from ops.vllm.ssh import RemoteHost
from sim import scenario
from sim.host import HostSimulator, generate_ed25519_key
from sim.host.shell import NOT_ALLOWED
from sim.vllm import VllmSimulator

BOOT_S = 3.0  # long enough that "still booting" is seen after a restart's SSH round trips on a loaded machine
FAIL_S = 0.2


@pytest.fixture
def vllm() -> Iterator[VllmSimulator]:
    sim = VllmSimulator({**scenario.load()["vllm"], "latency_s": 0.0}).start()
    yield sim
    sim.stop()


@pytest.fixture
def world(vllm: VllmSimulator) -> Iterator[tuple[HostSimulator, RemoteHost]]:
    cfg: dict[str, Any] = {**scenario.load()["host"], "boot_s": BOOT_S, "fail_after_s": FAIL_S}
    host = HostSimulator(cfg, vllm=vllm).start()
    key = generate_ed25519_key()
    host.authorize(key)
    remote = RemoteHost(
        host.host,
        host.port,
        user=host.user,
        pkey=key,
        pinned_host_keys=host.pinned_host_keys,
        connect_timeout_s=5,
    )
    yield host, remote
    remote.close()
    host.stop()


def _wait(predicate: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def _health(vllm: VllmSimulator) -> str:
    with VllmClient(vllm.url, timeout_s=2) as client:
        return client.health().state


def test_status_of_running_exited_and_absent_containers(world: tuple[HostSimulator, RemoteHost]) -> None:
    _, remote = world
    running = VllmContainer(remote, "vllm").status()
    assert running.exists and running.running and running.state == "running"
    assert running.image == "vllm/vllm-tpu:gemma4" and running.restart_count == 0
    assert running.started_at is not None and running.started_at.tzinfo is not None
    exited = VllmContainer(remote, "vllm-longctx").status()
    assert (exited.exists, exited.running, exited.state, exited.exit_code) == (True, False, "exited", 1)
    assert exited.finished_at is not None and exited.started_at is not None
    assert exited.finished_at > exited.started_at
    absent = VllmContainer(remote, "nothing-here").status()
    assert (absent.exists, absent.state, absent.running) == (False, "absent", False)


def test_logs_tail_grep_since_and_diagnosis_of_a_failed_container(
    world: tuple[HostSimulator, RemoteHost],
) -> None:
    host, remote = world
    healthy = VllmContainer(remote, "vllm")
    last = healthy.logs(tail=1)
    assert last.strip().endswith("Application startup complete.")
    assert len(healthy.logs(tail=5).splitlines()) == 5
    assert healthy.logs(tail=200, grep="Application startup complete.").count("\n") == 1
    assert healthy.logs(tail=200, grep="no such text anywhere") == ""
    assert healthy.logs(tail=200, since="10m") == ""  # started 45 minutes ago, nothing since
    assert diagnose(healthy.logs(tail=1000)).findings == ()  # a healthy start-up log raises nothing
    failed = VllmContainer(remote, "vllm-longctx")
    text = failed.logs(tail=1000)
    (finding,) = diagnose(text).findings
    assert finding.name == "kv-cache-insufficient"
    assert finding.values["estimated_max_model_len"] == "5632"
    assert "docker logs --tail 1 -- vllm 2>&1" in host.commands
    with pytest.raises(NotFound):
        VllmContainer(remote, "nothing-here").logs(tail=10)
    with pytest.raises(NotFound):
        VllmContainer(remote, "nothing-here").logs(tail=10, grep="x")


def test_syslog(world: tuple[HostSimulator, RemoteHost]) -> None:
    _, remote = world
    container = VllmContainer(remote, "vllm")
    assert "dockerd[812]" in container.syslog("docker.service", tail=20)
    agent = container.syslog("google-guest-agent.service", tail=1)
    assert agent.strip().endswith("Updating keys for user tpu-chatops.")
    assert container.syslog("nothing.service", tail=5) == "-- No entries --\n"


def test_stop_start_restart_rm_drive_the_linked_vllm_simulator(
    world: tuple[HostSimulator, RemoteHost], vllm: VllmSimulator
) -> None:
    host, remote = world
    container = VllmContainer(remote, "vllm")
    assert _health(vllm) == "ready"

    stopped = container.stop()
    assert (stopped.state, stopped.running, stopped.exit_code) == ("exited", False, 0)
    assert _health(vllm) == "refused"

    started = container.start(VllmSpec())
    assert started.running
    assert host.commands[-2] == "docker start -- vllm"  # it existed: start, not run
    assert vllm.mode == "booting" and _health(vllm) == "refused"
    assert "Application startup complete." not in container.logs(tail=3)
    _wait(lambda: _health(vllm) == "ready")
    _wait(lambda: container.logs(tail=1).strip().endswith("Application startup complete."))

    outcome = container.restart(VllmSpec(max_model_len=8192), settle_s=0.2)
    restarted = outcome.status
    assert outcome.replaced and restarted.running and restarted.restart_count == 0  # a new container
    assert "docker rename -- vllm vllm-previous" in host.commands
    assert "docker rm -f -- vllm-previous" in host.commands
    run = next(c for c in reversed(host.commands) if "docker run" in c)
    assert "docker run -d --name vllm" in run and "--max-model-len 8192" in run
    assert _health(vllm) == "refused"
    _wait(lambda: _health(vllm) == "ready")

    container.rm()
    assert container.status().state == "absent"
    assert _health(vllm) == "refused"
    container.rm()  # idempotent
    with pytest.raises(NotFound):
        container.stop()


def test_second_container_fails_with_tpu_busy_until_restart_frees_it(
    world: tuple[HostSimulator, RemoteHost],
) -> None:
    host, remote = world
    second = VllmContainer(remote, "vllm-b")
    status = second.start(VllmSpec(port=8001))
    assert status.exists
    _wait(lambda: host.container_state("vllm-b") == "exited")
    assert second.status().exit_code == 1
    findings = diagnose(second.logs(tail=100)).findings
    assert findings[0].name == "tpu-device-busy"
    # restart of the second one still collides with the running "vllm"; after removing "vllm" it is healthy
    VllmContainer(remote, "vllm").rm()
    second.restart(VllmSpec(port=8001))
    time.sleep(FAIL_S + 0.2)
    assert second.status().running


def test_failing_run_replays_the_scenario_case(
    world: tuple[HostSimulator, RemoteHost], vllm: VllmSimulator
) -> None:
    host, remote = world
    host.set_run_failing_log("vllm-hbm-oom-program-load.log")
    container = VllmContainer(remote, "vllm")
    container.rm()
    container.start(VllmSpec())  # docker run: a new container, which fails
    assert _health(vllm) == "refused"
    _wait(lambda: not container.status().running)
    findings = diagnose(container.logs(tail=500)).findings
    assert findings[0].name == "tpu-hbm-oom-program-load"
    time.sleep(BOOT_S)
    assert _health(vllm) == "refused"  # a failing container never becomes ready


def test_crash_control(world: tuple[HostSimulator, RemoteHost], vllm: VllmSimulator) -> None:
    host, remote = world
    host.crash("vllm", "vllm-hbm-oom-allocate-buffer.log")
    status = VllmContainer(remote, "vllm").status()
    assert (status.state, status.exit_code) == ("exited", 1)
    assert _health(vllm) == "refused"
    assert (
        diagnose(VllmContainer(remote, "vllm").logs(tail=5)).findings[0].name == "tpu-hbm-oom-allocate-buffer"
    )


def test_run_errors_are_typed(world: tuple[HostSimulator, RemoteHost]) -> None:
    host, remote = world
    with pytest.raises(NotFound, match="hf-missing"):
        VllmContainer(remote, "new-one").start(VllmSpec(hf_token_secret="hf-missing"))
    host.set_pull_rate_limited(True)
    with pytest.raises(QuotaExceeded) as info:
        VllmContainer(remote, "new-one").start(VllmSpec(image="vllm/vllm-tpu:nightly"))
    assert "rate limit" in info.value.hint
    with pytest.raises(AlreadyExists):
        VllmContainer(remote, "vllm")._run(VllmSpec())


def test_bench_output_parses_with_figures_from_the_parameters(
    world: tuple[HostSimulator, RemoteHost],
) -> None:
    _, remote = world
    params = BenchParams(num_prompts=64, input_len=512, output_len=64, max_concurrency=8)
    result = parse_bench_serve(VllmContainer(remote, "vllm").bench(params))
    assert result.successful_requests == 64 and result.failed_requests == 0
    assert result.max_concurrency == 8
    assert result.total_input_tokens == 64 * 512 and result.total_generated_tokens == 64 * 64
    assert result.duration_s is not None and result.duration_s > 0
    assert result.output_throughput == pytest.approx(64 * 64 / result.duration_s, rel=0.01)
    assert result.peak_concurrent_requests == 8.0
    for value in (result.mean_ttft_ms, result.median_tpot_ms, result.p99_itl_ms):
        assert value is not None and value > 0
    faster = parse_bench_serve(
        VllmContainer(remote, "vllm").bench(BenchParams(num_prompts=64, max_concurrency=1))
    )
    assert faster.mean_tpot_ms is not None and result.mean_tpot_ms is not None
    assert faster.mean_tpot_ms < result.mean_tpot_ms  # less contention, faster decode
    VllmContainer(remote, "vllm").stop()
    with pytest.raises(Exception, match="not running"):
        VllmContainer(remote, "vllm").bench(params)


def test_bench_beyond_max_model_len_fails_its_first_request(
    world: tuple[HostSimulator, RemoteHost], vllm: VllmSimulator
) -> None:
    """As the real benchmarker: vLLM refuses the initial test request (HTTP 400, prompt + max_tokens beyond
    max_model_len), the run stops there with the reason phrase, and no figure is printed."""
    _, remote = world
    limit = int(vllm.config["max_model_len"])
    params = BenchParams(num_prompts=5, input_len=limit - 100, output_len=101, max_concurrency=2)
    with pytest.raises(OpsError) as info:
        VllmContainer(remote, "vllm").bench(params)
    assert "Initial test run failed" in info.value.message and "Bad Request" in info.value.message
    assert '"POST /v1/completions HTTP/1.1" 400 Bad Request' in VllmContainer(remote, "vllm").logs(tail=5)
    fits = parse_bench_serve(VllmContainer(remote, "vllm").bench(replace(params, output_len=100)))
    assert fits.successful_requests == 5 and fits.failed_requests == 0


def test_sudo_prefix_and_unknown_commands(world: tuple[HostSimulator, RemoteHost]) -> None:
    host, _ = world
    key = generate_ed25519_key()
    host.authorize(key)
    with RemoteHost(
        host.host, host.port, user=host.user, pkey=key, pinned_host_keys=host.pinned_host_keys, sudo=True
    ) as r:
        assert VllmContainer(r, "vllm").status().running
        assert host.commands[-1] == "sudo -n docker inspect --type container -- vllm"
        VllmContainer(r, "vllm").restart(VllmSpec(), settle_s=0.2)
        runs = [c for c in host.commands if "docker run" in c]
        assert len(runs) == 1 and runs[0].count("sudo -n --preserve-env=HF_TOKEN docker run") == 1
        assert all(c.startswith(("sudo -n ", "HF_TOKEN=")) for c in host.commands[-8:])
        time.sleep(FAIL_S + 0.1)
        assert VllmContainer(r, "vllm").status().running  # the token reached the container (no 401)
    for command in (
        "rm -rf /",
        "docker ps",
        "docker logs vllm; id",
        "cat /etc/passwd",
        "docker logs $(id)",
        "docker logs `id`",
        "docker logs *",
    ):
        status, _, err = host.execute(command)
        assert status == 127 and NOT_ALLOWED in err, command


# ---- replace, don't remove: `restart` keeps the old container until the new one runs

SETTLE_S = 1.0


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
