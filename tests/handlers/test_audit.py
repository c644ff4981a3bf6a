"""`/tpu audit` shows the changes by default (refusals, confirmations, cancels, changing commands) and the
reads on request."""

from __future__ import annotations

from tests.handlers.conftest import Handlers


def test_audit_shows_changes_by_default_and_reads_on_request(handlers: Handlers) -> None:
    handlers.run("tpu status")
    handlers.run("tpu list")
    handlers.run("tpu delete gemma4-old")  # a preview: confirmation requested
    handlers.run("tpu reset gemma4-standby")
    changes = handlers.run("tpu audit")
    assert "Audit: last" in changes and "changes" in changes
    assert "/tpu delete gemma4-old -> awaiting confirmation" in changes
    assert "/tpu reset gemma4-standby" in changes
    assert "/tpu status" not in changes and "/tpu list" not in changes and "/tpu audit ->" not in changes
    assert "`/tpu audit --reads`" in changes
    everything = handlers.run("tpu audit --reads --last 50")
    assert "/tpu status -> ok" in everything and "/tpu list" in everything
