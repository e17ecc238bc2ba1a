"""The counts a cycle's requests add up to (science.fetch_totals): each one against the rows
it counts, and a re-run cycle replacing its own counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from freshness_pipeline.science.fetch_totals import (
    COUNT_COLUMNS,
    CYCLE_DETAIL,
    fetch_counts,
    remember_fetches,
)
from freshness_pipeline.warehouse import tables

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def requests(*rows: tuple) -> pl.DataFrame:
    """(host, url_class, outcome, http_status, conditional, bytes, plan_reason, forecast)"""
    names = ["host", "url_class", "outcome", "http_status", "conditional", "bytes"]
    names += ["plan_reason", "expected_change"]
    return pl.DataFrame(rows, schema=names, orient="row")


ROWS = requests(
    ("a", "article", "not_modified", 304, True, 0, "due", 0.2),
    ("a", "article", "changed", 200, True, 5000, "verify", 0.4),
    ("a", "article", "unchanged", 200, False, 4000, "verify", 0.1),
    ("a", "article", "new", 200, False, 6000, "new", None),
    ("a", "article", "error", 503, False, 0, "verify", 0.5),  # no content compared
    ("a", None, "error", None, False, 0, "due", 0.3),
    ("a", None, "changed", 200, False, 100, "verify", 1.7),  # a forecast out of [0, 1]
    ("b", "listing", "gone", 404, False, 10, "due", None),
)


def test_each_count_is_what_its_rows_say():
    got = {
        (r["host"], r["url_class"]): r for r in fetch_counts(ROWS, ("host", "url_class")).to_dicts()
    }
    article = got[("a", "article")]
    assert article == {
        "host": "a",
        "url_class": "article",
        "requests": 5,
        "conditional": 2,
        "answered_304": 1,
        "refetched": 2,
        "unchanged": 1,
        "changes": 1,
        "bytes": 15000,
        "errors": 1,
        "throttled": 1,
        "verified": 2,
        "verify_forecast": pytest.approx(0.5),
        "verify_changed": 1,
        "verify_variance": pytest.approx(0.4 * 0.6 + 0.1 * 0.9),
    }
    unclassed = got[("a", None)]
    assert unclassed["requests"] == 2 and unclassed["verified"] == 0
    assert unclassed["errors"] == 1 and unclassed["throttled"] == 0
    assert got[("b", "listing")]["refetched"] == 0
    assert list(tables.FETCH_TOTALS) == ["host", "cycle_at", "url_class", "cycles", *COUNT_COLUMNS]


def test_without_groups_one_row_sums_them_all_and_nothing_counts_zero():
    per_group = fetch_counts(ROWS, ("host", "url_class")).select(list(COUNT_COLUMNS)).sum()
    whole = fetch_counts(ROWS)
    assert whole.height == 1
    assert whole.row(0, named=True) == pytest.approx(per_group.row(0, named=True))
    assert fetch_counts(ROWS.clear()).row(0) == pytest.approx((0,) * len(COUNT_COLUMNS))


def test_cycles_add_up_and_a_rerun_replaces_its_own():
    totals = tables.empty("fetch_totals")
    for k in range(3):
        totals = remember_fetches(totals, ROWS, T0 + timedelta(hours=6 * k))
    assert totals["requests"].sum() == 3 * ROWS.height
    assert totals["cycle_at"].n_unique() == 3
    last = T0 + timedelta(hours=12)
    again = remember_fetches(totals, ROWS.head(2), last)
    assert again["requests"].sum() == 2 * ROWS.height + 2
    assert again.filter(pl.col("cycle_at") < last).equals(totals.filter(pl.col("cycle_at") < last))


def test_cycles_older_than_the_detail_window_sum_into_months_and_the_sums_hold():
    totals = tables.empty("fetch_totals")
    nows = [T0 + timedelta(hours=6 * k) for k in range(4 * 75)]  # 75 days of cycles
    for now in nows:
        totals = remember_fetches(totals, ROWS, now)
    assert totals["requests"].sum() == len(nows) * ROWS.height
    assert totals["cycles"].sum() == len(nows) * 3  # one per cycle and (host, class)
    recent = totals.filter(pl.col("cycle_at") >= nows[-1] - CYCLE_DETAIL)
    assert recent["cycles"].max() == 1
    months = totals.filter(pl.col("cycles") > 1)
    assert sorted(months["cycle_at"].unique().to_list()) == [
        datetime(2026, 1, 1, tzinfo=UTC),
        datetime(2026, 2, 1, tzinfo=UTC),
    ]
    # 120 cycle rows plus two months for each (host, class): bounded, not one per cycle
    assert totals.height <= 3 * (4 * 30 + 1 + 2)
    # a re-run of the last cycle still replaces only its own counts
    again = remember_fetches(totals, ROWS.head(1), nows[-1])
    assert again["requests"].sum() == (len(nows) - 1) * ROWS.height + 1
