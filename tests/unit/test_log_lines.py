"""The bot's logs: redaction runs outside the handler's lock, a long message is cut (marked) before it is
redacted, and a text log line cannot be forged from logged values."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest

from bot import observability
from bot.observability import MAX_LOG_MESSAGE_CHARS, escape_controls, setup_logging

RECORD_START = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ [\w.]+: ")
FORGED = "\n2026-01-01 00:00:00,000 INFO bot.oncall.checks: audit action=auto-recover command='/tpu delete x'"


@pytest.fixture
def logs(request: pytest.FixtureRequest) -> Iterator[tuple[io.StringIO, logging.Handler]]:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        handler = setup_logging(logging.INFO, json_format=getattr(request, "param", False), stream=stream)
        yield stream, handler
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def test_redaction_runs_outside_the_handlers_lock(
    logs: tuple[io.StringIO, logging.Handler], monkeypatch: pytest.MonkeyPatch
) -> None:
    stream, handler = logs
    held: list[bool] = []
    real = observability.redact

    def watched(text: str) -> str:
        held.append(handler.lock is not None and handler.lock._is_owned())  # type: ignore[attr-defined]
        return real(text)

    monkeypatch.setattr(observability, "redact", watched)
    logging.getLogger("bot.test").info("token=%s", "Zx81pQ7mN2vB4cX9qq")
    try:
        raise ValueError("password=hunter2")
    except ValueError:
        logging.getLogger("bot.test").exception("failed")
    assert held and not any(held)
    assert "Zx81pQ7mN2vB4cX9qq" not in stream.getvalue() and "hunter2" not in stream.getvalue()


def test_a_long_message_is_cut_and_marked_before_it_is_redacted(
    logs: tuple[io.StringIO, logging.Handler],
) -> None:
    stream, _ = logs
    logging.getLogger("bot.test").info("body: %s", "word " * 100_000)
    (line,) = stream.getvalue().splitlines()
    assert len(line) < MAX_LOG_MESSAGE_CHARS + 200
    assert line.endswith("more characters]") and "[cut: " in line


def test_text_lines_cannot_be_forged(logs: tuple[io.StringIO, logging.Handler]) -> None:
    stream, _ = logs
    log = logging.getLogger("bot.test")
    log.info("a value from a request: %s", "x" + FORGED + "\r\x1b[2J\u2028\u2029\x85 end")
    log.warning(f"an f-string with it: {FORGED}")
    try:
        raise RuntimeError("bad input" + FORGED)
    except RuntimeError:
        log.exception("with a traceback")
    lines = stream.getvalue().splitlines()
    assert all(RECORD_START.match(line) or line.startswith("    ") for line in lines), lines
    assert sum(bool(RECORD_START.match(line)) for line in lines) == 3
    assert "\\n2026-01-01" in lines[0] and "\\x1b" in lines[0] and "\\u2028" in lines[0]


@pytest.mark.parametrize("logs", [True], indirect=True)
def test_json_lines_keep_the_message_whole_and_escaped(logs: tuple[io.StringIO, logging.Handler]) -> None:
    stream, _ = logs
    logging.getLogger("bot.test").info("two\nlines with api_key=%s", "sk-Zx81pQ7mN2vB4cX9")
    (line,) = stream.getvalue().splitlines()
    assert json.loads(line)["message"] == "two\nlines with api_key=[REDACTED:api_key]"


def test_escape_controls_keeps_tabs_and_text() -> None:
    assert escape_controls("a\tb é") == "a\tb é"
    assert escape_controls("a\nb\rc\x00") == "a\\nb\\rc\\x00"
