"""The bot's own endpoints in the demo (/healthz, /readyz, /metrics) and its log format."""

from __future__ import annotations

import io
import json
import logging
import re
import time
from importlib.metadata import version

import httpx
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine

from bot.observability import (
    Metrics,
    Readiness,
    json_logs_wanted,
    setup_logging,
    trace_from_headers,
    use_trace,
)
from sim.demo import Demo


def _samples(demo: Demo) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = httpx.get(demo.server.url + "/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def _wait_for_sample(demo: Demo, name: str, labels: dict[str, str], at_least: float) -> float:
    key = (name, tuple(sorted(labels.items())))
    deadline = time.monotonic() + 20
    while True:
        value = _samples(demo).get(key, 0.0)
        if value >= at_least or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def test_healthz_and_readyz_answer(demo: Demo) -> None:
    assert httpx.get(demo.server.url + "/healthz").text.strip() == f"ok tpu-chatops {version('tpu-chatops')}"
    ready = httpx.get(demo.server.url + "/readyz")
    assert ready.status_code == 200 and ready.text.strip() == "ready"


def test_metrics_count_commands_and_ack_latency(demo: Demo) -> None:
    before = _samples(demo)
    acks = before.get(("tpu_chatops_ack_latency_seconds_count", ()), 0.0)
    ok = ("tpu_chatops_commands_total", (("command", "vllm endpoint"), ("outcome", "ok")))
    out, answered = demo.user.run("/vllm endpoint")
    assert answered, out
    assert _wait_for_sample(demo, *_unkey(ok), at_least=before.get(ok, 0.0) + 1) == before.get(ok, 0.0) + 1
    after = _samples(demo)
    assert after[("tpu_chatops_ack_latency_seconds_count", ())] >= acks + 1
    assert after[("tpu_chatops_ack_latency_seconds_bucket", (("le", "3.0"),))] >= acks + 1
    assert after[("tpu_chatops_backend_call_seconds_count", (("backend", "vllm"),))] >= 1
    assert {"tpu_chatops_backend_errors", "tpu_chatops_alerts_sent"} <= _families(demo)


def test_denied_command_and_backend_error_are_counted(demo: Demo) -> None:
    denied = ("tpu_chatops_commands_total", (("command", "tpu delete"), ("outcome", "denied")))
    before = _samples(demo).get(denied, 0.0)
    viewer = demo.user.__class__(demo.server.url, demo.signing_secret, demo.slack, user_id="U0VIEWER01")
    try:
        viewer.run("/tpu delete gemma4-qr --zone us-east5-a")
    finally:
        viewer.close()
    assert _wait_for_sample(demo, *_unkey(denied), at_least=before + 1) == before + 1

    errors = ("tpu_chatops_backend_errors_total", (("backend", "tpu"),))
    before_errors = _samples(demo).get(errors, 0.0)
    failed = ("tpu_chatops_commands_total", (("command", "tpu describe"), ("outcome", "error")))
    before_failed = _samples(demo).get(failed, 0.0)
    demo.gcp.inject_fault(r"/queuedResources/gemma4-qr$", 403, count=5)
    out, _ = demo.user.run("/tpu describe gemma4-qr --zone us-east5-a")
    demo.gcp.clear_faults()
    assert "403" in "\n".join(out)
    assert _wait_for_sample(demo, *_unkey(errors), at_least=before_errors + 1) == before_errors + 1
    assert _samples(demo)[failed] == before_failed + 1


def test_readyz_is_503_with_a_reason_when_slack_auth_fails(demo: Demo) -> None:
    original = demo.bot.readiness
    assert original is not None
    demo.bot.readiness = Readiness(demo.bot.app.client.auth_test, lambda: None, auth_ok=False)
    try:
        demo.slack.fail_next("auth.test", error="invalid_auth", status=200)
        response = httpx.get(demo.server.url + "/readyz")
        assert response.status_code == 503
        assert response.text.strip() == "Slack auth.test failed: invalid_auth"
        assert httpx.get(demo.server.url + "/readyz").status_code == 200  # auth.test answers again
    finally:
        demo.bot.readiness = original


def test_readyz_is_503_when_the_state_database_does_not_answer(demo: Demo) -> None:
    store = demo.bot.services.store
    engine = store.engine
    store.engine = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    try:
        response = httpx.get(demo.server.url + "/readyz")
        assert response.status_code == 503
        assert response.text.startswith("state database unreachable: OperationalError")
        assert "\n" not in response.text.strip()
    finally:
        store.engine.dispose()
        store.engine = engine
    assert httpx.get(demo.server.url + "/readyz").status_code == 200


def test_json_logs_carry_severity_message_trace_and_no_secrets() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        setup_logging(logging.INFO, json_format=True, stream=stream)
        trace = trace_from_headers(
            {"HTTP_X_CLOUD_TRACE_CONTEXT": "105445aa7843bc8bf206b12000100000/1;o=1"}, "p1"
        )
        with use_trace(trace):
            logging.getLogger("bot.test").warning("token xoxb-1234567890-abcdefghij leaked?")
        logging.getLogger("bot.test").error("no trace here")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["severity"] == "WARNING"
    assert first["message"] == "token [REDACTED:slack_token] leaked?"
    assert first["logging.googleapis.com/trace"] == "projects/p1/traces/105445aa7843bc8bf206b12000100000"
    assert second["severity"] == "ERROR" and "logging.googleapis.com/trace" not in second


def test_console_logs_are_lines_and_format_detection() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        setup_logging(logging.INFO, json_format=False, stream=stream)
        logging.getLogger("bot.test").info("hf token hf_abcdefghijklmnopqrstuvwxyz0123456789")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    assert re.search(r" INFO bot\.test: hf token \[REDACTED:hf_token\]$", stream.getvalue().strip())
    assert json_logs_wanted({"K_SERVICE": "tpu-chatops"})
    assert json_logs_wanted({"LOG_FORMAT": "json"})
    assert not json_logs_wanted({"K_SERVICE": "tpu-chatops", "LOG_FORMAT": "text"})
    assert not json_logs_wanted({})
    traceparent = {"HTTP_TRACEPARENT": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    assert trace_from_headers(traceparent, "p1") == "projects/p1/traces/4bf92f3577b34da6a3ce929d0e0e4736"
    assert trace_from_headers({}, "p1") is None


def test_each_bot_has_its_own_registry() -> None:
    one, two = Metrics(), Metrics()
    one.alert_sent("hbm")
    one.alerts_sent.labels(kind="hbm").inc()
    assert b'tpu_chatops_alerts_sent_total{kind="hbm"} 2.0' in one.exposition()[0]
    assert b"kind=" not in two.exposition()[0]


def _unkey(key: tuple[str, tuple[tuple[str, str], ...]]) -> tuple[str, dict[str, str]]:
    return key[0], dict(key[1])


def _families(demo: Demo) -> set[str]:
    text = httpx.get(demo.server.url + "/metrics").text
    return {f.name for f in text_string_to_metric_families(text)}
