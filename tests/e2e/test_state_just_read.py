"""Answers describe the state just read, never a remembered one: after the primary is deleted (by the bot,
or by someone else within the endpoint cache's lifetime), no answer names it as the vLLM endpoint's owner;
whatever still answers on its address is said plainly, with the deletion from the audit trail."""

from __future__ import annotations

import time

from bot.shared.fleet_status import DEPARTED_PROBE_S
from ops.tpu.api import TpuOps
from sim.console import DEMO_USER
from sim.demo import Demo

OWNER = "of ACTIVE queued resource gemma4-qr"


def _say(demo: Demo, line: str, timeout: float = 30) -> str:
    out, answered = demo.user.run(line, timeout=timeout)
    assert answered, out
    return "\n".join(out)


def test_a_primary_the_bot_deleted_is_no_endpoint_and_its_deletion_is_said(world: Demo) -> None:
    assert OWNER in _say(world, "/tpu status")  # the endpoint is found, and cached
    _say(world, "/tpu delete gemma4-qr --force")
    assert "Deleted queued resource `gemma4-qr`" in _say(world, "click Confirm")

    status = _say(world, "/tpu status")
    assert OWNER not in status and "/health ready" not in status, status
    assert "`gemma4-qr` is not listed in us-east5-a" in status, status
    deleted = f"`gemma4-qr` was deleted at {world.gcp.now():%H}:"  # the hour: the minute may turn
    still = "something still answers at 127.0.0.1:"  # the vLLM simulator outlives the deleted node
    assert still in status and deleted in status and f"by <@{DEMO_USER}>" in status, status
    assert "(`/tpu delete gemma4-qr --force`, from the audit trail): not this deployment's node" in status

    health = _say(world, "/vllm health")
    assert "answered by the deployment's container" not in health and OWNER not in health, health
    assert "no vLLM endpoint" in health and "`gemma4-qr` is not listed in us-east5-a" in health, health

    production = _say(world, "/fleet").split("*staging*")[0]
    assert "ready (" not in production and still in production and deleted in production, production

    chat = _say(world, "@gemma-bot what happened to gemma4-qr?")
    assert "No queued resource named `gemma4-qr`" not in chat, chat
    assert deleted in chat and "(`/tpu delete gemma4-qr --force`, from the audit trail)" in chat, chat
    assert "it is no longer listed in `production`" in chat, chat

    # the container on the old address (SSH still reaches it) is not presented as the deployment's
    vllm = _say(world, "@gemma-bot is vllm healthy?")
    container = next(line for line in vllm.splitlines() if line.startswith("• _vLLM container_"))
    assert "is running" not in container and "not read: no vLLM endpoint of this deployment" in container
    assert still in container and deleted in container and "not this deployment's node" in container
    served = next(line for line in vllm.splitlines() if line.startswith("• _vLLM_"))
    assert "no endpoint now" in served and still in served, vllm


def test_a_primary_deleted_elsewhere_is_not_served_from_the_endpoint_cache(world: Demo) -> None:
    """Deleted by someone else seconds after the bot found its endpoint: within the cache's lifetime, a
    command without a listing of its own (/vllm health) reads the node again and finds it gone."""
    assert "answered by the deployment's container" in _say(world, "/vllm health")
    tpu = TpuOps(world.gcp.project, api_endpoint=world.gcp.url, timeout_s=5, num_retries=0)
    try:
        tpu.delete_queued_resource("gemma4-qr", "us-east5-a", force=True, wait=True, poll_s=0.05)
    finally:
        tpu.close()
    health = _say(world, "/vllm health")
    assert "answered by the deployment's container" not in health and OWNER not in health, health
    assert "`gemma4-qr` is not listed in us-east5-a" in health, health


def test_the_endpoint_zone_not_listing_reads_its_node_again(world: Demo) -> None:
    """us-east5-a's listing fails: the endpoint found before is kept only because its node, read now, is
    still the VM it was found on; once the node is gone too, nothing is claimed."""
    assert OWNER in _say(world, "/tpu status")
    world.gcp.inject_fault(r"/locations/us-east5-a/queuedResources$", 503, count=20)
    status = _say(world, "/tpu status")
    assert ":red_circle: `us-east5-a`" in status and OWNER in status and "/health ready" in status, status
    world.gcp.inject_fault(r"/locations/us-east5-a/nodes/gemma4-qr-node$", 404, count=20)
    gone = _say(world, "/tpu status")
    assert OWNER not in gone and "/health ready" not in gone and "no vLLM endpoint" in gone, gone


def test_a_departed_address_that_does_not_answer_holds_no_answer_for_the_whole_timeout(world: Demo) -> None:
    """The primary deleted, its address stops answering (the vLLM simulator answers nothing for 8 s, as a
    released IP drops the attempt): /fleet and /tpu status probe it for DEPARTED_PROBE_S, not HTTP_TIMEOUT_S
    (10 s), and say that they did not wait longer, and why."""
    assert OWNER in _say(world, "/tpu status")
    _say(world, "/tpu delete gemma4-qr --force")
    assert "Deleted queued resource `gemma4-qr`" in _say(world, "click Confirm")
    world.vllm.set_latency(8.0)
    assert DEPARTED_PROBE_S < 8.0 < world.bot.services.settings.http_timeout_s
    said = f"nothing answered at 127.0.0.1:{world.vllm.url.rsplit(':', 1)[1]} within {DEPARTED_PROBE_S:g} s "
    for line in ("/fleet", "/tpu status"):
        started = time.monotonic()
        answer = _say(world, line)
        took = time.monotonic() - started
        assert said + "(not waited longer: its owner is gone)" in answer, answer
        assert "`gemma4-qr` was deleted at" in answer and took < 7.0, (line, took)
