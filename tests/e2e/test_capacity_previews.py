"""Every preview of a change that can create capacity states the worst case over every zone it may create
in, a change of provisioning model, and the same warnings (quota, a running primary) as `/tpu create`
(`bot.shared.zone_plan.capacity_preview`)."""

from __future__ import annotations

from ops.tpu.api import TpuOps
from sim.demo import Demo

PREEMPTIBLE_V6E = "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI"


def _say(demo: Demo, line: str, timeout: float = 30) -> str:
    out, answered = demo.user.run(line, timeout=timeout)
    assert answered, out
    return "\n".join(out)


def test_recover_by_search_prices_the_dearest_zone_and_warns_like_create(world: Demo) -> None:
    world.gcp.set_quota("europe-west4-a", PREEMPTIBLE_V6E, 0)  # a zone without preemptible quota
    preview = _say(world, "/tpu recover gemma4-old --search")
    # asia-northeast1-b is the dearest zone searched: $25.92/h x 4 h (not europe-west4-a's $95.04)
    assert "*Projected spend* flex-start, up to $103.68 (4 h at `asia-northeast1-b` prices" in preview
    changed = ":warning: *Provisioning model changes*: `gemma4-old` was spot; this requests flex-start"
    assert changed in preview, preview
    assert ":warning: `europe-west4-a` has preemptible v6e quota 0 (flex-start draws on it)" in preview
    assert ":warning: *Already running* `gemma4-qr` (ACTIVE, `us-east5-a`)" in preview, preview
    assert "[Confirm" in preview  # a warning, not a refusal: the fix of a stockout names this command

    again = _say(world, "/tpu recover gemma4-old")  # in its own zone, its own model: no model change
    assert "Provisioning model changes" not in again and "*Already running* `gemma4-qr`" in again, again
    assert ":warning: `europe-west4-a` has preemptible v6e quota 0 (spot draws on it)" in again, again

    reset = _say(world, "/tpu reset gemma4-old")  # provisioned again, it bills again
    assert "*Spend* no fixed end: up to $5.71/h" in reset, reset
    assert ":warning: `europe-west4-a` has preemptible v6e quota 0 (spot draws on it)" in reset, reset
    assert "*Already running* `gemma4-qr`" in reset and "[Confirm" in reset, reset


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
