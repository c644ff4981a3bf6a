"""The read-only commands end to end: signed Slack requests -> real Bolt app -> real Google/OpenAI/httpx
clients -> simulators -> reply delivered to the Slack simulator."""

from __future__ import annotations

from pathlib import Path

from sim.demo import Demo
from tests.e2e.demo_script import run_demo_script


def _say(demo: Demo, line: str) -> str:
    out, answered = demo.user.run(line, timeout=20)
    assert answered, f"no answer to {line!r}: {out}"
    return "\n".join(out)


def test_tpu_status_dashboard(demo: Demo) -> None:
    text = _say(demo, "/tpu status")
    assert "*gemma4-qr* (primary) · `us-east5-a` · :large_green_circle: ACTIVE (by USER)" in text
    assert text.index("*gemma4-qr*") < min(text.index("*gemma4-old*"), text.index("*gemma4-standby*"))
    assert "preempted by vLLM" in text  # vLLM's request preemptions, not the TPU's
    assert "flex-start" in text
    assert "WAITING_FOR_RESOURCES" in text and "gemma4-standby" in text
    assert "FAILED" in text and "no more capacity" in text
    assert "node `gemma4-qr-node` :large_green_circle: READY" in text
    assert "/health ready" in text
    assert "`google/gemma-4-31B-it` (max_model_len 16384)" in text
    assert "*KV cache* usage" in text and "*TTFT* p50" in text
    assert "terminates in 2h 2" in text  # 4 h flex-start created 90 min ago


def test_tpu_list_and_describe(demo: Demo) -> None:
    listing = _say(demo, "/tpu list")
    for name in ("gemma4-qr", "gemma4-standby", "gemma4-old"):
        assert f"*{name}*" in listing
    assert listing.index("*gemma4-qr* (primary)") < listing.index("*gemma4-old*")  # the primary first
    assert "127.0.0.1" in listing
    one_zone = _say(demo, "/tpu list --zone us-east5-a")
    assert "gemma4-qr" in one_zone and "gemma4-old" not in one_zone
    described = _say(demo, "/tpu describe gemma4-qr")
    assert "health HEALTHY" in described
    assert "runtime v2-alpha-tpuv6e" in described
    assert "max run duration 4h 00m" in described
    failed = _say(demo, "/tpu describe gemma4-old")
    assert "*Error* There is no more capacity" in failed


def test_tpu_list_all_zones_uses_the_projects_locations(demo: Demo) -> None:
    text = _say(demo, "/tpu list --all-zones")
    assert "Queued resources in 3 zones" in text


def test_describe_unknown_resource_names_what_failed(demo: Demo) -> None:
    text = _say(demo, "/tpu describe nope")
    assert ":x:" in text and "nope" in text
    assert "Traceback" not in text


def test_vllm_commands(demo: Demo) -> None:
    metrics = _say(demo, "/vllm metrics")
    assert "*Requests* running" in metrics and "*prefix cache* hit rate" in metrics
    assert "*ITL* p50" in metrics and "*E2E* p50" in metrics
    health = _say(demo, "/vllm health")
    assert "`/health`: ready" in health and "one-token chat completion" in health
    endpoint = _say(demo, "/vllm endpoint")
    assert demo.vllm.url in endpoint and "gemma4-qr-node" in endpoint
    assert "max_model_len 16384" in _say(demo, "/vllm models")
    assert "0.19.1" in _say(demo, "/vllm info")


def test_raw_metrics_are_attached_as_a_file(demo: Demo) -> None:
    text = _say(demo, "/vllm metrics --raw")
    assert "[file metrics.txt:" in text
    assert "vllm:num_requests_running" not in text, "the scrape is attached, not pasted as well"
    assert "Raw `/metrics` scrape attached" in text


def test_mention_uses_the_same_words_and_answers_in_the_thread(demo: Demo) -> None:
    text = _say(demo, "@gemma-bot vllm metrics")
    assert "*KV cache* usage" in text
    thread_reply = demo.slack.messages[-1]
    assert thread_reply.thread_ts is not None and thread_reply.kind == "post"


def test_help_is_short_and_only_for_the_requester(demo: Demo) -> None:
    for line, limit in (("@gemma-bot help", 1000), ("@gemma-bot", 1000), ("/tpu help", 2500)):
        _say(demo, line)
        reply = demo.slack.messages[-1]
        assert reply.ephemeral, f"{line!r} was posted to the channel"
        assert len(reply.text) < limit, f"{line!r}: {len(reply.text)} characters"
    short = _say(demo, "@gemma-bot help")
    assert "`/tpu` list, describe, status" in short and "`help all`" in short
    assert "Active settings" not in short


def test_help_lists_commands_and_masks_secrets(demo: Demo) -> None:
    text = _say(demo, "@gemma-bot help all")
    assert "/tpu list [--zone Z | --all-zones]" in text
    assert "project `demo-project`" in text
    token = demo.settings.slack_bot_token.get_secret_value()
    secret = demo.signing_secret
    assert token not in text and secret not in text
    assert "xoxb-…(set)" in text
    assert "/vllm metrics [--raw | --chart SPAN]" in _say(demo, "/vllm help")


def test_bad_input_gets_usage_in_the_ack_and_nothing_runs(demo: Demo) -> None:
    before = len(demo.slack.messages)
    out, answered = demo.user.run("/tpu describe")
    assert answered
    assert "missing NAME" in out[0] and "Usage: `/tpu describe NAME [--zone Z | --all-zones]`" in out[0]
    out, _ = demo.user.run("/tpu describe bad;name")
    assert "is not a TPU resource name" in out[0]
    out, _ = demo.user.run("/tpu frobnicate")
    assert "unknown command `tpu frobnicate`" in out[0] and "/tpu list" in out[0]
    assert len(demo.slack.messages) == before


def test_one_failing_zone_is_one_red_line(demo: Demo) -> None:
    demo.gcp.inject_fault(r"/locations/europe-west4-a/queuedResources", 503, count=20)
    text = _say(demo, "/tpu status")
    assert ":red_circle: `europe-west4-a`" in text
    assert "*gemma4-qr*" in text and "*gemma4-standby*" in text
    assert "/health ready" in text


def test_vllm_down_leaves_the_tpu_part_of_the_dashboard(demo: Demo) -> None:
    demo.vllm.set_mode("engine-dead")
    text = _say(demo, "/tpu status")
    assert "*gemma4-qr*" in text
    assert "/health engine-dead" in text
    health = _say(demo, "/vllm health")
    assert "chat completion failed" in health


def test_vllm_errors_are_red_lines_per_source(demo: Demo) -> None:
    demo.vllm.fail_next("/metrics", 500)
    demo.vllm.fail_next("/v1/models", 500)
    text = _say(demo, "/tpu status")
    assert ":red_circle: *metrics*" in text and ":red_circle: *models*" in text
    assert "/health ready" in text and "*gemma4-qr*" in text


def test_google_429_is_a_clear_message(demo: Demo) -> None:
    demo.gcp.inject_fault(r"/queuedResources", 429, count=50)
    text = _say(demo, "/tpu list --zone us-east5-a")
    assert ":red_circle: `us-east5-a`" in text and "retry" in text.lower()
    assert "No queued resources" not in text and "Traceback" not in text


def test_demo_script_runs_non_interactively(tmp_path: Path) -> None:
    result = run_demo_script(
        tmp_path,
        "# the issue's acceptance commands\n/tpu status\n/tpu list\n/tpu describe gemma4-qr\n"
        "/vllm metrics\n@gemma-bot vllm metrics\n",
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "SIMULATED" in result.stdout
    assert result.stdout.count("you> ") == 5
    assert "Queued resource gemma4-qr" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_upper_case_slash_command_and_a_typo(demo: Demo) -> None:
    listing = _say(demo, "/TPU LIST --ZONE us-east5-a")
    assert "*gemma4-qr*" in listing
    out, answered = demo.user.run("/tpu lsit")
    assert answered and "did you mean `/tpu list`?" in out[0]
    mention = _say(demo, "@gemma-bot vllm metric")
    assert "did you mean `/vllm metrics`?" in mention
