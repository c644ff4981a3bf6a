"""Several deployments end to end, in the demo world (production and staging, each with its own SIMULATED
Google project and vLLM server): signed Slack requests -> real Bolt app -> real clients -> simulators."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest

from bot.commands.runner import Authorizer
from bot.oncall import scheduler
from bot.slack.listeners import home_blocks
from ops.errors import NotFound
from sim.console import DEMO_USER
from sim.demo import ALERTS_CHANNEL, Demo

STAGING_CHANNEL = "C0STAGING1"


def _say(demo: Demo, line: str) -> str:
    out, answered = demo.user.run(line, timeout=20)
    assert answered, f"no answer to {line!r}: {out}"
    return "\n".join(out)


@pytest.fixture
def in_channel(demo: Demo) -> Iterator[None]:
    """The console types in channel C0STAGING1 for one test, then in its own channel again."""
    home = demo.user.channel_id
    yield
    demo.user.run(f"channel {home}")


def test_fleet_lists_both_deployments_in_one_message(demo: Demo) -> None:
    text = _say(demo, "/fleet")
    production, staging = text.split("*staging*")
    assert "*production* · project `demo-project`" in production
    assert "`gemma4-qr` ACTIVE · `us-east5-a` · v6e-8 flex-start" in production
    assert "node :large_green_circle: READY HEALTHY" in production
    assert "`google/gemma-4-31B-it` · :large_green_circle: ready" in production
    assert "running 0 · waiting 0 · KV cache 0%" in production  # idle: no KV block held
    # flex-start has no row in the price table: the on-demand row bounds it, labelled, never "$0.00/h"
    assert "*Cost* at most $21.60/h" in production and "no flex-start row for v6e in us-east5" in production
    assert "project `demo-staging`" in staging
    assert "`gemma4-staging` ACTIVE · `us-east5-b` · v6e-4 flex-start" in staging
    assert "`google/gemma-4-26B-A4B-it` · :large_green_circle: ready" in staging
    assert "KV cache 0%" in staging and "*Cost* at most $10.80/h" in staging
    assert "Bound to <#C0STAGING1>" in staging
    assert "*Total* at most $32.40/h · at most $" in staging  # both deployments, the ceiling labelled
    assert "Deployment `" not in text  # about every deployment, so not labelled with one


def test_fleet_shows_a_failing_source_and_the_rest(demo: Demo) -> None:
    demo.vllm.set_mode("engine-dead")
    text = _say(demo, "/fleet")
    production, staging = text.split("*staging*")
    assert "`google/gemma-4-31B-it` · :red_circle:" in production and "`gemma4-qr` ACTIVE" in production
    assert ":large_green_circle: ready" in staging


def test_fleet_shows_a_project_that_does_not_answer_and_the_rest(demo: Demo) -> None:
    assert demo.staging is not None
    demo.staging.gcp.inject_fault(r"/queuedResources", 503, count=50)
    try:
        text = _say(demo, "/fleet")
    finally:
        demo.staging.gcp.clear_faults()
    production, staging = text.split("*staging*")
    assert "`gemma4-qr` ACTIVE" in production and "*Cost* at most $" in production
    assert ":red_circle: *Queued resources*" in staging and "503" in staging
    assert "*Cost* unknown" in staging
    assert "Traceback" not in text
    demo.staging.gcp.inject_fault(r"/queuedResources", 503, count=50)
    try:
        spend = _say(demo, "/tpu cost --today")
    finally:
        demo.staging.gcp.clear_faults()
    assert ":red_circle: *staging*" in spend and "`gemma4-qr`" in spend


def test_status_of_the_deployment_named_by_the_flag(demo: Demo) -> None:
    text = _say(demo, "/tpu status --deployment staging")
    assert "*gemma4-staging* (primary) · `us-east5-b`" in text
    assert "gemma4-qr" not in text and "gemma4-standby" not in text
    assert "`google/gemma-4-26B-A4B-it`" in text
    assert "Deployment `staging`" in text
    production = _say(demo, "/tpu status")  # the console's channel is bound to production
    assert "*gemma4-qr*" in production and "gemma4-staging" not in production
    assert "Deployment `production`" in production


def test_each_deployment_reaches_its_own_tpu_vm(demo: Demo, in_channel: None) -> None:
    """Staging's commands over SSH reach staging's SIMULATED VM (its own port, node and container), not
    production's, and the banner lists it."""
    assert demo.staging is not None
    assert f"TPU VM SSH simulator at 127.0.0.1:{demo.staging.host.port}" in demo.banner()
    _say(demo, f"channel {STAGING_CHANNEL}")
    status = _say(demo, "/vllm status")
    assert ":large_green_circle: serving: running (up 2h 2" in status
    assert "Deployment `staging`" in status and "refused" not in status
    logs = _say(demo, "/vllm logs --tail 5")
    assert "Application startup complete." in logs and "refused" not in logs
    assert any("docker logs" in c for c in demo.staging.host.commands)
    assert not any("docker logs --tail 5 " in c for c in demo.host.commands)


def test_in_a_bound_channel_the_same_command_needs_no_flag(demo: Demo, in_channel: None) -> None:
    assert "now typing in channel C0STAGING1" in _say(demo, f"channel {STAGING_CHANNEL}")
    text = _say(demo, "/tpu status")
    assert "*gemma4-staging* (primary) · `us-east5-b`" in text and "gemma4-qr" not in text
    assert "Deployment `staging`" in text
    assert "`google/gemma-4-26B-A4B-it`" in _say(demo, "@gemma-bot vllm models")


def test_a_change_outside_a_bound_channel_is_refused_with_the_list(demo: Demo, in_channel: None) -> None:
    _say(demo, "channel C0ELSEWHR1")
    text = _say(demo, "/tpu delete gemma4-qr")
    assert "bound to no deployment: which one?" in text
    assert "`--deployment NAME`, one of `production`, `staging`" in text
    assert "Confirm" not in text
    assert demo.gcp.world.queued_resources[("us-east5-a", "gemma4-qr")].state == "ACTIVE"
    unknown = _say(demo, "/tpu describe gemma4-qr --deployment nope")
    assert "unknown deployment `nope`" in unknown and "`production`, `staging`" in unknown
    # A read-only command outside a bound channel uses the first deployment and says so.
    assert "Deployment `production`" in _say(demo, "/vllm models")


def test_a_deployments_alert_channel_acts_on_it(demo: Demo, in_channel: None) -> None:
    """Alert buttons clicked in production's alert channel (Delete now, Recover) are changes: they act on
    production instead of being refused as a guess."""
    _say(demo, f"channel {ALERTS_CHANNEL}")
    text = _say(demo, "/tpu delete gemma4-old")
    assert "which one?" not in text and "This changes infrastructure" in text and "Confirm" in text
    assert "Deployment `production`" in _say(demo, "/tpu status")
    assert "nothing was changed" in _say(demo, "click Cancel")


def _png(demo: Demo, filename: str) -> bytes:
    files = {m.filename: m.content for m in demo.slack.messages if m.kind == "file"}
    return files[filename]


def test_metrics_chart_attaches_a_png_of_the_history(
    demo: Demo, tmp_path_factory: pytest.TempPathFactory
) -> None:
    text = _say(demo, "/vllm metrics --chart 1h")
    assert "*vLLM metrics history* of `production` (`google/gemma-4-31B-it`), last 1h 00m" in text
    assert "[file vllm-metrics-production-60m.png:" in text
    png = _png(demo, "vllm-metrics-production-60m.png")
    assert png.startswith(b"\x89PNG")
    (tmp_path_factory.mktemp("chart") / "chart.png").write_bytes(png)
    six_hours = _say(demo, "/vllm metrics --chart 6h")
    assert "1 restart," in six_hours  # the scenario's simulated restart, when the container started


def test_metrics_chart_of_the_channels_deployment(demo: Demo, in_channel: None) -> None:
    _say(demo, f"channel {STAGING_CHANNEL}")
    text = _say(demo, "/vllm metrics --chart 1h")
    assert "of `staging` (`google/gemma-4-26B-A4B-it`)" in text
    assert _png(demo, "vllm-metrics-staging-60m.png").startswith(b"\x89PNG")


def test_metrics_chart_bad_spans(demo: Demo) -> None:
    assert "history is kept for 7d" in _say(demo, "/vllm metrics --chart 30d")
    assert "is not a duration" in _say(demo, "/vllm metrics --chart soon")
    assert "cannot be used together" in _say(demo, "/vllm metrics --chart 1h --raw")


def test_cost_today_and_week_per_deployment(demo: Demo) -> None:
    today = _say(demo, "/tpu cost --today")
    assert "TPU spend today (UTC)" in today
    assert "*production*: *at most $" in today and "`gemma4-qr` (v6e-8 flex-start) at most $" in today
    assert "*staging*: *at most $" in today and "`gemma4-staging` (v6e-4 flex-start) at most $" in today
    assert "Deployment `" not in today  # about every deployment
    # Every demo resource is flex-start (no row): a total bounded by the on-demand row, labelled.
    assert "*Total* at most $" in today and "unknown" not in today and "$0.00" not in today
    assert "no flex-start row for v6e in us-east5; used instead: the on-demand row" in today
    assert "read 2026-12-02" in today
    week = _say(demo, "/tpu cost --week")
    assert "TPU spend over the last 7 days" in week and "*Total* at most $" in week and "$0.00" not in week
    assert "cannot be used together" in _say(demo, "/tpu cost --today --week")


def test_chat_facts_give_a_flex_start_resource_its_labelled_ceiling(demo: Demo) -> None:
    text = _say(demo, "@gemma-bot how much does gemma4-qr cost so far?")
    assert "`gemma4-qr` (v6e-8, flex-start): at most $" in text and "at most $21.60/h" in text
    assert "no flex-start row for v6e in us-east5" in text and "total at most $" in text


def test_the_sampler_adds_a_sample_of_every_deployment(demo: Demo) -> None:
    sampler = demo.bot.sampler
    assert sampler is not None
    assert sampler.sample_once() == 2
    now = demo.gcp.now()
    for name in ("production", "staging"):
        newest = sampler.history.window(name, now - timedelta(seconds=30), now + timedelta(seconds=1))
        assert newest and newest[-1].kv_cache_usage is not None


def test_help_lists_the_deployments_and_their_channels(demo: Demo) -> None:
    text = _say(demo, "@gemma-bot help")
    # production's alert channel is bound to it too (its alert buttons act there)
    assert "*Deployments* `production` (<#C0DEMOCHN1> <#C0ALERTS01>), `staging` (<#C0STAGING1>)" in text
    assert "`--deployment NAME`" in text


def test_the_token_form_stores_in_the_project_it_was_opened_for(demo: Demo, in_channel: None) -> None:
    _say(demo, "channel C0ELSEWHR1")
    token = "hf_" + "S" * 34
    _say(demo, "/tpu token --deployment staging")
    demo.user.run(f"submit {token}")
    assert demo.fleet.services["staging"].secrets.access("hf-token") == token
    with pytest.raises(NotFound):  # production's project has no token version
        demo.fleet.services["production"].secrets.access("hf-token")


def test_every_deployment_is_watched_from_its_own_alert_channel(demo: Demo) -> None:
    lead = demo.bot.alerts
    assert lead is not None and list(lead.watchers) == ["production", "staging"]
    assert lead.deployment == "production" and lead.services is demo.fleet.first
    assert lead.channel == ALERTS_CHANNEL
    staging = lead.watchers["staging"]
    assert staging.channel == STAGING_CHANNEL and staging.services is demo.fleet.services["staging"]
    assert staging.ledger.deployment == "staging" and staging.resources.recovery.budget.prefix == "staging:"


def test_staging_vllm_down_alerts_staging_only_and_shows_on_its_fleet_line(demo: Demo) -> None:
    assert demo.staging is not None and demo.bot.alerts is not None
    lead = demo.bot.alerts
    demo.vllm.set_mode("ready")
    demo.staging.vllm.set_mode("engine-dead")
    start = len(demo.slack.messages)
    try:
        for _ in range(3):  # three failed /health checks in a row raise vllm_down
            lead.tick_all()
        posts = [m for m in demo.slack.messages[start:] if m.kind == "post"]
        down = [m for m in posts if "alert `vllm_down`" in json.dumps(m.blocks)]
        assert [m.channel for m in down] == [STAGING_CHANNEL]
        assert "deployment `staging`" in json.dumps(down[0].blocks) and down[0].text.startswith("deployment")
        assert "--chart 1h --deployment staging" in json.dumps(down[0].blocks)
        production_posts = json.dumps([m.blocks for m in posts if m.channel == ALERTS_CHANNEL])
        assert "vllm_down" not in production_posts and "staging" not in production_posts
        text = _say(demo, "/fleet")
        production, staging = text.split("*staging*")
        (staging_alerts,) = [line for line in staging.splitlines() if line.startswith("*Alerts*")]
        assert "*Alerts* 1 open · newest: vLLM at `http://" in staging_alerts and "is down" in staging_alerts
        (production_alerts,) = [line for line in production.splitlines() if line.startswith("*Alerts*")]
        assert "vLLM" not in production_alerts
        home = home_blocks(demo.bot.runner, demo.bot.registry, DEMO_USER, lead)
        opened = [b["text"]["text"] for b in home if b.get("type") == "section"][-2:]
        assert opened[0].startswith("*production*\n") and "vLLM at" not in opened[0]
        assert opened[1].startswith("*staging*\n") and "vLLM at `http://" in opened[1]
    finally:
        demo.staging.vllm.set_mode("ready")
    lead.tick_all()  # staging serves again: its alert resolves in place, in its own channel
    resolved = [m for m in demo.slack.messages[start:] if "Resolved:" in json.dumps(m.blocks)]
    assert [m.channel for m in resolved] == [STAGING_CHANNEL]
    assert "*Alerts* none open" in _say(demo, "/fleet").split("*staging*")[1]


def test_each_deployment_gets_its_own_daily_digest_in_its_channel(demo: Demo) -> None:
    assert demo.bot.alerts is not None
    start = len(demo.slack.messages)
    demo.bot.alerts.digest_all()
    demo.bot.alerts.digest_all()  # once per UTC day each
    digests = {m.channel: m.text for m in demo.slack.messages[start:] if "Daily digest" in m.text}
    assert set(digests) == {ALERTS_CHANNEL, STAGING_CHANNEL}
    assert len([m for m in demo.slack.messages[start:] if "Daily digest" in m.text]) == 2
    assert (
        "deployment `staging`" in digests[STAGING_CHANNEL] and "`gemma4-staging`" in digests[STAGING_CHANNEL]
    )
    assert "gemma4-qr" not in digests[STAGING_CHANNEL]
    assert (
        "deployment `production`" in digests[ALERTS_CHANNEL]
        and "gemma4-staging" not in digests[ALERTS_CHANNEL]
    )


def test_a_serving_alert_points_at_the_chart_of_its_window(demo: Demo) -> None:
    scheduler = demo.bot.alerts
    assert scheduler is not None
    demo.vllm.set_mode("engine-dead")
    start = len(demo.slack.messages)
    for _ in range(3):  # three failed /health checks in a row raise vllm_down
        scheduler.tick()
    down = [m for m in demo.slack.messages[start:] if "alert `vllm_down`" in json.dumps(m.blocks)]
    assert down and "`/vllm metrics --chart 1h --deployment production`" in json.dumps(down[0].blocks)


def _staging_down(demo: Demo) -> None:
    """Staging's vLLM fails three /health checks in a row: its vllm_down alert is open."""
    assert demo.staging is not None and demo.bot.alerts is not None
    demo.vllm.set_mode("ready")
    demo.staging.vllm.set_mode("engine-dead")
    for _ in range(3):
        demo.bot.alerts.tick_all()


def _open(listing: str) -> str:
    """The *Open* section of an `/alerts list` answer (the console also shows other posts meanwhile)."""
    return listing.split("*Open*", 1)[1].split("*Muted*", 1)[0]


def test_alerts_list_and_mute_act_on_the_commands_deployment(demo: Demo, in_channel: None) -> None:
    assert demo.staging is not None and demo.bot.alerts is not None
    down = f":{demo.staging.vllm.url.rsplit(':', 1)[1]}` is down"  # staging's vLLM port
    try:
        _staging_down(demo)
        production = _say(demo, "/alerts list")
        assert "Deployment `production`" in production and down not in _open(production)
        assert "Daily digest" not in _open(production)  # a digest is news, never an open alert
        assert down in _open(_say(demo, "/alerts list --deployment staging"))
        _say(demo, f"channel {STAGING_CHANNEL}")
        staging = _say(demo, "/alerts list")
        assert "Deployment `staging`" in staging and down in _open(staging)
        muted = _say(demo, "/alerts mute gemma4-staging 1h")
        assert "muted until" in muted and "Deployment `staging`" in muted
        assert "`gemma4-staging` until" in _say(demo, "/alerts list")
        assert "`gemma4-staging` was not muted" not in _say(demo, "/alerts unmute gemma4-staging")
    finally:
        demo.staging.vllm.set_mode("ready")
        demo.bot.alerts.tick_all()


def test_alerts_test_posts_to_the_commands_deployments_alert_channel(
    demo: Demo, in_channel: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As started by `serve` (the tests tick by hand instead of running APScheduler).
    monkeypatch.setattr(scheduler, "_active", demo.bot.alerts)
    start = len(demo.slack.messages)
    assert f"posted to <#{ALERTS_CHANNEL}>" in _say(demo, "/alerts test")
    _say(demo, f"channel {STAGING_CHANNEL}")
    assert f"posted to <#{STAGING_CHANNEL}>" in _say(demo, "/alerts test")
    tests = [m.channel for m in demo.slack.messages[start:] if "Test alert requested" in m.text]
    assert tests == [ALERTS_CHANNEL, STAGING_CHANNEL]


def test_alert_buttons_act_on_and_check_the_roles_of_the_alerts_deployment(
    demo: Demo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A staging countdown alert clicked from production's channel: Delete now previews the delete in
    staging, and staging's roles (not production's) decide Delete now and Acknowledge."""
    lead = demo.bot.alerts
    assert lead is not None and demo.staging is not None
    staging = lead.watchers["staging"]
    assert lead.watcher_of("us-east5-b", "gemma4-staging") is staging
    assert lead.watcher_of("us-east5-a", "gemma4-qr") is lead
    qr = staging.services.tpu.get_queued_resource("gemma4-staging", staging.services.settings.tpu_zones)
    assert qr.create_time is not None and qr.max_run_duration is not None
    deadline = qr.termination_time or qr.create_time + qr.max_run_duration
    monkeypatch.setattr(staging.delivery, "clock", lambda: deadline - timedelta(minutes=50))
    start = len(demo.slack.messages)
    staging.tick()
    (alert,) = [m for m in demo.slack.messages[start:] if "terminates in" in m.text]
    assert alert.channel == STAGING_CHANNEL
    key = next(b for b in alert.blocks if b.get("block_id") == "alert")["elements"][0]["value"]
    assert lead.owner_of(key) is staging
    # Staging's roles: only someone else may change or acknowledge there.
    others = staging.services.settings.model_copy(
        update={"admins": ["U0OTHER001"], "operators": [], "viewers": ["U0OTHER001"]}
    )
    refusing = Authorizer(others, demo.bot.runner.slack)
    with monkeypatch.context() as roles:
        roles.setitem(demo.bot.runner._authorizers, "staging", refusing)
        assert "needs the" in _say(demo, "click Delete now")
        assert "acknowledging an alert needs the" in _say(demo, "click Acknowledge")
    preview = _say(demo, "click Delete now")
    assert "This changes infrastructure" in preview and "gemma4-staging" in preview
    assert "Deployment `staging`" in preview and "not found" not in preview
    # The confirmation stores the command's text and Confirm parses it again, so the deployment is in it
    # (the Confirm dialog repeats that text).
    asked = next(m for m in reversed(demo.slack.messages) if "This changes infrastructure" in m.render())
    assert "--deployment staging" in str(asked.blocks)
    assert "nothing was changed" in _say(demo, "click Cancel")
    assert "Acknowledged by" in _say(demo, "click Acknowledge")


# Last in this module: it deletes staging's queued resource.
def test_a_confirmed_change_acts_on_the_deployment_of_the_flag(demo: Demo, in_channel: None) -> None:
    _say(demo, "channel C0ELSEWHR1")
    text = _say(demo, "/tpu delete gemma4-staging --force --deployment staging")
    assert "This changes infrastructure" in text and "gemma4-staging" in text
    _say(demo, "click Confirm")  # the click re-reads `--deployment staging` from the confirmation
    assert demo.staging is not None
    assert ("us-east5-b", "gemma4-staging") not in demo.staging.gcp.world.queued_resources or (
        demo.staging.gcp.world.queued_resources[("us-east5-b", "gemma4-staging")].state == "DELETING"
    )
    assert demo.gcp.world.queued_resources[("us-east5-a", "gemma4-qr")].state == "ACTIVE"
