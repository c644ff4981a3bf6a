"""The bad day through the bot: handed failure cases reach Slack named, with their fix and key lines, from
`/vllm logs`, `/vllm status`, `/vllm health`, `/logs analyze`, `/tpu describe`, `/tpu status` and the
alerts' threads (issue "The bad day")."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.oncall.scheduler import AlertScheduler
from bot.slack.gateway import SlackGateway
from sim.demo import Demo
from sim.scenario import load
from tests.cases import case_text

CHANNEL = "C0ALERTS01"

# Handed log cases, the family /vllm logs must name, and a fix term it must show.
LOG_CASES = [
    ("vllm-hbm-oom-program-load.log", "tpu-hbm-oom-program-load", "--gpu-memory-utilization"),
    ("vllm-hbm-oom-allocate-buffer.log", "tpu-hbm-oom-allocate-buffer", "fragmentation"),
    ("vllm-kv-cache-insufficient.log", "kv-cache-insufficient", "at or below 5632"),
    ("vllm-request-too-long.log", "request-too-long", "shorten the prompt"),
    ("vllm-hf-gated-repo-401.log", "hf-gated-repo-401", "Secret Manager"),
    ("hf-gated-repo-403-not-authorized.log", "hf-gated-repo-403", "token's own account"),
    ("docker-pull-rate-limit.log", "docker-pull-rate-limit", "mirror"),
    ("docker-no-space-left.log", "disk-full", "docker system prune"),
    ("vllm-tpu-device-busy.log", "tpu-device-busy", "docker rm -f"),
]

# Queued resources in a failure state, added to the default world for /tpu describe and alerts.
EXTRA_QRS: list[dict[str, Any]] = [
    {
        "name": "gemma4-flex",
        "zone": "europe-west4-a",
        "state": "FAILED",
        "provisioning_model": "FLEX_START",
        "max_run_duration": "4h",
        "created": "-2h",
        "error": {
            "code": 3,
            "message": "FLEX_START provisioning model is not supported for accelerator "
            'type "v6e-8" in location "europe-west4-a"',
        },
        "node": {"id": "gemma4-flex-node", "accelerator_type": "v6e-8", "runtime_version": "v2-alpha-tpuv6e"},
    },
    {
        "name": "gemma4-noquota",
        "zone": "europe-west4-a",
        "state": "FAILED",
        "provisioning_model": "SPOT",
        "created": "-3h",
        "error": {
            "code": 8,
            "message": "Quota 'TPUV6EPreemptiblePerProjectPerZoneForTPUAPI' exceeded. "
            "Limit: 0.0 in zone europe-west4-a.",
        },
        "node": {
            "id": "gemma4-noquota-node",
            "accelerator_type": "v6e-8",
            "runtime_version": "v2-alpha-tpuv6e",
        },
    },
    {
        "name": "gemma4-acc",
        "zone": "europe-west4-a",
        "state": "FAILED",
        "provisioning_model": "SPOT",
        "created": "-4h",
        "error": {"code": 3, "message": case_text("tpu-create-accelerator-not-in-zone.txt")},
        "node": {"id": "gemma4-acc-node", "accelerator_type": "v6e-4", "runtime_version": "v2-alpha-tpuv6e"},
    },
    {
        "name": "gemma4-quota",
        "zone": "us-east5-a",
        "state": "FAILED",
        "provisioning_model": "SPOT",
        "created": "-1h",
        "error": {
            "code": 8,
            "message": "Quota 'TPUV6EPerProjectPerRegionForTPUAPI' exceeded. Limit: 64.0 in region us-east5.",
        },
        "node": {
            "id": "gemma4-quota-node",
            "accelerator_type": "v6e-8",
            "runtime_version": "v2-alpha-tpuv6e",
        },
    },
    {
        "name": "gemma4-spot",
        "zone": "us-east5-a",
        "state": "ACTIVE",
        "provisioning_model": "SPOT",
        "created": "-30m",
        "node": {
            "id": "gemma4-spot-node",
            "accelerator_type": "v6e-8",
            "runtime_version": "v2-alpha-tpuv6e",
            "state": "READY",
            "health": "HEALTHY",
            "internal_ip": "10.9.9.9",
        },
    },
]


def _say(demo: Demo, line: str, timeout: float = 60) -> str:
    out, answered = demo.user.run(line, timeout=timeout)
    assert answered, out
    return "\n".join(out)


@pytest.fixture(scope="module")
def scenario_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    scenario = load(None)
    scenario["google"]["queued_resources"] += EXTRA_QRS
    path = tmp_path_factory.mktemp("scenario") / "bad-day.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


@pytest.fixture()
def world(scenario_file: Path) -> Iterator[Demo]:
    with Demo(scenario_file, vllm_startup_stuck_s=60, http_timeout_s=2) as demo:
        yield demo


def _fail_with(world: Demo, case: str) -> str:
    """Recreate the container so that it fails with `case` alone in its log; returns /vllm status. (A
    `/vllm restart` would bring the old container back when the new one fails: remove, then start.)"""
    world.host.set_run_failing_log(case)
    for verb in ("rm", "start"):
        _say(world, f"/vllm {verb}")
        _say(world, "click Confirm", timeout=90)
    return _say(world, "/vllm status")


def test_every_handed_log_case_is_named_by_vllm_status_and_logs(world: Demo) -> None:
    for case, family, fix in LOG_CASES:
        status = _fail_with(world, case)
        assert f"*{family}*" in status and fix in status, (case, status[-1500:])
        logs = _say(world, "/vllm logs --tail 100")
        assert f"*{family}*" in logs and fix in logs, (case, logs[-1500:])
        if family == "hf-gated-repo-403":
            assert "*hf-gated-repo-401*" not in status


def test_chat_names_the_stopped_containers_own_failure_first(world: Demo) -> None:
    """The container exited on a failure in its log: @gemma-bot reads that log as /vllm status does and
    names the same family first, with its fix, whatever the earlier Cloud Logging entries say."""
    for case, family, fix in (LOG_CASES[1], LOG_CASES[6]):
        _fail_with(world, case)
        answer = _say(world, "@gemma-bot why did the vLLM server fail?", timeout=120)
        first = re.search(r":rotating_light: \*([a-z0-9-]+)\*", answer)
        assert first is not None and first.group(1) == family, (case, answer[-2000:])
        assert fix in answer and "its log shows: " + family in answer, (case, answer[-2000:])


def test_unknown_failure_shows_the_key_lines(world: Demo, tmp_path: Path) -> None:
    unknown = tmp_path / "unknown-failure.log"
    unknown.write_text(
        "Traceback (most recent call last):\n"
        '  File "/opt/loader/plan.py", line 12, in build\n'
        "ZeroDivisionError: shard count is zero in the sharding plan\n"
    )
    world.host.crash(world.settings.vllm_container, unknown)
    text = _say(world, "/vllm logs --tail 20")
    assert "Not a known failure: no family of the fault catalogue matches these errors" in text
    assert "ZeroDivisionError" in text


def test_start_up_stuck_is_not_starting(world: Demo) -> None:
    world.vllm.stop()  # the container runs (up for an hour and a half) but the port never answers
    status = _say(world, "/vllm status")
    assert "start-up stuck" in status and "starting:" not in status
    assert "*startup-stuck*" in status and "/vllm logs" in status


def test_wedged_engine_is_not_healthy(world: Demo) -> None:
    world.vllm.set_mode("wedged")
    for _ in range(2):  # two requests now wait for ever
        world.user.run("/gemma ask hello", timeout=0.5)
    health = _say(world, "/vllm health")
    assert "vLLM answers /health but generates nothing" in health and "probe timed out" in health
    assert "*engine-wedged*" in health
    status = _say(world, "/tpu status")
    assert "vLLM answers /health but generates nothing" in status
    world.vllm.set_mode("ready")


def test_describe_names_the_failure_and_its_fix(world: Demo) -> None:
    flex = _say(world, "/tpu describe gemma4-flex")
    assert "*tpu-provisioning-model-not-offered*" in flex and "--spot" in flex
    quota = _say(world, "/tpu describe gemma4-noquota")
    assert "*tpu-preemptible-quota-zero*" in quota and "request preemptible quota" in quota
    acc = _say(world, "/tpu describe gemma4-acc")
    assert "*tpu-accelerator-not-offered*" in acc and "/tpu zones --type v6e-4" in acc
    held = _say(world, "/tpu describe gemma4-quota")
    assert "*tpu-quota-exhausted*" in held and "gemma4-old (europe-west4-a, FAILED)" in held
    assert "/tpu ensure" in held
    stock = _say(world, "/tpu describe gemma4-old")
    assert "*tpu-stockout*" in stock and "another zone" in stock
    # every one of them is FAILED: delete or recover, with the command, never "wait until valid-until"
    for name, text in (
        ("gemma4-flex", flex),
        ("gemma4-noquota", quota),
        ("gemma4-acc", acc),
        ("gemma4-old", stock),
    ):
        fix = text.split("_Fix:_")[1].split("\n")[0]
        assert "valid-until" not in fix and "keeps waiting" not in fix, fix
        assert f"/tpu delete {name}" in fix or f"/tpu recover {name}" in fix, fix


def test_node_gone_says_recreate_not_zone(world: Demo) -> None:
    text = _say(world, "/tpu stop no-such-node --zone us-east5-a")
    if "Confirm" in text:
        text = _say(world, "click Confirm")
    assert "recreate" in text and "check the name and the zone" not in text


def test_logs_analyze_names_new_cases(world: Demo) -> None:
    at = world.gcp.now() - timedelta(minutes=2)
    for case in ("hf-gated-repo-403-not-authorized.log", "docker-no-space-left.log"):
        for line in case_text(case).splitlines():
            if line.strip() and not line.startswith("#"):
                world.gcp.add_log_entry(line, severity="ERROR", at=at)
    text = _say(world, "/logs analyze --since 10m", timeout=90)
    assert "hf-gated-repo-403" in text and "disk-full" in text
    assert "hf-gated-repo-401" not in text


def test_preempted_node_alert_has_its_diagnosis_in_the_thread(world: Demo) -> None:
    services = world.bot.services
    client = SlackGateway.connect(world.settings.slack_bot_token.get_secret_value(), world.slack.api_url)
    scheduler = AlertScheduler.build(services, client, CHANNEL, clock=world.gcp.now, vllm_checks=False)
    scheduler.tick()  # baseline
    world.gcp.preempt("us-east5-a", "gemma4-spot-node")
    start = len(world.slack.messages)
    scheduler.tick()
    threaded = [m.text for m in world.slack.messages[start:] if m.channel == CHANNEL and m.thread_ts]
    assert any("tpu-preempted" in t and "/tpu ensure" in t for t in threaded), threaded
    status = _say(world, "/tpu list")
    assert "preempted by Google" in status


def test_vllm_down_alert_has_its_diagnosis_in_the_thread(world: Demo) -> None:
    services = world.bot.services
    client = SlackGateway.connect(world.settings.slack_bot_token.get_secret_value(), world.slack.api_url)
    scheduler = AlertScheduler.build(services, client, CHANNEL, clock=world.gcp.now, health_failures=1)
    world.host.crash(world.settings.vllm_container, "vllm-kv-cache-insufficient.log")
    world.vllm.stop()
    start = len(world.slack.messages)
    scheduler.tick()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        threaded = [m.text for m in world.slack.messages[start:] if m.channel == CHANNEL and m.thread_ts]
        if threaded:
            break
        time.sleep(0.1)
    assert any("kv-cache-insufficient" in t and "5632" in t for t in threaded), threaded
    assert any("Model reading unavailable" in t or "Reading by" in t for t in threaded)


def test_tool_call_left_as_markup_is_run_and_never_posted(world: Demo) -> None:
    world.vllm.set_output_fault("markup")
    text = _say(world, "what are the vllm metrics now")
    assert "<|tool_call>" not in text and "tool_call|>" not in text
    assert "read: the vLLM metrics of deployment `production`" in text


def test_empty_completion_is_explained(world: Demo) -> None:
    world.vllm.set_output_fault("empty")
    text = _say(world, "is gemma4-qr healthy?")
    assert "returned an empty completion" in text and "--tool-call-parser gemma4" in text
    assert "(no answer)" not in text


TEAM_CATALOGUE = """
families:
  - name: nfs-model-cache-stale
    title: stale NFS handle on the model cache
    severity: critical
    patterns: ['Stale file handle: ''(?P<path>/mnt/models/[^'']+)''']
    conclusion: the model cache on NFS went stale[ at {path}]
    fix: remount /mnt/models on the VM, then /vllm restart
    runbook: 'Page #storage-oncall before remounting; the filer may be failing over.'
"""


def test_a_team_family_is_matched_with_its_runbook(tmp_path: Path) -> None:
    path = tmp_path / "team-faults.yaml"
    path.write_text(TEAM_CATALOGUE)
    with Demo(fault_catalogue_file=str(path)) as demo:
        at = demo.gcp.now() - timedelta(minutes=1)
        line = "OSError: [Errno 116] Stale file handle: '/mnt/models/gemma/model-00001.safetensors'"
        demo.gcp.add_log_entry(line, severity="ERROR", at=at)
        text = _say(demo, "/logs analyze --since 5m", timeout=90)
        assert "*nfs-model-cache-stale*" in text and "remount /mnt/models" in text
        assert "Runbook:_ Page #storage-oncall" in text


def test_a_node_that_is_not_ready_is_never_booting(world: Demo) -> None:
    _say(world, "/tpu stop gemma4-qr-node")
    _say(world, "click Confirm", timeout=90)
    world.vllm.stop()
    status = _say(world, "/tpu status")
    assert "is STOPPED, so vLLM is not booting there" in status
    assert "booting (about 10 minutes" not in status


def test_tool_result_belongs_to_the_resource_asked_about_and_keeps_its_lines(world: Demo) -> None:
    text = _say(world, "describe gemma4-old please")
    assert "Read from the describe of `gemma4-old`: State FAILED, initiated by SERVICE." in text
    result = next(
        str(m["content"])
        for body in reversed(world.vllm.chat_requests)
        for m in body["messages"][-1:]
        if m.get("role") == "tool"
    )
    assert result.startswith("[describe of `gemma4-old`]\nQueued resource gemma4-old\n")  # with its lines
    assert "simulated answer" in text and "*Provisioning*" not in text.split("written by")[0]  # no dump


def test_gemma_ask_with_an_empty_answer_says_why(world: Demo) -> None:
    world.vllm.set_output_fault("empty")
    text = _say(world, "/gemma ask hello")
    assert "returned an empty completion" in text and "(empty answer)" not in text
