"""Last-Modified as the date of a content change, through real cycles on the synthetic web: the
client reads the age off each body, url_state keeps it only for hosts whose Last-Modified has
moved with the content, and never for one that lags or stamps every response "now" (their
truthful sitemaps may date changes instead: test_sitemap_ages)."""

from __future__ import annotations

import os

import polars as pl
import pytest

from freshness_pipeline.synthweb import DEFAULT_START, SiteSpec, SyntheticWeb, build_world
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.crawls import crawl

DAY_S = 86_400.0


def test_ages_reach_url_state_for_an_honest_host_only(tmp_path):
    os.environ.setdefault("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    world = build_world(
        11,
        start=DEFAULT_START,
        horizon_days=3,
        sites=[
            SiteSpec("honest", "honest", 40),
            SiteSpec("frozen", "stale_lastmod", 40),
            SiteSpec("stamped", "volatile", 20),
        ],
    )
    home = tmp_path / "home"
    with SyntheticWeb(world) as web:
        truth = web.truth()
        wh = Warehouse(home)
        host_of = {name: web.hosts[name] for name in ("honest", "frozen", "stamped")}
        sitemap_ages: set[float] = set()  # every site's sitemap is truthful: it may date too
        for now in crawl(web, home, tmp_path, 6):
            sitemap_ages.update(wh.read("revisit_plan")["lastmod_age_days"].drop_nulls())
            results = wh.read("fetch_results").filter(pl.col("outcome").is_in(["new", "changed"]))
            for url, host, age in results.select("url", "host", "content_age_days").iter_rows():
                if host == host_of["stamped"]:
                    assert age is None, url  # Last-Modified "now" dates nothing
                    continue
                page = truth.page(url)
                # what each server claims: the true last change, or the page's birth
                said = page.last_modified_at(now) if host == host_of["honest"] else page.born_at
                assert age == pytest.approx((now.timestamp() - said) / DAY_S, abs=1.5 / DAY_S)
        state = wh.read("url_state")

    ages = state.select(
        "host",
        "url",
        "obs_interval_days",
        "obs_changed",
        "obs_age_days",
    ).with_columns(
        n_dated=pl.col("obs_age_days").list.drop_nulls().list.len().fill_null(0),
    )
    per_host = dict(ages.group_by("host").agg(pl.col("n_dated").sum()).iter_rows())
    assert per_host[host_of["honest"]] >= 3
    # born-date or "now" Last-Modified dates nothing: what ages these hosts have, their
    # (truthful) sitemap lastmod gave
    for name in ("frozen", "stamped"):
        kept = ages.filter(pl.col("host") == host_of[name])["obs_age_days"].explode().drop_nulls()
        assert set(kept) <= sitemap_ages, name
    dated = ages.filter(pl.col("n_dated") > 0).explode(
        ["obs_interval_days", "obs_changed", "obs_age_days"]
    )
    dated = dated.filter(pl.col("obs_age_days").is_not_null())
    # a date only ever on a change, inside the interval it was seen in
    assert dated["obs_changed"].all()
    assert (dated["obs_age_days"] <= dated["obs_interval_days"]).all()
    assert (dated["obs_age_days"] > 0).all()
