"""The process-wide politeness ledger: when each host last saw a request start from us.

Robots, sitemap and page fetches run in different stages of one in-process run, each with its
own session; Crawl-delay is about the host, not the stage, so the gap is kept across them.
Real (monotonic) time only: this is politeness, never a scheduling decision. Callers note a
request both when it leaves and when its answer arrives, so the gap the server sees between two
requests is at least the delay whatever the server's own processing time.
"""

from __future__ import annotations

import asyncio
import threading
import time


class HostLedger:
    def __init__(self) -> None:
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def last_start(self, host: str) -> float | None:
        with self._lock:
            return self._last.get(host)

    def note_start(self, host: str, at: float | None = None) -> None:
        at = time.monotonic() if at is None else at
        with self._lock:
            if at > self._last.get(host, float("-inf")):
                self._last[host] = at

    async def wait_turn(self, host: str, delay: float | None) -> None:
        """Sleep until ``delay`` seconds after the host's last request start, then claim it."""
        if delay and delay > 0:
            last = self.last_start(host)
            if last is not None:
                wait = last + delay - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
        self.note_start(host)


LEDGER = HostLedger()
