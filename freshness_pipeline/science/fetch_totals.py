"""What a cycle's requests add up to, per host, cycle and URL class: the counts behind the
metrics users watch (metrics_sql) and behind pricing fetches by bytes (science.cost).

Computing those metrics from fetch_log means opening every file of it: one per host per cycle,
so 24,000 files at 200 hosts and a month of six-hour cycles, which DuckDB took 9 s to count and
20 s to turn into host_metrics, a time that grows with hosts times history. The counts here
add up over cycles, so a cycle keeps them as one small table per host
(:func:`remember_fetches`) and the metrics are sums over it.

Pure polars, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import polars as pl

from freshness_pipeline.science.calibration import is_verified

__all__ = ["CYCLE_DETAIL", "COUNT_COLUMNS", "fetch_counts", "remember_fetches"]

#: How long a cycle keeps its own row (pricing by bytes averages this much); older cycles are
#: summed into one row per calendar month (UTC), so a host's file stops growing with every
#: cycle and the lifetime sums stay exact.
CYCLE_DETAIL = timedelta(days=30)

#: Per group: requests sent; conditional ones; 304 answers; bodies of pages fetched again
#: (changed or unchanged) and how many were unchanged; changes seen; body bytes; errors;
#: 429/503 answers; and on the random verification sample (plan_reason 'verify', an outcome
#: that compared content, a forecast in [0, 1]) its size, the forecasts' sum, the changes seen
#: and the forecasts' variance sum (science.calibration).
COUNT_COLUMNS: dict[str, pl.DataType] = {
    "requests": pl.Int64(),
    "conditional": pl.Int64(),
    "answered_304": pl.Int64(),
    "refetched": pl.Int64(),
    "unchanged": pl.Int64(),
    "changes": pl.Int64(),
    "bytes": pl.Int64(),
    "errors": pl.Int64(),
    "throttled": pl.Int64(),
    "verified": pl.Int64(),
    "verify_forecast": pl.Float64(),
    "verify_changed": pl.Int64(),
    "verify_variance": pl.Float64(),
}


def fetch_counts(requests: pl.DataFrame, by: Sequence[str] = ()) -> pl.DataFrame:
    """:data:`COUNT_COLUMNS` per group of ``by`` over ``requests`` (fetch_log or sent
    fetch_results rows: outcome, http_status, conditional, bytes, plan_reason,
    expected_change); no ``by``: one row over them all."""
    by = list(by)
    outcome = pl.col("outcome")
    forecast = pl.col("expected_change").cast(pl.Float64)
    verified = is_verified()
    status = pl.col("http_status")
    sums = (
        pl.len().alias("requests"),
        pl.col("conditional").fill_null(False).sum().alias("conditional"),
        (status == 304).fill_null(False).sum().alias("answered_304"),
        outcome.is_in(["changed", "unchanged"]).sum().alias("refetched"),
        (outcome == "unchanged").sum().alias("unchanged"),
        (outcome == "changed").sum().alias("changes"),
        pl.col("bytes").fill_null(0).sum().alias("bytes"),
        (outcome == "error").sum().alias("errors"),
        status.is_in([429, 503]).fill_null(False).sum().alias("throttled"),
        verified.sum().alias("verified"),
        forecast.filter(verified).sum().alias("verify_forecast"),
        (outcome == "changed").filter(verified).sum().alias("verify_changed"),
        (forecast * (1.0 - forecast)).filter(verified).sum().alias("verify_variance"),
    )
    if not by:
        return requests.select(*sums).select(pl.col(c).cast(t) for c, t in COUNT_COLUMNS.items())
    counts = requests.group_by(by).agg(*sums)
    return counts.select(*by, *(pl.col(c).cast(t) for c, t in COUNT_COLUMNS.items())).sort(
        by, nulls_last=True
    )


def remember_fetches(totals: pl.DataFrame, requests: pl.DataFrame, now: datetime) -> pl.DataFrame:
    """``totals`` (per ``host``, ``cycle_at``, ``url_class``, with the number of ``cycles``
    each row sums) with cycle ``now``'s ``requests`` counted; a re-run of cycle ``now``
    replaces that cycle's counts. Cycles older than :data:`CYCLE_DETAIL` are summed into one row
    per month (``cycle_at`` the month's first instant); nothing is dropped: the metrics are
    lifetime totals, kept when fetch_log is pruned."""
    cycle = fetch_counts(
        requests.with_columns(cycle_at=pl.lit(now)), ("host", "cycle_at", "url_class")
    ).with_columns(cycles=pl.lit(1, pl.Int64))
    totals = totals.with_columns(pl.col("cycles").fill_null(1))
    same_cycle = (pl.col("cycle_at") == now) & (pl.col("cycles") == 1)
    kept = totals.filter(~same_cycle)
    merged = pl.concat([kept, cycle.select(kept.columns)], how="vertical_relaxed")
    old = pl.col("cycle_at") < now - CYCLE_DETAIL
    by_month = (
        merged.filter(old)
        .with_columns(pl.col("cycle_at").dt.truncate("1mo"))
        .group_by("host", "cycle_at", "url_class")
        .agg(pl.col("cycles").sum(), *(pl.col(c).sum() for c in COUNT_COLUMNS))
    )
    return pl.concat(
        [merged.filter(~old), by_month.select(merged.columns)], how="vertical_relaxed"
    ).sort(["host", "cycle_at", "url_class"], nulls_last=True)
