"""Idle stop: a TPU slice bills by the hour whether or not it serves anything.

`IdleWatch` follows vLLM's finished-request counter (`vllm:request_success_total`, all reasons summed): the
last time it moved is the last time the deployment served a request. A counter that goes down means the
server restarted; that counts as activity (someone restarted it). `Schedule` reads `IDLE_STOP_AT`, times of
day (UTC) at which the bot proposes stopping the deployment, e.g. "mon-fri 20:00, sat 08:00".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from ops.linear import linear
from ops.times import from_rfc3339, rfc3339

__all__ = ["DAYS", "IdleWatch", "Schedule", "parse_schedule"]

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_ENTRY = linear(r"^(?:(?P<days>[a-z]{3}(?:-[a-z]{3})?)\s+)?(?P<hh>\d{1,2}):(?P<mm>\d{2})$")


@dataclass(frozen=True)
class IdleWatch:
    """Last request count seen and when it last changed (ISO UTC); None before the first scrape."""

    requests: float | None = None
    since: str | None = None

    def observe(self, requests: float, now: datetime) -> IdleWatch:
        """The state after a scrape showing `requests` finished since the server started."""
        if self.requests is None or self.since is None or requests != self.requests:
            return IdleWatch(requests, rfc3339(now))
        return self

    def idle_for(self, now: datetime) -> timedelta:
        """How long no request finished (zero before the first scrape)."""
        return now - from_rfc3339(self.since) if self.since else timedelta(0)

    def to_json(self) -> str:
        return json.dumps({"requests": self.requests, "since": self.since})

    @classmethod
    def from_json(cls, text: str | None) -> IdleWatch:
        if not text:
            return cls()
        data = json.loads(text)
        return cls(data.get("requests"), data.get("since"))


@dataclass(frozen=True)
class Schedule:
    """Times of day (UTC) on some weekdays. Entry = (weekday numbers, Monday 0; time of day)."""

    entries: tuple[tuple[frozenset[int], time], ...] = ()

    def latest(self, now: datetime) -> datetime | None:
        """The most recent scheduled moment at or before `now` (within the last 8 days), or None."""
        found: datetime | None = None
        for days, at in self.entries:
            for back in range(8):
                day = (now - timedelta(days=back)).date()
                moment = datetime.combine(day, at, tzinfo=UTC)
                if day.weekday() in days and moment <= now:
                    found = moment if found is None or moment > found else found
                    break
        return found


def parse_schedule(text: str) -> Schedule:
    """Read `IDLE_STOP_AT`: comma-separated "[DAYS ]HH:MM" in UTC, DAYS a day or range ("mon-fri", "sat").

    Examples: "20:00" (every day), "mon-fri 20:00, sat 08:00".

    Raises:
        ValueError: an entry that is not of that form (one line naming it).
    """
    entries: list[tuple[frozenset[int], time]] = []
    for raw in (part.strip().lower() for part in text.split(",")):
        if not raw:
            continue
        match = _ENTRY.match(raw)
        if not match or int(match["hh"]) > 23 or int(match["mm"]) > 59:
            raise ValueError(f"{raw!r} is not [DAYS ]HH:MM, e.g. 'mon-fri 20:00'")
        days = set(range(7))
        if match["days"]:
            first, _, last = match["days"].partition("-")
            if first not in DAYS or (last and last not in DAYS):
                raise ValueError(f"{raw!r}: days are {', '.join(DAYS)}")
            a, b = DAYS.index(first), DAYS.index(last or first)
            days = {d % 7 for d in range(a, (b if b >= a else b + 7) + 1)}
        entries.append((frozenset(days), time(int(match["hh"]), int(match["mm"]))))
    if not entries:
        raise ValueError("give at least one time, e.g. 'mon-fri 20:00'")
    return Schedule(tuple(entries))
