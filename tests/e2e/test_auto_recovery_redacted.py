"""Automatic recovery goes through the command runner: its audit rows are redacted like any command's.

In the demo world (real bot, simulated Google, Slack, vLLM and TPU VM): the primary, carrying the bot's
ownership label, goes FAILED with an error message that quotes a token, and its recreate is refused with
another; the alert scheduler the bot's start-up builds (with AUTO_RECOVER on) recovers it by itself. Neither
token reaches the audit table nor any Slack message; the audit rows say they were masked.
"""

from __future__ import annotations

import dataclasses
import json

from bot.oncall.scheduler import AlertScheduler
from bot.slack.gateway import SlackGateway
from ops.tpu.ownership import MANAGED_BY, MANAGED_BY_KEY
from sim.demo import ALERTS_CHANNEL, Demo

FAILED_TOKEN = "hf_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9"  # a Hugging Face token's shape (llm/redact.py)
CREATE_TOKEN = "hf_Zy8xW6vU4tS2rQ0pO8nM6lK4jH2g"


def test_auto_recovery_audit_and_slack_never_show_a_token() -> None:
    with Demo() as demo:
        assert demo.bot.alerts is not None
        client = SlackGateway.connect(demo.settings.slack_bot_token.get_secret_value(), demo.slack.api_url)
        scheduler = AlertScheduler.build(
            demo.bot.services,
            client,
            ALERTS_CHANNEL,
            runner=demo.bot.runner,
            options=dataclasses.replace(demo.bot.alerts.options, auto_recover=True),
        )
        world = demo.gcp.world
        with world.lock:
            primary = world.queued_resources[("us-east5-a", "gemma4-qr")]
            primary.node.labels[MANAGED_BY_KEY] = MANAGED_BY  # as if the bot had created it
        scheduler.tick()  # observes gemma4-qr ACTIVE

        with world.lock:
            primary.state, primary.state_initiator = "FAILED", "SERVICE"
            primary.error_code, primary.error_message = (
                13,
                f"startup script exited 1: HF_TOKEN={FAILED_TOKEN}",
            )
        refusal = {
            "code": 400,
            "message": f"bad metadata: HF_TOKEN={CREATE_TOKEN}",
            "status": "INVALID_ARGUMENT",
        }
        demo.gcp.inject_fault(r"/queuedResources$", 400, method="POST", body=json.dumps({"error": refusal}))
        scheduler.tick()  # the FAILED state alert, then the automatic recovery

        auto = [e for e in demo.bot.services.store.audit(last=50) if e.user_id == "auto-recover"]
        outcomes = [e.outcome for e in reversed(auto)]  # oldest first
        assert outcomes and outcomes[0].startswith("started: FAILED"), outcomes
        assert outcomes[-1].startswith("failed: "), outcomes
        assert all("[REDACTED:" in outcome for outcome in outcomes), outcomes
        for entry in demo.bot.services.store.audit(last=200):
            for token in (FAILED_TOKEN, CREATE_TOKEN):
                assert token not in entry.command and token not in entry.outcome, entry
        recovery = [
            m for m in demo.slack.messages if "utomatic recovery" in m.text or "utomatically" in m.text
        ]
        assert any("Automatic recovery of `gemma4-qr`: failed" in m.text for m in recovery), recovery
        for message in demo.slack.messages:
            for token in (FAILED_TOKEN, CREATE_TOKEN):
                assert token not in message.render() and token not in message.text, message
