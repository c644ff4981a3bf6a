"""The simulators enforce what the real services enforce: one test per limit, through the real clients
(slack_sdk, google-cloud-logging, google-api-python-client, httpx) where the product uses them.

Each limit, its public source and the product test that depends on it are listed in
tests/test_contract.py (CONTRACT).
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.webhook import WebhookClient

from ops.errors import BadInput, QuotaExceeded
from ops.gcp import google
from ops.gcp.quotas import zone_quotas
from ops.tpu.api import TpuOps
from sim.gcp import GcpSimulator
from sim.gcp.logentry import make_log_entry
from sim.host import HostSimulator
from sim.host.server import DOCKER_SOCKET_DENIED, SUDO_PASSWORD_REQUIRED
from sim.slack import MAX_BLOCKS_TEXT, SlackSimulator
from sim.vllm import VllmSimulator
from sim.vllm.tokens import count_chat_tokens
from tests.conftest import CASES
from tests.integration.test_gcp_sim import default_scenario
from tests.integration.test_tpu_lifecycle import POLL, make_spec

TOKEN = "xoxb-limits"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


# ---- Slack -------------------------------------------------------------------------------------------------


@pytest.fixture
def slack() -> Iterator[SlackSimulator]:
    sim = SlackSimulator(TOKEN, channels=["C0JOINED01"]).start()
    yield sim
    sim.stop()


def _client(slack: SlackSimulator) -> WebClient:
    return WebClient(token=TOKEN, base_url=slack.api_url)


def _error(call: Any) -> str:
    with pytest.raises(SlackApiError) as info:
        call()
    return str(info.value.response["error"])


def test_slack_posting_needs_membership(slack: SlackSimulator) -> None:
    client = _client(slack)
    assert client.chat_postMessage(channel="C0JOINED01", text="hi")["ok"]
    assert _error(lambda: client.chat_postMessage(channel="C0NOTJOIND", text="hi")) == "not_in_channel"
    assert _error(lambda: client.chat_postMessage(channel="G0PRIVATE1", text="hi")) == "channel_not_found"
    assert _error(lambda: client.chat_postMessage(channel="D0OTHERS01", text="hi")) == "channel_not_found"
    assert _error(lambda: client.chat_postEphemeral(channel="C0NOTJOIND", user="U1", text="x")) == (
        "not_in_channel"
    )
    assert client.chat_postMessage(channel="U0SOMEONE1", text="a DM from the app")["ok"]
    assert (
        _error(lambda: client.files_upload_v2(channel="C0NOTJOIND", filename="a.txt", content="x"))
        == "not_in_channel"
    )
    assert _error(lambda: client.conversations_replies(channel="C0NOTJOIND", ts="1.000001")) == (
        "not_in_channel"
    )
    assert ("chat.postMessage", "C0NOTJOIND", "not_in_channel") in slack.refused
    slack.relax("membership")
    assert client.chat_postMessage(channel="C0NOTJOIND", text="hi")["ok"]


def test_slack_response_url_takes_five_posts_within_30_minutes(slack: SlackSimulator) -> None:
    url = slack.response_url("r1")
    webhook = WebhookClient(url)
    assert [webhook.send(text=f"post {i}").status_code for i in range(5)] == [200] * 5
    spent = webhook.send(text="sixth")
    assert (spent.status_code, spent.body) == (404, "used_url")
    case = (CASES / "slack-response-url-expired.txt").read_text()
    assert "HTTP/1.1 404 Not Found" in case and "expired_url" in case  # the real refusal's shape
    late = WebhookClient(slack.response_url("r2"))
    slack.advance(30 * 60 + 1)
    expired = late.send(text="after 30 minutes")
    assert (expired.status_code, expired.body) == (404, "expired_url")


def test_slack_trigger_id_opens_one_view_within_3_seconds(slack: SlackSimulator) -> None:
    client = _client(slack)
    view = {"type": "modal", "title": {"type": "plain_text", "text": "Form"}, "blocks": []}
    assert _error(lambda: client.views_open(trigger_id="123.never.issued", view=view)) == "invalid_trigger_id"
    trigger = slack.issue_trigger()
    assert client.views_open(trigger_id=trigger, view=view)["ok"]
    assert _error(lambda: client.views_open(trigger_id=trigger, view=view)) == "exchanged_trigger_id"
    late = slack.issue_trigger()
    slack.advance(3.5)
    assert _error(lambda: client.views_open(trigger_id=late, view=view)) == "expired_trigger_id"


def test_slack_replies_pages_and_returns_edited_text(slack: SlackSimulator) -> None:
    client = _client(slack)
    root = f"{int(time.time())}.000100"
    slack.record_user_message("C0JOINED01", root, "root")
    for i in range(1, 8):
        slack.record_user_message("C0JOINED01", f"{int(time.time())}.{100 + i:06d}", f"reply {i}", root)
    slack.edit_user_message("C0JOINED01", root, "root (edited)")
    first = client.conversations_replies(channel="C0JOINED01", ts=root, limit=3)
    assert [m["text"] for m in first["messages"]] == ["root (edited)", "reply 1", "reply 2"]
    assert first["messages"][0]["edited"] and first["has_more"]
    texts = [m["text"] for m in first["messages"]]
    cursor = first["response_metadata"]["next_cursor"]
    while cursor:
        page = client.conversations_replies(channel="C0JOINED01", ts=root, limit=3, cursor=cursor)
        texts += [m["text"] for m in page["messages"]]
        cursor = page["response_metadata"]["next_cursor"] if page["has_more"] else ""
    assert texts == ["root (edited)"] + [f"reply {i}" for i in range(1, 8)]
    assert _error(lambda: client.conversations_replies(channel="C0JOINED01", ts=root, cursor="%%%")) == (
        "invalid_cursor"
    )


def test_slack_bot_edits_show_in_the_thread(slack: SlackSimulator) -> None:
    client = _client(slack)
    posted = client.chat_postMessage(channel="C0JOINED01", text=":hourglass_flowing_sand: thinking")
    client.chat_update(channel="C0JOINED01", ts=posted["ts"], text="the final answer")
    thread = client.conversations_replies(channel="C0JOINED01", ts=posted["ts"])
    assert [m["text"] for m in thread["messages"]] == ["the final answer"]


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def test_slack_block_limits(slack: SlackSimulator) -> None:
    client = _client(slack)

    def post(blocks: list[dict[str, Any]]) -> str:
        return _error(lambda: client.chat_postMessage(channel="C0JOINED01", text="x", blocks=blocks))

    # each block within its own 3,000 limit, together over the cumulative limit (the real error of
    # tests/fixtures/cases/slack-msg-too-long.txt)
    too_long = post([_section("y" * 2900) for _ in range(MAX_BLOCKS_TEXT // 2900 + 1)])
    assert too_long == "msg_blocks_too_long" and too_long in (CASES / "slack-msg-too-long.txt").read_text()
    assert post([_section("")]) == "invalid_blocks"
    button = {"type": "button", "action_id": "a", "text": {"type": "plain_text", "text": "b" * 76}}
    assert post([{"type": "actions", "elements": [button]}]) == "invalid_blocks"
    fields = [{"type": "mrkdwn", "text": "f"} for _ in range(11)]
    assert post([{"type": "section", "fields": fields}]) == "invalid_blocks"
    elements = [{"type": "mrkdwn", "text": "c"} for _ in range(11)]
    assert post([{"type": "context", "elements": elements}]) == "invalid_blocks"
    assert _error(lambda: client.chat_postMessage(channel="C0JOINED01", text="   ")) == "no_text"
    view = {"type": "modal", "title": {"type": "plain_text", "text": "t" * 25}, "blocks": []}
    trigger = slack.issue_trigger()
    assert _error(lambda: client.views_open(trigger_id=trigger, view=view)) == "invalid_arguments"
    home = {"type": "home", "blocks": [_section("x") for _ in range(101)]}
    assert _error(lambda: client.views_publish(user_id="U1", view=home)) == "invalid_arguments"


# ---- Google: TPU, Cloud Quotas, Cloud Logging --------------------------------------------------------------


def _spot_scenario() -> dict[str, Any]:
    scenario = copy.deepcopy(default_scenario())
    scenario["google"]["zones"]["us-west4-a"] = {"accelerator_types": ["v6e-8"]}
    scenario["google"]["quota_defaults"] = {"TPUV6EPreemptiblePerProjectPerZoneForTPUAPI": 16}
    scenario["google"]["queued_resources"].append(
        {
            "name": "spot-qr",
            "zone": "us-west4-a",
            "state": "ACTIVE",
            "provisioning_model": "SPOT",
            "created": "-10m",
            "preempt_after": "5m",
            "node": {"id": "spot-qr-node"},
        }
    )
    return scenario


@pytest.fixture
def gcp() -> Iterator[GcpSimulator]:
    with GcpSimulator(_spot_scenario(), now=lambda: NOW) as server:
        yield server


@pytest.fixture
def tpu(gcp: GcpSimulator) -> Iterator[TpuOps]:
    ops = TpuOps(gcp.project, api_endpoint=gcp.url, num_retries=0, timeout_s=5.0)
    yield ops
    ops.close()


def test_tpu_spot_preemption_suspends_and_deletes_the_node(gcp: GcpSimulator, tpu: TpuOps) -> None:
    gcp.advance(5 * 60)
    raw = google.tpu_v2alpha1(gcp.url).projects().locations()
    qr = raw.queuedResources().get(
        name=f"projects/{gcp.project}/locations/us-west4-a/queuedResources/spot-qr"
    )
    body = qr.execute()
    assert body["state"]["state"] == "SUSPENDING" and body["state"]["stateInitiator"] == "SERVICE"
    gcp.advance(120)
    assert qr.execute()["state"]["state"] == "SUSPENDED"
    assert tpu.get_queued_resource("spot-qr", ["us-west4-a"]).nodes == ()


def test_tpu_reset_only_from_failed(gcp: GcpSimulator, tpu: TpuOps) -> None:
    gcp.advance(10 * 60)
    with pytest.raises(BadInput, match="only a FAILED queued resource can be reset"):
        tpu.reset_queued_resource("spot-qr", "us-west4-a")


def test_tpu_create_over_the_zone_quota_is_refused_at_once(gcp: GcpSimulator, tpu: TpuOps) -> None:
    # us-west4-a has only the default preemptible quota (16): spot-qr holds 8 of it, even once SUSPENDED.
    gcp.advance(10 * 60)
    op = tpu.create_queued_resource(make_spec("spot-b", zone="us-west4-a", model="spot"))
    gcp.advance(1)
    tpu.wait_operation(op, **POLL)
    with pytest.raises(QuotaExceeded) as info:
        tpu.create_queued_resource(make_spec("spot-c", zone="us-west4-a", model="spot"))
    assert (
        "Quota 'TPUV6EPreemptiblePerProjectPerZoneForTPUAPI' exhausted. Limit 16 in zone us-west4-a"
        in info.value.message
    )
    assert "FAILED and SUSPENDED queued resources still hold it" in info.value.hint


def test_cloud_quotas_default_dimension(gcp: GcpSimulator) -> None:
    client = google.cloud_quotas(gcp.url)
    name = (
        f"projects/{gcp.project}/locations/global/services/tpu.googleapis.com/quotaInfos/"
        "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI"
    )
    infos = {
        tuple(sorted(d.dimensions.items())): d for d in client.get_quota_info(name=name).dimensions_infos
    }
    default = infos[()]
    assert default.details.value == 16 and "us-west4-a" in default.applicable_locations
    assert "us-east5-a" not in default.applicable_locations  # it has its own value
    assert zone_quotas(gcp.project, api_endpoint=gcp.url)["us-west4-a"] == {
        "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI": 16
    }


def _entries_list(gcp: GcpSimulator, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"{gcp.url}/v2/entries:list", json={"resourceNames": [f"projects/{gcp.project}"], **body}
    )


def test_logging_regex_is_re2_and_page_size_not_negative(gcp: GcpSimulator) -> None:
    ok = _entries_list(gcp, {"filter": 'textPayload=~"Engine(Core)?"', "pageSize": 5})
    assert ok.status_code == 200
    for pattern in (r"(?=Engine)E", r"(a)\\1"):  # lookahead, backreference: Python re only
        refused = _entries_list(gcp, {"filter": f'textPayload=~"{pattern}"'})
        assert refused.status_code == 400 and "invalid regular expression" in refused.text
    negative = _entries_list(gcp, {"pageSize": -1})
    assert negative.status_code == 400 and "must not be negative" in negative.text


def test_logging_ties_are_ordered_by_insert_id(gcp: GcpSimulator) -> None:
    at = NOW - timedelta(minutes=1)
    with gcp.world.lock:  # three entries with the same timestamp, stored out of insertId order
        gcp.world.add_logs(
            [
                make_log_entry(gcp.project, at, "ERROR", text=f"tie {i}", insert_id=i)
                for i in ("zz", "aa", "mm")
            ]
        )
    since = (at - timedelta(seconds=1)).isoformat()
    body = {"filter": f'textPayload:"tie" AND timestamp>="{since}"', "pageSize": 10}
    entries = _entries_list(gcp, body).json()["entries"]
    assert [e["insertId"] for e in entries] == ["aa", "mm", "zz"]


# ---- vLLM and the TPU VM -----------------------------------------------------------------------------------


@pytest.fixture
def vllm() -> Iterator[VllmSimulator]:
    sim = VllmSimulator({"latency_s": 0.0, "engine_death_exit_s": 1.5}).start()
    yield sim
    sim.stop()


def test_vllm_api_server_exits_after_engine_death(vllm: VllmSimulator) -> None:
    host = HostSimulator({"containers": [{"name": "vllm", "state": "running", "started": "-1h"}]}, vllm=vllm)
    vllm.set_mode("engine-dead")
    assert httpx.get(vllm.url + "/health").status_code == 503  # the short window before the exit
    deadline = time.monotonic() + 5
    while vllm.listening and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(httpx.ConnectError):
        httpx.get(vllm.url + "/health")
    assert host.container_state("vllm") == "exited"
    status, out, _ = host.execute("docker inspect --type container -- vllm")
    assert status == 0 and json.loads(out)[0]["State"]["ExitCode"] == 1


def test_vllm_can_be_told_to_stay_up_after_engine_death() -> None:
    with VllmSimulator({"keep_alive_on_engine_death": True, "engine_death_exit_s": 0.1}) as sim:
        sim.set_mode("engine-dead")
        time.sleep(0.4)
        assert httpx.get(sim.url + "/health").status_code == 503


def test_vllm_tokenize_counts_template_and_tools(vllm: VllmSimulator) -> None:
    messages = [{"role": "user", "content": "Why did node 12 fail at 03:14?"}]
    tools = [{"type": "function", "function": {"name": "status", "parameters": {"type": "object"}}}]
    bare = httpx.post(vllm.url + "/tokenize", json={"model": "m", "messages": messages}).json()
    with_tools = httpx.post(vllm.url + "/tokenize", json={"messages": messages, "tools": tools}).json()
    assert bare["count"] == count_chat_tokens(messages) and bare["max_model_len"] == 16384
    assert with_tools["count"] > bare["count"] + 10  # the tools' schema is part of the prompt
    # digits and punctuation are tokens of their own: far more than the whitespace words
    assert bare["count"] > len(messages[0]["content"].split()) + 10


def _host(cfg: dict[str, Any]) -> HostSimulator:
    return HostSimulator({"containers": [{"name": "vllm", "state": "running", "started": "-1h"}], **cfg})


def test_docker_restart_resets_restart_count() -> None:
    host = _host({"containers": [{"name": "vllm", "state": "running", "started": "-1h", "restart_count": 4}]})
    assert json.loads(host.execute("docker inspect --type container -- vllm")[1])[0]["RestartCount"] == 4
    assert host.execute("docker restart -- vllm")[0] == 0
    assert json.loads(host.execute("docker inspect --type container -- vllm")[1])[0]["RestartCount"] == 0


def test_vllm_logs_go_to_stdout() -> None:
    status, out, err = _host({}).execute("docker logs --tail 50 -- vllm")
    assert status == 0 and "Application startup complete." in out and err == ""


def test_docker_socket_and_sudo_permissions() -> None:
    outside_group = _host({"docker_group": False})
    assert outside_group.execute("docker inspect --type container -- vllm") == (1, "", DOCKER_SOCKET_DENIED)
    assert outside_group.execute("sudo -n docker inspect --type container -- vllm")[0] == 0
    with_password = _host({"docker_group": False, "sudo": "password"})
    assert with_password.execute("sudo -n docker inspect --type container -- vllm") == (
        1,
        "",
        SUDO_PASSWORD_REQUIRED,
    )
