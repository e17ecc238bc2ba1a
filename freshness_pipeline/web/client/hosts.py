"""The per-host scheduler: every host gets its own queue and workers, so that hosts never wait
on each other. A host's next request waits out the larger of its Crawl-delay and its throttle's
gap, holds one of the cycle's global slots only while it is in flight, and the host's queue is
deferred when its breaker opens, the cycle's time runs out or a Retry-After outlasts the cycle;
the first 429 or 503 drops the host to one request at a time."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Sequence

from freshness_pipeline.web.client.context import Attempt, CycleContext
from freshness_pipeline.web.client.fetches import (
    TIME_LIMIT_REASON,
    FetchRequest,
    FetchResult,
    Outcome,
)
from freshness_pipeline.web.client.outcomes import THROTTLE_STATUSES, fetch_one
from freshness_pipeline.web.politeness import LEDGER

__all__ = ["HostRun"]

# Added to a crawl-delay gap for scheduling jitter between our clock and the server's, so the
# server never sees less than the delay robots.txt asked for. A gap that only AutoThrottle set is
# our own estimate, with no rule on the server's side to break: 5 ms on top of a sub-millisecond
# latency would cap a fast host at ~200 requests/s for nothing.
_GAP_SLACK_S = 0.005
_PROBE_POLL_S = 0.05  # how often a request waiting on a breaker's probe looks again


class HostRun:
    """One host's queue: its own workers, throttle and stop flag, so hosts never wait on each
    other (a host waiting out its gap or back-off holds no global slot)."""

    def __init__(
        self,
        key: str,
        indices: list[int],
        requests: Sequence[FetchRequest],
        results: list[FetchResult | None],
        ctx: CycleContext,
    ) -> None:
        self.key = key
        self.queue = deque(indices)
        self.requests = requests
        self.results = results
        self.ctx = ctx
        # One host, one gap: the strictest crawl-delay among its requests wins, and so do the
        # longest learned gap and the smallest learned concurrency.
        mine = [requests[i] for i in indices]
        self.crawl_delay = max((r.crawl_delay or 0.0 for r in mine), default=0.0)
        limit = ctx.settings.host_concurrency
        learned = [r.concurrency for r in mine if r.concurrency is not None]
        self.concurrency = 1 if self.crawl_delay > 0 else max(1, min([limit, *learned]))
        self.throttle = ctx.throttles.for_host(key, floor=self.crawl_delay)
        self.throttle.learn_gap(max((r.min_gap_s or 0.0 for r in mine), default=0.0))
        self.last_start: float | None = LEDGER.last_start(key)
        self.last_sent: float | None = None
        self.lock = asyncio.Lock()
        self.stop_outcome: Outcome | None = None
        self.stop_reason: str | None = None
        self.stop_retry_after: float | None = None
        held = LEDGER.held_until(key)
        if held is not None:
            # a Retry-After the host gave a robots.txt or sitemap request of this run
            self.throttle.not_before = max(self.throttle.not_before, held)
            if held > ctx.pause_deadline:
                self._defer_rest("host throttled (Retry-After)", held - time.monotonic())

    def _defer_rest(self, reason: str, retry_after_s: float) -> None:
        """The host asked for a pause longer than the cycle has: its remaining fetches wait for
        a later cycle, whatever the breaker says, carrying the server's Retry-After for the
        planner."""
        self.stop_outcome, self.stop_reason = "deferred", reason
        self.stop_retry_after = retry_after_s

    def mark_started(self, at: float) -> None:
        # The gap counts from when the request really left (after DNS and connect), which is
        # what the server sees; otherwise a slow first connect would shorten the next gap.
        if self.last_start is None or at > self.last_start:
            self.last_start = at
        LEDGER.note_start(self.key, at)

    def mark_sent(self, attempt: Attempt) -> None:
        """The request is on the wire: note the gap since the previous one left, which is what
        a server that throttles bursts judges us by."""
        assert attempt.sent_at is not None
        if self.last_sent is not None:
            attempt.gap_s = attempt.sent_at - self.last_sent
        self.last_sent = attempt.sent_at
        self.mark_started(attempt.sent_at)

    async def wait_for_gap(self) -> None:
        """Sleep until the host's gap allows another request: a redirect followed within one
        fetch (outcomes.fetch_one) is a request of its own to the server."""
        now = time.monotonic()
        earliest = self._earliest(now)
        if earliest > now:
            await asyncio.sleep(earliest - now)

    async def run(self) -> None:
        workers = min(self.concurrency, len(self.queue))
        await asyncio.gather(*(self._worker(slot) for slot in range(workers)))

    def _skip(
        self, i: int, outcome: Outcome, reason: str, retry_after: float | None = None
    ) -> None:
        self.results[i] = FetchResult.unsent(
            self.requests[i].url, self.key, outcome, reason, retry_after
        )

    def _stopped(self, i: int) -> bool:
        if self.stop_outcome is None:
            return False
        assert self.stop_reason is not None
        self._skip(i, self.stop_outcome, self.stop_reason, self.stop_retry_after)
        return True

    async def _wait_turn(self, i: int) -> bool:
        """Wait until the host's gap allows request ``i``; False when it was deferred instead.

        The gap is re-read after every sleep: a response that arrives meanwhile may have raised
        it (a failure) or opened the breaker, and that must hold for requests already waiting.
        """
        ctx, throttle = self.ctx, self.throttle
        while True:
            if self._stopped(i):
                return False
            now = time.monotonic()
            if not throttle.allows(now):
                # A flaky host's short cool-down (or a probe in flight) is waited for when it
                # ends within the window; a down host's breaker defers the rest at once.
                reopens = throttle.reopens_at()
                limit = ctx.pause_deadline if ctx.deadline is None else ctx.deadline
                soon = throttle.probing or throttle.retries_soon()
                if soon and reopens is not None and reopens < limit:
                    await asyncio.sleep(max(reopens - now, _PROBE_POLL_S))
                    continue
                self._skip(i, "deferred", throttle.breaker_reason())
                return False
            earliest = self._earliest(now)
            if ctx.deadline is not None and earliest >= ctx.deadline:
                self._skip(i, "deferred", TIME_LIMIT_REASON)
                return False
            if earliest <= now:
                return True
            await asyncio.sleep(earliest - now)

    def _earliest(self, now: float) -> float:
        throttle = self.throttle
        gap = throttle.delay
        if gap > 0 and self.last_start is not None:
            slack = _GAP_SLACK_S if throttle.floor > 0 else 0.0
            return max(now, self.last_start + gap + slack, throttle.not_before)
        return max(now, throttle.not_before)

    def _still_clear(self, now: float) -> bool:
        return (
            self.stop_outcome is None and self.throttle.allows(now) and self._earliest(now) <= now
        )

    async def _worker(self, slot: int) -> None:
        ctx = self.ctx
        # a throttling answer lowers the host's concurrency for the rest of the cycle: the
        # workers above it finish their request in flight and stop taking new ones
        while self.queue and slot < self.concurrency:
            i = self.queue.popleft()
            if self._stopped(i):
                continue
            async with self.lock:
                while True:
                    if not await self._wait_turn(i):
                        break
                    await ctx.slots.acquire()
                    now = time.monotonic()
                    if ctx.deadline is not None and now >= ctx.deadline:
                        ctx.slots.release()
                        self._skip(i, "deferred", TIME_LIMIT_REASON)
                        break
                    # Waiting for a global slot may have taken a while: a response that came
                    # in meanwhile can have raised the gap, opened the breaker or stopped the
                    # host. Then give the slot back and wait (or defer) again.
                    if self._still_clear(now):
                        break
                    ctx.slots.release()
                if self.results[i] is not None:
                    continue  # deferred
                attempt = Attempt(self)
                self.throttle.started(attempt.started_at)
                self.mark_started(attempt.started_at)
            try:
                result = await fetch_one(ctx, attempt, self.requests[i])
            finally:
                ctx.slots.release()
            self.results[i] = result
            self._learn(result, attempt)

    def _learn(self, result: FetchResult, attempt: Attempt) -> None:
        if result.outcome == "blocked":
            self.stop_outcome = "blocked"
            self.stop_reason = result.error or "blocked by the network allow-list"
            return
        taken_for = attempt.signal
        if attempt.signal is not None:
            taken_for = self.throttle.observe(
                attempt.signal,
                now=time.monotonic(),
                latency_s=attempt.latency_s,
                detail=result.error or f"HTTP {result.http_status}",
                retry_after_s=result.retry_after_s,
                gap_s=attempt.gap_s,
                http_status=result.http_status,
                sent_at=attempt.sent_at,
            )
        if result.http_status in THROTTLE_STATUSES and taken_for == "throttled":
            self.concurrency = 1
            pause = result.retry_after_s
            if pause is not None and self.stop_outcome is None:
                if time.monotonic() + pause <= self.ctx.pause_deadline:
                    # The pause fits the cycle: the throttle holds the host until it ends
                    # (its not_before), then carry on.
                    self.throttle.n_pauses += 1
                    return
                self._defer_rest(f"host throttled (HTTP {result.http_status})", pause)
