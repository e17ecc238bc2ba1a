"""The process-wide politeness ledger: when each host last saw a request start from us, and
until when a host asked us (429 or 503 with Retry-After) to stay away.

Robots, sitemap and page fetches run in different stages of one in-process run, each with its
own session; Crawl-delay and Retry-After are about the host, not the stage, so both are kept
across them (a 503 with Retry-After: 2 to a sitemap probe was followed 1.79 s later by the
first page request: found by an exploratory web). Real (monotonic) time only: this is
politeness, never a scheduling decision. Callers note a request both when it leaves and when
its answer arrives, so the gap the server sees between two requests is at least the delay
whatever the server's own processing time.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from datetime import datetime


class HostLedger:
    def __init__(self) -> None:
        self._last: dict[str, float] = {}
        self._held: dict[str, float] = {}
        self._lock = threading.Lock()

    def hold(self, host: str, until: float) -> None:
        """No request to ``host`` before ``until`` (monotonic seconds): its Retry-After."""
        with self._lock:
            if until > self._held.get(host, float("-inf")):
                self._held[host] = until

    def held_until(self, host: str) -> float | None:
        """When the host's latest Retry-After ends, if it has not ended yet."""
        with self._lock:
            until = self._held.get(host)
        return until if until is not None and until > time.monotonic() else None

    def last_start(self, host: str) -> float | None:
        with self._lock:
            return self._last.get(host)

    def note_start(self, host: str, at: float | None = None) -> None:
        at = time.monotonic() if at is None else at
        with self._lock:
            if at > self._last.get(host, float("-inf")):
                self._last[host] = at

    def ready_at(self, host: str, delay: float | None) -> float:
        """The earliest moment (monotonic) a request to ``host`` may start: ``delay`` after its
        last request start, and not inside a Retry-After."""
        now = time.monotonic()
        ready = now
        if delay and delay > 0:
            last = self.last_start(host)
            if last is not None:
                ready = max(ready, last + delay)
        return max(ready, self.held_until(host) or now)

    async def wait_turn(self, host: str, delay: float | None) -> None:
        """Sleep until the host's turn (:meth:`ready_at`), then claim it."""
        wait = self.ready_at(host, delay) - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        self.note_start(host)


LEDGER = HostLedger()


def hold_for_answer(host: str, headers: Mapping[str, str], now: datetime | None) -> None:
    """Keep a throttling answer's Retry-After (``headers``, read against their Date, else the
    cycle's ``now``) for every later request of the run to ``host``, pages included."""
    from freshness_pipeline.web.client.headers import parse_retry_after  # its package imports us

    pause = parse_retry_after(headers.get("Retry-After"), date=headers.get("Date"), now=now)
    if pause:
        LEDGER.hold(host, time.monotonic() + pause)
