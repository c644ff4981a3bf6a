"""A failure no catalogue family explains, through the bot against the simulators: `/vllm status`, `/vllm
logs`, `/logs analyze`, the vLLM alert's thread and the chat's facts say it is not a known failure, then show
the top error templates with counts and first/last seen (RFC 3339 UTC), the first error before the engine
died, and a next step that the bot runs (issue "One diagnosis engine", point 6). The chat's question goes
through the demo's Slack user (a mention), the rest through the runner."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from bot.oncall.scheduler import AlertScheduler
from bot.slack.gateway import SlackGateway
from bot.views.findings import NO_MATCH_LEAD
from sim.demo import Demo
from sim.scenario import load
from tests.handlers.conftest import Handlers

CHANNEL = "C0ALERTS01"
STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"  # a log line's time as every answer shows a time
# A start-up failure no family of the catalogue knows: an error line, a traceback, another error.
UNKNOWN = (
    "(APIServer pid=1) INFO 12-03 09:00:00 [api_server.py:1] vLLM API server version 0.11\n"
    "(EngineCore_DP0 pid=281) ERROR 12-03 09:00:05 [core.py:708] sharding plan rejected for layer 3\n"
    "Traceback (most recent call last):\n"
    '  File "/opt/loader/plan.py", line 12, in build\n'
    "ZeroDivisionError: shard count is zero in the sharding plan\n"
    "(EngineCore_DP0 pid=281) ERROR 12-03 09:00:07 [core.py:708] sharding plan rejected for layer 4\n"
)


@pytest.fixture(scope="module")
def scenario_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default world without its logged failure cases (Cloud Logging keeps only INFO/WARNING noise)."""
    scenario = load(None)
    scenario["google"]["logs"]["cases"] = []
    path = tmp_path_factory.mktemp("scenario") / "nomatch.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


@pytest.fixture()
def quiet(scenario_file: Path) -> Iterator[Demo]:
    with Demo(scenario_file) as demo:
        yield demo


def _crash(world: Demo, tmp_path: Path) -> None:
    log = tmp_path / "unknown-failure.log"
    log.write_text(UNKNOWN)
    world.host.crash(world.settings.vllm_container, log)


def _no_match_block(text: str) -> str:
    assert f"*{NO_MATCH_LEAD}.*" in text, text[-2000:]
    return text[text.index(NO_MATCH_LEAD) :]


def test_vllm_status_and_logs_show_templates_first_error_and_next_step(quiet: Demo, tmp_path: Path) -> None:
    _crash(quiet, tmp_path)
    handlers = Handlers(quiet)
    for line in ("vllm status", "vllm logs --tail 50"):
        block = _no_match_block(handlers.run(line))
        assert "*Top error templates* in the vLLM container's log" in block
        assert re.search(
            rf"1\. \*2× ERROR\* `.*sharding plan rejected for layer <NUM>` · first {STAMP} · last {STAMP}",
            block,
        ), block
        assert "ZeroDivisionError: shard count is zero" in block
        first = re.search(
            rf"\*First error\* at {STAMP}, before the container exited at {STAMP}:\n`(.*)`", block
        )
        assert first and "sharding plan rejected for layer 3" in first.group(1), block
        steps = re.findall(r"`(/[^`]+)`", block.split("*Next step*: ")[1])
        assert steps[0].startswith("/vllm logs --since ") and steps[1].startswith("/logs analyze --since ")
    # the next step runs in the state shown (the container exited): the wider log answers, no usage error
    wider = handlers.run(steps[0].removeprefix("/"))
    assert f"`{quiet.settings.vllm_container}` log" in wider and "sharding plan rejected" in wider


def test_logs_analyze_shows_the_no_match_answer(quiet: Demo) -> None:
    now = quiet.gcp.now()
    for minutes, text in (
        (6, "google_metadata_script_runner[712]: startup-script: mount: /mnt/models: unknown filesystem"),
        (4, "(EngineCore_DP0 pid=281) ERROR [core.py:708] sharding plan rejected for layer 3"),
        (3, "(EngineCore_DP0 pid=281) ERROR [core.py:708] sharding plan rejected for layer 4"),
        (2, "ZeroDivisionError: shard count is zero in the sharding plan"),
    ):
        quiet.gcp.add_log_entry(text, severity="ERROR", at=now - timedelta(minutes=minutes))
    text = Handlers(quiet).run("logs analyze --since 10m")
    block = _no_match_block(text)
    assert "*Top error templates* in the Cloud Logging entries of the TPU VMs" in block
    assert re.search(rf"\*2× ERROR\* `.*sharding plan rejected for layer <NUM>` · first {STAMP}", block), (
        block
    )
    first = re.search(rf"\*First error\* at ({STAMP}):\n`(.*)`", block)
    assert first and "startup-script: mount" in first.group(2), block
    assert "`/logs analyze --since 2h`" in block
    assert "`/vllm syslog --unit google-startup-scripts --tail 2000`" in block
    journal = Handlers(quiet).run("vllm syslog --unit google-startup-scripts --tail 2000")
    assert "journal of `google-startup-scripts.service`" in journal


def test_the_vllm_alert_thread_shows_the_no_match_answer(quiet: Demo, tmp_path: Path) -> None:
    services = quiet.bot.services
    client = SlackGateway.connect(quiet.settings.slack_bot_token.get_secret_value(), quiet.slack.api_url)
    scheduler = AlertScheduler.build(services, client, CHANNEL, clock=quiet.gcp.now, health_failures=1)
    _crash(quiet, tmp_path)
    quiet.vllm.stop()
    start = len(quiet.slack.messages)
    scheduler.tick()
    threaded: list[str] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not threaded:
        threaded = [m.text for m in quiet.slack.messages[start:] if m.channel == CHANNEL and m.thread_ts]
        time.sleep(0.1)
    text = "\n".join(threaded)
    block = _no_match_block(text)
    assert "sharding plan rejected for layer 3" in block.split("*First error*")[1]
    assert "`/vllm logs --since " in block


def test_the_chat_facts_carry_the_no_match_answer(quiet: Demo) -> None:
    now = quiet.gcp.now()
    for minutes in (5, 3):
        line = f"(EngineCore_DP0 pid=281) ERROR [core.py:708] sharding plan rejected for layer {minutes}"
        quiet.gcp.add_log_entry(line, severity="ERROR", at=now - timedelta(minutes=minutes))
    out, answered = quiet.user.run("@gemma-bot what went wrong on gemma4-qr in the last hour?", timeout=60)
    assert answered, out
    text = "\n".join(out)
    facts = text[text.index("*Facts*") :]
    assert NO_MATCH_LEAD in facts and "sharding plan rejected" in facts, facts
    assert re.search(rf"first error at {STAMP}", facts) and "`/logs analyze --since 2h`" in facts, facts
