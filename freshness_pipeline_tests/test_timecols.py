"""science/timecols.py: time columns of any type compared as UTC microseconds."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import polars as pl

from freshness_pipeline.science.timecols import UTC_US, as_utc, utc_column, utc_literal

NOON = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def test_aware_naive_and_date_columns_meet_in_one_type() -> None:
    df = pl.DataFrame(
        {
            "aware": [NOON.astimezone(timezone(timedelta(hours=2)))],
            "naive": [NOON.replace(tzinfo=None)],
            "day": [date(2026, 3, 2)],
            "none": [None],
        }
    )
    out = df.select(utc_column(df, name).alias(name) for name in df.columns)
    assert all(dtype == UTC_US for dtype in out.schema.values())
    assert out.row(0) == (NOON, NOON, NOON - timedelta(hours=12), None)
    assert df.select(utc_literal(NOON.replace(tzinfo=None))).item() == NOON
    assert as_utc(NOON.replace(tzinfo=None)) == as_utc(NOON) == NOON
