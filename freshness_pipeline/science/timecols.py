"""UTC time columns: every science function compares times in one type, microseconds in UTC.

Callers pass frames from Parquet (aware), from users (naive, read as UTC) and dates (sitemap
lastmod); comparing them as they come either fails or, worse, silently shifts by a time zone.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

UTC_US = pl.Datetime("us", "UTC")
#: Microseconds in a day: a difference of UTC_US times divided by it is in days.
DAY_US = 86_400_000_000.0


def duration_days(expr: pl.Expr) -> pl.Expr:
    """A duration (a difference of UTC_US times) in days, as a float."""
    return expr.dt.total_microseconds().cast(pl.Float64) / DAY_US


def cycles_within(now: datetime, window: timedelta, column: str = "cycle_at") -> pl.Expr:
    """Rows of the cycles in ``window`` before ``now`` (``now`` itself excluded: the cycle
    being run has written nothing yet that it may read as its past)."""
    return (pl.col(column) >= now - window) & (pl.col(column) < now)


def as_utc(now: datetime) -> datetime:
    """An aware UTC datetime; a naive one is taken as UTC."""
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)


def utc_literal(now: datetime) -> pl.Expr:
    return pl.lit(as_utc(now)).cast(UTC_US)


def utc_column(df: pl.DataFrame, name: str) -> pl.Expr:
    """Column ``name`` of ``df`` as UTC microseconds, whatever time type it arrived in."""
    dtype = df.schema[name]
    col = pl.col(name)
    if dtype == pl.Null:
        return pl.lit(None, dtype=UTC_US)
    if isinstance(dtype, pl.Datetime):
        col = (
            col.dt.replace_time_zone("UTC")
            if dtype.time_zone is None
            else col.dt.convert_time_zone("UTC")
        )
        return col.dt.cast_time_unit("us")
    if dtype == pl.Date:
        return col.cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    return col.cast(UTC_US)
