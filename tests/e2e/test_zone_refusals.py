"""A create refused for good is remembered for its zone and provisioning model, shown by `/tpu zones` and
warned about in the create and find previews (end to end, through the demo's console and simulators)."""

from __future__ import annotations

from sim.demo import Demo

PREEMPTIBLE_V6E = "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI"


def _say(demo: Demo, line: str, timeout: float = 20) -> str:
    out, answered = demo.user.run(line, timeout=timeout)
    assert answered, out
    return "\n".join(out)


def test_a_zone_s_fit_is_shown_per_provisioning_model_with_its_reasons(world: Demo) -> None:
    world.gcp.set_quota("europe-west4-a", PREEMPTIBLE_V6E, 0)  # a zone without preemptible quota
    default = _say(world, "/tpu zones")
    assert "Zones for v6e-8: flex-start" in default
    assert "flex-start: ❌ has preemptible v6e quota 0 (flex-start draws on it)" in default
    assert "`europe-west4-a`" in default and "`us-east5-a`" in default
    every = _say(world, "/tpu zones --all-models")
    europe = every.split("`europe-west4-a`")[1].split("`us-east5-a`")[0]
    assert "spot: ❌ has preemptible" in europe and "on-demand: ✅ fits" in europe
    assert ":large_yellow_circle: `europe-west4-a`" in every


def test_a_create_refused_for_good_is_remembered_and_shown(world: Demo) -> None:
    world.gcp.set_quota("europe-west4-a", PREEMPTIBLE_V6E, 0)  # a zone without preemptible quota
    _say(world, "/tpu create gemma4-eu --zone europe-west4-a --spot --allow-second")
    refused = _say(world, "click Confirm")
    assert "Limit 0 in zone europe-west4-a" in refused
    assert "request preemptible quota" in refused and "retry" not in refused.split("Limit 0", 1)[1]
    (failure,) = world.bot.services.store.zone_failures("v6e-8", "spot").values()
    assert failure.zone == "europe-west4-a" and failure.message.startswith("no preemptible quota: ")
    assert not world.bot.services.store.zone_failures("v6e-8", "on-demand")  # that model was not refused
    zones = _say(world, "/tpu zones --model spot")
    assert "(no preemptible quota; a remembered refusal)" in zones
    again = _say(world, "/tpu create gemma4-eu --zone europe-west4-a --spot --allow-second")
    assert ":warning: `europe-west4-a` refused spot v6e-8 on " in again
    assert "*Instead* `/tpu create gemma4-eu --zone Z` with Z one of `us-east5-a`" in again
    _say(world, "click Cancel")


def test_an_unknown_zone_gets_one_clean_refusal_from_every_command_that_takes_one(demo: Demo) -> None:
    """Whether the bot checks the zone before its preview (create, find) or the TPU API answers 404 for the
    location (list, describe, delete, reset, start, stop, recover), the answer is one line naming the zone
    and /tpu zones, never the API's text."""
    refusal = "unknown zone for TPUs in project demo-project: us-east5-z\n_see the zones with /tpu zones_"
    for line in (
        "/tpu list --zone us-east5-z",
        "/tpu describe gemma4-qr --zone us-east5-z",
        "/tpu delete gemma4-qr --zone us-east5-z",
        "/tpu reset gemma4-qr --zone us-east5-z",
        "/tpu start gemma4-qr-node --zone us-east5-z",
        "/tpu stop gemma4-qr-node --zone us-east5-z",
        "/tpu recover gemma4-old --zone us-east5-z",
        "/tpu create gemma4-x --zone us-east5-z",
        "/tpu find --zones us-east5-a,us-east5-z",
    ):
        text = _say(demo, line)
        assert refusal in text, (line, text)
        assert "HTTP 404" not in text and "Location projects/" not in text, (line, text)
    assert demo.gcp.world.queued_resources[("us-east5-a", "gemma4-qr")].state == "ACTIVE"
