"""Retention and privacy of the crawled copy: the ``[url_classes.C.retention]`` and
``[retention]`` settings, read from freshness.toml and then applied by real cycles over the
synthetic web on loopback, with what reaches the Parquet files and the WARC archive read back."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from freshness_pipeline.app.runner import load_seeds, run_cycle
from freshness_pipeline.config import ClassRetention, ConfigError, load_config
from freshness_pipeline.synthweb import DEFAULT_START, SyntheticWeb, World
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.archive import (
    ArchivedOriginal,
    ArchiveReader,
    archive_dir_for,
    iter_records,
    list_warcs,
)
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.crawls import hand_page, shop_world

RETAINED = """\
[url_classes.product.fields]
price = ".price"
sku = ".sku"

[url_classes.product.retention]
versions_days = 30
exclude_fields = ["sku"]
keep_history = false

[url_classes.listing.retention]
versions_days = 7.5

[retention]
archive_days = 90
"""


def test_retention_settings_are_read_per_class(tmp_path):
    (tmp_path / "freshness.toml").write_text(RETAINED)
    config = load_config(tmp_path)
    assert config.retention_for("product") == ClassRetention(30.0, ("sku",), False)
    assert config.retention_for("listing") == ClassRetention(7.5)
    assert config.retention_for("article") == ClassRetention()
    assert config.retention_for(None).keeps_everything
    assert config.archive_days == 90.0
    # a class with retention only keeps the default extraction and its fingerprint version
    assert config.extraction_for("listing") == config.extraction_for("article")


def test_the_defaults_keep_everything(tmp_path):
    (tmp_path / "freshness.toml").write_text('[url_classes.product.fields]\nprice = ".price"\n')
    config = load_config(tmp_path)
    assert config.retention_for("product").keeps_everything and config.archive_days is None
    assert not config.class_retention


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[retention]\narchive_days = 0\n", r"retention.archive_days must be a positive"),
        ("[retention]\narchive_days = true\n", r"retention.archive_days must be a positive"),
        ("[retention]\nversions_days = 3\n", r"\[retention\] takes only archive_days"),
        (
            "[url_classes.p.retention]\nkeep = 1\n",
            r"\[url_classes.p.retention\] takes only versions_days, exclude_fields, "
            r"keep_history, not keep",
        ),
        ("[url_classes.p]\nretention = 3\n", r"\[url_classes.p.retention\] takes only"),
        (
            "[url_classes.p.retention]\nversions_days = -1\n",
            r"url_classes.p.retention.versions_days must be a positive number of days",
        ),
        (
            "[url_classes.p.retention]\nkeep_history = 'no'\n",
            r"url_classes.p.retention.keep_history must be true or false",
        ),
        (
            '[url_classes.p.fields]\nprice = ".price"\n[url_classes.p.retention]\n'
            'exclude_fields = ["emial"]\n',
            r"exclude_fields: 'emial' is not a field of the class \(its fields: availability, "
            r"name, price\)",
        ),
        (
            '[url_classes.p.retention]\nexclude_fields = ["text"]\n',
            r"exclude_fields: 'text' is every version's own column",
        ),
        (
            "[url_classes.p.retention]\nexclude_fields = [1]\n",
            r"url_classes.p.retention.exclude_fields must be a list of non-empty strings",
        ),
    ],
)
def test_bad_retention_is_named(tmp_path, text, message):
    (tmp_path / "freshness.toml").write_text(text)
    with pytest.raises(ConfigError, match=message) as caught:
        load_config(tmp_path)
    assert "freshness.toml" in str(caught.value)


def test_json_ld_fields_can_be_excluded(tmp_path):
    text = "[url_classes.offer]\njson_ld = true\n[url_classes.offer.retention]\n"
    (tmp_path / "freshness.toml").write_text(text + 'exclude_fields = ["availability"]\n')
    assert load_config(tmp_path).retention_for("offer").exclude_fields == ("availability",)
    # by default too (a sold item's values are read unless json_ld = false), but not when off
    (tmp_path / "freshness.toml").write_text(
        '[url_classes.offer.retention]\nexclude_fields = ["price"]\n'
    )
    assert load_config(tmp_path).retention_for("offer").exclude_fields == ("price",)
    (tmp_path / "freshness.toml").write_text(
        text.replace("true", "false") + 'exclude_fields = ["price"]\n'
    )
    with pytest.raises(ConfigError, match="'price' is not a field of the class"):
        load_config(tmp_path)


# ---- real cycles ----------------------------------------------------------------------------

S = DEFAULT_START
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
T0, T1, T2, T3 = (S + 6 * k * HOUR for k in range(4))
#: 0.4 days = 9.6 hours: what T0 wrote is expired by the T2 cycle, not by T1's
HOME_CONFIG = """\
[url_classes.product.fields]
price = ".price"
heading = "h1"

[url_classes.product.retention]
exclude_fields = ["price"]

[url_classes.offer.fields]
price = ".price"

[url_classes.offer.retention]
keep_history = false

[url_classes.article.retention]
versions_days = 0.4

[retention]
archive_days = 0.4
"""
SEEDED_CLASS = {"/products/chair": "offer", "/products/desk": "offer"}


def _world() -> World:
    pages = [
        hand_page(0, "/products/lamp", "product", changes=(3, 9)),  # new prices at T1 and T2
        hand_page(1, "/products/chair", "product", changes=(3, 9)),  # seeded "offer"
        hand_page(2, "/products/desk", "product"),  # seeded "offer", never changes
        hand_page(3, "/about", "article"),  # never changes: 304s, revisits
        hand_page(4, "/news", "article", changes=(9,)),  # changed at T2
    ]
    return shop_world(pages, seed=5)


def _files(home: Path, table: str) -> pl.DataFrame:
    """Every row of every Parquet file of a table, as stored (no schema applied)."""
    paths = sorted((home / "warehouse" / table).glob("host=*/cycle-*.parquet"))
    if not paths:
        return tables.empty(table)
    return pl.concat([pl.read_parquet(p) for p in paths], how="diagonal_relaxed")


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    os.environ.setdefault("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    workdir = tmp_path_factory.mktemp("retention")
    home = workdir / "home"
    world = _world()
    after: dict = {}
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
        (home / "freshness.toml").write_text(HOME_CONFIG)
        for now in (T0, T1, T2, T3):
            web.set_now(now)
            outcome = run_cycle(home, now, budget=1000)
            after[now] = {
                "versions": _files(home, "page_versions"),
                "changes": _files(home, "changes"),
                "warcs": set(list_warcs(archive_dir_for(home))),
                "notes": list(outcome.notes),
            }
        urls = {p.path: web.url(p) for p in world.pages}
    return {"home": home, "url": urls, "after": after}


def _of(frame: pl.DataFrame, shop, *paths: str) -> pl.DataFrame:
    return frame.filter(pl.col("url").is_in([shop["url"][p] for p in paths]))


def test_an_excluded_field_never_reaches_the_history_files(shop):
    final = {"versions": _files(shop["home"], "page_versions")}
    final["changes"] = _files(shop["home"], "changes")
    for moment, files in [*shop["after"].items(), ("final", final)]:
        lamp = _of(files["versions"], shop, "/products/lamp")
        assert lamp.height >= 1, moment
        for text in lamp["fields"]:
            fields = json.loads(text)
            assert "price" not in fields and "$" not in "".join(fields.get("heading", "")), moment
            assert fields["heading"].startswith("Product lamp"), moment
        # another class's price is written as configured
        offers = _of(files["versions"], shop, "/products/chair", "/products/desk")
        assert all("price" in json.loads(t) for t in offers["fields"]), moment
        for row in _of(files["changes"], shop, "/products/lamp").iter_rows(named=True):
            assert "price" not in (row["changed_fields"] or []), moment
            for values in (row["old_values"], row["new_values"]):
                assert "price" not in json.loads(values or "{}"), moment
    # the lamp's price moved at T1 and at T2: both changes are recorded, without it
    lamp_changes = _of(final["changes"], shop, "/products/lamp")
    assert sorted(lamp_changes["changed_at"].to_list()) == [T1, T2]


def test_keep_history_false_keeps_one_version_per_url_and_no_changes(shop):
    for moment, files in shop["after"].items():
        offers = _of(files["versions"], shop, "/products/chair", "/products/desk")
        assert offers.height == 2 and offers["url"].n_unique() == 2, moment
        assert _of(files["changes"], shop, "/products/chair", "/products/desk").is_empty()
    chair = {
        moment: _of(files["versions"], shop, "/products/chair").row(0, named=True)
        for moment, files in shop["after"].items()
    }
    # the newest version is the one kept: the chair changed at T1 and at T2
    assert [(r["observed_at"], r["outcome"]) for r in chair.values()] == [
        (T0, "new"),
        (T1, "changed"),
        (T2, "changed"),
        (T2, "changed"),
    ]
    # the lamp (another class) keeps every version
    lamp = _of(shop["after"][T3]["versions"], shop, "/products/lamp")
    assert sorted(lamp["observed_at"].to_list()) == [T0, T1, T2]


def test_versions_days_drops_old_rows_of_its_class_only(shop):
    def observed(moment, *paths):
        frame = _of(shop["after"][moment]["versions"], shop, *paths)
        return sorted(frame["observed_at"].to_list())

    # 0.4 days: the T0 versions are kept at T1; at T2 the news page's goes (it changed at T2),
    # the about page's stays: it never changed, so its one version is what it says now
    assert observed(T1, "/about", "/news") == [T0, T0]
    assert observed(T2, "/news") == [T2] and observed(T3, "/news") == [T2]
    assert observed(T2, "/about") == [T0] and observed(T3, "/about") == [T0]
    assert _expired_articles(shop, T2) == [] and _expired_articles(shop, T3) == []
    assert _of(shop["after"][T3]["changes"], shop, "/news")["changed_at"].to_list() == [T2]
    # other classes keep their T0 rows
    assert observed(T3, "/products/lamp")[0] == T0
    assert any("page_versions rows" in n for n in shop["after"][T2]["notes"])
    assert not any("page_versions rows" in n for n in shop["after"][T0]["notes"])


def _expired_articles(shop, moment) -> list[str]:
    """URLs with a version observed before the cut-off of ``moment``'s cycle, class article,
    that a newer version of the URL replaced."""
    versions = shop["after"][moment]["versions"]
    frame = versions.filter(
        (pl.col("url_class") == "article")
        & (pl.col("observed_at") < moment - 0.4 * DAY)
        & (pl.col("observed_at") < pl.col("observed_at").max().over("url"))
    )
    return frame["url"].to_list()


def test_archive_days_removes_old_warc_files_but_keeps_referred_originals(shop):
    home = shop["home"]
    archive = archive_dir_for(home)
    stamp = {t: t.strftime("%Y%m%d%H%M%S") for t in (T0, T1, T2, T3)}
    after = shop["after"]
    assert any(stamp[T0] in n for n in after[T1]["warcs"])  # 0.4 days: kept at T1
    assert not any(stamp[T0] in n for n in after[T2]["warcs"])
    assert not any(stamp[T1] in n for n in after[T3]["warcs"])
    assert any("WARC files" in n for n in after[T2]["notes"])
    warcs = list_warcs(archive)
    assert set(warcs) == after[T3]["warcs"]
    retained = [n for n in warcs if "-retained-" in n]
    assert retained
    # every kept revisit still replays, some from an original carried out of a pruned file
    reader = ArchiveReader(archive)
    carried = 0
    revisits = 0
    for name in warcs:
        for record in iter_records(archive / name, payloads=False):
            if record.record_type != "revisit":
                continue
            revisits += 1
            original = reader.find_original(record)
            carried += original.warc_filename in retained
            response = reader.read_response(name, record.offset)
            assert response.status == 200 and response.body
    assert revisits and carried
    # the tables point only at files that are there
    versions = _files(home, "page_versions").drop_nulls("warc_filename")
    assert set(versions["warc_filename"]) <= set(warcs)
    for row in versions.iter_rows(named=True):
        got = reader.read_response(row["warc_filename"], row["warc_offset"], row["warc_length"])
        assert got.status == 200
    state = Warehouse(home).read("url_state").drop_nulls("archived")
    assert state.height
    for text in state["archived"]:
        original = ArchivedOriginal.from_json(text)
        assert original.warc_filename in warcs
