"""Stored answers and their ratings are scoped: random ids, one verdict per user, visible in their own channel
(every channel only for an admin); the audit trail is read back by channel and thread."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

import bot.handlers  # noqa: F401  (declares every command on the registry)
from bot.commands.registry import registry
from bot.views.gemma import feedback_blocks
from llm.agent import SUGGEST_TOOL
from ops.errors import NotFound
from ops.store.state import AuditEntry, Store

NOW = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)


def _answer(store: Store, channel: str = "C1", question: str = "why?") -> str:
    return store.save_answer(question, "gemma", ["describe x"], user_id="U1", channel_id=channel, now=NOW)


def test_answer_ids_are_random_not_sequential(store: Store) -> None:
    ids = [_answer(store) for _ in range(3)]
    assert all(re.fullmatch(r"[0-9a-f]{24}", i) for i in ids) and len(set(ids)) == 3
    assert not {"1", "2", "3"} & set(ids)


def test_each_user_has_one_verdict_and_changes_only_their_own(store: Store) -> None:
    answer = _answer(store)
    store.rate_answer(answer, "helpful", user_id="U1", channel_id="C1", now=NOW)
    store.rate_answer(answer, "not helpful", user_id="U2", channel_id="C1", now=NOW + timedelta(seconds=1))
    store.rate_answer(answer, "not helpful", user_id="U1", channel_id="C1", now=NOW + timedelta(seconds=2))
    verdicts = {(r.rated_by, r.verdict) for r in store.rated_answers(channel_id="C1")}
    assert verdicts == {("U1", "not helpful"), ("U2", "not helpful")}


def test_answers_are_rated_and_listed_only_in_their_channel(store: Store) -> None:
    mine, theirs = _answer(store, "C1", "ours?"), _answer(store, "C2", "secret plan?")
    store.rate_answer(mine, "helpful", user_id="U1", channel_id="C1", now=NOW)
    with pytest.raises(NotFound) as refused:
        store.rate_answer(theirs, "helpful", user_id="U1", channel_id="C1", now=NOW)
    assert refused.value.message == f"no answer {theirs} in this channel"
    store.rate_answer(theirs, "helpful", user_id="U9", channel_id=None, now=NOW)  # an admin
    assert [r.question for r in store.rated_answers(channel_id="C1")] == ["ours?"]
    assert {r.question for r in store.rated_answers()} == {"ours?", "secret plan?"}


def test_the_audit_is_read_by_channel_and_thread(store: Store) -> None:
    def line(channel: str, thread: str | None, command: str, minutes: int = 0) -> None:
        at = NOW + timedelta(minutes=minutes)
        store.record(AuditEntry(at, "U1", channel, "command", command, "received", thread_ts=thread))

    line("C1", None, "tpu list")
    line("C1", "111.1", "tpu describe a")
    line("C1", "222.2", "tpu describe b")
    line("C2", None, "tpu delete other")
    line("C1", None, "tpu status", minutes=-200)
    since = NOW - timedelta(hours=2)
    assert [e.command for e in store.channel_audit("C1", since=since, thread_ts="111.1")] == [
        "tpu list",
        "tpu describe a",
    ]
    everything = [e.command for e in store.channel_audit("C1", since=since)]
    assert everything == ["tpu list", "tpu describe a", "tpu describe b"]


def test_feedback_names_what_an_answer_was_given_as_the_answer_named_it(store: Store) -> None:
    """Stored comma-joined and read back split, a fact's label keeps its own commas; a tool is named by the
    command it ran, and suggest_command (which runs nothing) is left out."""
    given = ["describe gemma4-old", "queued resources in us-east5-a, europe-west4-a", "logs", SUGGEST_TOOL]
    answer = store.save_answer("why?", "gemma", given, user_id="U1", channel_id="C1", now=NOW)
    store.rate_answer(answer, "helpful", user_id="U1", channel_id="C1", now=NOW)
    (record,) = store.rated_answers(channel_id="C1")
    commands = {tool.name: "/" + command.tool_line({}) for tool, command in registry.tools()}
    (block,) = feedback_blocks([record], commands)
    text = block["text"]["text"]
    assert "(based on: describe gemma4-old; queued resources in us-east5-a, europe-west4-a" in text
    assert "· ran `/logs --severity ERROR`)" in text and SUGGEST_TOOL not in text
