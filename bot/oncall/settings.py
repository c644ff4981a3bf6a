"""The on-call settings: alerts, the daily digest, maintenance, SLO rules, idle stops and automatic recovery.

A part of `bot.config.Settings` (which inherits these fields and their rules): they are loaded, validated and
reported with every other setting by `bot.config.load_settings`; this module only declares them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode

from bot.oncall.routing import parse_routes
from ops.cost.idle import parse_schedule
from ops.times import parse_duration
from ops.vllm.slo import load_rules

CommaList = Annotated[list[str], NoDecode]
"""A list setting given as comma-separated text (`TPU_ZONES=us-east5-a,asia-northeast1-b`)."""


def split_commas(value: object) -> object:
    """A comma-separated string as its stripped, non-empty parts; any other value unchanged."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class OncallSettings(BaseSettings):
    """The settings of the alert jobs (bot/oncall/scheduler.py, checks.py); see docs/settings.md."""

    alert_interval_s: float = Field(
        60.0, ge=0.5, le=3600, description="How often alerts are evaluated, seconds."
    )
    alert_retention_days: int = Field(
        30,
        ge=8,
        le=3650,
        description="Days the alert ledger keeps the alerts and last states of queued resources that are "
        "gone (at least 8: a tick reads a week of sent alerts).",
    )
    alert_thresholds_min: CommaList = Field(
        default_factory=lambda: ["60", "15", "5"],
        description="Minutes before termination (or valid-until) to alert at.",
    )
    alert_channel: str | None = Field(
        None, pattern=r"^[CG][A-Z0-9]{2,}$", description="Channel id for alerts; unset: no alerts."
    )
    alert_routes: CommaList = Field(
        default_factory=list,
        description="KIND=CHANNEL or SEVERITY=CHANNEL items, e.g. critical=C0PAGE01,expiry=C0COST01.",
    )
    alert_mention_group: str | None = Field(
        None, pattern=r"^S[A-Z0-9]{2,}$", description="User-group id (S...) mentioned on critical alerts."
    )
    digest_channel: str | None = Field(
        None, pattern=r"^[CG][A-Z0-9]{2,}$", description="Channel of the daily digest; unset: ALERT_CHANNEL."
    )
    maintenance_timeout_min: int = Field(
        30,
        ge=1,
        le=240,
        description=(
            "After planned work, how long to wait for vLLM to serve before 'start-up looks stuck', minutes."
        ),
    )
    maintenance_alert_lead: str = Field(
        "24h",
        description=(
            "How long before a TPU host maintenance window (upcomingMaintenance) its alert is "
            "posted, 5m to 7d."
        ),
    )
    alert_delivery_recheck_s: int = Field(
        300,
        ge=10,
        le=86400,
        description=(
            "How long a channel Slack refused (archived, not found, not joined, missing scope, "
            "token refused) is left alone before the alert job tries it again, seconds."
        ),
    )
    slo_rules_file: str | None = Field(
        None,
        description="YAML file of serving SLO rules (format in ops/vllm/slo.py); unset: the built-in rules.",
    )
    idle_alert_after: str | None = Field(
        None, description="Alert when no request was served for this long, e.g. 2h (at least 5m); unset: off."
    )
    idle_stop_at: str | None = Field(
        None, description="UTC times to propose stopping the primary, e.g. 'mon-fri 20:00, sat 08:00'."
    )
    idle_keep_hours: int = Field(4, ge=1, le=72, description="Hours the Keep button silences idle alerts.")
    auto_recover: bool = Field(False, description="Recover a dead primary the bot created without a click.")
    auto_recover_max_per_day: int = Field(
        2, ge=1, le=24, description="Cap on automatic recoveries per UTC day: attempts."
    )
    auto_recover_max_usd_per_day: float = Field(
        200.0, gt=0, le=100000, description="Cap on automatic recoveries per UTC day: projected USD."
    )

    @field_validator("alert_thresholds_min", "alert_routes", mode="before")
    @classmethod
    def _split_oncall_commas(cls, value: object) -> object:  # a name of its own: Settings has _split_commas
        return split_commas(value)

    @field_validator("alert_thresholds_min")
    @classmethod
    def _check_thresholds(cls, values: list[str]) -> list[str]:
        if not values or not all(v.isdigit() and 0 < int(v) <= 10080 for v in values):
            raise ValueError("give whole minutes from 1 to 10080, e.g. 60,15,5")
        return values

    @field_validator("alert_routes")
    @classmethod
    def _check_routes(cls, items: list[str]) -> list[str]:
        parse_routes(items)
        return items

    @field_validator("slo_rules_file")
    @classmethod
    def _check_slo_rules(cls, path: str | None) -> str | None:
        if path is not None:
            load_rules(path)
        return path

    @field_validator("idle_alert_after")
    @classmethod
    def _check_idle_after(cls, text: str | None) -> str | None:
        if text is not None and parse_duration(text.strip()) < timedelta(minutes=5):
            raise ValueError("give at least 5m, e.g. 2h")
        return text

    @field_validator("maintenance_alert_lead")
    @classmethod
    def _check_maintenance_lead(cls, text: str) -> str:
        if not timedelta(minutes=5) <= parse_duration(text.strip()) <= timedelta(days=7):
            raise ValueError("give 5m to 7d, e.g. 24h (Google announces scheduled maintenance 7 days ahead)")
        return text

    @field_validator("idle_stop_at")
    @classmethod
    def _check_idle_stop_at(cls, text: str | None) -> str | None:
        if text is not None:
            parse_schedule(text)
        return text
