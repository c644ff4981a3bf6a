"""Every preview of a change that can create capacity states the worst case over every zone it may create
in, a change of provisioning model, and the same warnings (quota, a running primary) as `/tpu create`
(`bot.shared.zone_plan.capacity_preview`)."""

from __future__ import annotations

import re

from ops.tpu.api import TpuOps
from sim.demo import Demo

PREEMPTIBLE_V6E = "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI"


def _say(demo: Demo, line: str, timeout: float = 30) -> str:
    out, answered = demo.user.run(line, timeout=timeout)
    assert answered, out
    return "\n".join(out)


def test_recover_by_search_prices_the_dearest_zone_and_warns_like_create(world: Demo) -> None:
    world.gcp.set_quota("europe-west4-a", PREEMPTIBLE_V6E, 0)  # a zone without preemptible quota
    # Beside the ACTIVE primary, a recovery is refused as a create is, and says how to go on.
    for line in ("/tpu recover gemma4-old --search", "/tpu recover gemma4-old"):
        refused = _say(world, line)
        assert (
            "the primary `gemma4-qr` is already ACTIVE in `us-east5-a` (v6e-8): this recovery would start a "
            "second one"
            in refused
            and "[Confirm" not in refused
        ), refused
        assert f"to go on anyway: `{line} --allow-second`; or first `/tpu delete gemma4-qr" in refused, (
            refused
        )
    preview = _say(world, "/tpu recover gemma4-old --search --allow-second")
    # asia-northeast1-b is the dearest zone searched: $25.92/h x 4 h (not europe-west4-a's $95.04)
    assert "*Projected spend* flex-start, up to $103.68 (4 h at `asia-northeast1-b` prices" in preview
    changed = ":warning: *Provisioning model changes*: `gemma4-old` was spot; this requests flex-start"
    assert changed in preview, preview
    assert ":warning: `europe-west4-a` has preemptible v6e quota 0 (flex-start draws on it)" in preview
    assert ":warning: *Already running* `gemma4-qr` (ACTIVE, `us-east5-a`)" in preview, preview
    assert "[Confirm" in preview  # allowed: the second TPU is warned of

    again = _say(
        world, "/tpu recover gemma4-old --allow-second"
    )  # in its own zone, its own model: no model change
    assert "Provisioning model changes" not in again and "*Already running* `gemma4-qr`" in again, again
    assert ":warning: `europe-west4-a` has preemptible v6e quota 0 (spot draws on it)" in again, again

    reset = _say(world, "/tpu reset gemma4-old")  # provisioned again, it bills again
    assert "*Spend* no fixed end: up to $5.71/h" in reset, reset
    assert ":warning: `europe-west4-a` has preemptible v6e quota 0 (spot draws on it)" in reset, reset
    assert "*Already running* `gemma4-qr`" in reset and "[Confirm" in reset, reset


def test_a_recovery_beside_the_primary_says_what_now_bills(world: Demo) -> None:
    """The result of a recovery that went on beside the ACTIVE primary says both TPUs bill, each one's
    hourly rate and the total, the worst case still to come of each, and the delete of the second one."""
    _say(world, "/tpu recover gemma4-old --search --allow-second")
    result = _say(world, "click Confirm", timeout=120)
    assert "deleted `gemma4-old` and found capacity in `us-east5-a`: now ACTIVE" in result, result
    bills = (
        ":warning: *2 TPUs now bill*: `gemma4-old` (ACTIVE, `us-east5-a`) at most $21.60/h beside "
        "`gemma4-qr` (ACTIVE, `us-east5-a`) at most $21.60/h: together at most $43.20/h"
    )
    assert bills in result, result
    assert "*Worst case* `gemma4-old` at most $86.40 more (4.0 h); `gemma4-qr` at most $" in result, result
    delete = "_Not wanted? `/tpu delete gemma4-old --zone us-east5-a --force` deletes `gemma4-old`._"
    assert delete in result, result
    assert "[Confirm" in _say(world, delete.split("`")[1])  # the delete it names is accepted as is


def test_ensure_shows_the_spend_and_warnings_of_the_create_it_makes(world: Demo) -> None:
    tpu = TpuOps(world.gcp.project, api_endpoint=world.gcp.url, timeout_s=5, num_retries=0)
    try:
        tpu.delete_queued_resource("gemma4-qr", "us-east5-a", force=True, wait=True, poll_s=0.05)
    finally:
        tpu.close()
    preview = _say(world, "/tpu ensure")
    assert "*Create* `gemma4-qr` in `us-east5-a`" in preview, preview
    assert "*Price* flex-start: `us-east5-a` at most $21.60/h" in preview, preview
    assert "*Spend* up to $86.40 (4 h max run), billed once ACTIVE" in preview, preview
    assert "*Already running*" not in preview and "[Confirm" in preview, preview


def test_find_and_zones_give_one_judgement_of_a_zone_in_the_same_words(world: Demo) -> None:
    world.gcp.set_quota("europe-west4-a", PREEMPTIBLE_V6E, 0)  # a zone without preemptible quota
    store, now = world.bot.services.store, world.bot.services.now()
    message = "flex-start not offered: FLEX_START is not offered for v6e-8 in europe-west4-a"
    store.remember_zone_failure("europe-west4-a", "v6e-8", "flex-start", message, now=now)
    zones = _say(world, "/tpu zones")
    fit = zones.split("`europe-west4-a` quota", 1)[1].split("flex-start: ", 1)[1].splitlines()[0]
    assert fit.startswith("❌ has preemptible v6e quota 0 (flex-start draws on it); refused flex-start"), fit
    assert fit.endswith("(flex-start not offered; a remembered refusal)"), fit
    refused = _say(world, "/tpu find gemma4-f")  # the primary is ACTIVE: refused, and says how to go on
    assert "a search would start a second one" in refused and "[Confirm" not in refused, refused
    assert "`/tpu find gemma4-f --allow-second`" in refused and "/tpu delete gemma4-qr" in refused, refused
    find = _say(world, "/tpu find gemma4-f --allow-second")
    assert f"*Skipped* (`--retry-all` to try): `europe-west4-a` {fit}" in find, find


def test_start_states_what_the_started_node_bills_until_its_resource_terminates(world: Demo) -> None:
    """A stopped node bills again once started: /tpu start's preview prices it as its queued resource
    (type, provisioning model, zone) up to the resource's termination time, as every capacity preview
    states its worst case."""
    _say(world, "/tpu stop gemma4-qr-node")
    assert "is STOPPED" in _say(world, "click Confirm", timeout=60)
    qr = world.bot.services.tpu.get_queued_resource("gemma4-qr", ["us-east5-a"])
    assert qr.termination_time is not None
    left = (qr.termination_time - world.gcp.now()).total_seconds() / 3600
    preview = _say(world, "/tpu start gemma4-qr-node")
    assert "*Price* flex-start: `us-east5-a` at most $21.60/h" in preview, preview
    ends = qr.termination_time.strftime("%Y-%m-%d %H:%M UTC")
    found = re.search(
        r"\*Spend\* up to \$([\d,.]+) \(([\d.]+) h until it terminates at (.+?)\), billed again", preview
    )
    assert found is not None and "[Confirm" in preview, preview
    usd, hours = float(found.group(1).replace(",", "")), float(found.group(2))
    assert abs(usd - 21.60 * left) < 0.1 and abs(hours - left) < 0.1 and found.group(3) == ends, preview


def test_start_of_a_running_node_and_stop_of_a_stopped_one_are_refused_before_any_confirmation(
    world: Demo,
) -> None:
    """A start or stop with nothing to do in the node's state as just read offers no Confirm: it says the
    state and the command that does something in it."""
    refused = _say(world, "/tpu start gemma4-qr-node")
    assert "node gemma4-qr-node is READY: it already runs or is on its way up, nothing to start" in refused
    assert "`/tpu stop gemma4-qr-node`" in refused and "[Confirm" not in refused, refused
    _say(world, "/tpu stop gemma4-qr-node")
    assert "is STOPPED" in _say(world, "click Confirm", timeout=60)
    again = _say(world, "/tpu stop gemma4-qr-node")
    assert "is STOPPED: it is already stopped or stopping, nothing to stop" in again, again
    assert "[Confirm" not in again and "`/tpu start gemma4-qr-node`" in again, again
