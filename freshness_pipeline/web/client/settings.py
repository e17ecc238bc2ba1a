"""What one cycle's fetching may do: timeouts, byte caps, concurrency, the fetch window and
the throttle's knobs, checked when they are made. Every part of the client reads them, and
robots.txt, sitemaps and discovery open their sessions with them, so they stand apart."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from freshness_pipeline.science.retry_after import MAX_RETRY_AFTER_S
from freshness_pipeline.web.throttle import ThrottlePolicy

__all__ = ["DEFAULT_USER_AGENT", "USER_AGENT_PREFIX", "FetchSettings"]

DEFAULT_USER_AGENT = "freshness-pipeline/0.1 (+https://example.invalid/freshness-pipeline)"
USER_AGENT_PREFIX = "freshness-pipeline/"


@dataclass(frozen=True)
class FetchSettings:
    """Knobs for one cycle's fetching; the defaults are polite for unknown public sites."""

    user_agent: str = DEFAULT_USER_AGENT
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    total_timeout: float = 60.0
    max_body_bytes: int = 10 * 1024 * 1024
    max_decompressed_bytes: int = 50 * 1024 * 1024
    global_concurrency: int = 16
    host_concurrency: int = 2
    cycle_time_limit_s: float | None = None
    # The fetch window the plan sized each host's share by (seconds). A 429/503 whose
    # Retry-After ends within it (or within the time limit, when there is one) pauses the host
    # and resumes it; only a longer one defers the host's remaining fetches to later cycles.
    fetch_window_s: float = 600.0
    # The longest Retry-After kept: the planner holds a host that long across cycles, so the
    # default is the planner's own limit (see science.retry_after for why one day).
    max_retry_after_s: float = MAX_RETRY_AFTER_S
    # The cycle's now (timezone-aware): the reference for a response's dates when it carries no
    # Date header (content age, an HTTP-date Retry-After), so that no decision reads the wall
    # clock. None only for callers outside a cycle.
    cycle_now: datetime | None = None
    # Unforgiven failures (transport errors, timeouts, 5xx, 429/503; each success forgives one)
    # after which a host's circuit breaker opens and the rest of its queue is deferred: a dead
    # host must not eat the cycle one timeout at a time. None disables the breaker.
    host_failure_limit: int | None = 3
    # Latency-aware pacing (see web/throttle.py). The gap between request starts to a host
    # follows latency / target concurrency, never below its Crawl-delay, never above
    # max_delay_s (unless the Crawl-delay is larger).
    autothrottle: bool = True
    autothrottle_target_concurrency: float = 1.0
    autothrottle_start_delay_s: float = 0.0
    max_delay_s: float = 60.0
    # Exponential back-off on failures: the gap becomes at least base * 2^(n-1) after n
    # unforgiven failures (and at least double the previous gap), raised by up to `jitter`.
    backoff_base_s: float = 1.0
    backoff_jitter: float = 0.25
    # How long an open breaker stays open before one probe is let through; matters only when a
    # Throttles object is reused across fetch_all calls (within one cycle, open means done).
    breaker_cooldown_s: float = 600.0
    # A host that has answered in this cycle and then fails ``host_failure_limit`` times is
    # flaky, not down: its breaker lets a probe through after this cool-down (doubling each
    # time, at most ``breaker_retries`` times) when that fits the fetch window.
    breaker_retry_s: float = 5.0
    breaker_retries: int = 3

    def __post_init__(self) -> None:
        if not self.user_agent.startswith(USER_AGENT_PREFIX):
            raise ValueError(f"user_agent must start with {USER_AGENT_PREFIX!r}")
        for name in ("connect_timeout", "read_timeout", "total_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        for name in (
            "max_body_bytes",
            "max_decompressed_bytes",
            "global_concurrency",
            "host_concurrency",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.cycle_time_limit_s is not None and self.cycle_time_limit_s < 0:
            raise ValueError("cycle_time_limit_s must not be negative")
        if not self.fetch_window_s > 0:
            raise ValueError("fetch_window_s must be positive")
        if self.max_retry_after_s < 0:
            raise ValueError("max_retry_after_s must not be negative")
        if self.cycle_now is not None and self.cycle_now.utcoffset() is None:
            raise ValueError("cycle_now must be timezone-aware")
        self.throttle_policy()  # validates the throttle knobs

    def throttle_policy(self) -> ThrottlePolicy:
        return ThrottlePolicy(
            autothrottle=self.autothrottle,
            target_concurrency=self.autothrottle_target_concurrency,
            start_delay_s=self.autothrottle_start_delay_s,
            max_delay_s=self.max_delay_s,
            backoff_base_s=self.backoff_base_s,
            backoff_jitter=self.backoff_jitter,
            failure_limit=self.host_failure_limit,
            breaker_cooldown_s=self.breaker_cooldown_s,
            breaker_retry_s=self.breaker_retry_s,
            breaker_retries=self.breaker_retries,
        )
