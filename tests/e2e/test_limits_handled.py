"""The product handles the limits the simulators now enforce (tests/test_contract.py lists which limit each
test depends on). Everything goes through the real bot over signed HTTP, as in the demo."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from slack_sdk.webhook import WebhookClient

from bot.commands.runner import Origin
from bot.slack.render import Reply, section
from sim.console import DEMO_CHANNEL, DEMO_USER, SlackUser
from sim.demo import ALERTS_CHANNEL, Demo
from tests.integration.test_gcp_sim import default_scenario

UNINVITED = "C0NOTJOIND"


def _user(demo: Demo, channel: str) -> SlackUser:
    return SlackUser(demo.server.url, demo.signing_secret, demo.slack, channel_id=channel)


# ---- Slack: membership, response_url, trigger_id, thread history, block limits --------------------------


def test_console_shows_not_in_channel_guidance_in_an_uninvited_channel(demo: Demo) -> None:
    user = _user(demo, DEMO_CHANNEL)
    out, ok = user.run(f"channel {UNINVITED}")
    assert ok and "not a member" in out[0]
    start = len(demo.slack.messages)
    out, answered = user.run("/vllm metrics --raw")
    text = "\n".join(out)
    assert answered, text
    assert "vLLM metrics" in text or "metrics" in text.lower()  # the answer itself still arrives
    assert f"I am not a member of <#{UNINVITED}>" in text and "/invite @gemma-bot" in text
    notice = demo.slack.wait_for(lambda m: "not a member" in m.render(), start=start)
    assert notice is not None and notice.ephemeral and notice.kind == "response"
    assert "the file `" in notice.render()  # the raw scrape could not be attached there
    assert not any(m.kind == "file" and m.channel == UNINVITED for m in demo.slack.messages[start:])


def test_reply_without_response_url_falls_back_to_a_dm(demo: Demo) -> None:
    start = len(demo.slack.messages)
    demo.bot.runner.deliver(
        Reply(text="the answer", blocks=[section("the answer")]), Origin(DEMO_USER, UNINVITED)
    )
    dm = demo.slack.wait_for(lambda m: m.channel == DEMO_USER, start=start)
    assert dm is not None and "the answer" in dm.render() and "/invite @gemma-bot" in dm.render()


def test_spent_response_url_falls_back_to_the_channel(demo: Demo) -> None:
    url = demo.slack.response_url("spent-1")
    webhook = WebhookClient(url)
    for i in range(5):
        assert webhook.send(text=f"update {i}").status_code == 200
    start = len(demo.slack.messages)
    origin = Origin(DEMO_USER, DEMO_CHANNEL, response_url=url)
    demo.bot.runner.deliver(Reply(text="late answer", blocks=[section("late answer")]), origin)
    posted = demo.slack.wait_for(lambda m: "late answer" in m.text, start=start)
    assert posted is not None and posted.kind == "post" and posted.channel == DEMO_CHANNEL


def test_long_reply_stays_within_the_cumulative_block_limit(demo: Demo) -> None:
    start = len(demo.slack.messages)
    blocks = [section(f"{i} " + "x" * 2800) for i in range(30)]
    demo.bot.runner.deliver(Reply(text="long", blocks=blocks), Origin(DEMO_USER, DEMO_CHANNEL))
    posted = demo.slack.wait_for(lambda m: m.kind == "post" and m.text == "long", start=start)
    file = demo.slack.wait_for(lambda m: m.kind == "file", start=start)
    assert posted is not None and file is not None  # cut to fit, the whole text attached
    assert "Longer than Slack allows" in posted.render()


def test_alerts_say_when_the_alert_channel_was_not_joined() -> None:
    with Demo(alerts=True) as world:
        world.slack.joined.discard(ALERTS_CHANNEL)
        out, answered = world.user.run("/alerts test")
        text = "\n".join(out)
        assert answered and "not_in_channel" in text and "/invite @gemma-bot" in text
        assert world.bot.alerts is not None
        world.gcp.advance(3 * 3600)  # gemma4-qr crosses its expiry thresholds: the alert cannot be posted
        world.bot.alerts.tick()
        problem = world.bot.alerts.outbox.problem(ALERTS_CHANNEL)
        assert problem is not None and problem.code == "not_in_channel"
        out, _ = world.user.run("/alerts list")
        listed = "\n".join(out)
        assert "Alerts cannot reach" in listed and "not_in_channel" in listed


def test_token_form_opens_within_the_trigger_window_while_workers_are_busy() -> None:
    with Demo(worker_threads=1) as world:
        world.vllm.set_latency(4.0)
        busy = threading.Thread(target=world.user.run, args=("/vllm health",), kwargs={"timeout": 30})
        busy.start()
        time.sleep(0.5)  # the only worker is now waiting for vLLM
        start = len(world.slack.messages)
        out, _ = world.user.run("/tpu token", timeout=10)
        modal = world.slack.wait_for(lambda m: m.kind == "modal", timeout=3, start=start)
        assert modal is not None, out
        assert "failed unexpectedly" not in "\n".join(out)
        world.vllm.set_latency(0.0)
        busy.join(timeout=60)


def test_thread_history_is_read_from_the_newest_end_with_edits(demo: Demo) -> None:
    user = _user(demo, DEMO_CHANNEL)
    base = int(time.time()) - 5000
    root = f"{base}.000000"
    demo.slack.record_user_message(DEMO_CHANNEL, root, "thread root")
    for i in range(1, 260):
        text = "the newest detail is zebra-42" if i == 259 else f"older message {i}"
        demo.slack.record_user_message(DEMO_CHANNEL, f"{base}.{i:06d}", text, thread_ts=root)
    demo.slack.edit_user_message(DEMO_CHANNEL, f"{base}.000258", "edited: giraffe-7")
    user.thread_ts = root
    calls, requests = len(demo.slack.calls), len(demo.vllm.chat_requests)
    out, answered = user.run("@gemma-bot what changed most recently?")
    assert answered, out
    pages = [a for m, a in demo.slack.calls[calls:] if m == "conversations.replies"]
    assert len(pages) >= 2 and any(a.get("cursor") for a in pages)  # every page was read
    sent = demo.vllm.chat_requests[requests]
    contents = [str(m.get("content")) for m in sent["messages"]]
    assert "the newest detail is zebra-42" in contents and "edited: giraffe-7" in contents
    assert "older message 1" not in contents  # the oldest did not crowd out the newest
    assert contents[-1].endswith("what changed most recently?")


# ---- TPU: preemption, reset, Cloud Quotas default dimension, Cloud Logging regexes ----------------------


@pytest.fixture(scope="module")
def spot_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    scenario = copy.deepcopy(default_scenario())
    scenario["google"]["zones"]["us-west4-a"] = {"accelerator_types": ["v6e-8"]}
    scenario["google"]["quota_defaults"] = {"TPUV6EPreemptiblePerProjectPerZoneForTPUAPI": 48}
    scenario["google"]["queued_resources"].append(
        {
            "name": "spot-qr",
            "zone": "us-west4-a",
            "state": "ACTIVE",
            "provisioning_model": "SPOT",
            "created": "-10m",
            "preempt_after": "1m",
            "node": {"id": "spot-qr-node", "external_ip": "127.0.0.9"},
        }
    )
    path = Path(tmp_path_factory.mktemp("spot")) / "spot.yaml"
    path.write_text(yaml.safe_dump(scenario))
    with Demo(path) as world:
        yield world


def test_preempted_spot_is_shown_and_reset_is_refused_with_the_alternative(spot_world: Demo) -> None:
    spot_world.gcp.advance(3 * 60)  # preempted, then SUSPENDED with its node deleted
    out, answered = spot_world.user.run("/tpu list --zone us-west4-a")
    text = "\n".join(out)
    assert answered and "SUSPENDED" in text and "spot capacity preempted" in text
    out, answered = spot_world.user.run("/tpu describe spot-qr")
    assert answered and "spot capacity preempted" in "\n".join(out)
    out, answered = spot_world.user.run("/tpu reset spot-qr")
    text = "\n".join(out)
    assert (
        answered
        and "cannot be reset" in text
        and "/tpu recover spot-qr" in text
        and "deletes it and creates it again" in text
    )
    assert "[Confirm" not in text  # refused in the preview: nothing to confirm


def test_zones_count_the_default_quota_dimension(spot_world: Demo) -> None:
    out, answered = spot_world.user.run("/tpu zones")
    text = "\n".join(out)
    assert answered and "us-west4-a" in text and "48" in text


def test_a_filter_the_real_api_rejects_is_a_clear_error(spot_world: Demo) -> None:
    out, answered = spot_world.user.run("""/logs --filter 'textPayload=~"(?=oom)o"'""")
    text = "\n".join(out)
    assert answered and "invalid regular expression" in text and "Traceback" not in text


# ---- vLLM engine death -------------------------------------------------------------------------------------


def test_engine_death_shows_as_refused_and_exited() -> None:
    with Demo() as world:
        world.vllm.config["engine_death_exit_s"] = 0.5
        world.vllm.set_mode("engine-dead")
        deadline = time.monotonic() + 10
        while world.vllm.listening and time.monotonic() < deadline:
            time.sleep(0.05)
        out, answered = world.user.run("/vllm status")
        text = "\n".join(out)
        assert answered and "exited" in text, text
        out, answered = world.user.run("/vllm health")
        text = "\n".join(out).lower()
        assert answered and ("cannot connect" in text or "refused" in text), text


def test_streamed_answer_in_an_uninvited_channel_arrives_with_the_lost_progress_named(demo: Demo) -> None:
    user = _user(demo, UNINVITED)
    start = len(demo.slack.messages)
    out, answered = user.run("/gemma ask hello")
    text = "\n".join(out)
    assert answered and "simulated answer" in text, text  # the final answer, through the response_url
    assert "progress updates could not be posted" in text and "/invite @gemma-bot" in text
    assert not any(
        m.channel == UNINVITED for m in demo.slack.messages[start:] if m.kind in ("post", "update")
    )
