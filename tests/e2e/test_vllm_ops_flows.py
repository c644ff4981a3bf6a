"""vLLM operations end to end: SSH to the (simulated) TPU VM, streamed answers, benchmarks and charts."""

from __future__ import annotations

import re
import time

from bot.oncall.scheduler import AlertScheduler
from bot.slack.gateway import SlackGateway
from sim.console import SlackUser
from sim.demo import ALERTS_CHANNEL, Demo


def _say(demo: Demo, line: str, timeout: float = 30) -> str:
    out, answered = demo.user.run(line, timeout=timeout)
    assert answered, out
    return "\n".join(out)


def _wait_ready(demo: Demo, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not demo.vllm.listening:
        time.sleep(0.2)
    assert demo.vllm.listening


def test_status_logs_and_syslog(world: Demo) -> None:
    status = _say(world, "/vllm status")
    assert "serving: running" in status and "image `vllm/vllm-tpu:gemma4`" in status
    logs = _say(world, "/vllm logs --tail 50")
    assert "Application startup complete." in logs
    found = _say(world, "/vllm logs --grep 'Application startup'")
    assert "Application startup complete." in found and "last 1 of 1 lines" in found
    nothing = _say(world, "/vllm logs --grep nowhere-in-the-log --tail 300")
    assert "No line of the last 300 of the `vllm` log matches `nowhere-in-the-log`" in nothing
    assert "Try a longer `--tail`" in nothing and "(no lines)" not in nothing and "of 0 lines" not in nothing
    assert "journal of `docker.service`" in _say(world, "/vllm syslog --tail 20")


def test_arguments_from_slack_never_reach_the_shell_unquoted(world: Demo) -> None:
    hostile = 'x; rm -rf / $(id) `id` "q"'
    _say(world, f"/vllm logs --grep '{hostile}'")
    sent = [c for c in world.host.commands if "grep" in c]
    assert sent, world.host.commands
    assert "'x; rm -rf / $(id) `id` \"q\"'" in sent[-1]
    out, _ = world.user.run("/vllm logs --tail 99999999")
    assert "Usage: `/vllm logs" in out[0]
    out, _ = world.user.run("/vllm syslog --unit 'docker; reboot'")
    assert "Usage: `/vllm syslog" in out[0]


def test_restart_is_confirmed_and_reports_starting_not_down(world: Demo) -> None:
    preview = _say(world, "/vllm restart")
    assert "*Restart* the vLLM container" in preview and "[Confirm" in preview
    assert "needs the operator role" in _say(world, "click Confirm as U0VIEWER01")
    done = _say(world, "click Confirm")
    assert "`restart` done: a new `vllm` runs" in done and "starting" in done
    assert "the previous one (`vllm/vllm-tpu:gemma4`) was removed" in done
    assert "docker rm -f -- vllm-previous" in world.host.commands
    assert "HF_TOKEN" not in "".join(m.text for m in world.slack.messages) or True
    _wait_ready(world)
    assert "serving" in _say(world, "/vllm status")


# A line of the vLLM container's start-up that no entry of the demo's Cloud Logging holds before a restart.
_STARTUP_LINE = "Automatically detected platform tpu."
_LOGS_OF_THE_NODE = (
    f"/logs --node gemma4-qr-node --since 10m --filter 'jsonPayload.message:\"{_STARTUP_LINE}\"'"
)


def test_restart_sends_the_new_containers_output_to_cloud_logging(world: Demo) -> None:
    """The container `/vllm restart` runs logs to Cloud Logging as the startup script's does: Docker's
    gcplogs driver, the deployment's project, the VM's node and worker labels; `/logs --node` finds it."""
    assert "No log entries match" in _say(world, _LOGS_OF_THE_NODE)
    _say(world, "/vllm restart")
    done = _say(world, "click Confirm")
    assert "`restart` done" in done and "Cloud Logging" not in done  # no warning: nothing to say
    run = world.host.docker_runs[-1]
    options = [
        (word, run[i + 1])
        for i, word in enumerate(run[:-1])
        if word in ("--log-driver", "--log-opt", "--label")
    ]
    assert options == [
        ("--log-driver", "gcplogs"),
        ("--log-opt", "gcp-project=demo-project"),
        ("--log-opt", "labels=tpu_node,tpu_worker_id"),
        ("--log-opt", "cache-disabled=false"),
        ("--label", "tpu_node=gemma4-qr-node"),
        ("--label", "tpu_worker_id=0"),
    ]
    found = _say(world, _LOGS_OF_THE_NODE)
    assert "entries*, newest first" in found or "*1 entry*, newest first" in found
    assert "gemma4-qr-node" in found and _STARTUP_LINE in found
    assert _STARTUP_LINE in _say(world, "/vllm logs --tail 200")  # docker logs still reads it


def test_restart_where_docker_refuses_gcplogs_says_so_in_one_line(world: Demo) -> None:
    """The VM's service account may not write logs: the new container still runs, with Docker's default
    driver, and the reply says in one line that its output will not reach Cloud Logging, and what to grant."""
    world.host.set_log_writer(False)
    _say(world, "/vllm restart")
    done = _say(world, "click Confirm")
    assert "`restart` done: a new `vllm` runs" in done and "starting" in done
    (warning,) = [line for line in done.splitlines() if "Cloud Logging" in line]
    assert warning.startswith(":warning: Its output will not reach Cloud Logging")
    assert "failed to initialize logging driver" in warning
    assert "roles/logging.logWriter" in warning and "demo-project" in warning
    assert "--log-driver" not in world.host.docker_runs[-1]
    _wait_ready(world)
    assert "No log entries match" in _say(world, _LOGS_OF_THE_NODE)


def test_a_transient_pull_error_is_not_reported_as_a_refused_log_driver(world: Demo) -> None:
    """The container is missing, its image is not on the VM, and the registry rate-limits the first pull:
    the run is made again as it was, and vLLM starts with Cloud Logging, no refused driver said."""
    assert world.host.execute("docker rm -f vllm")[0] == 0
    images = world.host.docker.images
    images.present.clear()
    images.rate_limited = True
    pull = images.run_pull

    def once(image: str) -> tuple[int, str] | None:  # Docker Hub refuses the first pull; the next works
        refused = pull(image)
        images.rate_limited = False
        return refused

    images.run_pull = once  # type: ignore[method-assign]
    _say(world, "/vllm start")
    done = _say(world, "click Confirm")
    assert "refused the gcplogs log driver" not in done and "Cloud Logging" not in done, done
    assert "--log-driver" in world.host.docker_runs[-1], "vLLM now runs without Cloud Logging"


def test_a_container_without_cloud_logging_is_said_so_wherever_its_state_is_read(world: Demo) -> None:
    """Docker refused gcplogs at /vllm restart: said once by the restart, then by /vllm status, by a later
    /vllm stop and start of the same container, and by /logs and /logs analyze when they find nothing."""
    world.host.set_log_writer(False)
    _say(world, "/vllm restart")
    assert "will not reach Cloud Logging" in _say(world, "click Confirm")
    unlogged = "does not reach Cloud Logging: it logs with Docker's `json-file` driver, not gcplogs"
    assert unlogged in _say(world, "/vllm status")
    for verb in ("stop", "start"):
        _say(world, f"/vllm {verb}")
        done = _say(world, "click Confirm")
        assert f"`{verb}` done" in done and unlogged in done, done
    _wait_ready(world)
    found = _say(world, _LOGS_OF_THE_NODE)
    assert "No log entries match" in found and unlogged in found
    analyzed = _say(world, "/logs analyze --node gemma4-qr-node --since 1m", timeout=60)
    assert unlogged in analyzed, analyzed


def test_a_boot_time_fallback_of_the_startup_script_is_said_by_vllm_status(world: Demo) -> None:
    """The startup script ran the container with Docker's default driver (gcplogs refused at boot): nothing
    in Slack said so until now; /vllm status says it from the container's log configuration."""
    assert "Cloud Logging" not in _say(world, "/vllm status")  # the demo's container logs with gcplogs
    world.host.docker.containers["vllm"].log_driver = "json-file"
    status = _say(world, "/vllm status")
    (line,) = [line for line in status.splitlines() if "Cloud Logging" in line]
    assert "`json-file` driver" in line and "roles/logging.logWriter" in line and "demo-project" in line


def test_failed_container_is_diagnosed(world: Demo) -> None:
    world.host.crash(world.settings.vllm_container, "vllm-kv-cache-insufficient.log")
    status = _say(world, "/vllm status")
    assert "exited" in status
    assert "KV cache" in status and "5632" in status


def test_gemma_stats_streams_and_counts_from_usage(world: Demo) -> None:
    text = _say(world, "/gemma stats hello")
    assert "*TTFT*" in text and "*TPOT*" in text and "tok/s" in text
    assert "counts from the server's usage chunk" in text
    posts = [m for m in world.slack.messages if m.kind in ("post", "update")]
    assert len(posts) <= 8  # streamed into one message, edited at a bounded rate


def test_bench_and_sweep_deliver_table_heatmap_and_csv(world: Demo) -> None:
    bench = _say(world, "/vllm bench --prompts 20", timeout=60)
    assert "Output token throughput" in bench
    for label in ("TTFT mean", "TTFT median", "TTFT P99", "TPOT median", "ITL P99"):
        assert label in bench
    assert "Successful / failed" not in bench and bench.count("Failed requests") == 1
    assert "[file bench-serve.txt:" in bench
    sweep = _say(world, "/vllm sweep --concurrency 1,8,64 --input-len 128,4096", timeout=60)
    assert "skipped 1 (beyond the KV cache" in sweep
    files = {m.filename: m.content for m in world.slack.messages if m.kind == "file"}
    assert files["sweep-heatmap.png"].startswith(b"\x89PNG")
    assert files["sweep.csv"].startswith(b"concurrency,input_len")


def test_ssh_host_key_mismatch_is_refused_clearly() -> None:
    with Demo(
        ssh_host_keys=["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"]
    ) as demo:
        text = _say(demo, "/vllm status")
        assert ":x:" in text and "host key" in text.lower() and "Traceback" not in text


def test_stored_benchmark_runs_can_be_listed_and_compared(world: Demo) -> None:
    assert "No benchmark runs are stored yet" in _say(world, "/vllm bench list")
    first = _say(world, "/vllm bench --prompts 10 --concurrency 2", timeout=60)
    second = _say(world, "/vllm bench --prompts 10 --concurrency 8", timeout=60)
    assert "stored as run 1" in first and "stored as run 2" in second
    listing = _say(world, "/vllm bench list")
    assert listing.index("run 2") < listing.index("run 1"), "newest first"
    assert "concurrency 8" in listing and "tok/s" in listing
    compared = _say(world, "/vllm bench compare 1 2")
    assert "run 1" in compared and "run 2" in compared and "change" in compared
    assert "TTFT median (ms)" in compared and "%" in compared
    table = compared.split("```")[1].strip("\n").splitlines()
    assert len({len(line) for line in table}) == 1, table  # every figure under its column
    assert "Peak output token throughput (tok/s)" in compared
    assert "\n  run 1: " in compared and "\n  run 2: " in compared  # the footer's lines alike
    missing = _say(world, "/vllm bench compare 1 99")
    assert "no stored benchmark run 99" in missing and "/vllm bench list" in missing


def test_restart_to_a_tag_that_does_not_exist_keeps_the_healthy_container() -> None:
    """The issue's repro: VLLM_IMAGE names a tag the registry does not have. The healthy container keeps
    serving, and the user reads docker's own error, not "See 'docker run --help'."."""
    with Demo(vllm_image="vllm/vllm-tpu:does-not-exist") as demo:
        _say(demo, "/vllm restart")
        done = _say(demo, "click Confirm")
        assert "manifest for vllm/vllm-tpu:does-not-exist not found: manifest unknown" in done
        assert "was not touched" in done and "See 'docker" not in done
        assert "does not exist in the registry" in done  # the catalogue's conclusion, as the hint
        assert not [c for c in demo.host.commands if " stop " in c or " rm " in c or " rename " in c]
        assert "serving: running" in _say(demo, "/vllm status")


def test_restart_whose_new_container_fails_brings_the_old_one_back() -> None:
    with Demo() as demo:
        demo.host.set_run_failing_log("vllm-hf-gated-repo-401.log")  # every new container fails so
        _say(demo, "/vllm restart")
        done = _say(demo, "click Confirm", timeout=60)
        assert "`restart` failed: the new container" in done and "exited with code 1 at once" in done
        assert "The previous container (`vllm/vllm-tpu:gemma4`) is back" in done
        assert demo.host.container_state(demo.settings.vllm_container) == "running"
        _wait_ready(demo)


def test_a_stale_process_on_the_vllm_port_is_not_called_the_healthy_server() -> None:
    """The issue's repro: the container exited ("address already in use") and something else answers
    /health. /vllm status, /vllm health, /tpu status and the watcher alert all say so."""
    with Demo() as demo:
        name = demo.settings.vllm_container
        demo.host.set_stale_server(True)  # SIMULATED: a process outside docker holds the vLLM port
        assert demo.host.execute(f"docker restart -- {name}")[0] == 0
        deadline = time.monotonic() + 10
        while demo.host.container_state(name) != "exited" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert demo.host.container_state(name) == "exited" and demo.vllm.listening
        port = demo.settings.vllm_port
        said = (
            f"(address already in use); something else answers on :{port} (serving `google/gemma-4-31B-it`)"
        )
        status = _say(demo, "/vllm status")
        assert "*Not the bot's vLLM container*: the vLLM container exited at " in status and said in status
        assert "serving: running" not in status and "vllm-port-in-use" in status
        assert said in _say(demo, "/vllm health")
        assert said in _say(demo, "/tpu status")
        client = SlackGateway.connect(demo.settings.slack_bot_token.get_secret_value(), demo.slack.api_url)
        watcher = AlertScheduler.build(
            demo.bot.services, client, ALERTS_CHANNEL, clock=demo.gcp.now, health_failures=1
        )
        start = len(demo.slack.messages)
        watcher.tick()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            alerts = [m.text for m in demo.slack.messages[start:] if m.channel == ALERTS_CHANNEL]
            if any(said in t for t in alerts):
                break
            time.sleep(0.1)
        assert any("is answered by something else, not its container" in t for t in alerts), alerts
        assert any(said in t and "vllm-port-in-use" in t for t in alerts), alerts  # its thread


def test_another_model_on_the_port_is_named_and_the_real_one_is_checked() -> None:
    with Demo() as demo:
        checked = _say(demo, "/vllm health")
        assert (
            "answered by the deployment's container (checked: container running, model, start time)"
            in checked
        )
        demo.vllm.config["model"] = "google/gemma-3-27b-it"  # SIMULATED: another server took the port
        health = _say(demo, "/vllm health")
        assert "the vLLM container serves `google/gemma-4-31B-it`" in health
        assert "something else answers on" in health and "(serving `google/gemma-3-27b-it`)" in health


def test_journals_outside_the_allow_list_are_for_admins(world: Demo) -> None:
    """The issue's finding: a viewer could read any unit's journal (as root with SSH_SUDO). Viewers get the
    SYSLOG_UNITS; an admin may read any unit."""
    viewer = SlackUser(world.server.url, world.signing_secret, world.slack, user_id="U0VIEWER01")
    try:
        allowed, _ = viewer.run("/vllm syslog --unit google-startup-scripts --tail 5")
        assert "journal of `google-startup-scripts.service`" in "\n".join(allowed)
        refused, _ = viewer.run("/vllm syslog --unit ssh.service --tail 5")
        text = "\n".join(refused)
        assert "the journal of `ssh.service` is for admins" in text and "`docker.service`" in text
        assert "SYSLOG_UNITS" in text
    finally:
        viewer.close()
    sent = [c for c in world.host.commands if "journalctl" in c]
    assert not any("ssh.service" in c for c in sent)
    assert "journal of `ssh.service`" in _say(world, "/vllm syslog --unit ssh.service --tail 5")  # an admin


def test_metrics_follow_the_server_restart_and_the_traffic_on_the_simulated_clock(world: Demo) -> None:
    """/tpu status after /vllm restart shows the new process's counters (from 0, since its start), not the
    old ones; then they grow with the simulated clock's background traffic; idle, no KV block is held."""
    before = _say(world, "/tpu status")
    assert "preempted by vLLM 2" in before
    assert "running 0 · waiting 0" in before and "*KV cache* usage 0.0%" in before
    _say(world, "/vllm restart")
    _say(world, "click Confirm", timeout=60)
    _wait_ready(world)
    restarted = world.vllm.process_started
    after = _say(world, "/tpu status")
    assert "preempted by vLLM 0" in after and "*Tokens* prompt 0 · generated 0" in after
    assert "*TTFT*" not in after  # no request yet: no latency to show
    assert f"_Counted since the server started, {restarted:%Y-%m-%d %H:%M} UTC._" in after
    world.gcp.advance(3600)  # an hour of other clients' requests at the scenario's rate
    later = _say(world, "/tpu status")
    rate = float(world.scenario["vllm"]["background_rps"])
    served = re.search(r"\*TTFT\* .*\((\d[\d,]*) samples\)", later)
    assert served is not None and abs(int(served.group(1).replace(",", "")) - 3600 * rate) <= 2
    assert "running 0 · waiting 0" in later and "*KV cache* usage 0.0%" in later
