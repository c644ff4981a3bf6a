"""A source fetched concurrently for a reply (`/tpu status`, `/fleet`, `/tpu cost --today`): its value, or
the OpsError that stopped it, so one failing source is one red line and the rest of the reply still shows."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import TypeVar

from ops.errors import OpsError

log = logging.getLogger(__name__)

T = TypeVar("T")


def settled(future: Future[T], what: str = "source") -> T | OpsError:
    """The future's value, or the OpsError it raised; any other exception is logged (as "`what` failed")
    and becomes a generic OpsError pointing at the logs. Waits for the future."""
    try:
        return future.result()
    except OpsError as exc:
        return exc
    except Exception:
        log.exception("%s failed", what)
        return OpsError("internal error while fetching this source", "see the bot's logs")
