"""warehouse/retention.py on a home written by hand: which page_versions and changes rows each
class's retention expires (a row's class is its URL's class in url_state, its own when
url_state no longer has it), what an expired WARC file does to the rows that pointed into it,
the summary the cycle's notes and the retention asset read, a second prune that finds nothing,
and the writer lock: held by this process it prunes, held by another it prunes nothing and
says who has the home."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from freshness_pipeline.config import load_config
from freshness_pipeline.warehouse.archive import HttpExchange, archive_dir_for, list_warcs
from freshness_pipeline.warehouse.archive.writer import ArchiveWriter
from freshness_pipeline.warehouse.retention import RetentionSummary, prune_history, prune_home
from freshness_pipeline.warehouse.storage import Warehouse

NOW = datetime(2026, 3, 2, 12, tzinfo=UTC)
DAY = timedelta(days=1)
HOST = "shop.test"
OTHER = "blog.test"

CONFIG = """\
[url_classes.product.retention]
versions_days = 30
keep_history = false

[url_classes.listing.retention]
versions_days = 7.5
"""


def url(path: str, host: str = HOST) -> str:
    return f"http://{host}{path}"


def write_state(
    wh: Warehouse, host: str, classes: dict[str, str], gone: tuple[str, ...] = ()
) -> None:
    wh.write_partition(
        "url_state",
        host,
        pl.DataFrame(
            {
                "url": [url(p, host) for p in classes],
                "host": [host] * len(classes),
                "url_class": list(classes.values()),
                "status": ["gone" if p in gone else "active" for p in classes],
            }
        ),
    )


def write_versions(
    wh: Warehouse, host: str, days_ago: float, rows: dict[str, str], *, changes: bool = True
) -> None:
    """One cycle's page_versions (path -> the class the row was written with) and a changes
    row for each."""
    at = NOW - days_ago * DAY
    paths = list(rows)
    # the columns both tables key their rows by
    keys = {"url": [url(p, host) for p in paths], "host": [host] * len(paths)}
    versions = {
        **keys,
        "observed_at": [at] * len(paths),
        "outcome": ["changed"] * len(paths),
        "url_class": list(rows.values()),
        "fingerprint": [f"{p}@{days_ago}" for p in paths],
    }
    wh.append_cycle("page_versions", host, at, pl.DataFrame(versions))
    if changes:
        wh.append_cycle(
            "changes", host, at, pl.DataFrame({**keys, "changed_at": [at] * len(paths)})
        )


def kept(wh: Warehouse, table: str, host: str = HOST) -> set[tuple[str, float]]:
    """(path, days before NOW) of every row of a history table."""
    at = "observed_at" if table == "page_versions" else "changed_at"
    frame = wh.read(table, [host])
    return {
        (u.split(host, 1)[1], round((NOW - t) / DAY, 2))
        for u, t in zip(frame["url"], frame[at], strict=True)
    }


@pytest.fixture
def home(tmp_path: Path) -> Warehouse:
    (tmp_path / "freshness.toml").write_text(CONFIG)
    wh = Warehouse(tmp_path)
    # /moved was an article when its rows were written and is a listing now; /gone left
    # url_state (its rows keep their own class, listing); /dead answers 404 now
    classes = {"/p": "product", "/l": "listing", "/a": "article", "/moved": "listing"}
    write_state(wh, HOST, {**classes, "/dead": "listing"}, gone=("/dead",))
    write_versions(wh, HOST, 90, {"/l": "listing"})
    write_versions(wh, HOST, 60, {"/p": "product", "/l": "listing", "/a": "article"})
    write_versions(
        wh,
        HOST,
        20,
        {"/p": "product", "/l": "listing", "/moved": "article"},
    )
    # a changes row has no class of its own: only url_state's, which /gone no longer has
    write_versions(wh, HOST, 20, {"/gone": "listing"}, changes=False)
    write_versions(wh, HOST, 10, {"/dead": "listing"})
    write_versions(wh, HOST, 5, {"/p": "product", "/l": "listing"})
    write_versions(wh, HOST, 0, {"/p": "product", "/a": "article"})
    write_state(wh, OTHER, {"/x": "article"})
    write_versions(wh, OTHER, 60, {"/x": "article"})
    return wh


def test_each_class_expires_by_its_own_retention(home: Warehouse) -> None:
    summary = prune_history(home, load_config(home.home), NOW)
    # product keeps its newest version only, and no changes; listing 7.5 days of both, but
    # for a live page's newest version (/moved changed 20 days ago and not since: that
    # version is what it says now; /dead is gone, /gone left url_state: theirs go); article
    # everything; a moved URL goes by its class now, one url_state lost by its own rows'
    assert kept(home, "page_versions") == {
        ("/p", 0.0),
        ("/l", 5.0),
        ("/a", 60.0),
        ("/a", 0.0),
        ("/moved", 20.0),
    }
    assert kept(home, "changes") == {("/l", 5.0), ("/a", 60.0), ("/a", 0.0)}
    assert kept(home, "page_versions", OTHER) == {("/x", 60.0)}  # another host's articles
    assert (summary.version_rows, summary.change_rows) == (8, 9)
    assert summary.by_host[HOST] == (8, 9) and summary.by_host.get(OTHER, (0, 0)) == (0, 0)
    # the 90- and 10-day files of both tables and the 20-day changes held only expired rows:
    # removed; the 60- and 5-day files of both, the 20-day versions (/moved's is kept) and the
    # newest changes file rewritten; the newest versions untouched
    assert (summary.files_removed, summary.files_rewritten) == (5, 6)
    assert summary.warc_files_removed == 0 and summary.skipped is None
    assert summary.note() == (
        "retention removed 8 page_versions rows, 9 changes rows; "
        "6 history files rewritten, 5 removed"
    )


def test_a_second_prune_finds_nothing_left_to_do(home: Warehouse) -> None:
    config = load_config(home.home)
    prune_history(home, config, NOW)
    before = {p: p.stat().st_mtime_ns for p in home.files("page_versions", [HOST])}
    again = prune_history(home, config, NOW)
    assert again.counts() == dict.fromkeys(RetentionSummary.COUNTS, 0)
    assert again.note() is None
    assert {p: p.stat().st_mtime_ns for p in home.files("page_versions", [HOST])} == before


def test_an_expired_warc_file_goes_and_the_rows_in_it_lose_their_location(
    tmp_path: Path,
) -> None:
    (tmp_path / "freshness.toml").write_text("[retention]\narchive_days = 90\n")
    wh = Warehouse(tmp_path)
    archive = archive_dir_for(tmp_path)
    located = {}
    for days_ago in (100, 10):
        at = NOW - days_ago * DAY
        with ArchiveWriter(archive, at) as writer:
            page = url(f"/v{days_ago}")
            record = writer.write_exchange(HttpExchange(page, 200, "OK", body=b"<p>v</p>"))
        located[days_ago] = record
        wh.append_cycle(
            "page_versions",
            HOST,
            at,
            pl.DataFrame(
                {
                    "url": [page],
                    "host": [HOST],
                    "observed_at": [at],
                    "url_class": ["article"],
                    "warc_filename": [record.warc_filename],
                    "warc_offset": [record.warc_offset],
                    "warc_length": [record.warc_length],
                }
            ),
        )
    old, new = located[100].warc_filename, located[10].warc_filename
    assert sorted(list_warcs(archive)) == sorted([old, new])

    summary = prune_history(wh, load_config(tmp_path), NOW)
    assert list_warcs(archive) == [new]
    assert summary.warc_files_removed == 1 and summary.originals_carried == 0
    assert summary.version_rows == 0  # the rows are kept, only not where they pointed
    rows = wh.read("page_versions", [HOST]).sort("observed_at")
    assert rows["warc_filename"].to_list() == [None, new]
    assert rows["warc_offset"].to_list() == [None, located[10].warc_offset]
    assert summary.note() == "retention removed 1 WARC files; 1 history files rewritten, 0 removed"


def test_summaries_fold_and_read_back_from_counts() -> None:
    one = RetentionSummary(version_rows=2, files_rewritten=1, by_host={"a": (2, 0)})
    two = RetentionSummary(change_rows=3, warc_files_removed=1, originals_carried=4)
    two.count_host("a", changes=3)
    two.count_host("b", versions=1)
    one.add(two)
    assert one.by_host == {"a": (2, 3), "b": (1, 0)}
    assert RetentionSummary.from_counts({**one.counts(), "hosts_pruned": 9}).counts() == {
        "version_rows": 2,
        "change_rows": 3,
        "files_rewritten": 1,
        "files_removed": 0,
        "warc_files_removed": 1,
        "originals_carried": 4,
        "rows_scrubbed": 0,
    }
    assert one.note() == (
        "retention removed 2 page_versions rows, 3 changes rows, 1 WARC files (carrying 4 "
        "originals kept revisits refer to); 1 history files rewritten, 0 removed"
    )
    skipped = RetentionSummary(skipped="busy")
    one.add(skipped)
    assert one.skipped == "busy" and one.note() == (
        "retention skipped (busy); the next cycle prunes"
    )


def test_prune_home_prunes_under_a_lock_this_process_holds(home: Warehouse) -> None:
    with home.exclusive("freshness cycle"):  # a CLI cycle holds it around its run
        summary = prune_home(home, load_config(home.home), NOW)
    assert summary.skipped is None and summary.version_rows == 8


HOLD = textwrap.dedent(
    """
    import sys, time
    from freshness_pipeline.warehouse.storage import Warehouse
    with Warehouse(sys.argv[1]).exclusive("freshness reextract"):
        print("held", flush=True)
        time.sleep(120)
    """
)


def test_prune_home_beside_another_writer_prunes_nothing_and_names_it(home: Warehouse) -> None:
    files = {p: p.stat().st_mtime_ns for p in home.files("page_versions", [HOST])}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(home.home)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        summary = prune_home(home, load_config(home.home), NOW)
    finally:
        holder.kill()
        holder.wait()
    assert summary.skipped is not None and "freshness reextract" in summary.skipped
    assert f"(pid {holder.pid})" in summary.skipped
    assert summary.counts() == dict.fromkeys(RetentionSummary.COUNTS, 0)
    assert {p: p.stat().st_mtime_ns for p in home.files("page_versions", [HOST])} == files
    # the home free again: the same call prunes
    assert prune_home(home, load_config(home.home), NOW).version_rows == 8
