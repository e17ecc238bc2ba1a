"""Configured fields end to end: a shop on the synthetic web whose freshness.toml gives one
class a ``price = ".price"`` field, another schema.org JSON-LD, and a third its price field
only after two cycles; real cycles over loopback HTTP while the prices move, then
page_versions, changes and the README's "price changes" query are read back."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import duckdb
import polars as pl
import pytest

from freshness_pipeline.app.runner import load_seeds, run_cycle
from freshness_pipeline.config import extractor_version
from freshness_pipeline.science.fingerprint import FINGERPRINT_VERSION
from freshness_pipeline.synthweb import DEFAULT_START, SyntheticWeb, World
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.crawls import hand_page, shop_world
from freshness_pipeline_tests.support import readme_sql_blocks

S = DEFAULT_START
HOUR = timedelta(hours=1)
T0, T1, T2, T3 = (S + 6 * k * HOUR for k in range(4))
#: What the home's classes extract: the seeds put each product page in one of them.
CONFIG = """\
[url_classes.product.fields]
price = ".price"

[url_classes.offer]
json_ld = true
"""
#: Added before the T2 cycle: the class "item" gets its price field late.
LATE = '\n[url_classes.item.fields]\nprice = ".price"\n'
SEEDED_CLASS = {"/products/chair": "offer", "/products/desk": "item"}


def _world() -> World:
    pages = [
        hand_page(0, "/products/lamp", "product", changes=(3, 9)),  # a new price at T1 and at T2
        hand_page(1, "/products/chair", "product", changes=(3,)),  # seeded as "offer": JSON-LD
        hand_page(2, "/products/desk", "product", changes=(15,)),  # seeded as "item": new at T3
        hand_page(3, "/about", "article"),
    ]
    # honest: ETags and 304s, so a page is re-extracted only if the plan asks for its body
    return shop_world(pages, seed=5)


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    os.environ.setdefault("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    workdir = tmp_path_factory.mktemp("fields")
    home = workdir / "home"
    world = _world()
    with SyntheticWeb(world) as web:
        web.set_now(S)
        seeds = pl.read_csv(web.seeds_csv(workdir / "seeds.csv", variants=False))
        paths = {web.url(p): p.path for p in world.pages}
        seeds = seeds.with_columns(
            url_class=pl.col("url")
            .replace_strict(paths)
            .replace_strict(SEEDED_CLASS, default=pl.col("url_class"))
        )
        load_seeds(home, seeds.write_csv().encode(), added_at=S)
        (home / "freshness.toml").write_text(CONFIG)
        summaries = {}
        for now in (T0, T1, T2, T3):
            if now == T2:
                (home / "freshness.toml").write_text(CONFIG + LATE)
            web.set_now(now)
            summaries[now] = run_cycle(home, now, budget=1000).outcomes
        urls = {p.path: web.url(p) for p in world.pages}
        prices = {
            (p.path, t): world.price(p, p.version_at(t))
            for p in world.pages
            for t in (T0, T1, T2, T3)
        }
    Warehouse(home).ensure_views()
    return {"home": home, "url": urls, "price": prices, "summaries": summaries}


def sql(home: Path, query: str) -> pl.DataFrame:
    con = duckdb.connect(str(home / "freshness.duckdb"), read_only=True)
    try:
        return con.sql(query).pl()
    finally:
        con.close()


def versions(shop, path: str) -> dict:
    """A page's versions by when they were observed: (outcome, fields)."""
    frame = Warehouse(shop["home"]).read("page_versions").filter(pl.col("url") == shop["url"][path])
    return {
        row["observed_at"]: (row["outcome"], json.loads(row["fields"]))
        for row in frame.iter_rows(named=True)
    }


def changes(shop, path: str) -> list[dict]:
    frame = Warehouse(shop["home"]).read("changes").filter(pl.col("url") == shop["url"][path])
    return sorted(frame.iter_rows(named=True), key=lambda row: row["changed_at"])


def test_a_css_field_is_kept_with_every_version_and_its_change_named(shop):
    price = shop["price"]
    lamp = versions(shop, "/products/lamp")
    assert {t: outcome for t, (outcome, _) in lamp.items()} == {
        T0: "new",
        T1: "changed",
        T2: "changed",
    }
    for t, (_, fields) in lamp.items():
        assert fields["price"] == f"${price['/products/lamp', t]}"
        # the defaults stay beside it, and the structured data's name and availability under
        # the names the class leaves free (its price is the CSS field's)
        assert set(fields) == {"title", "text", "price", "name", "availability"}
    rows = changes(shop, "/products/lamp")
    assert [row["changed_at"] for row in rows] == [T1, T2]
    for row, (old, new) in zip(rows, ((T0, T1), (T1, T2)), strict=True):
        assert "price" in row["changed_fields"]
        assert json.loads(row["old_values"])["price"] == f"${price['/products/lamp', old]}"
        assert json.loads(row["new_values"])["price"] == f"${price['/products/lamp', new]}"
    # configured fields count in the fingerprint: their class has its own version
    log = (
        Warehouse(shop["home"])
        .read("fetch_log")
        .filter(pl.col("url") == shop["url"]["/products/lamp"])
    )
    assert set(log["fingerprint_version"]) == {extractor_version((), {"price": ".price"})}


def test_json_ld_fields_are_read_from_the_structured_data(shop):
    price = shop["price"]
    chair = versions(shop, "/products/chair")
    assert sorted((t, outcome) for t, (outcome, _) in chair.items()) == [
        (T0, "new"),
        (T1, "changed"),
    ]
    for t, (_, fields) in chair.items():
        assert fields["price"] == price["/products/chair", t]  # schema.org's, without the $
        assert fields["name"] == "Product chair"
        assert fields["availability"] == "https://schema.org/InStock"
    (row,) = changes(shop, "/products/chair")
    assert "price" in row["changed_fields"] and "name" not in row["changed_fields"]
    assert json.loads(row["old_values"]) == {"price": price["/products/chair", T0]}
    assert json.loads(row["new_values"]) == {"price": price["/products/chair", T1]}


def test_a_class_without_configuration_keeps_the_default_fields(shop):
    about = versions(shop, "/about")
    assert list(about) == [T0]
    assert set(about[T0][1]) == {"title", "text"}


def test_a_field_added_later_re_extracts_then_reports_the_next_price_change(shop):
    """The item class gets its price field before the T2 cycle: its page has not changed, and
    an honest server would answer 304, yet the plan fetches the body again (the stored
    fingerprint is another extractor's) so the version holds the price at once; the change
    at T3 is then a change with the old and the new price, not a second re-extraction."""
    price = shop["price"]
    desk = versions(shop, "/products/desk")
    assert {t: outcome for t, (outcome, _) in desk.items()} == {
        T0: "new",
        T2: "reextracted",
        T3: "changed",
    }
    assert desk[T0][1]["price"] == price["/products/desk", T0]  # the JSON-LD's, by default
    assert desk[T2][1]["price"] == f"${price['/products/desk', T2]}"
    (row,) = changes(shop, "/products/desk")
    assert row["changed_at"] == T3
    assert json.loads(row["old_values"])["price"] == f"${price['/products/desk', T2]}"
    assert json.loads(row["new_values"])["price"] == f"${price['/products/desk', T3]}"
    # the other classes' fingerprints kept their meaning: nothing else was re-extracted
    outcomes = Warehouse(shop["home"]).read("page_versions")["outcome"].to_list()
    assert outcomes.count("reextracted") == 1
    # and the cycle's summary says so: a re-extraction, not a page new to the crawl
    assert shop["summaries"][T2].get("reextracted") == 1
    assert "new" not in shop["summaries"][T2] and shop["summaries"][T0]["new"] == 4
    log = (
        Warehouse(shop["home"])
        .read("fetch_log")
        .filter(pl.col("url") == shop["url"]["/products/desk"])
    )
    by_time = dict(zip(log["fetched_at"], log["fingerprint_version"], strict=True))
    assert by_time[T1] == FINGERPRINT_VERSION
    assert by_time[T2] == by_time[T3] == extractor_version((), {"price": ".price"})


def test_the_readme_price_query_lists_every_price_change_of_the_day(shop):
    query = next(b for b in readme_sql_blocks() if "'$.price'" in b)
    got = sql(shop["home"], query)
    url, price = shop["url"], shop["price"]
    expected = [
        (
            url["/products/desk"],
            T3,
            f"${price['/products/desk', T2]}",
            f"${price['/products/desk', T3]}",
        ),
        (
            url["/products/lamp"],
            T2,
            f"${price['/products/lamp', T1]}",
            f"${price['/products/lamp', T2]}",
        ),
        (
            url["/products/lamp"],
            T1,
            f"${price['/products/lamp', T0]}",
            f"${price['/products/lamp', T1]}",
        ),
        (url["/products/chair"], T1, price["/products/chair", T0], price["/products/chair", T1]),
    ]
    assert sorted(got.rows()) == sorted(expected)
