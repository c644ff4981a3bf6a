"""What a command handler receives besides its arguments."""

from __future__ import annotations

from dataclasses import dataclass

from bot.commands import Registry
from bot.services import Services


@dataclass(frozen=True)
class Context:
    """Who asked, where, and the backends to use."""

    services: Services
    registry: Registry
    user_id: str
    channel_id: str
