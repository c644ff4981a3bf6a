"""The fault matrix's Slack family (tests/faults/matrix.py), half of it: a mention's answer posted with
chat.postMessage meets a Slack 429, invalid_blocks or msg_too_long. The other half is a module
of its own so that pytest-xdist's `--dist loadfile` can run the two halves in different worker processes."""

from __future__ import annotations

import logging

import pytest

from sim.demo import Demo
from tests.faults.matrix import check_family, queued_resources, run_slack_cells


def test_slack_post_message_faults(world: Demo, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    before = queued_resources(world)
    run_slack_cells(world, "chat.postMessage", mention=True)
    check_family(world, before, "slack", caplog)
