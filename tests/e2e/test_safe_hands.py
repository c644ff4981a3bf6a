"""Safe hands, end to end through the real bot (signed Slack requests) and the real Google clients against
the emulator: what the find and create previews tell and refuse, the live primary surviving an ambiguous
create, one operation per name, pinned confirmations, crafted buttons and roles on every click; the zones a
search tries and why, the name asked for being the name got, and the zone data (accelerator types,
preemptible quota, remembered refusals) warning before a create or a recovery that will be refused."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from bot.slack.listeners import home_blocks
from ops.errors import NotFound
from ops.tpu.model import CreateSpec
from sim.console import DEMO_USER
from sim.demo import Demo

PREEMPTIBLE_V6E = "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI"

VIEWER = "U0VIEWER01"
PRIMARY_ZONE = "us-east5-a"


@pytest.fixture()
def world() -> Iterator[Demo]:
    with Demo(google_timeout_s=2.0) as demo:
        yield demo


def _say(demo: Demo, line: str, timeout: float = 30) -> str:
    out, answered = demo.user.run(line, timeout=timeout)
    assert answered, out
    return "\n".join(out)


def _primary(demo: Demo) -> str:
    return demo.bot.services.tpu.get_queued_resource("gemma4-qr", [PRIMARY_ZONE]).state


def _wait_for(demo: Demo, text: str, timeout: float = 60, about: str = "") -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for message in reversed(demo.slack.messages):
            if text in message.render() and about in message.render():
                return message.render()
        time.sleep(0.2)
    raise AssertionError(f"no message with {text!r}")


def _click_action(demo: Demo, action_id: str, user_id: str) -> str:
    """Click the newest button with this action id as `user_id`; the reply to that click."""
    for message in reversed(demo.slack.messages):
        for block_id, element in message.buttons():
            if element.get("action_id") == action_id:
                start = len(demo.slack.messages)
                response_id = f"click-{action_id}-{user_id}-{start}"
                body = demo.user.click_body(message, block_id, element, response_id, user_id=user_id)
                demo.user.post_signed(body, "application/x-www-form-urlencoded")
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    replies = [m for m in demo.slack.messages[start:] if m.response_id == response_id]
                    if replies:
                        return replies[-1].render()
                    time.sleep(0.1)
                return ""
    raise AssertionError(f"no {action_id} button")


def _deletes(demo: Demo, name: str) -> list[str]:
    return [path for method, path in demo.gcp.requests if method == "DELETE" and f"/{name}?" in path + "?"]


def test_find_preview_refuses_a_second_primary_then_shows_the_whole_cost(world: Demo) -> None:
    refused = _say(world, "/tpu find --parallel 3")
    assert "`gemma4-qr` is already ACTIVE in `us-east5-a`" in refused and "up to $25.92/h more" in refused
    assert "--allow-second" in refused and "[Confirm" not in refused
    preview = _say(world, "/tpu find --parallel 3 --allow-second")
    # flex-start has no price row: each zone's on-demand row is the ceiling, and the preview says which
    assert "*Zones tried, in order*" in preview and "`us-east5-a` at most $21.60/h" in preview
    assert "no flex-start row for v6e in us-east5; used instead: the on-demand row" in preview
    assert "*At most 3 requests at once*" in preview
    assert "*Before the first winner* at most $77.76/h" in preview  # 3 x the top price, $25.92
    assert "*worst case* 3 ACTIVE at once for the whole max run: $311.04" in preview  # 3 x 4 h x $25.92
    assert "*Already running* `gemma4-qr`" in preview and "[Confirm" in preview


def test_unknown_zones_and_types_are_refused_in_the_preview(world: Demo) -> None:
    zone = _say(world, "/tpu find gemma4-z --zones mars-east1-a")
    assert "unknown zone for TPUs" in zone and "mars-east1-a" in zone and "[Confirm" not in zone
    kind = _say(world, "/tpu create gemma4-z --zone us-east5-a --type v6e-7 --allow-second")
    assert "v6e-7 is not offered in us-east5-a" in kind and "/tpu zones --type v6e-7" in kind
    none = _say(world, "/tpu find gemma4-z --type v9z-8 --allow-second")
    assert "no zone of project" in none and "v9z-8" in none


@pytest.mark.parametrize(("status", "delay_s", "after"), [(503, 0.0, False), (200, 3.0, True)])
def test_ambiguous_create_in_the_primarys_zone_never_touches_the_primary(
    world: Demo, status: int, delay_s: float, after: bool
) -> None:
    """The review's case: `/tpu find --zones us-east5-a`, Confirm, and the create answers 503 (or times out
    after the emulator handled it). The search asks under a name of its own (`gemma4-qr-2`), never the
    primary's, so the primary survives whatever the answer; a name taken by another's resource is left
    alone at the ops layer (tests/integration/test_ownership.py)."""
    preview = _say(world, "/tpu find --zones us-east5-a --allow-second")
    assert "Every request is named `gemma4-qr-2`" in preview, preview
    world.gcp.inject_fault(r"/queuedResources$", status, delay_s=delay_s, after=after, method="POST")
    world.user.run("click Confirm", timeout=2)
    final = _wait_for(world, "Deployment `production`", timeout=90, about="Capacity search: gemma4-qr-2")
    assert "already exists" not in final, final
    assert _primary(world) == "ACTIVE"
    assert _deletes(world, "gemma4-qr") == []


def test_two_concurrent_finds_for_one_name_one_is_refused(world: Demo) -> None:
    # Both previewed before either runs: once one runs, a preview of its name is refused (it is live).
    _say(world, "/tpu find gemma4-c --zones asia-northeast1-b --allow-second")
    _say(world, "/tpu find gemma4-c --zones asia-northeast1-b --allow-second")
    first, _ = world.user.run("click Confirm", timeout=3)  # waits for capacity (stockout)
    assert any("Cancel" in line for line in first)
    try:
        _second_find_is_refused(world)
        viewer = _click_action(world, "cancel_operation", VIEWER)
        assert "or to be its requester" in viewer
        assert "cancel requested" not in [e.outcome for e in world.bot.services.store.audit(5)]
        _click_action(world, "cancel_operation", DEMO_USER)
        _wait_for(world, "Cancelled; every request this search made was deleted")
    finally:
        for running in list(world.bot.runner._running.values()):
            running.cancelled.set()
    with pytest.raises(NotFound):
        world.bot.services.tpu.get_queued_resource("gemma4-c", ["asia-northeast1-b"])


def _second_find_is_refused(world: Demo) -> None:
    second = _say(world, "click Confirm")
    assert "is still running on this name" in second and f"<@{DEMO_USER}>" in second
    again = _say(world, "/tpu find gemma4-c --zones asia-northeast1-b --allow-second")
    assert "`gemma4-c` is already WAITING_FOR_RESOURCES in `asia-northeast1-b`" in again, again
    refused = _say(world, "/tpu create gemma4-c --zone asia-northeast1-b --allow-second")
    assert "already exists" in refused  # the running search's request
    listing = world.bot.services.tpu.list_queued_resources(["asia-northeast1-b"], with_nodes=False)
    assert [qr.name for qr in listing.resources if qr.name.startswith("gemma4-c")] == ["gemma4-c"]


def test_confirm_refused_when_the_previewed_resource_was_recreated(world: Demo) -> None:
    preview = _say(world, "/tpu delete gemma4-old")
    assert "[Confirm" in preview
    tpu = world.bot.services.tpu
    tpu.delete_queued_resource("gemma4-old", "europe-west4-a", force=True, wait=True)
    spec = CreateSpec(
        "gemma4-old", "gemma4-old-node", "europe-west4-a", "v6e-8", "v2-alpha-tpuv6e", "on-demand", None, None
    )  # on-demand: the zone has no spot quota
    tpu.wait_operation(tpu.create_queued_resource(spec), timeout_s=30)
    refused = _say(world, "click Confirm")
    assert "the target changed since the preview" in refused and "was recreated" in refused
    assert tpu.get_queued_resource("gemma4-old", ["europe-west4-a"]).name == "gemma4-old"


def test_confirm_of_a_create_refused_when_the_name_appeared(world: Demo) -> None:
    _say(world, "/tpu create gemma4-n --zone asia-northeast1-b --allow-second")
    tpu = world.bot.services.tpu
    spec = CreateSpec(
        "gemma4-n", "gemma4-n-node", "asia-northeast1-b", "v6e-8", "v2-alpha-tpuv6e", "spot", None, None
    )
    tpu.create_queued_resource(spec)
    refused = _say(world, "click Confirm")
    assert "now exists" in refused
    assert not tpu.get_queued_resource("gemma4-n", ["asia-northeast1-b"]).labels


def test_a_viewers_cancel_of_a_pending_change_is_refused(world: Demo) -> None:
    _say(world, "/tpu delete gemma4-old")
    refused = _say(world, f"click Cancel as {VIEWER}")
    assert "(only visible to you)" in refused and "needs the admin role" in refused
    assert "Deleted queued resource `gemma4-old`" in _say(world, "click Confirm")


def test_crafted_button_values_get_a_clear_reply(world: Demo) -> None:
    user = world.user
    _say(world, "/tpu list")
    message = world.slack.messages[-1]
    for action_id, value, expected in [
        ("confirm_change", "0" * 32, "this confirmation is unknown"),
        ("cancel_change", "not-a-token", "this confirmation is unknown"),
        ("cancel_operation", "f" * 32, "unknown or has already finished"),
        ("alert_delete", "us-east5-a/gemma4-qr; rm -rf /@x|expiry|60", "does not name a queued resource"),
    ]:
        element = {"type": "button", "action_id": action_id, "value": value, "text": {"type": "plain_text"}}
        element["text"]["text"] = action_id
        start = len(world.slack.messages)
        body = user.click_body(message, "b", element, f"crafted-{action_id}", user_id=DEMO_USER)
        assert user.post_signed(body, "application/x-www-form-urlencoded").status_code == 200
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(
            expected in m.render() for m in world.slack.messages[start:]
        ):
            time.sleep(0.1)
        assert any(expected in m.render() for m in world.slack.messages[start:]), action_id


def test_alert_delete_pins_the_create_time(world: Demo) -> None:
    from bot.views.alerts import alert_buttons

    user = world.user
    _say(world, "/tpu list")
    message = world.slack.messages[-1]
    stale = "europe-west4-a/gemma4-old@2020-01-01T00:00:00Z|stale|1"
    (button,) = [e for e in alert_buttons(stale)["elements"] if e["action_id"] == "alert_delete"]
    body = user.click_body(message, "alert", button, "alert-delete", user_id=DEMO_USER)
    user.post_signed(body, "application/x-www-form-urlencoded")
    refused = _wait_for(world, "as pinned: it was deleted and recreated since", timeout=20)
    assert "gemma4-old" in refused
    (ack,) = [e for e in alert_buttons(stale)["elements"] if e["action_id"] == "alert_ack"]
    body = user.click_body(message, "alert", ack, "alert-ack", user_id=VIEWER)
    user.post_signed(body, "application/x-www-form-urlencoded")
    assert "acknowledging an alert needs the operator role" in _wait_for(world, "acknowledging an alert")


def test_app_home_shows_alerts_only_to_a_role(world: Demo) -> None:
    world.bot.runner._authorizer._everyone_views = False  # VIEWERS set: outsiders hold no role
    scheduler = world.bot.alerts
    outsider = home_blocks(world.bot.runner, world.bot.registry, "U0OUTSIDE1", scheduler)
    texts = str(outsider)
    assert "needs the viewer role" in texts and "Alerts are shown to members with the viewer role" in texts
    admin = home_blocks(world.bot.runner, world.bot.registry, DEMO_USER, scheduler)
    assert "Alerts are shown to members" not in str(admin)


def test_disruptive_previews_say_what_goes_down_and_for_how_long(world: Demo) -> None:
    delete = _say(world, "/tpu delete gemma4-qr --force")
    assert "*Goes down* vLLM on `gemma4-qr-node` (the primary: the bot's vLLM endpoint)" in delete
    assert "for good" in delete
    stop = _say(world, "/tpu stop gemma4-qr-node")
    assert "*Goes down* vLLM on `gemma4-qr-node` until `/tpu start gemma4-qr-node`" in stop
    restart = _say(world, "/vllm restart")
    assert "*Goes down*" in restart and "about 10 minutes" in restart


def test_a_find_for_an_absent_name_still_carries_labels(world: Demo) -> None:
    _say(world, "/tpu find gemma4-l --zones us-east5-a --allow-second")
    world.user.run("click Confirm", timeout=2)
    _wait_for(world, "Capacity found", timeout=60)
    qr = world.bot.services.tpu.get_queued_resource("gemma4-l", [PRIMARY_ZONE])
    assert qr.labels["managed-by"] == "tpu-chatops" and qr.labels["tpu-chatops-search"]
    assert timedelta(0) <= world.gcp.now() - qr.create_time < timedelta(hours=1)  # type: ignore[operator]


def test_the_vllm_api_key_comes_from_secret_manager_is_sent_and_survives_a_restart(tmp_path: Path) -> None:
    import httpx
    import yaml

    from sim import scenario as scenarios

    world = scenarios.load(None)
    world["google"].setdefault("secrets", {})["vllm-api-key"] = "k-simulated-api-key"
    world["host"]["secrets"] = ["hf-token", "vllm-api-key"]
    world["host"]["secret_values"] = {"vllm-api-key": "k-simulated-api-key"}
    path = tmp_path / "keyed.yaml"
    path.write_text(yaml.safe_dump(world))
    with Demo(path, vllm_api_key_secret="vllm-api-key") as demo:
        preview = _say(demo, "/tpu create gemma4-k --zone us-east5-a --allow-second")
        assert "[Confirm" in preview
        _say(demo, "click Cancel")
        script = demo.bot.services.vllm_spec()
        assert script.api_key_secret == "vllm-api-key"
        assert "Goes down" in _say(demo, "/vllm restart")
        assert "`restart` done: a new `vllm` runs" in _say(demo, "click Confirm", timeout=60)
        ran = [c for c in demo.host.commands if "docker run" in c][-1]
        assert "--secret=vllm-api-key" in ran and "-e VLLM_API_KEY" in ran
        assert "k-simulated-api-key" not in ran  # read on the VM, never in the command
        deadline = time.monotonic() + 30
        health = ""
        while time.monotonic() < deadline:
            health = _say(demo, "/vllm health")
            if "one-token chat completion from" in health:
                break
            time.sleep(1)
        assert "one-token chat completion from" in health, health  # the bot sent the key
        unauthenticated = httpx.get(f"{demo.vllm.url}/v1/models", timeout=5)
        assert unauthenticated.status_code == 401
        assert all("k-simulated-api-key" not in m.render() for m in demo.slack.messages)


def test_default_find_tries_the_cheapest_zones_first_in_parallel_and_keeps_the_name(world: Demo) -> None:
    world.gcp.set_quota("europe-west4-a", PREEMPTIBLE_V6E, 0)  # a zone without preemptible quota
    preview = _say(world, "/tpu find gemma4-b --allow-second")
    assert "3 zones at a time" in preview  # CAPACITY_PARALLEL, not one zone at a time
    order = preview.split("*Zones tried, in order* ", 1)[1].splitlines()[0]
    assert order.startswith(
        "(cheapest first, equal prices in TPU_ZONES order, zones expected to refuse last)"
    )
    # us-east5-a ($21.60/h) before asia-northeast1-b ($25.92/h); europe-west4-a (preemptible quota 0) last
    assert order.index("`us-east5-a`") < order.index("`asia-northeast1-b`") < order.index("`europe-west4-a`")
    assert ":warning: `europe-west4-a` has preemptible v6e quota 0" in preview
    assert "Every request is named `gemma4-b`" in preview
    result = _say(world, "click Confirm", timeout=60)
    assert "Capacity found" in result and "*gemma4-b* · `us-east5-a`" in result
    described = _say(world, "/tpu describe gemma4-b")
    assert "not found" not in described and "`us-east5-a`" in described
    listing = world.bot.services.tpu.list_queued_resources(world.settings.tpu_zones)
    assert [(qr.zone, qr.name) for qr in listing.resources if qr.name.startswith("gemma4-b")] == [
        ("us-east5-a", "gemma4-b")
    ]


def test_create_and_recover_previews_warn_about_a_zone_that_will_refuse(world: Demo) -> None:
    world.gcp.set_quota("europe-west4-a", PREEMPTIBLE_V6E, 0)  # a zone without preemptible quota
    create = _say(world, "/tpu create gemma4-c --zone europe-west4-a --allow-second")
    assert "[Confirm" in create
    assert ":warning: `europe-west4-a` has preemptible v6e quota 0 (flex-start draws on it)" in create
    assert "*Instead* `/tpu create gemma4-c --zone Z` with Z one of `us-east5-a`" in create
    assert "*At most" not in create and "the one kept" not in create  # a create's own words
    assert "*Spend* up to $" in create
    recover = _say(world, "/tpu recover gemma4-old --allow-second")
    assert ":warning: `europe-west4-a` has preemptible v6e quota 0 (spot draws on it)" in recover
    assert "`/tpu recover gemma4-old --search --allow-second`" in recover
    fine = _say(world, "/tpu create gemma4-d --zone us-east5-a --allow-second")
    assert ":warning: `us-east5-a`" not in fine and "*Instead*" not in fine


def test_a_remembered_refusal_is_named_in_the_create_preview(world: Demo) -> None:
    store, now = world.bot.services.store, world.bot.services.now()
    message = "flex-start not offered: FLEX_START is not offered for v6e-8 in asia-northeast1-b"
    store.remember_zone_failure("asia-northeast1-b", "v6e-8", "flex-start", message, now=now)
    create = _say(world, "/tpu create gemma4-e --zone asia-northeast1-b --allow-second")
    assert ":warning: `asia-northeast1-b` refused flex-start v6e-8 on" in create and "not offered" in create
    assert "`us-east5-a`" in create.split("*Instead*", 1)[1]


def test_describe_finds_a_search_winner_outside_the_watched_zones() -> None:
    """The search kept `gemma4-w` in us-east5-a, which TPU_ZONES does not list: /tpu describe still finds
    it, from the bot's own record of what it made, and /tpu list of the watched zones does not show it."""
    with Demo(google_timeout_s=2.0, tpu_zones="asia-northeast1-b") as demo:
        _say(demo, "/tpu find gemma4-w --zones us-east5-a --allow-second")
        assert "*gemma4-w* · `us-east5-a`" in _say(demo, "click Confirm", timeout=60)
        described = _say(demo, "/tpu describe gemma4-w")
        assert "not found" not in described and "*Zone* `us-east5-a`" in described
        assert "not found" in _say(demo, "/tpu describe gemma4-nothing")


def test_a_find_whose_create_is_answered_late_says_so_then_its_message_says_what_became_of_it() -> None:
    """The issue's repro: the create is answered after the client's timeout, so the search cannot say that
    every request was deleted; a minute later the request is there (ACTIVE, billing). Reconciliation, which
    now runs every RECONCILE_INTERVAL_S while the bot serves, deletes it by its label and edits the search's
    last message to say so."""
    with Demo(google_timeout_s=1.0, reconcile_interval_s=1.0) as demo:
        _say(demo, "/tpu find newx --zones us-east5-a --allow-second")
        demo.gcp.inject_fault(r"/queuedResources$", 200, delay_s=3.0, method="POST")
        demo.user.run("click Confirm", timeout=2)
        final = _wait_for(demo, "not every request is accounted for")
        assert "every request this search made was deleted" not in final and "No zone had" not in final
        assert "`newx` in `us-east5-a`: its create got no clear answer" in final and "is deleted" in final
        edited = _wait_for(demo, "appeared after the timeout", timeout=30)
        assert "`newx` in `us-east5-a` appeared after the timeout" in edited and "was deleted" in edited
        assert "no clear answer" not in edited  # the line was replaced, not added to
        with pytest.raises(NotFound):
            demo.bot.services.tpu.get_queued_resource("newx", [PRIMARY_ZONE])
        assert _primary(demo) == "ACTIVE"
        audit = [e for e in demo.bot.services.store.audit(20) if e.action == "reconcile"]
        assert [e.outcome.split(":")[0] for e in audit] == ["deleted"]


def test_a_create_answered_late_is_kept_and_its_message_says_so() -> None:
    with Demo(google_timeout_s=1.0, reconcile_interval_s=1.0) as demo:
        _say(demo, "/tpu create newc --zone us-east5-a --allow-second")
        demo.gcp.inject_fault(r"/queuedResources$", 200, delay_s=3.0, method="POST")
        demo.user.run("click Confirm", timeout=2)
        final = _wait_for(demo, "was not there when read back")
        assert "is kept (nothing else is touched)" in final
        edited = _wait_for(demo, "appeared after the timeout", timeout=30)
        assert "`newc` in `us-east5-a` appeared after the timeout" in edited
        assert "is kept: `/tpu create` asked for it" in edited
        assert demo.bot.services.tpu.get_queued_resource("newc", [PRIMARY_ZONE]).name == "newc"


def test_a_vllm_stop_confirmed_after_the_primary_was_recreated_is_refused_with_what_changed() -> None:
    """The issue's finding: `/vllm stop` confirmed after the primary was recreated (a new VM, a new IP)
    SSHed to the new IP. The preview pins the VM (node, create time, address) and Confirm refuses."""
    with Demo(ssh_host=None, google_timeout_s=2.0) as demo:
        preview = _say(demo, "/vllm stop")
        assert "on `127.0.0.1` (node `gemma4-qr-node` of `gemma4-qr`, created " in preview
        created = preview.split("`gemma4-qr`, created ", 1)[1].split(")", 1)[0]
        assert datetime.strptime(created, "%Y-%m-%d %H:%M UTC")  # as every answer shows a time
        tpu = demo.bot.services.tpu
        tpu.delete_queued_resource("gemma4-qr", PRIMARY_ZONE, force=True, wait=True)
        spec = CreateSpec(
            "gemma4-qr", "gemma4-qr-node", PRIMARY_ZONE, "v6e-8", "v2-alpha-tpuv6e", "on-demand", None, None
        )
        tpu.wait_operation(tpu.create_queued_resource(spec), timeout_s=30)
        before = len(demo.host.commands)
        refused = _say(demo, "click Confirm")
        assert "the target changed since the preview" in refused
        assert "node `gemma4-qr-node` was recreated" in refused and "nothing was sent" in refused
        assert "its address changed from `127.0.0.1` to `127.34." in refused
        assert demo.host.commands[before:] == []
        assert demo.host.container_state(demo.settings.vllm_container) == "running"


def test_a_vllm_stop_of_an_unchanged_target_goes_to_the_vm_previewed() -> None:
    with Demo(ssh_host=None) as demo:
        _say(demo, "/vllm stop")
        done = _say(demo, "click Confirm")
        assert "`stop` done." in done and demo.host.container_state(demo.settings.vllm_container) == "exited"
