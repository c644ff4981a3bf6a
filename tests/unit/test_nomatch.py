"""The pure parts of the no-match answer: line severities, the top templates and the first error before the
engine died (`llm.nomatch`), docker's time stamps (`ops.vllm.container.timed_lines`), and the view's next
steps,
each a command line the registry parses (`bot.views.findings`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import bot.handlers  # noqa: F401  (declares every command)
from bot.commands.registry import registry
from bot.views.findings import NO_MATCH_LEAD, diagnosis_text, next_steps, unmatched_fact
from llm.nomatch import from_lines
from ops.diagnosis.engine import Diagnosis
from ops.diagnosis.nomatch import TOP_TEMPLATES, Unmatched, from_templates, line_severity
from ops.times import rfc3339, utc_text
from ops.vllm.container import timed_lines

T0 = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


def _at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


LINES = [
    (_at(0), "(APIServer pid=1) INFO 12-03 09:00:00 [api_server.py:1] vLLM API server version 0.11"),
    (_at(5), "(EngineCore_DP0 pid=281) ERROR 12-03 09:00:05 [core.py:708] plan rejected for layer 3"),
    (_at(6), "Traceback (most recent call last):"),
    (_at(6), '  File "/opt/loader/plan.py", line 12, in build'),
    (_at(6), "ZeroDivisionError: shard count is zero"),
    (_at(7), "(EngineCore_DP0 pid=281) ERROR 12-03 09:00:07 [core.py:708] plan rejected for layer 4"),
    (_at(20), "(APIServer pid=1) ERROR 12-03 09:00:20 [launcher.py:9] shutting down after the engine"),
    (_at(21), "E1203 09:00:21.000000 1 tpu.cc:1] device lost after the exit"),
]


@pytest.mark.parametrize(
    ("line", "severity"),
    [
        ("(EngineCore_DP0 pid=281) ERROR 12-03 09:00:05 [core.py:708] x", "ERROR"),
        ("(APIServer pid=1) WARNING 12-03 09:00:05 [x.py:1] y", "WARNING"),
        ("ERROR:    Exception in ASGI application", "ERROR"),
        ("F1203 09:00:21.000000 1 tpu.cc:1] fatal", "CRITICAL"),
        ("W1203 09:00:21.000000 1 tpu.cc:1] warn", "WARNING"),
        ("ValueError: bad plan", "ERROR"),
        ('  File "/x.py", line 1, in f', "ERROR"),
        ("Loading weights took 12.3 s", "INFO"),
    ],
)
def test_line_severity(line: str, severity: str) -> None:
    assert line_severity(line) == severity


def test_top_templates_and_first_error_before_the_exit() -> None:
    u = from_lines(LINES, source="container", ended_at=_at(10), now=_at(1800))
    assert u is not None and len(u.templates) == TOP_TEMPLATES
    assert u.templates[0].template.endswith("plan rejected for layer <NUM>") and u.templates[0].count == 2
    assert len({t.template for t in u.templates}) == TOP_TEMPLATES  # distinct
    assert u.first_error.endswith("plan rejected for layer 3") and u.first_error_at == _at(5)
    assert u.span == timedelta(seconds=1800) and u.timed


def test_first_error_is_the_earliest_one_before_the_exit_not_after() -> None:
    later = [(when, text) for when, text in LINES if when >= _at(20)]
    u = from_lines(later, source="container", ended_at=_at(10))
    assert u is not None and u.first_error == "" and u.first_error_at is None  # both after the exit
    text = diagnosis_text(Diagnosis((), ("E1203 device lost after the exit",), u))
    assert "*First error*" not in text and "*Key lines*\n`E1203 device lost after the exit`" in text
    running = from_lines(later, source="container")  # no exit: the whole window counts
    assert running is not None and running.first_error.endswith("shutting down after the engine")


def test_lines_without_times_keep_their_order_and_show_no_time() -> None:
    u = from_lines([(None, text) for _, text in LINES], source="journal", unit="docker.service")
    assert u is not None and not u.timed and u.first_error_at is None and u.span is None
    assert u.first_error.endswith("plan rejected for layer 3")
    text = diagnosis_text(Diagnosis((), (), u))
    assert " · first " not in text and "*First error*:" in text
    assert "`/vllm syslog --unit docker.service --tail 2000`" in text


def test_no_error_is_no_unmatched_view() -> None:
    assert from_lines(LINES[:1], source="container") is None
    with pytest.raises(ValueError, match="not one of"):
        from_templates((), source="stdout")


def test_timed_lines_split_docker_time_stamps() -> None:
    text = "2026-12-03T09:00:05.123456789Z ERROR boom\nno stamp here\n2026-12-03T09:00:06Z ok"
    assert timed_lines(text) == [
        (datetime(2026, 12, 3, 9, 0, 5, 123456, tzinfo=UTC), "ERROR boom"),
        (None, "no stamp here"),
        (datetime(2026, 12, 3, 9, 0, 6, tzinfo=UTC), "ok"),
    ]


def _unmatched(source: str, span: timedelta | None, startup: bool = False) -> Unmatched:
    u = from_lines(LINES, source="container", now=_at(1))
    assert u is not None
    return Unmatched(source, u.templates, u.first_error, u.first_error_at, span=span, startup_script=startup)


@pytest.mark.parametrize(
    ("source", "span", "startup", "expected"),
    [
        ("container", None, False, ["/vllm logs --since 2h --tail 2000", "/logs analyze --since 2h"]),
        (
            "container",
            timedelta(hours=3, minutes=10),
            False,
            ["/vllm logs --since 7h --tail 2000", "/logs analyze --since 7h"],
        ),
        (
            "cloud-logging",
            timedelta(hours=1),
            True,
            ["/logs analyze --since 2h", "/vllm syslog --unit google-startup-scripts --tail 2000"],
        ),
        ("cloud-logging", timedelta(days=2), False, ["/logs analyze --since 4d"]),
        ("cloud-logging", timedelta(days=90), False, ["/logs analyze --since 30d"]),
        (
            "journal",
            None,
            False,
            ["/vllm syslog --unit google-startup-scripts --tail 2000", "/logs analyze --since 2h"],
        ),
    ],
)
def test_next_steps(source: str, span: timedelta | None, startup: bool, expected: list[str]) -> None:
    steps = next_steps(_unmatched(source, span, startup))
    assert steps == expected
    for step in steps:  # each one a command of the registry with arguments it accepts
        registry.parse(step.removeprefix("/"))


def test_the_view_and_the_fact_say_the_same() -> None:
    u = from_lines(LINES, source="container", ended_at=_at(10), now=_at(60))
    assert u is not None
    text = diagnosis_text(Diagnosis((), ("ZeroDivisionError: shard count is zero",), u))
    assert text.startswith(f":mag: *{NO_MATCH_LEAD}.*")
    first, last = utc_text(_at(5), seconds=True), utc_text(_at(7), seconds=True)
    assert "1. *2× ERROR*" in text and f"first {first} · last {last}" in text  # as every answer shows a time
    exited = utc_text(_at(10), seconds=True)
    assert f"*First error* at 2026-12-03 09:00:05 UTC, before the container exited at {exited}" in text
    assert "*Key lines*\n`ZeroDivisionError: shard count is zero`" in text
    fact = unmatched_fact(u)
    assert fact.startswith(NO_MATCH_LEAD) and "first error at 2026-12-03 09:00:05 UTC" in fact
    assert "next step: `/vllm logs --since 2h --tail 2000`" in fact


def test_rfc3339_is_utc() -> None:
    east = datetime(2026, 12, 3, 10, 0, 5, 900000, tzinfo=UTC).astimezone(tz=None)
    assert rfc3339(east) == "2026-12-03T10:00:05Z"
