"""kill -9 inside the retention step (crashpoints.PRUNE_POINTS) of a `freshness cycle` that
expires two cycles' WARC files and history at once: whatever the kill interrupted, no table row
points into a WARC record that is gone, every revisit left in the archive still finds its
original, and the next run of the cycle completes the prune to what a run that never crashed
leaves."""

from __future__ import annotations

import os
import shutil
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from freshness_pipeline.app.runner import load_seeds, run_cycle
from freshness_pipeline.synthweb import DEFAULT_START, SiteSpec, SyntheticWeb, World
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.archive import (
    ArchivedOriginal,
    ArchiveIndex,
    ArchiveReader,
    archive_dir_for,
    file_cycle,
    index_name_for,
    iter_records,
    list_warcs,
    read_record,
)
from freshness_pipeline.warehouse.crashpoints import ENV, PRUNE_POINTS
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.crawls import hand_page
from freshness_pipeline_tests.support import run_freshness

S = DEFAULT_START
HOUR = timedelta(hours=1)
T0, T1, T2 = S, S + 6 * HOUR, S + 12 * HOUR
#: the crashed cycle comes after a pause: its cut-off (a day before it) passes T0 and T1, so
#: one prune removes two cycles' WARC files and two page_versions files per host
TC = T2 + 20 * HOUR
CUTOFF = TC - timedelta(days=1)
HOME_CONFIG = """\
[url_classes.article.retention]
versions_days = 1

[retention]
archive_days = 1
"""
# pages that never change (their 304s are revisits of the T0 originals) and pages that
# change at T1 and T2 (their versions and changes rows expire with them)
PAGES = {"/about": (), "/team": (), "/news": (3,), "/blog": (3, 9)}
SCENARIOS = [
    # a kill between two history files of one host: some rewritten, the others not
    "prune:history_rewritten#1",
    # a kill after some expired WARC files are deleted and before the others
    "prune:warc_removed#1",
    pytest.param("prune:archive_prepared", marks=pytest.mark.slow),
    pytest.param("prune:tables_moved", marks=pytest.mark.slow),
    pytest.param("prune:history_rewritten#3", marks=pytest.mark.slow),
]


def test_the_scenarios_cover_every_prune_point():
    named = {(s if isinstance(s, str) else s.values[0]).partition("#")[0] for s in SCENARIOS}
    assert named == set(PRUNE_POINTS)


def _world() -> World:
    pages = []
    for site in ("shop", "blog"):
        for path, changes in PAGES.items():
            pages.append(hand_page(len(pages), path, "article", changes, site=site))
    return World(
        seed=13,
        start=S,
        horizon_days=3.0,
        sites=[SiteSpec("shop", "honest", len(PAGES)), SiteSpec("blog", "honest", len(PAGES))],
        pages=pages,
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A home after three clean cycles, and a copy of it after a clean cycle at TC."""
    os.environ.setdefault("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    root = tmp_path_factory.mktemp("retention-crash")
    base = root / "base"
    with SyntheticWeb(_world()) as web:
        web.set_now(S)
        seeds = web.seeds_csv(root / "seeds.csv", variants=False)
        load_seeds(base, seeds.read_bytes(), added_at=S)
        (base / "freshness.toml").write_text(HOME_CONFIG)
        for now in (T0, T1, T2):
            web.set_now(now)
            run_cycle(base, now, budget=1000)
        web.set_now(TC)
        reference = root / "reference"
        shutil.copytree(base, reference)
        outcome = run_cycle(reference, TC, budget=1000)
        assert any("WARC files" in note for note in outcome.notes), outcome.notes
        yield {"base": base, "reference": reference, "root": root, "web": web}


def _cycle(home: Path, crash: str | None):
    return run_freshness(
        "cycle", "--now", TC.isoformat(), "--budget", "1000", home=home, env={ENV: crash or ""}
    )


def assert_every_pointer_resolves(home: Path) -> None:
    """No row, index line or revisit of the home points at a record that is not there."""
    wh = Warehouse(home)
    for table in tables.SCHEMAS:
        wh.read(table)  # every file whole
    archive = archive_dir_for(home)
    warcs = set(list_warcs(archive))
    for table in ("page_versions", "fetch_log"):
        located = wh.read(table).drop_nulls("warc_filename")
        for name, offset, length in located.select(
            "warc_filename", "warc_offset", "warc_length"
        ).iter_rows():
            assert name in warcs, (table, name)
            record = read_record(archive, name, offset, length)
            assert record.record_type in ("response", "revisit"), (table, name, offset)
    for text in wh.read("url_state").drop_nulls("archived")["archived"]:
        where = ArchivedOriginal.from_json(text).location
        assert where is not None and where.warc_filename in warcs, text
        record = read_record(archive, where.warc_filename, where.warc_offset, where.warc_length)
        assert record.record_type == "response"
    index = ArchiveIndex(archive)
    for index_name in index.index_files():
        for entry in index.entries(index_name):
            assert entry.filename in warcs, (index_name, entry.filename)
            for name, offset, length in (
                (entry.filename, entry.offset, entry.length),
                *(
                    [
                        (
                            entry.fields["revisit_filename"],
                            int(entry.fields["revisit_offset"]),
                            int(entry.fields["revisit_length"]),
                        )
                    ]
                    if entry.is_resolved_revisit
                    else []
                ),
            ):
                assert name in warcs, (index_name, name)
                read_record(archive, name, offset, length)
    reader = ArchiveReader(archive)
    revisits = 0
    for name in warcs:
        for record in iter_records(archive / name, payloads=False):
            if record.record_type == "revisit":
                revisits += 1
                response = reader.read_response(name, record.offset, record.length)
                assert response.status == 200 and response.body, (name, record.offset)
    assert revisits


def _versions(home: Path) -> pl.DataFrame:
    return (
        Warehouse(home)
        .read("page_versions")
        .select("url", "observed_at", "outcome", "fingerprint", "payload_digest")
        .sort("url", "observed_at", "outcome")
    )


def _changes(home: Path) -> pl.DataFrame:
    return Warehouse(home).read("changes").select("url", "changed_at").sort("url", "changed_at")


@pytest.mark.parametrize("crash", SCENARIOS)
def test_kill_9_inside_the_prune_loses_nothing_and_the_next_run_completes_it(world, crash):
    home = world["root"] / crash.replace(":", "_").replace("#", "_")
    shutil.copytree(world["base"], home)
    expired = {
        n
        for n in list_warcs(archive_dir_for(home))
        if file_cycle(archive_dir_for(home), n) < CUTOFF
    }
    assert len(expired) >= 2  # two cycles' files, each with its index

    killed = _cycle(home, crash)
    assert killed.returncode == -9, (killed.returncode, killed.stderr[-2000:])
    assert_every_pointer_resolves(home)

    resumed = _cycle(home, None)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert_every_pointer_resolves(home)
    archive = archive_dir_for(home)
    left = list_warcs(archive)
    assert not expired & set(left)
    assert all(file_cycle(archive, n) >= CUTOFF for n in left)
    assert all((archive / index_name_for(n)).exists() for n in left)
    # the history the prune keeps is what a cycle that never crashed kept
    versions = _versions(home)
    # older than the cut-off, per site: only the newest version of each page that has not
    # changed since (/about and /team from T0, /news from T1); /blog's are all newer
    older = versions.filter(pl.col("observed_at") < CUTOFF)
    newest = versions.group_by("url").agg(pl.col("observed_at").max())
    assert (
        older.select("url", "observed_at")
        .sort("url")
        .equals(newest.filter(pl.col("observed_at") < CUTOFF).sort("url"))
    )
    paths = older["url"].str.extract(r"(/[a-z]+)$").value_counts().sort("url")
    assert paths.rows() == [("/about", 2), ("/news", 2), ("/team", 2)]
    reference = world["reference"]
    assert versions.equals(_versions(reference)), versions.join(
        _versions(reference), on=["url", "observed_at", "outcome"], how="full"
    )
    assert _changes(home).equals(_changes(reference))
    assert Warehouse(home).read("changes")["changed_at"].min() >= CUTOFF
