"""`freshness reextract` against a home built by real cycles over the synthetic web: after a
class's selectors and fields change, fingerprints and versions are re-derived from the WARC
archive without a request, and the next cycle finds the unchanged pages unchanged."""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from freshness_pipeline.app.runner import load_seeds, run_cycle
from freshness_pipeline.config import load_config
from freshness_pipeline.science.fingerprint import FINGERPRINT_VERSION, class_record
from freshness_pipeline.synthweb import DEFAULT_START, SyntheticWeb
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.crawls import crawl_as_class, hand_page, shop_world
from freshness_pipeline_tests.support import run_freshness

S = DEFAULT_START
HOUR = timedelta(hours=1)
T0, T1, T2 = S, S + 6 * HOUR, S + 12 * HOUR
#: What the classes extract after the change (before it, the default extractor).
CHANGED = """\
[url_classes.product]
selectors = ["h1", ".price-box"]

[url_classes.product.fields]
price = ".price"

[url_classes.article]
selectors = ["h1"]
"""
CLASSES = {"/products/lamp": "product", "/products/desk": "product", "/about": "article"}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Two cycles under the default extractor, the web left running (at T1) for the tests
    that count its requests or fetch again."""
    os.environ.setdefault("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    workdir = tmp_path_factory.mktemp("reextract")
    home = workdir / "home"
    pages = [hand_page(i, path, cls) for i, (path, cls) in enumerate(CLASSES.items())]
    world = shop_world(pages, seed=7)
    with SyntheticWeb(world) as web:
        web.set_now(T0)
        seeds = pl.read_csv(web.seeds_csv(workdir / "seeds.csv", variants=False))
        paths = {web.url(p): p.path for p in world.pages}
        seeds = seeds.with_columns(
            url_class=pl.col("url").replace_strict(paths).replace_strict(CLASSES)
        )
        load_seeds(home, seeds.write_csv().encode(), added_at=T0)
        for now in (T0, T1):
            web.set_now(now)
            run_cycle(home, now, budget=1000)
        yield {"home": home, "web": web, "url": {p.path: web.url(p) for p in world.pages}}


@pytest.fixture
def home(built, tmp_path) -> Path:
    """A copy of the built home with the changed config, so each test starts from the same."""
    copy = tmp_path / "home"
    shutil.copytree(built["home"], copy)
    (copy / "freshness.toml").write_text(CHANGED)
    return copy


def state(home: Path) -> pl.DataFrame:
    return Warehouse(home).read("url_state").sort("url")


def reextracted(home: Path) -> pl.DataFrame:
    return Warehouse(home).read("page_versions").filter(pl.col("outcome") == "reextracted")


def test_the_home_starts_with_every_page_under_the_default_extractor(built):
    rows = state(built["home"])
    assert rows.height == len(CLASSES)
    assert rows["fingerprint"].null_count() == 0
    assert set(rows["fingerprint_version"]) == {FINGERPRINT_VERSION}
    assert reextracted(built["home"]).is_empty()


def test_reextract_stores_what_a_fetch_computes_without_a_request(built, home):
    web = built["web"]
    before = len(web.request_log)
    done = run_freshness("reextract", home=home)
    assert done.returncode == 0, done.stderr
    assert len(web.request_log) == before, "reextract contacted the web"
    assert "re-extracted 3 pages on 1 host; 0 without an archived body" in done.stdout
    config = load_config(home)
    rows = state(home)
    for row in rows.iter_rows(named=True):
        extraction = config.extraction_for(row["url_class"])
        assert row["fingerprint_version"] == extraction.version != FINGERPRINT_VERSION
        # what a fetch of the page as served now computes (the pages never change)
        with urllib.request.urlopen(row["url"], timeout=10) as resp:  # noqa: S310 (loopback)
            fetched = class_record(extraction, resp.read(), resp.headers.get("Content-Type"))
        assert row["fingerprint"] == fetched.fingerprint, row["url"]
    versions = reextracted(home)
    assert versions.height == 3
    assert set(versions["fingerprint_version"]) == set(rows["fingerprint_version"])
    lamp = versions.filter(pl.col("url") == built["url"]["/products/lamp"]).row(0, named=True)
    assert json.loads(lamp["fields"])["price"], "the new price field was not extracted"
    assert lamp["warc_filename"] and lamp["warc_length"] > 0
    # observed when the archived body was, which url_state now points at
    observed = rows.filter(pl.col("url") == lamp["url"])["version_observed_at"][0]
    assert lamp["observed_at"] == observed
    # the versions the cycles took are kept beside the re-extractions; no change is counted
    wh = Warehouse(home)
    assert wh.read("page_versions").filter(pl.col("outcome") == "new").height == 3
    assert wh.read("changes").height == Warehouse(built["home"]).read("changes").height


def _next_cycle(built, home: Path) -> pl.DataFrame:
    web = built["web"]
    web.set_now(T2)
    try:
        run_cycle(home, T2, budget=1000)
    finally:
        web.set_now(T1)
    return Warehouse(home).read("fetch_log").filter(pl.col("fetched_at") == T2)


def test_the_next_cycle_finds_the_unchanged_pages_unchanged(built, home):
    assert run_freshness("reextract", home=home).returncode == 0
    log = _next_cycle(built, home)
    pages = log.filter(pl.col("url").is_in(list(built["url"].values())))
    assert not pages.is_empty()
    assert set(pages["outcome"]) <= {"unchanged", "not_modified"}, pages["outcome"].to_list()
    assert Warehouse(home).read("changes").height == Warehouse(built["home"]).read("changes").height


def test_without_reextract_the_next_cycle_compares_with_the_archived_body_read_again(built, home):
    """Without `freshness reextract` the next cycle reads the archived bodies again itself
    (stages/rereading.py) and compares its fetches with them: the unchanged pages are
    re-extractions ('new', page_versions 'reextracted'), and no change is counted."""
    log = _next_cycle(built, home)
    pages = log.filter(pl.col("url").is_in(list(built["url"].values())))
    assert not pages.is_empty()
    assert set(pages["outcome"]) == {"new"}, pages["outcome"].to_list()
    # and they go with their validators: a 304 is the archived body's reading (after an
    # upgrade every page was fetched whole once, 2.4x the bytes: an exploratory run)
    assert pages["conditional"].all() and (pages["http_status"] == 304).all(), pages
    versions = Warehouse(home).read("page_versions").filter(pl.col("observed_at") == T2)
    assert set(versions["outcome"]) == {"reextracted"}
    assert Warehouse(home).read("changes").height == Warehouse(built["home"]).read("changes").height


def test_a_page_that_changed_when_its_class_did_is_a_change(tmp_path):
    """A class's fields edited while one of its pages changed: the next fetch was a silent
    re-extraction (outcome 'new', page_versions 'reextracted'), and the change (a new price)
    never reached `changes` or the notifications (found by an exploratory run). Compared with
    its archived body read under the new settings, it is a change."""
    os.environ.setdefault("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    home = tmp_path / "home"
    pages = [
        hand_page(0, "/products/lamp", "product", changes=(9,)),
        hand_page(1, "/products/desk", "product"),
    ]
    world = shop_world(pages, seed=7)
    with SyntheticWeb(world) as web:
        crawl_as_class(web, home, tmp_path, "product", [T0, T1])
        (home / "freshness.toml").write_text(CHANGED)  # the price is read from now on
        web.set_now(T2)  # the lamp changed at T0 + 9 h
        run_cycle(home, T2, budget=1000)
        lamp, desk = (web.url(p) for p in pages)
    wh = Warehouse(home)
    log = wh.read("fetch_log").filter(pl.col("fetched_at") == T2)
    outcomes = dict(zip(log["url"], log["outcome"], strict=True))
    assert outcomes == {lamp: "changed", desk: "new"}, outcomes  # desk: a re-extraction
    change = wh.read("changes").filter(pl.col("changed_at") == T2)
    assert change["url"].to_list() == [lamp]
    assert "price" in change["changed_fields"][0] and "text" in change["changed_fields"][0]
    # the old price is the one the archived body says under the new settings, not a null
    # from the version read before the price was configured (found by an exploratory run:
    # "headline: null -> ..." for a field that was only added)
    old, new = (json.loads(change[c][0]) for c in ("old_values", "new_values"))
    assert old["price"] is not None and old["price"] != new["price"], (old, new)


def test_url_class_limits_it_to_that_class(built, home):
    done = run_freshness("reextract", "--url-class", "article", home=home)
    assert done.returncode == 0, done.stderr
    assert "re-extracted 1 page on 1 host" in done.stdout
    versions = dict(state(home).select("url_class", "fingerprint_version").iter_rows())
    assert versions["article"] == load_config(home).extraction_for("article").version
    assert versions["product"] == FINGERPRINT_VERSION
    assert set(reextracted(home)["url_class"]) == {"article"}


def test_a_class_its_urls_enter_by_a_new_match_pattern_is_reextracted_before_the_next_cycle(
    built, home
):
    """A class added with ``match`` patterns re-extracted nothing: classes were applied only by
    a cycle, whose fetches of the class's pages then went whole (found by an outside check).
    Seeds that name no class take the pattern's class now; a seed's own class still wins."""
    wh = Warehouse(home)
    about = built["url"]["/about"]
    for table in ("seeds", "url_inventory"):  # the products' seed rows as if they named none
        rows = wh.read(table)
        unclassed = rows.with_columns(
            url_class=pl.when(pl.col("url") == about).then("url_class").otherwise(None)
        )
        wh.write_partitions(table, sorted(set(rows["host"])), unclassed)
    (home / "freshness.toml").write_text(
        CHANGED
        + """
[url_classes.gadget]
match = ['/products/', '/about$']
selectors = ["h1", ".price"]
"""
    )
    done = run_freshness("reextract", "--url-class", "gadget", home=home)
    assert done.returncode == 0, done.stderr
    assert "re-extracted 2 pages on 1 host" in done.stdout
    classes = dict(state(home).select("url", "url_class").iter_rows())
    assert classes == {
        built["url"]["/products/lamp"]: "gadget",
        built["url"]["/products/desk"]: "gadget",
        built["url"]["/about"]: "article",  # its seed row says so
    }
    gadget = load_config(home).extraction_for("gadget").version
    assert set(reextracted(home)["fingerprint_version"]) == {gadget}
    log = _next_cycle(built, home)
    products = log.filter(pl.col("url").str.contains("/products/"))
    assert products.height == 2
    assert set(products["outcome"]) <= {"unchanged", "not_modified"}, products["outcome"]
    assert set(state(home).filter(pl.col("url").str.contains("/products/"))["url_class"]) == {
        "gadget"
    }


def test_a_second_reextract_is_a_no_op(home):
    assert run_freshness("reextract", home=home).returncode == 0
    files = {p: p.stat().st_mtime_ns for p in (home / "warehouse").rglob("*.parquet")}
    again = run_freshness("reextract", home=home)
    assert again.returncode == 0, again.stderr
    # said as such, on one line (it was "re-extracted 0 pages on 0 hosts", wrapped when piped)
    assert again.stdout.strip() == (
        "nothing to re-extract: no page's version is of an older extraction than its class's "
        "(--force re-extracts them anyway)"
    )
    assert {p: p.stat().st_mtime_ns for p in (home / "warehouse").rglob("*.parquet")} == files


def test_force_redoes_a_page_without_piling_up_versions(home):
    assert run_freshness("reextract", home=home).returncode == 0
    first = reextracted(home).sort("url")
    done = run_freshness("reextract", "--force", home=home)
    assert done.returncode == 0, done.stderr
    assert "re-extracted 3 pages" in done.stdout
    assert reextracted(home).sort("url").equals(first)


def test_pages_without_an_archived_body_are_counted_and_left(built, home):
    lamp = built["url"]["/products/lamp"]
    wh = Warehouse(home)
    rows = wh.read("url_state").with_columns(
        archived=pl.when(pl.col("url") == lamp).then(None).otherwise("archived")
    )
    wh.write_partitions("url_state", sorted(set(rows["host"])), rows)
    done = run_freshness("reextract", home=home)
    assert done.returncode == 0, done.stderr
    assert "re-extracted 2 pages on 1 host; 1 without an archived body" in done.stdout
    left = state(home).filter(pl.col("url") == lamp)
    assert left["fingerprint_version"][0] == FINGERPRINT_VERSION


def test_bad_input_exits_2_naming_the_known_classes(home, tmp_path):
    done = run_freshness("reextract", "--url-class", "prodcut", home=home)
    assert done.returncode == 2
    assert "prodcut" in done.stderr and "article, product" in done.stderr
    assert reextracted(home).is_empty()
    empty = run_freshness("reextract", home=tmp_path / "nothing")
    assert empty.returncode == 2 and "no warehouse" in empty.stderr


def test_a_busy_home_exits_75_and_changes_nothing(home):
    with Warehouse(home).exclusive("a test holding the home"):
        done = run_freshness("reextract", home=home)
    assert done.returncode == 75, done.stderr
    assert set(state(home)["fingerprint_version"]) == {FINGERPRINT_VERSION}
