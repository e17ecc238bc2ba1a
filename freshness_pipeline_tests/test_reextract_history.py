"""What a `freshness reextract` row is in the crawled copy's history: a new reading of a body the
archive kept, dated when it was derived (just after its host's newest cycle), never at the time
of the row it re-read. So the history of a URL (the README's query) has one row per time, the
changes view has no row for it and its rows each name one page_versions row, `freshness export`
hands it out once (in the window it was derived in, too), `freshness diff` shows it as the
newest reading, and the next real change is diffed against it. Real cycles over the synthetic
web, the CLI as a user runs it."""

from __future__ import annotations

import json
import os
from datetime import timedelta

import duckdb
import polars as pl
import pytest

from freshness_pipeline.app.reextract import DERIVED_AFTER
from freshness_pipeline.app.runner import run_cycle
from freshness_pipeline.synthweb import DEFAULT_START, SyntheticWeb
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.crawls import crawl_as_class, hand_page, shop_world
from freshness_pipeline_tests.support import readme_history_of, run_freshness

S = DEFAULT_START
HOUR = timedelta(hours=1)
T0, T1, T2 = S, S + 6 * HOUR, S + 12 * HOUR
#: a price field and narrower text for the product class, after the first two cycles
CHANGED = """\
[url_classes.product]
selectors = ["h1", ".price-box"]

[url_classes.product.fields]
price = ".price"
"""
# the lamp changes before T1 and again before T2; the desk never does
PAGES = {"/products/lamp": (3, 9), "/products/desk": ()}


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """Cycles at T0 and T1 under the default extractor, `freshness reextract` after the class
    changed, then the cycle at T2 (where the lamp changed again)."""
    os.environ.setdefault("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    workdir = tmp_path_factory.mktemp("reextract-history")
    home = workdir / "home"
    pages = [
        hand_page(i, path, "product", changes) for i, (path, changes) in enumerate(PAGES.items())
    ]
    world = shop_world(pages, seed=21)
    with SyntheticWeb(world) as web:
        crawl_as_class(web, home, workdir, "product", [T0, T1])
        (home / "freshness.toml").write_text(CHANGED)
        done = run_freshness("reextract", home=home)
        assert done.returncode == 0, done.stderr
        after_reextract = {
            "versions": Warehouse(home).read("page_versions"),
            "changes": Warehouse(home).read("changes"),
            "state": Warehouse(home).read("url_state"),
        }
        web.set_now(T2)
        run_cycle(home, T2, budget=1000)
        urls = {p.path: web.url(p) for p in world.pages}
    return {"home": home, "url": urls, "after_reextract": after_reextract}


def _reextracted(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.filter(pl.col("outcome") == "reextracted")


def test_a_reextraction_is_dated_after_the_newest_cycle_not_at_the_body_it_reread(home):
    seen = home["after_reextract"]
    rows = _reextracted(seen["versions"])
    assert rows.height == len(PAGES)
    assert set(rows["observed_at"]) == {T1 + DERIVED_AFTER}
    # the bodies it re-read: the lamp's of T1 (its last change), the desk's of T0
    lamp = rows.filter(pl.col("url") == home["url"]["/products/lamp"]).row(0, named=True)
    fetched = seen["versions"].filter(
        (pl.col("url") == lamp["url"]) & (pl.col("outcome") != "reextracted")
    )
    assert sorted(fetched["observed_at"]) == [T0, T1]
    assert lamp["payload_digest"] == fetched.sort("observed_at")["payload_digest"][-1]
    assert json.loads(lamp["fields"])["price"].startswith("$")
    # one row per URL and time, and url_state moved to the re-extraction
    assert seen["versions"].select("url", "observed_at").n_unique() == seen["versions"].height
    state = seen["state"].filter(pl.col("url").is_in(list(home["url"].values())))
    assert set(state["version_observed_at"]) == {T1 + DERIVED_AFTER}
    # a reading is no change
    assert seen["changes"]["changed_at"].to_list() == [T1]


def test_the_readme_history_of_one_url_lists_each_reading_once_in_order(home):
    history = readme_history_of(home["url"]["/products/lamp"])
    wh = Warehouse(home["home"])
    wh.ensure_views()
    con = duckdb.connect(str(wh.duckdb_path), read_only=True)
    try:
        steps = con.sql(history).pl()
    finally:
        con.close()
    assert steps["observed_at"].to_list() == [T0, T1, T1 + DERIVED_AFTER, T2]
    assert steps["outcome"].to_list() == ["new", "changed", "reextracted", "changed"]


def test_changes_name_one_row_each_and_the_next_change_is_diffed_against_the_reextraction(home):
    wh = Warehouse(home["home"])
    changes = wh.read("changes").sort("changed_at")
    versions = wh.read("page_versions")
    lamp = home["url"]["/products/lamp"]
    assert changes["url"].to_list() == [lamp, lamp]  # T1 and T2; nothing for the re-extraction
    for side in ("changed_at", "previous_observed_at"):
        joined = changes.drop_nulls(side).join(
            versions, left_on=["url", side], right_on=["url", "observed_at"], how="left"
        )
        assert joined.height == changes.drop_nulls(side).height, side  # one row each
        assert joined["outcome"].null_count() == 0, side
    t2 = changes.row(-1, named=True)
    assert t2["previous_observed_at"] == T1 + DERIVED_AFTER
    # the re-extraction read the T1 price, so the T2 change is a price change from it, not
    # a price field appearing out of nothing
    old, new = json.loads(t2["old_values"]), json.loads(t2["new_values"])
    assert "price" in t2["changed_fields"]
    assert old["price"] and new["price"] and old["price"] != new["price"]


def test_export_hands_out_one_row_per_url_and_the_reextraction_in_its_own_window(home):
    def rows(*window: str) -> list[dict]:
        done = run_freshness("export", *window, home=home["home"])
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in done.stdout.splitlines()]

    everything = rows("--since", T0.isoformat())
    assert sorted(r["url"] for r in everything) == sorted(home["url"].values())
    desk = next(r for r in everything if r["url"] == home["url"]["/products/desk"])
    assert desk["outcome"] == "reextracted" and desk["fields"]["price"].startswith("$")
    # a consumer that exported up to T1 gets the new reading with the next window
    later = rows("--since", (T1 + timedelta(seconds=1)).isoformat(), "--until", T2.isoformat())
    assert sorted(r["url"] for r in later) == sorted(home["url"].values())
    assert {r["outcome"] for r in later} == {"reextracted"}
    # and the window of the body it re-read still has the row the fetch took
    before = rows("--since", T1.isoformat(), "--until", (T1 + DERIVED_AFTER).isoformat())
    assert [(r["url"], r["outcome"]) for r in before] == [
        (home["url"]["/products/lamp"], "changed")
    ]


def test_diff_shows_the_reextraction_as_the_newest_reading_of_the_version_before(home):
    lamp = home["url"]["/products/lamp"]
    at = (T1 + DERIVED_AFTER).isoformat()
    done = run_freshness("diff", lamp, "--at", at, home=home["home"])
    assert done.returncode == 0, done.stderr
    header = [line for line in done.stdout.splitlines() if line.startswith(("---", "+++"))]
    assert any("(changed)" in line and line.startswith("---") for line in header), header
    assert any("(reextracted)" in line and line.startswith("+++") for line in header), header
    assert "+price: " in done.stdout  # the field the new extraction reads
    # the change before it is still the change it was
    done = run_freshness("diff", lamp, "--at", T1.isoformat(), home=home["home"])
    assert done.returncode == 0, done.stderr
    assert "(new)" in done.stdout and "(changed)" in done.stdout
    assert "reextracted" not in done.stdout
