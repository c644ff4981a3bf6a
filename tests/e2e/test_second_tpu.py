"""A second TPU beside a running primary gets a name of its own, and the primary is one resource, known by
zone and name: two queued resources of one name in two zones are never both "(primary)". Signed Slack
requests to the real bot, the Google emulator over REST with the real Google clients."""

from __future__ import annotations

import time
from datetime import timedelta

from ops.tpu.api import TpuOps
from ops.tpu.model import CreateSpec
from sim.demo import Demo


def _say(demo: Demo, line: str, timeout: float = 30) -> str:
    out, answered = demo.user.run(line, timeout=timeout)
    assert answered, out
    return "\n".join(out)


def _tpu(demo: Demo) -> TpuOps:
    return TpuOps(demo.gcp.project, api_endpoint=demo.gcp.url, timeout_s=5, num_retries=0)


ZONES = ["us-east5-a", "asia-northeast1-b", "europe-west4-a"]


def test_a_search_beside_the_running_primary_gets_a_free_name_and_the_primary_stays_one(world: Demo) -> None:
    refused = _say(world, "/tpu find gemma4-qr --allow-second")  # the name is ACTIVE: not a second of it
    assert "`gemma4-qr` is already ACTIVE in `us-east5-a`" in refused and "[Confirm" not in refused, refused
    assert "`/tpu find gemma4-qr-2 --allow-second`" in refused, refused

    preview = _say(world, "/tpu find --allow-second")
    assert "*Find capacity* for `gemma4-qr-2`" in preview, preview
    assert "Every request is named `gemma4-qr-2` (a name is unique per zone), not `gemma4-qr`" in preview
    assert "already exists" not in preview and "[Confirm" in preview, preview
    lines, _ = world.user.run("click Confirm", timeout=90)
    found = "\n".join(lines)
    assert "failed: already exists" not in found, found
    tpu = _tpu(world)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            names = [
                (qr.zone, qr.name) for qr in tpu.list_queued_resources(ZONES, with_nodes=False).resources
            ]
            if ("us-east5-a", "gemma4-qr-2") in names and sum(n == "gemma4-qr-2" for _, n in names) == 1:
                break
            time.sleep(0.5)
    finally:
        tpu.close()
    assert [zone for zone, name in names if name == "gemma4-qr"] == ["us-east5-a"], names
    assert ("us-east5-a", "gemma4-qr-2") in names, (names, found)

    for command in ("/tpu list", "/tpu status"):
        shown = _say(world, command)
        assert shown.count("(primary)") == 1, shown
        assert "*gemma4-qr* (primary) · `us-east5-a`" in shown and "node `gemma4-qr-2-node`" in shown, shown


def test_two_resources_of_one_name_are_never_both_the_primary(world: Demo) -> None:
    tpu = _tpu(world)  # a second gemma4-qr made outside the bot, in another zone: it waits for capacity
    try:
        spec = CreateSpec(
            "gemma4-qr", "gemma4-qr-node", "asia-northeast1-b", "v6e-8", "v2-alpha-tpuv6e", "flex-start",
            timedelta(hours=1), timedelta(hours=1),
        )  # fmt: skip
        tpu.create_queued_resource(spec)
    finally:
        tpu.close()
    for command in ("/tpu list", "/tpu status"):
        shown = _say(world, command)
        assert shown.count("(primary)") == 1 and "*gemma4-qr* (primary) · `us-east5-a`" in shown, shown
        other = "*gemma4-qr* (not the primary, which is in `us-east5-a`) · `asia-northeast1-b`"
        assert other in shown, shown
    # The vLLM endpoint stays the primary's node, not the other one of its name.
    assert "of ACTIVE queued resource gemma4-qr (us-east5-a)" in shown, shown

    hint = _say(world, "/tpu describe gemma4-qr --zone europe-west4-a")
    assert "`us-east5-a` (the primary) (`/tpu describe gemma4-qr --zone us-east5-a`)" in hint, hint
    assert "`asia-northeast1-b` (`/tpu describe gemma4-qr --zone asia-northeast1-b`)" in hint, hint


def test_a_create_of_the_primarys_name_in_another_zone_is_refused_with_a_free_name(demo: Demo) -> None:
    refused = _say(demo, "/tpu create gemma4-qr --zone asia-northeast1-b --allow-second")
    assert "`gemma4-qr` is already ACTIVE in `us-east5-a`: creating it in `asia-northeast1-b`" in refused
    assert "`/tpu create gemma4-qr-2 --zone asia-northeast1-b --allow-second`" in refused, refused
    offered = _say(demo, "/tpu create gemma4-qr-2 --zone asia-northeast1-b --allow-second")
    assert "*Create* queued resource `gemma4-qr-2` in `asia-northeast1-b`" in offered, offered
    assert "[Confirm" in offered, offered
