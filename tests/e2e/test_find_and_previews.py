"""The demo's previews and the capacity search, end to end through the real bot and the real Google clients
against the emulator: the zones a search tries and why, the name asked for being the name got, and the
zone data (accelerator types, preemptible quota, remembered refusals) warning before a create or a
recovery that will be refused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sim.demo import Demo


@pytest.fixture()
def world() -> Iterator[Demo]:
    with Demo(google_timeout_s=2.0) as demo:
        yield demo


def _say(demo: Demo, line: str, timeout: float = 30) -> str:
    out, answered = demo.user.run(line, timeout=timeout)
    assert answered, out
    return "\n".join(out)


def test_default_find_tries_the_cheapest_zones_first_in_parallel_and_keeps_the_name(world: Demo) -> None:
    preview = _say(world, "/tpu find gemma4-b --allow-second")
    assert "3 zone(s) at a time" in preview  # CAPACITY_PARALLEL, not one zone at a time
    order = preview.split("*Zones tried, in order* ", 1)[1].splitlines()[0]
    assert order.startswith(
        "(cheapest first, equal prices in TPU_ZONES order, zones expected to refuse last)"
    )
    # us-east5-a ($21.60/h) before asia-northeast1-b ($25.92/h); europe-west4-a (preemptible quota 0) last
    assert (
        order.index("`us-east5-a` ($21.60/h)")
        < order.index("`asia-northeast1-b`")
        < order.index("`europe-west4-a`")
    )
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
    create = _say(world, "/tpu create gemma4-c --zone europe-west4-a --allow-second")
    assert "[Confirm" in create
    assert ":warning: `europe-west4-a` has preemptible v6e quota 0 (flex-start draws on it)" in create
    assert "*Instead* `/tpu create gemma4-c --zone Z` with Z one of `us-east5-a`" in create
    assert "request(s) at once" not in create and "the one kept" not in create  # a create's own words
    assert "*Spend* up to $" in create
    recover = _say(world, "/tpu recover gemma4-old")
    assert ":warning: `europe-west4-a` has preemptible v6e quota 0 (spot draws on it)" in recover
    assert "`/tpu recover gemma4-old --search`" in recover
    fine = _say(world, "/tpu create gemma4-d --zone us-east5-a --allow-second")
    assert ":warning: `us-east5-a`" not in fine and "*Instead*" not in fine


def test_a_remembered_refusal_is_named_in_the_create_preview(world: Demo) -> None:
    store, now = world.bot.services.store, world.bot.services.now()
    message = "flex-start not offered: FLEX_START is not offered for v6e-8 in asia-northeast1-b"
    store.remember_zone_failure("asia-northeast1-b", "v6e-8", "flex-start", message, now=now)
    create = _say(world, "/tpu create gemma4-e --zone asia-northeast1-b --allow-second")
    assert ":warning: `asia-northeast1-b` refused flex-start v6e-8 on" in create and "not offered" in create
    assert "`us-east5-a`" in create.split("*Instead*", 1)[1]
