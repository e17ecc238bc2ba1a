"""Per-host pacing that follows the server's own signals, in the spirit of Scrapy's AutoThrottle.

A fixed gap is either too slow for a healthy site or too fast for a struggling one. The server
tells us which it is: how long it takes to answer (latency), and whether it fails. So each host
gets a gap between request starts of about ``latency / target_concurrency``: on average
``target_concurrency`` requests in flight, whatever the site's speed. The gap never goes below
the host's Crawl-delay (robots.txt is the operator's explicit wish) and never above a cap, so a
site that stops answering does not park a worker for minutes per page.

Failures (transport errors, timeouts, 5xx, 429) only ever slow us down, exponentially and with
jitter; error pages are cheap to serve, so their short latency must not speed us up (Scrapy's
rule). Successes forgive one failure at a time and halve the excess delay, so a hiccup is
forgotten quickly but a host that fails more often than it succeeds keeps sinking. After
``failure_limit`` unforgiven failures the circuit breaker opens. A host that has answered well
in this run is only flaky: a run of failures is to be expected now and then at a failure rate
of a few percent over hundreds of requests, so after a short cool-down (``breaker_retry_s``,
doubling each time, at most ``breaker_retries`` times) one probe request decides whether it
closes again. A host that has not answered at all, or keeps failing its probes, is taken for
down: the rest of its queue is deferred instead of spending the cycle one timeout at a time,
and only after the long cool-down (``breaker_cooldown_s``, relevant when state outlives one
cycle) does a probe ask again.

Throttling answers (429, 503) also teach a soft floor, the host's learned gap
(science.capacity): the shortest gap between request starts it has taken without throttling.
The latency-driven gap never goes below it, so a host that punishes bursts is not hit again
every few requests as the back-off decays. It starts from what earlier cycles learned.

Everything here is pure bookkeeping: times are passed in (monotonic seconds) and the jitter
source is injectable, so the policy is testable without sleeping. The client does the waiting.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Literal

from freshness_pipeline.science.capacity import throttled_gap
from freshness_pipeline.science.knobs import require

__all__ = [
    "HostThrottle",
    "Signal",
    "ThrottlePolicy",
    "Throttles",
    "classify_status",
]

#: What one response says about the host's health.
#: ``ok``: 2xx or 304, a normal page served (may speed us up).
#: ``other``: a served answer that is not a page (3xx, 4xx): healthy server, but cheap to make,
#: so it may slow us down, never speed us up.
#: ``failure``: transport error, timeout, 5xx: back off.
#: ``throttled``: 429, or 503 (the server asked us to slow down): back off.
Signal = Literal["ok", "other", "failure", "throttled"]

_THROTTLE_STATUSES = frozenset({429, 503})


def classify_status(http_status: int | None) -> Signal:
    """The signal of a response that arrived (``None``: no response, a transport failure)."""
    if http_status is None:
        return "failure"
    if http_status in _THROTTLE_STATUSES:
        return "throttled"
    if http_status >= 500:
        return "failure"
    if 200 <= http_status < 300 or http_status == 304:
        return "ok"
    return "other"


@dataclass(frozen=True)
class ThrottlePolicy:
    """How eagerly hosts are paced (``FetchSettings.throttle``); the defaults are polite for
    unknown public sites."""

    # Latency-aware pacing: the gap between request starts to a host follows latency / target
    # concurrency, never below its Crawl-delay, never above max_delay_s (unless the
    # Crawl-delay is larger). Off: the host gets host_concurrency requests back to back.
    autothrottle: bool = True
    target_concurrency: float = 1.0
    start_delay_s: float = 0.0
    max_delay_s: float = 60.0
    # Exponential back-off on failures: the gap becomes at least base * 2^(n-1) after n
    # unforgiven failures (and at least double the previous gap), raised by up to `jitter`.
    backoff_base_s: float = 1.0
    backoff_jitter: float = 0.25
    # Unforgiven failures (transport errors, timeouts, 5xx, 429/503; each success forgives one)
    # after which the host's circuit breaker opens and the rest of its queue is deferred.
    # None disables the breaker.
    failure_limit: int | None = 3
    # How long an open breaker stays open before one probe is let through; matters only when a
    # Throttles object is reused across fetch_all calls (within one cycle, open means done).
    breaker_cooldown_s: float = 600.0
    # A host that has answered in this cycle and then fails ``failure_limit`` times is flaky,
    # not down: its breaker lets a probe through after this cool-down (doubling each time, at
    # most ``breaker_retries`` times) when that fits the fetch window.
    breaker_retry_s: float = 5.0
    breaker_retries: int = 3

    @property
    def latency_in_flight(self) -> float | None:
        """About how many requests a host has in flight while latency paces it (None: as many
        as its concurrency lets start back to back): what a plan sizing a slow host's share of
        the window must assume."""
        return self.target_concurrency if self.autothrottle else None

    def __post_init__(self) -> None:
        if self.target_concurrency <= 0:
            raise ValueError("target_concurrency must be positive")
        delays = (
            "start_delay_s",
            "max_delay_s",
            "backoff_base_s",
            "breaker_cooldown_s",
            "breaker_retry_s",
        )
        require(self, delays, lambda v: v >= 0, "not be negative")
        if not 0 <= self.backoff_jitter <= 1:
            raise ValueError("backoff_jitter must be within [0, 1]")
        if self.breaker_retries < 0:
            raise ValueError("breaker_retries must not be negative")
        if self.failure_limit is not None and self.failure_limit < 1:
            raise ValueError("failure_limit must be at least 1 (or None to disable)")


@dataclass
class HostThrottle:
    """One host's pacing state: the gap between request starts, failures, the breaker."""

    host: str
    policy: ThrottlePolicy = field(default_factory=ThrottlePolicy)
    floor: float = 0.0  # the host's Crawl-delay: a hard minimum, above any cap
    # the learned gap (science.capacity): a soft minimum, raised by throttling answers
    min_gap: float = 0.0
    rng: random.Random = field(default_factory=random.Random, repr=False)
    delay: float = -1.0  # set from policy/floor in __post_init__
    failures: int = 0  # failures not yet forgiven by successes
    tripped_at: float | None = None
    probing: bool = False
    last_failure: str | None = None
    latency_s: float | None = None  # smoothed latency of served responses
    n_ok: int = 0
    n_other: int = 0
    n_failures: int = 0
    n_trips: int = 0
    n_opens: int = 0  # trips and failed probes: each opening lengthens the next cool-down
    n_throttled: int = 0
    # 503s without Retry-After at a pace the host had served well: failures, not "slower"
    n_unpaced_503: int = 0
    # the shortest gap between request starts after which the host served a page in this run
    served_gap: float | None = None
    n_pauses: int = 0  # Retry-After pauses waited out within the cycle (the client counts them)
    max_delay_seen: float = 0.0
    # No request before this moment (monotonic seconds): the end of the latest Retry-After,
    # counted from the answer that asked for it. A hard limit beside the gap, which learning
    # may lower meanwhile.
    not_before: float = 0.0
    # when the latest throttling answer came in: a request that left before it says nothing
    # of the pace the host asked for since
    throttled_at: float | None = None

    def __post_init__(self) -> None:
        self.floor = max(0.0, self.floor)
        self.min_gap = max(0.0, self.min_gap)
        if self.delay < 0:
            self.delay = self._clamp(self.policy.start_delay_s)
        self.max_delay_seen = self.delay

    # ------------------------------------------------------------------ the gap

    def raise_floor(self, floor: float | None) -> None:
        """A Crawl-delay learned later (or a stricter one) applies from now on."""
        if floor is not None and floor > self.floor:
            self.floor = floor
            self.delay = max(self.delay, floor)
            self.max_delay_seen = max(self.max_delay_seen, self.delay)

    def _cap(self) -> float:
        # A Crawl-delay above the cap still wins: it is the operator's explicit rule.
        return max(self.policy.max_delay_s, self.floor)

    def _clamp(self, value: float) -> float:
        return min(max(value, self.floor, self.min_gap), self._cap())

    def learn_gap(self, gap_s: float | None) -> None:
        """Start from a gap learned in earlier cycles (never lowers what this one learned)."""
        if gap_s is not None and gap_s > self.min_gap:
            self.min_gap = gap_s
            self._set(max(self.delay, self._clamp(self.delay)))

    def _set(self, value: float) -> None:
        self.delay = value
        self.max_delay_seen = max(self.max_delay_seen, value)

    # ------------------------------------------------------------------ the breaker

    def allows(self, now: float) -> bool:
        """Whether a request may start now as far as the breaker is concerned.

        Open: no. After the cool-down (half-open): one probe at a time, claimed with
        :meth:`started` once the request really goes out.
        """
        reopens = self.reopens_at()
        if reopens is None:
            return True
        return now >= reopens and not self.probing

    def reopens_at(self) -> float | None:
        """When the open breaker lets a probe through (None: it is closed): soon for a host
        that has answered in this run and has not failed too many probes, after the long
        cool-down otherwise."""
        if self.tripped_at is None:
            return None
        policy = self.policy
        if self.retries_soon():
            return self.tripped_at + policy.breaker_retry_s * 2.0 ** (self.n_opens - 1)
        return self.tripped_at + policy.breaker_cooldown_s

    def retries_soon(self) -> bool:
        """Whether the open breaker is a flaky host's short pause rather than a down host's
        long one: it answered in this run and has not failed too many probes yet."""
        return (
            self.tripped_at is not None
            and self.n_ok > 0
            and self.n_opens <= self.policy.breaker_retries
        )

    def started(self, now: float) -> None:
        """A request is going out; while half-open it is the probe and others must wait."""
        reopens = self.reopens_at()
        if reopens is not None and now >= reopens:
            self.probing = True

    @property
    def tripped(self) -> bool:
        return self.tripped_at is not None

    def breaker_reason(self) -> str:
        last = f" (last: {self.last_failure})" if self.last_failure else ""
        return f"host failing: circuit breaker open after {self.failures} failures{last}"

    # ------------------------------------------------------------------ learning

    def observe(
        self,
        signal: Signal,
        *,
        now: float,
        latency_s: float | None = None,
        detail: str | None = None,
        retry_after_s: float | None = None,
        gap_s: float | None = None,
        http_status: int | None = None,
        sent_at: float | None = None,
    ) -> Signal:
        """Learn from one finished request, and say what it was taken for.

        ``latency_s`` is the time from the request leaving to the response read (its headers,
        and its body where it has one; for a failure: to the moment it failed, so a timeout
        counts as very slow); ``gap_s`` the time
        since the previous request to the host had left, which a throttling answer says was
        too short.

        A 503 without Retry-After after a gap at least half as long as one the host served a
        page after is a failure, not a word about our pace: a host that fails a share of its
        requests at random (a flaky backend) doubled the learned gap at each, up to a minute
        between requests, and was starved for good (found by an outside held-out web: 15 %
        random 503s, 0.43 fetches a page against the oracle's 3.5). It still backs off, as
        any failure does, and still trips the breaker.

        ``sent_at``: when the request left. An answer served to a request that left before
        the latest throttling answer came in does not bring the gap down: the request in
        flight beside one refused with Retry-After: 1 came back served, halved the gap, and the
        next request left inside the pause (found by an outside held-out web). A Retry-After
        holds the host until it ends (``not_before``) whatever else is learned.
        """
        if signal == "ok" and gap_s is not None:
            self.served_gap = gap_s if self.served_gap is None else min(self.served_gap, gap_s)
        if (
            signal == "throttled"
            and http_status == 503
            and retry_after_s is None
            and gap_s is not None
            and self.served_gap is not None
            and gap_s >= self.served_gap / 2.0  # the learned gap's own step: a doubling
        ):
            self.n_unpaced_503 += 1
            signal = "failure"
        if signal in ("ok", "other"):
            before = (
                sent_at is not None
                and self.throttled_at is not None
                and sent_at < self.throttled_at
            )
            self._served(signal, latency_s, lower=not before)
        else:
            if retry_after_s is not None:
                self.not_before = max(self.not_before, now + retry_after_s)
            if signal == "throttled":
                self.n_throttled += 1
                self.throttled_at = now
                # What the host says of our pace, when we kept to it. A probe through an open
                # breaker says the host is still down, not how fast to go, and a request that
                # came after this throttle's own back-off came after a wait we imposed: taken
                # as the gap the host refused, a two-cycle outage taught a minute between
                # requests, recovered 10 % a cycle (the fifth exploratory run).
                if not self.probing:
                    self.min_gap = throttled_gap(
                        self.min_gap, gap_s if not self.failures else None, retry_after_s
                    )
            self._failed(now, latency_s, detail, retry_after_s)
        return signal

    def _served(self, signal: Signal, latency_s: float | None, *, lower: bool = True) -> None:
        if signal == "ok":
            self.n_ok += 1
        else:
            self.n_other += 1
        if latency_s is not None and latency_s >= 0:
            self.latency_s = (
                latency_s if self.latency_s is None else (self.latency_s + latency_s) / 2.0
            )
        self.failures = max(0, self.failures - 1)  # forgiveness: one success, one failure
        self.probing = False
        if self.tripped_at is not None:
            self.tripped_at = None  # a probe got through: the breaker closes
        if self.policy.autothrottle and latency_s is not None and latency_s >= 0:
            target = self._clamp(latency_s / self.policy.target_concurrency)
        else:
            target = self._clamp(self.policy.start_delay_s)  # the static gap
        # Scrapy's rule: move halfway to the target, but jump straight up to a larger one.
        new = max(target, (self.delay + target) / 2.0)
        if (signal == "other" or not lower) and new <= self.delay:
            return  # cheap non-page answers never speed us up, nor stale ones
        self._set(new)

    def _failed(
        self,
        now: float,
        latency_s: float | None,
        detail: str | None,
        retry_after_s: float | None,
    ) -> None:
        policy = self.policy
        self.n_failures += 1
        self.failures += 1
        self.last_failure = detail
        backoff = policy.backoff_base_s * 2.0 ** (self.failures - 1)
        target = 0.0
        if policy.autothrottle and latency_s is not None and latency_s > 0:
            target = latency_s / policy.target_concurrency
        raised = max(self.delay * 2.0, backoff, target, retry_after_s or 0.0)
        if policy.backoff_jitter > 0:
            # Upward only: jitter spreads retries without ever undercutting the back-off.
            raised *= 1.0 + policy.backoff_jitter * self.rng.random()
        self._set(max(self.delay, self._clamp(raised)))  # a failure never lowers the gap
        self.probing = False
        limit = policy.failure_limit
        if limit is not None and self.failures >= limit:
            if self.tripped_at is None:
                self.n_trips += 1
            self.n_opens += 1
            self.tripped_at = now

    # ------------------------------------------------------------------ reporting

    def snapshot(self) -> dict[str, Any]:
        """Plain values for logs and asset metadata (a host's health at the end of a cycle)."""
        return {
            "host": self.host,
            "delay_s": self.delay,
            "max_delay_s": self.max_delay_seen,
            "crawl_delay_s": self.floor,
            "gap_s": self.min_gap,
            "latency_s": self.latency_s,
            "failures": self.failures,
            "breaker_open": self.tripped_at is not None,
            "n_ok": self.n_ok,
            "n_other": self.n_other,
            "n_failures": self.n_failures,
            "n_trips": self.n_trips,
            "n_throttled": self.n_throttled,
            "n_unpaced_503": self.n_unpaced_503,
            "n_pauses": self.n_pauses,
            "last_failure": self.last_failure,
        }


class Throttles:
    """The per-host throttles of one crawl.

    The client makes a fresh one per ``fetch_all`` call; pass your own to keep what was learnt
    across calls (a long-running process) or to inspect it afterwards.
    """

    def __init__(self, policy: ThrottlePolicy | None = None, *, seed: int | None = None) -> None:
        self.policy = policy or ThrottlePolicy()
        self._rng = random.Random(seed)
        self._hosts: dict[str, HostThrottle] = {}

    def for_host(self, host: str, *, floor: float | None = None) -> HostThrottle:
        throttle = self._hosts.get(host)
        if throttle is None:
            throttle = HostThrottle(host, self.policy, floor=floor or 0.0, rng=self._rng)
            self._hosts[host] = throttle
        else:
            throttle.raise_floor(floor)
        return throttle

    def __contains__(self, host: object) -> bool:
        return host in self._hosts

    def __getitem__(self, host: str) -> HostThrottle:
        return self._hosts[host]

    def __len__(self) -> int:
        return len(self._hosts)

    def snapshot(self) -> list[dict[str, Any]]:
        return [self._hosts[h].snapshot() for h in sorted(self._hosts)]
