"""kill -9 at 20 points of a cycle: afterwards every table reads, the next run of the same cycle
completes, and the state equals that of a cycle that never crashed (no URL lost or duplicated,
no fetch observation counted twice)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest

from freshness_pipeline.app.runner import load_seeds, open_instance, run_cycle
from freshness_pipeline.synthweb import DEFAULT_START, SiteSpec, SyntheticWeb, build_world
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.archive import index_name_for, list_warcs, read_record
from freshness_pipeline.warehouse.archive.files import OPEN_SUFFIX
from freshness_pipeline.warehouse.crashpoints import ENV, POINTS
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.support import run_freshness

T0 = DEFAULT_START
T1 = DEFAULT_START + timedelta(hours=6)
SITES = [
    SiteSpec("honest", "honest", 30),
    SiteSpec("lastmod", "lastmod_only", 20),
    SiteSpec("polite", "polite", 24, crawl_delay=0.05, disallow=("/private/",), n_private=2),
]
# 18 named points plus two kills landing in the middle of the fetches (the polite host alone
# needs over a second of crawl-delays: at 0.3 s 7 of its 21 pages are fetched, at 0.6 s 12).
# (A delay of 0.05 s, not 0.1 s: every cycle of the sweep waits them out, a second apiece.)
# The default run kills where the state is at stake: at the fetch and state steps' start,
# between url_state's, fetch_results' and robots' temp files and their renames, after a
# fetch_log append, in the middle of the fetches and in the middle of the archive; every other
# point (the other assets' starts and temp files, every after-rename kill, a later mid-fetch
# kill) runs with `pytest -m slow`.
DEFAULT_POINTS = {
    "asset:fetch_results:start",
    "asset:url_state:start",
    "write:url_state:temp_written",
    "write:fetch_results:temp_written",
    "write:robots:temp_written",
    "write:fetch_log:replaced",
    "archive:record_written",
    "archive:renamed",
}
SCENARIOS = [
    point if point in DEFAULT_POINTS else pytest.param(point, marks=pytest.mark.slow)
    for point in POINTS
] + [
    "asset:fetch_results:start@0.3",
    pytest.param("asset:fetch_results:start@0.6", marks=pytest.mark.slow),
    # the 40th archive record: past the robots and sitemap answers, among the page fetches
    "archive:record_written#40",
]
COMPARED = [
    "url",
    "host",
    "status",
    "n_obs",
    "n_changes",
    "fingerprint",
    "last_fetched_at",
    "last_seen_at",
]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A web, a home after one cycle at T0, and the reference state after a clean cycle at T1."""
    os.environ.setdefault("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    root = tmp_path_factory.mktemp("crash")
    with SyntheticWeb(build_world(11, start=T0, horizon_days=1, sites=SITES)) as web:
        web.set_now(T0)
        base = root / "base"
        seeds = web.seeds_csv(root / "seeds.csv")
        load_seeds(base, seeds.read_bytes(), added_at=T0)
        run_cycle(base, T0)
        web.set_now(T1)
        reference = root / "reference"
        shutil.copytree(base, reference)
        run_cycle(reference, T1)
        yield {"web": web, "base": base, "reference": Warehouse(reference), "root": root}


def freshness_cycle(home: Path, crash: str | None) -> subprocess.CompletedProcess[str]:
    return run_freshness("cycle", "--now", T1.isoformat(), home=home, env={ENV: crash or ""})


@pytest.fixture(scope="module")
def killed(world) -> Callable[[str, Path], None]:
    """``killed(crash, home)`` makes ``home`` a copy of the base whose cycle at T1 was killed
    (-9) at ``crash``. The kill runs once per point for the module (two tests start from the
    kill at url_state's start); each test gets a copy of its own to read and resume."""
    made: dict[str, Path] = {}

    def copy(crash: str, home: Path) -> None:
        if crash not in made:
            template = world["root"] / "killed" / crash.replace(":", "_").replace("@", "_at_")
            shutil.copytree(world["base"], template)
            done = freshness_cycle(template, crash)
            assert done.returncode == -9, (done.returncode, done.stderr[-2000:])
            made[crash] = template
        shutil.copytree(made[crash], home)

    return copy


def all_tables_read(wh: Warehouse) -> None:
    for table in tables.SCHEMAS:
        wh.read(table)
    wh.ensure_views(force=True)
    con = duckdb.connect(str(wh.duckdb_path), read_only=True)
    try:
        for table in tables.VIEW_TABLES:
            con.execute(f'SELECT count(*) FROM "{table}"').fetchall()  # noqa: S608
    finally:
        con.close()


def state_frame(wh: Warehouse) -> pl.DataFrame:
    return wh.read("url_state").select(COMPARED).sort("url")


@pytest.mark.parametrize("crash", SCENARIOS)
def test_kill_9_then_resume_equals_a_clean_cycle(world, killed, crash):
    home = world["root"] / crash.replace(":", "_").replace("@", "_at_")
    killed(crash, home)
    wh = Warehouse(home)
    all_tables_read(wh)

    resumed = freshness_cycle(home, None)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert not list(wh.root.glob("*/host=*/*.tmp-*")), "temp files left behind"
    # the next cycle says what happened, and leaves no run 'started' for ever in the UI
    said = " ".join(resumed.stderr.split())
    assert f"the last cycle {T1.isoformat()} (pid " in said and "did not finish" in said, said
    with open_instance(home) as instance:
        assert not instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
    # the archive: the killed run's unfinished file gone, every complete file indexed and
    # whole, and every archive location a table holds is a record that exists
    archive = home / "archive"
    assert not [p.name for p in archive.iterdir() if p.name.endswith(OPEN_SUFFIX)]
    for warc in list_warcs(archive):
        assert (archive / index_name_for(warc)).exists(), warc
    located = wh.read("fetch_log").filter(pl.col("warc_filename").is_not_null())
    assert located.height > 0
    for name, offset, length in located.select(
        "warc_filename", "warc_offset", "warc_length"
    ).iter_rows():
        record = read_record(archive, name, offset, length)
        assert record.header("WARC-Type") in ("response", "revisit"), (name, offset)
    state = state_frame(wh)
    assert state.height == state["url"].n_unique()
    reference = state_frame(world["reference"])
    assert state["url"].to_list() == reference["url"].to_list()
    assert state.equals(reference), state.join(reference, on="url", suffix="_ref").filter(
        pl.any_horizontal(pl.col(c) != pl.col(f"{c}_ref") for c in COMPARED[1:])
    )
    log = wh.read("fetch_log")
    assert log.height == log.select("url", "fetched_at").n_unique()
    assert (
        world["reference"].read("fetch_log").height >= log.filter(pl.col("fetched_at") == T1).height
    )


def test_the_cycle_after_one_killed_before_its_state_records_each_change_once(world, killed):
    """Killed after its fetches were written and before url_state took them in, a cycle left
    rows the next cycle (a later time: the next tick) knew nothing of: it fetched the pages
    again and `changes`, exports and notifications got every change twice, the metrics its
    requests twice (found by an exploratory run: 20 changes counted 40 times). They are taken
    back; the next cycle's rows are the only ones."""
    home = world["root"] / "killed-then-next"
    killed("asset:url_state:start", home)
    wh = Warehouse(home)
    assert wh.read("fetch_log").filter(pl.col("fetched_at") == T1).height > 0  # left behind
    later = T1 + timedelta(hours=6)
    after = run_freshness("cycle", "--now", later.isoformat(), home=home)
    assert after.returncode == 0, after.stderr[-2000:]
    for table, at in tables.HISTORY_TABLES.items():
        assert wh.read(table).filter(pl.col(at) == T1).height == 0, table
    assert wh.read("fetch_totals").filter(pl.col("cycle_at") == T1).height == 0
    changes = wh.read("changes")
    assert changes.height > 0 and changes["url"].n_unique() == changes.height
    # the totals the metrics sum agree with the requests kept
    totals = wh.read("fetch_totals")["requests"].sum()
    assert totals == wh.read("fetch_log").height


def test_a_cycle_failing_in_its_state_step_takes_its_fetches_back(world, monkeypatch):
    """The same rows are left by a cycle whose url_state step fails (a bug, a full disk): the
    failing cycle takes them back itself and says so."""
    from freshness_pipeline.app.runner import CycleFailed
    from freshness_pipeline.defs.assets import state as state_asset

    home = world["root"] / "failed-in-state"
    shutil.copytree(world["base"], home)

    def broken(*args, **kwargs):
        raise RuntimeError("the state step broke")

    monkeypatch.setattr(state_asset, "update_state", broken)
    with pytest.raises(CycleFailed, match="taken back"):
        run_cycle(home, T1)
    monkeypatch.undo()
    wh = Warehouse(home)
    for table, at in tables.HISTORY_TABLES.items():
        assert wh.read(table).filter(pl.col(at) == T1).height == 0, table
    assert wh.read("fetch_totals").filter(pl.col("cycle_at") == T1).height == 0
    run_cycle(home, T1 + timedelta(hours=6))
    changes = wh.read("changes")
    assert changes.height > 0 and changes["url"].n_unique() == changes.height
