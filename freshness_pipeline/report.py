"""The metrics users watch, computed by SQL over the DuckDB views (what `freshness report` shows
and what anyone can re-run in their own DuckDB session).

- share_304: of the conditional requests, how many the server answered 304 (validators work);
- unchanged_share: of the 200 bodies, how many had the same content fingerprint (wasted bytes);
- requests_per_change: requests sent per change detected (the cost of one useful observation);
- expected_age_h: the value-weighted expected time our copies have been stale, from each page's
  rate and the time since we last saw it (Cho and Garcia-Molina's age metric): the freshness lag.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from freshness_pipeline.storage import Warehouse

_FETCH_METRICS = """
    count(*) AS requests,
    count(*) FILTER (WHERE conditional) AS conditional,
    round(count(*) FILTER (WHERE http_status = 304) / nullif(count(*) FILTER (WHERE conditional), 0), 3)
        AS share_304,
    round(count(*) FILTER (WHERE outcome = 'unchanged') / nullif(count(*) FILTER (WHERE http_status = 200), 0), 3)
        AS unchanged_share,
    count(*) FILTER (WHERE outcome = 'changed') AS changes,
    round(count(*) / nullif(count(*) FILTER (WHERE outcome = 'changed'), 0), 2) AS requests_per_change,
    round(sum(bytes) / nullif(count(*) FILTER (WHERE outcome = 'changed'), 0)) AS bytes_per_change,
    count(*) FILTER (WHERE outcome = 'error') AS errors,
    count(*) FILTER (WHERE http_status IN (429, 503)) AS throttled
"""

_STATE_METRICS = """
    count(*) AS urls,
    count(*) FILTER (WHERE status = 'active') AS active,
    count(*) FILTER (WHERE status = 'new') AS new,
    count(*) FILTER (WHERE status = 'gone') AS gone,
    count(*) FILTER (WHERE status = 'blocked') AS blocked,
    count(*) FILTER (WHERE status = 'error') AS error,
    round(median(change_rate) FILTER (WHERE status = 'active'), 3) AS median_rate_per_day,
    round(24 * sum(value * (age_d - (1 - exp(-change_rate * age_d)) / greatest(change_rate, 1e-9)))
        FILTER (WHERE status = 'active')
        / nullif(sum(value) FILTER (WHERE status = 'active'), 0), 2) AS expected_age_h
"""


def _state_source() -> str:
    return (
        "(SELECT *, greatest(date_diff('microsecond', last_seen_at, $now::TIMESTAMPTZ), 0)"
        " / 86400e6 AS age_d FROM url_state)"
    )


def report_by(warehouse: Warehouse, key: str, now: datetime) -> pl.DataFrame:
    """Metrics grouped by 'host' or 'url_class' (fetch_log joined to url_state for the class)."""
    if key not in ("host", "url_class"):
        raise ValueError("report key must be 'host' or 'url_class'")
    state_sql = (
        f"SELECT coalesce({key}, '(none)') AS {key}, {_STATE_METRICS} "  # noqa: S608
        f"FROM {_state_source()} GROUP BY 1"
    )
    if key == "host":
        log_sql = f"SELECT host, {_FETCH_METRICS} FROM fetch_log GROUP BY 1"  # noqa: S608
    else:
        log_sql = (
            f"SELECT coalesce(s.url_class, '(none)') AS url_class, {_FETCH_METRICS} "  # noqa: S608
            "FROM fetch_log f LEFT JOIN url_state s USING (url) GROUP BY 1"
        )
    sql = (
        f"SELECT * FROM ({state_sql}) s FULL JOIN ({log_sql}) f USING ({key}) "  # noqa: S608
        f"ORDER BY {key}"
    )
    return warehouse.query(sql, {"now": now})


def report_totals(warehouse: Warehouse, now: datetime) -> pl.DataFrame:
    sql = (
        f"SELECT * FROM (SELECT {_STATE_METRICS} FROM {_state_source()}) "  # noqa: S608
        f"CROSS JOIN (SELECT {_FETCH_METRICS} FROM fetch_log)"
    )
    return warehouse.query(sql, {"now": now})


def latest_cycle_time(warehouse: Warehouse) -> datetime:
    """The newest cycle's ``now``: reports are as of the data, not of the wall clock, so a
    simulated or backfilled history reads the same any day."""
    frame = warehouse.query("SELECT max(fetched_at) AS t FROM fetch_log")
    latest = frame["t"][0] if frame.height else None
    if latest is None:
        frame = warehouse.query("SELECT max(added_at) AS t FROM seeds")
        latest = frame["t"][0] if frame.height else None
    if latest is None:
        raise ValueError("nothing seeded or fetched yet")
    return latest
