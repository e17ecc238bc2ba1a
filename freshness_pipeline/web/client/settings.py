"""What one cycle's fetching may do: timeouts, byte caps, concurrency, the fetch window and
the throttle's knobs, checked when they are made. Every part of the client reads them, and
robots.txt, sitemaps and discovery open their sessions with them, so they stand apart."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from freshness_pipeline.science.knobs import require
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
    # The longest one host's robots.txt and sitemap reads may take in a cycle (its Crawl-delay
    # waits included): every host's page fetches wait for discovery to end, so a host with a long
    # Crawl-delay and dozens of sitemap files must not hold them up; what it did not read is
    # read in the next cycles (each starts the index's children at another place).
    discovery_window_s: float = 60.0
    # The most sitemap and index files one host's walk asks for in a cycle (redirect hops and
    # 304s count): a site with more has them read over several cycles, those never read or
    # whose index lastmod moved first (web.sitemaps.reads).
    max_sitemap_files: int = 50
    # The longest Retry-After kept: the planner holds a host that long across cycles, so the
    # default is the planner's own limit (see science.retry_after for why one day).
    max_retry_after_s: float = MAX_RETRY_AFTER_S
    # The cycle's now (timezone-aware): the reference for a response's dates when it carries no
    # Date header (content age, an HTTP-date Retry-After), so that no decision reads the wall
    # clock. None only for callers outside a cycle.
    cycle_now: datetime | None = None
    # How each host is paced and when its circuit breaker opens (web/throttle.py): latency-aware
    # gaps never below the Crawl-delay, exponential back-off on failures, and a breaker after
    # ``throttle.failure_limit`` unforgiven failures so that a dead host does not eat the
    # cycle one timeout at a time.
    throttle: ThrottlePolicy = field(default_factory=ThrottlePolicy)

    def __post_init__(self) -> None:
        if not self.user_agent.startswith(USER_AGENT_PREFIX):
            raise ValueError(f"user_agent must start with {USER_AGENT_PREFIX!r}")
        timeouts = ("connect_timeout", "read_timeout", "total_timeout")
        require(self, timeouts, lambda v: v > 0, "be positive")
        counts = (
            "max_body_bytes",
            "max_decompressed_bytes",
            "global_concurrency",
            "host_concurrency",
            "max_sitemap_files",
        )
        require(self, counts, lambda v: v >= 1, "be at least 1")
        if self.cycle_time_limit_s is not None and self.cycle_time_limit_s < 0:
            raise ValueError("cycle_time_limit_s must not be negative")
        if not self.fetch_window_s > 0:
            raise ValueError("fetch_window_s must be positive")
        if not self.discovery_window_s > 0:
            raise ValueError("discovery_window_s must be positive")
        if self.max_retry_after_s < 0:
            raise ValueError("max_retry_after_s must not be negative")
        if self.cycle_now is not None and self.cycle_now.utcoffset() is None:
            raise ValueError("cycle_now must be timezone-aware")
