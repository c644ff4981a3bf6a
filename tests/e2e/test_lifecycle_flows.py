"""Changing commands end to end: preview, Confirm button, role re-checked on the click, audit trail."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

import pytest

from ops.errors import NotFound
from ops.tpu.model import ssh_keys_entry
from sim.console import DEMO_USER
from sim.demo import Demo

VIEWER = "U0VIEWER01"


def _say(demo: Demo, line: str, timeout: float = 20) -> str:
    out, answered = demo.user.run(line, timeout=timeout)
    assert answered, out
    return "\n".join(out)


def _exists(demo: Demo, name: str, zone: str) -> bool:
    try:
        demo.bot.services.tpu.get_queued_resource(name, [zone])
    except NotFound:
        return False
    return True


def test_delete_needs_confirmation_and_a_viewer_click_is_refused_and_audited(world: Demo) -> None:
    preview = _say(world, "/tpu delete gemma4-old")
    assert "*Delete* the queued resource" in preview and "[Confirm (expires in 5m)]" in preview
    assert _exists(world, "gemma4-old", "europe-west4-a")

    refused = _say(world, f"click Confirm as {VIEWER}")
    assert "(only visible to you)" in refused and "needs the admin role" in refused
    assert _exists(world, "gemma4-old", "europe-west4-a")
    refusals = [e for e in world.bot.services.store.audit(50) if e.action == "refuse"]
    assert refusals and refusals[0].user_id == VIEWER and "tpu delete gemma4-old" in refusals[0].command

    done = _say(world, "click Confirm")
    assert "Deleted queued resource `gemma4-old`" in done
    assert not _exists(world, "gemma4-old", "europe-west4-a")

    again = _say(world, "click again")  # a double click: the used button once more
    assert "already used" in again


def test_expired_confirmation_is_refused(world: Demo) -> None:
    _say(world, "/tpu delete gemma4-old")
    services = world.bot.services
    real_now = services.now
    services.now = lambda: real_now() + timedelta(minutes=6)
    text = _say(world, "click Confirm")
    assert "expired" in text
    assert _exists(world, "gemma4-old", "europe-west4-a")


def test_cancel_changes_nothing(world: Demo) -> None:
    _say(world, "/tpu delete gemma4-old")
    assert "nothing was changed" in _say(world, "click Cancel")
    assert _exists(world, "gemma4-old", "europe-west4-a")
    assert "no button" in world.user.run("click Confirm")[0][0]  # the Cancel's answer replaced it
    assert "already used" in _say(world, "click again Confirm")  # the stale message's Confirm


def test_delete_with_running_nodes_asks_for_force(world: Demo) -> None:
    text = _say(world, "/tpu delete gemma4-qr")
    assert "has running nodes" in text and "--force" in text


def test_create_shows_cost_and_token_source_then_creates(world: Demo) -> None:
    refused = _say(world, "/tpu create gemma4-b --zone us-east5-a --max-run 2h")
    assert "primary `gemma4-qr` is already ACTIVE" in refused and "--allow-second" in refused
    assert "[Confirm" not in refused
    preview = _say(world, "/tpu create gemma4-b --zone us-east5-a --max-run 2h --allow-second")
    assert "flex-start, max run duration 2h 00m" in preview
    assert "Secret Manager secret `hf-token`" in preview and "*Already running* `gemma4-qr`" in preview
    # flex-start has no price row: the spend is bounded by the on-demand row, and says which row
    assert "no flex-start row for v6e in us-east5; used instead: the on-demand row" in preview
    assert "`us-east5-a` at most $21.60/h" in preview and "up to $43.20 (2 h max run)" in preview
    created = _say(world, "click Confirm")
    assert "Created queued resource `gemma4-b`" in created
    creates = [
        body
        for method, path, body in world.gcp.request_bodies
        if method == "POST" and "queuedResourceId" in path
    ]
    assert creates, world.gcp.request_bodies
    body = creates[-1]
    assert body["provisioningModel"] == "FLEX_START" and body["runDuration"] == {"maxRunDuration": "7200s"}
    node = body["tpu"]["nodeSpec"][0]["node"]
    assert node["labels"]["managed-by"] == "tpu-chatops" and node["labels"]["tpu-chatops-request"]
    assert node["labels"]["tpu-chatops-user"] == DEMO_USER.lower()
    assert node["networkConfig"]["enableExternalIps"] is True
    assert "gcloud secrets versions access" in node["metadata"]["startup-script"]
    # the bot's public key for SSH_USER, so the guest agent lets the bot in (docs/ssh.md)
    settings = world.bot.services.settings
    assert node["metadata"]["ssh-keys"] == ssh_keys_entry(str(settings.ssh_key_path), settings.ssh_user)
    assert _exists(world, "gemma4-b", "us-east5-a")
    assert "already exists" in _say(world, "/tpu create gemma4-b --zone us-east5-a")


def test_create_rejects_bad_combinations_before_confirming(world: Demo) -> None:
    assert "cannot be used together" in _say(world, "/tpu create x --spot --flex-start")
    assert "--max-run applies to --flex-start only" in _say(world, "/tpu create x --spot --max-run 2h")
    assert "7-day limit" in _say(world, "/tpu create x --max-run 8d")


def test_operator_commands_need_the_role() -> None:
    with Demo(admins=[], operators=[]) as demo:
        text = _say(demo, "/tpu create gemma4-b")
        assert "needs the operator role" in text
        assert "needs the admin role" in _say(demo, "/tpu audit")


def test_ensure_carries_out_exactly_what_it_showed(world: Demo) -> None:
    preview = _say(world, "/tpu ensure")
    assert "*Delete*" in preview and "*gemma4-old*" in preview
    assert "Left alone" in preview and "gemma4-standby" in preview
    # The world changes before the click: the primary disappears, so the plan would now also create it.
    world.bot.services.tpu.delete_queued_resource("gemma4-qr", "us-east5-a", force=True, wait=True)
    changed = _say(world, "click Confirm")
    assert "changed since the confirmation" in changed
    assert _exists(world, "gemma4-old", "europe-west4-a")

    preview = _say(world, "/tpu ensure")
    assert "*gemma4-old*" in preview and "*Create* `gemma4-qr`" in preview
    done = _say(world, "click Confirm")
    assert "deleted `gemma4-old`" in done and "created `gemma4-qr`" in done
    assert not _exists(world, "gemma4-old", "europe-west4-a")
    assert _exists(world, "gemma4-qr", "us-east5-a")


def test_find_keeps_the_first_active_and_deletes_the_rest(world: Demo) -> None:
    zones = "europe-west4-a,asia-northeast1-b,us-east5-a"
    preview = _say(world, f"/tpu find gemma4-f --zones {zones} --parallel 3 --allow-second")
    assert "*Find capacity* for `gemma4-f`" in preview
    result = _say(world, "click Confirm", timeout=60)
    assert "Capacity found" in result
    listing = world.bot.services.tpu.list_queued_resources(zones.split(","))
    found = [qr.name for qr in listing.resources if qr.name.startswith("gemma4-f")]
    assert len(found) == 1, found
    assert "remembered" in result  # europe-west4-a does not offer flex-start: remembered as permanent
    again = _say(world, f"/tpu find gemma4-g --zones {zones} --allow-second")
    assert "*Skipped*" in again and "europe-west4-a" in again


def test_find_cancel_leaves_nothing(world: Demo) -> None:
    _say(world, "/tpu find gemma4-c --zones asia-northeast1-b --allow-second")
    out, answered = world.user.run("click Confirm", timeout=3)
    assert not answered  # still waiting for capacity (stockout)
    assert any("Cancel" in line for line in out)
    world.user.run("click Cancel", timeout=3)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any("Cancelled" in m.text for m in world.slack.messages):
        time.sleep(0.2)
    cancelled = "Cancelled; every request this search made was deleted"
    assert any(cancelled in m.render() for m in world.slack.messages)
    assert not _exists(world, "gemma4-c", "asia-northeast1-b")


def test_zones_cost_config_and_token(world: Demo, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    zones = _say(world, "/tpu zones")
    assert "`us-east5-a` quota 64 / preemptible 64" in zones
    cost = _say(world, "/tpu cost --hours 4 --model spot --region us-east5")
    assert "*spot* in us-east5, 4 h: *$34.56*" in cost and "*Live burn*" in cost and "gemma4-qr" in cost
    assert "read 2026-12-02" in cost and "reference project" not in cost
    # the default is create's default, flex-start: no row, so the on-demand row bounds it, labelled
    default = _say(world, "/tpu cost")
    assert "*flex-start* in us-east5, 1 h: *at most $21.60*" in default
    assert "no flex-start row for v6e in us-east5" in default and "*Total* at most $" in default
    assert "over 0.0 h" not in default
    mars = _say(world, "/tpu cost --region mars-east1")
    assert "no flex-start row for v6e in mars-east1" in mars and "not a price of mars-east1" in mars
    startup = _say(world, "/tpu config startup")
    assert "[file startup.sh:" in startup
    assert "[file vllm-gke.yaml:" in _say(world, "/tpu config gke")
    gcloud = _say(world, "/tpu config gcloud")
    assert "gcloud alpha compute tpus queued-resources create" in gcloud
    assert "--metadata-from-file=startup-script=startup.sh" in gcloud  # the script it names goes with it
    assert "[file create.sh:" in gcloud and "[file startup.sh:" in gcloud, gcloud
    assert "`create.sh` reads `startup.sh` from the directory it runs in: both are attached" in gcloud

    token = "hf_" + "Q" * 34
    _say(world, "/tpu token")
    world.user.run(f"submit {token}")
    assert world.bot.services.secrets.access("hf-token") == token
    assert all(token not in m.text and token not in m.render() for m in world.slack.messages)
    assert all(token not in e.command + e.outcome for e in world.bot.services.store.audit(100))
    assert token not in caplog.text


def test_token_from_a_mention_says_to_use_the_slash_command(world: Demo) -> None:
    assert "opens from the slash command only" in _say(world, "@gemma-bot tpu token")
