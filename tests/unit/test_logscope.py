"""A log analysis places its errors against what serves now: earlier than the running container, from
another process or node, or with a figure the served configuration contradicts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from llm.logsum import TemplateSummary
from ops.diagnosis.engine import ServingNow, diagnose, is_fatal, place, present, template_note

STARTED = datetime(2026, 12, 1, 2, 15, tzinfo=UTC)
KV = (
    "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache "
    "is needed, which is larger than the available KV cache memory (0.71 GiB). Based on the available "
    "memory, the estimated maximum model length is 5632."
)
TOO_LONG = (
    "ValueError: This model's maximum context length is 16384 tokens. However, you requested 122946 tokens "
    "(112946 in the messages, 10000 in the completion). Please reduce the length of the message."
)
HBM = (
    "RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: Error loading program: Attempting to reserve "
    "1.04G at the bottom of memory. That was not possible. There are 905.37M free"
)


def _t(text: str, minutes: float, node: str = "gemma4-qr-node", severity: str = "ERROR") -> TemplateSummary:
    at = STARTED + timedelta(minutes=minutes)
    return TemplateSummary(1, text, 3, severity, at - timedelta(minutes=2), at, (text,), (node,))


def test_an_error_before_the_container_started_is_earlier() -> None:
    note = template_note(_t(TOO_LONG, -10), ServingNow(started_at=STARTED))
    assert note == "before the current container started at 02:15 UTC"


def test_a_fatal_error_after_the_start_of_a_running_container_is_another_process() -> None:
    for text in (KV, HBM):
        t = _t(text, 20)
        assert is_fatal(t)
        note = template_note(t, ServingNow(started_at=STARTED), fatal=is_fatal(t))
        assert note.startswith("not from the running container (up since 02:15 UTC, 0 restarts)")


def test_a_client_error_after_the_start_is_the_present() -> None:
    t = _t(TOO_LONG, 20)
    assert not is_fatal(t)
    assert template_note(t, ServingNow(started_at=STARTED), fatal=False) == ""
    assert present((t,), ServingNow(started_at=STARTED)) == (t,)


def test_another_node_is_named() -> None:
    note = template_note(_t(TOO_LONG, 20, node="gemma4-b-node"), ServingNow(node="gemma4-qr-node"))
    assert note == "from gemma4-b-node, not the serving node gemma4-qr-node"


def test_nothing_is_placed_when_the_container_was_not_read() -> None:
    t = _t(KV, -30)
    assert template_note(t, ServingNow(missing=("the container's start: SSH refused",)), fatal=True) == ""


def test_place_splits_findings_and_says_when_and_why() -> None:
    templates = (_t(KV, -30), _t(HBM, 20), _t(TOO_LONG, 25))
    findings = tuple(diagnose("\n".join((KV, HBM, TOO_LONG))).findings)
    placed = place(findings, templates, ServingNow(started_at=STARTED, max_model_len=16384))
    assert [f.name for f in placed.current] == ["request-too-long"]
    (earlier,) = placed.earlier
    assert earlier.name == "kv-cache-insufficient"
    assert "before the current container started at 02:15 UTC" in earlier.conclusion
    assert "max_model_len 131072, but the server now serves max_model_len 16384" in earlier.conclusion
    (other,) = placed.other
    assert other.name == "tpu-hbm-oom-program-load" and "not from the running container" in other.conclusion


def test_a_figure_that_matches_the_served_configuration_is_not_flagged() -> None:
    findings = tuple(diagnose(TOO_LONG).findings)
    placed = place(findings, (_t(TOO_LONG, 5),), ServingNow(started_at=STARTED, max_model_len=16384))
    assert "another configuration" not in placed.current[0].conclusion
