"""Gemma reads the logs and answers in threads: /logs, /logs analyze, @mention questions with tools."""

from __future__ import annotations

from datetime import timedelta

from sim.demo import Demo


def _say(demo: Demo, line: str, timeout: float = 30) -> str:
    out, answered = demo.user.run(line, timeout=timeout)
    assert answered, out
    return "\n".join(out)


def _sent_filters(demo: Demo) -> list[str]:
    return [b["filter"] for _, path, b in demo.gcp.request_bodies if path.startswith("/v2/entries:list")]


def test_logs_carry_an_explicit_time_bound_and_are_newest_first(world: Demo) -> None:
    """The footer says the window in words; the exact query sent is shown with --query only."""
    text = _say(world, "/logs --since 2h --severity ERROR --limit 5")
    assert "*5 entries*, newest first" in text
    assert " ERROR " in text and " ERRO " not in text  # Cloud Logging's severity names, whole
    assert "last 2h (since " in text and " · ERROR and above · every node · " in text
    assert "`--query` shows the exact Cloud Logging query" in text
    assert 'timestamp>="' not in text and "severity>=" not in text and "jsonPayload" not in text
    sent = _sent_filters(world)[-1]
    assert 'timestamp>="' in sent and "severity>=ERROR" in sent

    shown = _say(world, "/logs --since 2h --severity ERROR --limit 5 --query")
    sent = _sent_filters(world)[-1]
    assert 'timestamp>="' in sent and "severity>=ERROR" in sent
    assert f"Cloud Logging query: `{sent}`" in shown  # exactly what was sent


def test_an_empty_listing_describes_its_window(world: Demo) -> None:
    text = _say(world, "/logs --node no-such-node --filter '\"OOM\"'")
    assert "No log entries match: last 1h (since " in text
    assert "node `no-such-node`" in text and 'matching `"OOM"`' in text and "resource.labels" not in text
    assert 'resource.labels.node_id="no-such-node"' in _sent_filters(world)[-1]


def test_analyze_names_the_real_failures_among_noise(world: Demo) -> None:
    text = _say(world, "/logs analyze --since 1h", timeout=60)
    assert "*Top error kinds*" in text and "*Gemma's analysis*" in text
    assert "Log analysis: last 1h," in text  # a duration as the bot writes them, not Python's 1:00:00
    for finding in (
        "kv-cache-insufficient",
        "tpu-device-busy",
        "hf-gated-repo-401",
        "docker-pull-rate-limit",
        "tpu-hbm-oom-program-load",
    ):
        assert finding in text, finding
    assert "[file log-templates.tsv:" in text


def test_analyze_places_errors_against_the_running_container(world: Demo) -> None:
    """Frames never lead; errors older than the container or fatal to a process that is not the running
    one are labelled, and an old max_model_len is said to contradict the served one."""
    text = _say(world, "/logs analyze --since 1h", timeout=60)
    top = text[text.index("*Top error kinds*") : text.index("\n*", text.index("*Top error kinds*") + 1)]
    assert "File <*>" not in top and "Traceback" not in top
    assert "traceback lines)" in top
    assert "*Earlier failures, before the current container started: not the present state*" in text
    assert "*Failures of another process or node: not the serving container*" in text
    assert "not from the running container (up since" in text
    assert "max_model_len 131072, but the server now serves max_model_len 16384" in text
    known = text.split("*Known failures in the log*")[1].split("*Earlier failures")[0]
    assert "kv-cache-insufficient" not in known and "tpu-hbm-oom" not in known
    system = world.vllm.chat_requests[-1]["messages"][1]["content"]
    assert "What serves now (bot text, not log data): the running vLLM container started at" in system


def test_an_empty_window_is_refused_without_reading_the_logs(world: Demo) -> None:
    reads = len(world.gcp.request_bodies)
    for window in ("0m", "0s", "-5m"):
        text = _say(world, f"/logs analyze --since {window}")
        assert "window: give how far back to look" in text and "Log analysis" not in text
    assert len(world.gcp.request_bodies) == reads


def test_no_errors_means_no_model_call(world: Demo) -> None:
    world.gcp.add_log_entry(
        'INFO:     10.0.0.7:51234 - "GET /health HTTP/1.1" 200 OK',
        severity="INFO",
        at=world.gcp.now() - timedelta(seconds=20),
    )
    before = world.vllm.requests_served
    text = _say(world, "/logs analyze --since 1m")
    assert "No errors in the window" in text
    assert world.vllm.requests_served == before


def test_a_window_with_no_entry_at_all_is_not_called_free_of_errors(world: Demo) -> None:
    """Nothing at all from a node in the window (its logs do not reach Cloud Logging, or it did not log) is
    said as such, never as a green "no errors"."""
    text = _say(world, "/logs analyze --since 1h --node gemma4-standby-node")
    assert "*No entries at all* in the window" in text and "says nothing about errors" in text, text
    assert "No errors in the window" not in text and ":white_check_mark:" not in text, text


def test_tokens_in_logs_are_masked_in_slack(world: Demo) -> None:
    token = "hf_" + "Z" * 34
    world.gcp.add_log_entry(
        f"downloading with HF_TOKEN={token}", severity="ERROR", at=world.gcp.now() - timedelta(minutes=1)
    )
    text = _say(world, "/logs --since 5m --severity ERROR")
    assert token not in text and "[REDACTED" in text


def test_question_in_a_thread_uses_the_status_tool(world: Demo) -> None:
    text = _say(world, "@gemma-bot why is vLLM down?")
    assert "read: the status of deployment `production`" in text


def test_change_request_becomes_a_review_button_never_an_action(world: Demo) -> None:
    text = _say(world, "@gemma-bot please delete gemma4-old")
    assert "[Review /tpu delete gemma4-old]" in text
    assert world.bot.services.tpu.get_queued_resource("gemma4-old", ["europe-west4-a"])
    preview = _say(world, "click Review")
    assert "*Delete* the queued resource" in preview and "[Confirm" in preview


def test_server_without_tools_still_answers() -> None:
    with Demo() as demo:
        demo.vllm.config["tool_calling"] = False
        text = _say(demo, "@gemma-bot is the TPU healthy?")
        assert "does not accept tools" in text and "--tool-call-parser gemma4" in text
