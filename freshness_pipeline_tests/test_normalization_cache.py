"""url_candidates normalizes only the URLs it has not seen under the same rules
(candidates.normalize_with_cache): the answers must be exactly the uncached ones, cycle after
cycle, when the inventory grows or shrinks and when a host's strip_params change."""

from __future__ import annotations

import polars as pl

from freshness_pipeline.app.runner import load_seeds, run_cycle
from freshness_pipeline.config import PipelineConfig
from freshness_pipeline.stages.candidates import normalize_inventory, normalize_with_cache
from freshness_pipeline.synthweb import DEFAULT_START
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.storage import Warehouse

RAW = [
    "https://a.example/p?utm_source=x&b=2&a=1",
    "HTTPS://A.Example:443/p?a=1&b=2#top",
    "https://a.example/list?sessionid=9&page=2",
    "https://b.example/x?q=1,2",
    "https://bücher.example/ä",
    "ftp://a.example/file",
    "https://user:pw@a.example/secret",
    "https://b.example/%7euser/",
]


def inventory(urls: list[str]) -> pl.DataFrame:
    """Inventory rows as the inventory stage makes them: partitioned by the URL's host."""
    hosts = [u.split("/")[2].lower().split("@")[-1].split(":")[0] for u in urls]
    return pl.DataFrame({"url": urls, "host": hosts, "source": ["seed"] * len(urls)})


def test_cached_answers_are_the_uncached_ones_and_only_new_urls_are_normalized():
    config = PipelineConfig()
    inv = inventory(RAW)
    first = normalize_with_cache(inv, tables.empty("url_canonical"), config)
    expected = normalize_inventory(inv["url"], config)
    assert first.norm.equals(expected)
    assert first.normalized == len(RAW)
    assert first.cache.height == len(RAW)
    assert first.cache.filter(pl.col("error").is_not_null()).height == 2  # kept, not retried

    again = normalize_with_cache(inv, first.cache, config)
    assert again.norm.equals(expected)
    assert again.normalized == 0 and again.changed_hosts == []

    grown = inventory([*RAW, "https://b.example/new?utm_medium=mail"])
    more = normalize_with_cache(grown, again.cache, config)
    assert more.normalized == 1 and more.changed_hosts == ["b.example"]
    assert more.norm.equals(normalize_inventory(grown["url"], config))

    shrunk = inventory(RAW[3:])
    fewer = normalize_with_cache(shrunk, more.cache, config)
    assert fewer.normalized == 0
    assert "a.example" in fewer.changed_hosts  # its rows left the cache with the inventory
    assert fewer.cache.height == len(RAW) - 3
    assert fewer.norm.equals(normalize_inventory(shrunk["url"], config))


def test_a_hosts_new_strip_params_renormalize_that_host_only():
    inv = inventory(RAW)
    plain = normalize_with_cache(inv, tables.empty("url_canonical"), PipelineConfig())
    configured = PipelineConfig(host_strip_params={"a.example": ("sessionid",)})
    after = normalize_with_cache(inv, plain.cache, configured)
    assert after.norm.equals(normalize_inventory(inv["url"], configured))
    assert "https://a.example/list?page=2" in after.norm["url"].to_list()
    a_rows = plain.cache.filter(pl.col("canonical_host") == "a.example").height
    assert after.normalized == a_rows
    back = normalize_with_cache(inv, after.cache, PipelineConfig())
    assert back.normalized == a_rows
    assert back.norm.equals(plain.norm)


def test_cycles_keep_the_cache_and_plan_from_the_same_candidates(tmp_path):
    """Real cycles (a dry run plans without fetching): the second normalizes nothing, and its
    candidates are the first's; the cache holds every inventory URL once."""
    home = tmp_path / "home"
    seeds = "url\n" + "\n".join(
        f"https://site{i % 3}.example/a/{i}?utm_campaign=z&k={i % 4}" for i in range(60)
    )
    load_seeds(home, seeds.encode(), added_at=DEFAULT_START)
    run_cycle(home, DEFAULT_START, dry_run=True)
    wh = Warehouse(home)
    first = wh.read("url_candidates").sort("url")
    cache = wh.read("url_canonical")
    assert cache.height == wh.read("url_inventory")["url"].n_unique() == 60
    files = sorted(p.stat().st_mtime_ns for p in wh.table_dir("url_canonical").rglob("*.parquet"))
    run_cycle(home, DEFAULT_START.replace(hour=6), dry_run=True)
    second = wh.read("url_candidates").sort("url")
    assert second.select("url", "host", "value").equals(first.select("url", "host", "value"))
    assert first.height == 60 and not first["url"].str.contains("utm_").any()
    unchanged = sorted(
        p.stat().st_mtime_ns for p in wh.table_dir("url_canonical").rglob("*.parquet")
    )
    assert unchanged == files  # nothing new: no host's cache rewritten


def test_candidates_keep_when_a_sitemap_last_listed_each_url():
    """listed_until: the newest sighting of a URL in a sitemap, over its variants, so a later
    complete read that no longer lists it can mark it delisted; seeds set nothing, and neither
    do feeds (they keep recent items only), whose lastmod still counts when read now."""
    from datetime import UTC, datetime, timedelta

    from freshness_pipeline.stages.candidates import canonical_candidates
    from freshness_pipeline.warehouse import tables

    now = datetime(2026, 11, 30, tzinfo=UTC)
    old = now - timedelta(days=2)
    inventory = tables.conform(
        "url_inventory",
        pl.DataFrame(
            {
                "url": [
                    "https://a.example/p?x=1&utm_source=feed",
                    "https://a.example/p?x=1",
                    "https://a.example/p?x=1",
                    "https://a.example/seed-only",
                    "https://a.example/post",
                ],
                "host": ["a.example"] * 5,
                "source": ["sitemap", "sitemap", "seed", "seed", "feed"],
                "first_seen_at": [old] * 5,
                "last_seen_at": [now, old, now, now, now],
                "lastmod": [None, None, None, None, old],
            }
        ),
    )
    rows, invalid = canonical_candidates(inventory, ["a.example"], now)
    got = {
        url: (until, lastmod)
        for url, until, lastmod in rows.select("url", "listed_until", "lastmod").iter_rows()
    }
    assert invalid == 0
    assert got == {
        "https://a.example/p?x=1": (now, None),
        "https://a.example/seed-only": (None, None),
        "https://a.example/post": (None, old),
    }
