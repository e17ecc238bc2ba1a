"""Retry-After across cycles: which hosts asked us, with a 429 or 503, to stay away until later.

The pause a server asks for can outlast a cycle; a cycle ten minutes after "come back tomorrow"
must not knock again. A hold is measured in cycle time: a fetch's ``fetched_at`` is its cycle's
``now``, so the hold ends at ``fetched_at + retry_after_s`` whatever the wall clock says, and a
backfill or a simulated cycle sees exactly the holds a live run would have seen. The inventory
stage reads the last cycle's answers (fetch_results) each cycle and carries the holds still
running in the host's robots row (``retry_until``), so no cycle reads fetch_log history for
them; a held host's robots.txt and sitemaps wait, and the plan gives it no capacity.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

__all__ = [
    "MAX_RETRY_AFTER_S",
    "THROTTLE_STATUSES",
    "TOO_MANY_REQUESTS",
    "asks_to_slow_down",
    "held_hosts",
    "retry_holds",
]

MAX_RETRY_AFTER_S = 86_400.0
"""The longest Retry-After honoured, in seconds (one day).

A server alone decides the header, so a hostile or broken one could silence a host for years
with a single answer; a cap is needed. One day honours in full what well-behaved servers ask:
maintenance windows and rate limits run from minutes to hours, and daily quotas reset within a
day. A host that wants us away for longer loses little by the cap: it answers 429 again and the
hold re-arms, at a cost of one request a day (the client stops a host at its first 429 or 503).
"""

#: "Too Many Requests" (RFC 6585 §4): an answer about our pace, never about the page
TOO_MANY_REQUESTS = 429
THROTTLE_STATUSES = (TOO_MANY_REQUESTS, 503)
"""The answers whose Retry-After asks for a pause (RFC 9110 §10.2.3, RFC 6585 §4)."""


def asks_to_slow_down(status: pl.Expr, retry_after_s: pl.Expr) -> pl.Expr:
    """An answer that speaks of our pace, not of the page or of the host failing: a 429, or any
    answer with a Retry-After. The host's learned pace (science.capacity) and its hold
    (:func:`retry_holds`) answer it; counted as the page failing, three 429s in a row put a
    page in error status for a day, and counted as the host failing, one 429 of a cold start
    cost the host the next cycle (found by an exploratory run)."""
    return (status == TOO_MANY_REQUESTS).fill_null(False) | retry_after_s.is_not_null()


def retry_holds(
    answers: pl.DataFrame,
    now: datetime,
    *,
    carried: pl.DataFrame | None = None,
    max_s: float = MAX_RETRY_AFTER_S,
) -> pl.DataFrame:
    """``host, retry_until``: the hosts a 429/503 Retry-After still keeps away at ``now``.

    ``answers`` are fetch rows (host, fetched_at, http_status, retry_after_s: fetch_results or
    fetch_log); ``carried`` the holds kept so far (host, retry_until). Each answer holds its host
    until ``fetched_at`` plus its Retry-After, capped at ``max_s``; the latest end wins. Answers
    from after ``now`` are ignored, so a backfill as of an earlier time is held only by what had
    been answered by then; a hold ends at its instant (``retry_until > now``).
    """
    pause_us = (pl.col("retry_after_s").clip(0.0, max_s) * 1_000_000).cast(pl.Int64)
    fresh = answers.filter(
        pl.col("http_status").is_in(THROTTLE_STATUSES)
        & pl.col("retry_after_s").is_not_null()
        & (pl.col("fetched_at") <= now)
    ).select(
        pl.col("host").cast(pl.String),
        (pl.col("fetched_at") + pl.duration(microseconds=pause_us)).alias("retry_until"),
    )
    if carried is not None:
        kept = carried.select(pl.col("host").cast(pl.String), pl.col("retry_until"))
        fresh = pl.concat([fresh, kept.cast(fresh.schema)])
    return (
        fresh.group_by("host")
        .agg(pl.col("retry_until").max())
        .filter(pl.col("retry_until") > now)
        .sort("host")
    )


def held_hosts(robots: pl.DataFrame, now: datetime) -> pl.DataFrame:
    """``host, retry_until`` of the robots rows whose hold still runs at ``now``."""
    return robots.select("host", "retry_until").filter(pl.col("retry_until") > now).sort("host")
