"""Page-type cost (science.cost): credits by URL class, and bytes per request of a host's URL
class relative to an average request, shrunk towards the host and global means."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from freshness_pipeline.science.cost import (
    REQUEST_OVERHEAD_BYTES,
    SHRINK_REQUESTS,
    bytes_cost,
    credits_cost,
)
from freshness_pipeline.science.fetch_totals import fetch_counts


def test_credits_by_class_case_blind_with_default():
    df = pl.DataFrame({"url_class": ["Product", " article ", None, "listing"]})
    got = df.select(credits_cost(pl.col("url_class"), {"product": 5, "default": 2})).to_series()
    assert got.to_list() == [5.0, 2.0, 2.0, 2.0]
    plain = df.select(credits_cost(pl.col("url_class"), {"product": 5})).to_series()
    assert plain.to_list() == [5.0, 1.0, 1.0, 1.0]


def _log(rows: list[tuple[str, str, int | None]]) -> pl.DataFrame:
    return pl.DataFrame(
        rows, schema={"host": pl.String, "url_class": pl.String, "bytes": pl.Int64}, orient="row"
    )


def test_bytes_cost_prices_types_by_what_their_requests_transfer():
    # product pages send 50 kB bodies; articles mostly answer 304 (no body)
    log = _log(
        [("a", "product", 50_000)] * 40
        + [("a", "article", 0)] * 36
        + [("a", "article", 20_000)] * 4
    )
    cands = pl.DataFrame(
        {"host": ["a", "a", "a", "elsewhere"], "url_class": ["product", "article", "static", "x"]}
    )
    cost = bytes_cost(cands, log).to_list()
    overall = log["bytes"].mean()
    assert cost[0] > 5 * cost[1]  # a 304-heavy type is cheap, because it is
    # a class never fetched on a host is priced at that host's mean; an unknown host at the mean
    host_mean = (log["bytes"].sum() + SHRINK_REQUESTS * overall) / (log.height + SHRINK_REQUESTS)
    o = REQUEST_OVERHEAD_BYTES
    assert cost[2] == pytest.approx((host_mean + o) / (overall + o))
    assert cost[3] == pytest.approx(1.0)
    # and the average request costs about 1
    assert 0.8 < (40 * cost[0] + 40 * cost[1]) / 80 < 1.2


def test_one_huge_page_does_not_make_its_type_expensive():
    log = _log([("a", "article", 10_000)] * 50 + [("a", "product", 5_000_000), ("a", "x", None)])
    cands = pl.DataFrame({"host": ["a", "a"], "url_class": ["product", "article"]})
    cost = bytes_cost(cands, log).to_list()
    raw_ratio = 5_000_000 / 10_000
    assert cost[1] < cost[0] < raw_ratio * cost[1] / 2


def test_no_history_costs_one():
    cands = pl.DataFrame({"host": ["a"], "url_class": ["product"]})
    assert bytes_cost(cands, _log([])).to_list() == [1.0]
    assert bytes_cost(cands, _log([("a", "product", None)])).to_list() == [1.0]


def test_totals_price_as_the_requests_they_sum():
    rng = np.random.default_rng(3)
    log = _log(
        [
            (f"h{rng.integers(3)}", str(rng.choice(["a", "b", "c"])), int(rng.integers(0, 9000)))
            for _ in range(300)
        ]
    ).with_columns(
        outcome=pl.lit("changed"),
        conditional=False,
        http_status=200,
        plan_reason=pl.lit("due"),
        expected_change=pl.lit(None, pl.Float64),
    )
    cands = pl.DataFrame(
        {"host": ["h0", "h1", "h2", "h9", "h1"], "url_class": ["a", "b", "c", "a", "zzz"]}
    )
    totals = fetch_counts(log, ("host", "url_class"))
    assert totals["requests"].sum() == 300
    assert bytes_cost(cands, totals).to_list() == pytest.approx(bytes_cost(cands, log).to_list())
