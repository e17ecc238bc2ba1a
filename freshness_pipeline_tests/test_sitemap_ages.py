"""Sitemap lastmod as the date of a content change, through real cycles on the synthetic web:
a host without a usable Last-Modified header but with a truthful sitemap earns trust for its
lastmod, and url_state then keeps the quiet time the lastmod proves on each change it dates."""

from __future__ import annotations

import os

import polars as pl
import pytest

from freshness_pipeline.synthweb import DEFAULT_START, SiteSpec, SyntheticWeb, build_world
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.crawls import crawl

DAY_S = 86_400.0


def test_a_truthful_sitemap_dates_changes_on_a_host_without_last_modified(tmp_path):
    os.environ.setdefault("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    world = build_world(
        5, start=DEFAULT_START, horizon_days=3, sites=[SiteSpec("plain", "no_validators", 60)]
    )
    home = tmp_path / "home"
    dated_checked = 0
    with SyntheticWeb(world) as web:
        truth = web.truth()
        wh = Warehouse(home)
        for now in crawl(web, home, tmp_path, 8):
            plan = wh.read("revisit_plan").filter(pl.col("lastmod_age_days").is_not_null())
            results = wh.read("fetch_results").select("url", "outcome", "content_age_days")
            assert results["content_age_days"].null_count() == results.height  # no header
            for url, age in (
                plan.join(results, on="url")
                .filter(pl.col("outcome") == "changed")
                .select("url", "lastmod_age_days")
                .iter_rows()
            ):
                # the web stands still within a cycle: the lastmod is the true last change
                said = truth.page(url).last_modified_at(now)
                assert age == pytest.approx((now.timestamp() - said) / DAY_S, abs=1.5 / DAY_S)
                dated_checked += 1
        state = wh.read("url_state")
        plans = wh.read("revisit_plan")

    assert plans["lastmod_dates"].all()  # trust earned by the last cycle
    assert dated_checked >= 3
    dated = (
        state.select("obs_interval_days", "obs_changed", "obs_age_days")
        .drop_nulls("obs_age_days")
        .explode(["obs_interval_days", "obs_changed", "obs_age_days"])
        .drop_nulls("obs_age_days")
    )
    assert dated.height >= dated_checked
    assert dated["obs_changed"].all()
    assert (
        (dated["obs_age_days"] > 0) & (dated["obs_age_days"] <= dated["obs_interval_days"])
    ).all()
