"""Samples every deployment's vLLM `/metrics` into the history (ops/vllm/history.py) on a schedule.

Each round scrapes all deployments at once; a deployment whose vLLM does not answer is skipped for that
round (the chart shows a gap), and the failure is logged once per round. Once an hour the history is pruned
(retention and downsampling, see ops/vllm/history.py).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from bot.services import Fleet, Services
from ops.errors import OpsError
from ops.vllm.history import History, sample_of

log = logging.getLogger(__name__)

PRUNE_EVERY_S = 3600.0


class HistorySampler:
    """Scrape each deployment every `interval_s` seconds (HISTORY_INTERVAL_S) until `shutdown()`.

    Args:
        fleet: the deployments; the first one's store and clock are used.
        interval_s: seconds between rounds.
    """

    def __init__(self, fleet: Fleet, interval_s: float) -> None:
        self.fleet = fleet
        self.history = History(fleet.first.store)
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(fleet.services)), thread_name_prefix="sampler")

    def sample_once(self) -> int:
        """One round: scrape every deployment at once and store what answered. Returns how many did."""
        now = self.fleet.first.now()
        names = list(self.fleet.services)
        scraped = self._pool.map(
            self._scrape, names, [self.fleet.services[n] for n in names], [now] * len(names)
        )
        return sum(scraped)

    def _scrape(self, name: str, services: Services, now: datetime) -> bool:
        try:
            client, _ = services.vllm()
            with client:
                text = client.metrics_text()
            self.history.add(name, sample_of(text, now))
            return True
        except (OpsError, ValueError) as exc:
            log.info("history: no sample of %s this round: %s", name, exc)
            return False

    def start(self) -> None:
        """Run rounds on a daemon thread."""
        self._thread = threading.Thread(target=self._run, name="history-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        since_prune = PRUNE_EVERY_S
        while not self._stop.wait(self.interval_s):
            try:
                self.sample_once()
                since_prune += self.interval_s
                if since_prune >= PRUNE_EVERY_S:
                    self.history.prune(self.fleet.first.now())
                    since_prune = 0.0
            except Exception:
                log.exception("history sampling round failed")

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._pool.shutdown(wait=False, cancel_futures=True)
