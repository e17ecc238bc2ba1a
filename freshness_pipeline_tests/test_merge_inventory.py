"""url_inventory's merge of a cycle's sightings into what it had: one row per (url, source)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

from freshness_pipeline.stages.inventory import merge_inventory
from freshness_pipeline.warehouse import tables

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _found(
    lastmod: datetime | None, at: datetime, url: str = "https://h.example/a"
) -> pl.DataFrame:
    return tables.conform(
        "url_inventory",
        pl.DataFrame(
            {"url": [url], "host": ["h.example"], "source": ["sitemap"], "lastmod": [lastmod]},
            schema={
                "url": pl.String,
                "host": pl.String,
                "source": pl.String,
                "lastmod": tables.UTC_TIME,
            },
        ),
    ).with_columns(first_seen_at=pl.lit(None, tables.UTC_TIME))


def _lastmod(frame: pl.DataFrame) -> datetime | None:
    return frame["lastmod"][0]


def test_the_newest_lastmod_stays_but_a_placeholder_in_the_future_never_does() -> None:
    """A sitemap's 2099-12-31 placeholder, once read, outlived its correction for good: the
    merge kept the largest date, and the hints ignore a URL whose lastmod is in the future
    (found by an exploratory run)."""
    empty = tables.empty("url_inventory")
    first = merge_inventory(empty, _found(T0, T0), T0)
    assert _lastmod(first) == T0
    # an older date from another listing, or none, leaves the newest
    later = T0 + timedelta(hours=6)
    assert _lastmod(merge_inventory(first, _found(T0 - timedelta(days=3), later), later)) == T0
    assert _lastmod(merge_inventory(first, _found(None, later), later)) == T0
    # a placeholder in the future is not kept, so the next real date is
    placeholder = merge_inventory(first, _found(datetime(2099, 12, 31, tzinfo=UTC), later), later)
    assert _lastmod(placeholder) == T0
    fixed = T0 + timedelta(hours=10)
    then = T0 + timedelta(hours=12)
    assert _lastmod(merge_inventory(placeholder, _found(fixed, then), then)) == fixed
    # one stored before this rule goes at the next merge
    stored = first.with_columns(lastmod=pl.lit(datetime(2099, 12, 31, tzinfo=UTC)))
    assert _lastmod(merge_inventory(stored, _found(None, then), then)) is None
    # within a day ahead (clocks, time zones written wrong) is still a date
    soon = then + timedelta(hours=20)
    assert _lastmod(merge_inventory(first, _found(soon, then), then)) == soon
    assert merge_inventory(first, _found(soon, then), then)["first_seen_at"][0] == T0
