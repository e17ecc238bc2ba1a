"""The Dagster instance of a long crawl stays bounded: `[dagster] keep_runs_days` deletes old
runs with their events at each cycle, and what a cycle adds does not grow with its hosts."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from datetime import UTC, datetime, timedelta

import dagster as dg
import pytest

from freshness_pipeline.app.runner import load_seeds, open_instance, run_cycle
from freshness_pipeline.config import ConfigError, load_config
from freshness_pipeline.defs import instance_upkeep

T0 = datetime(2026, 3, 2, 12, tzinfo=UTC)


def seeded_home(tmp_path, n_hosts: int, toml: str = ""):
    home = tmp_path / "home"
    home.mkdir()
    (home / "freshness.toml").write_text(toml)
    lines = [f"https://h{i:04d}.example/p/{k}" for i in range(n_hosts) for k in range(2)]
    load_seeds(home, ("url\n" + "\n".join(lines) + "\n").encode(), added_at=T0)
    return home


def test_old_runs_are_deleted_with_their_events_and_the_index_compacted(tmp_path, monkeypatch):
    home = seeded_home(tmp_path, 3, "[dagster]\nkeep_runs_days = 0.00002\n")  # 1.7 s
    instance = open_instance(home)
    first = run_cycle(home, T0, dry_run=True, instance=instance)
    assert not any("deleted" in n for n in first.notes)
    (old,) = instance.get_runs()
    assert instance.all_logs(old.run_id)
    time.sleep(2.0)
    monkeypatch.setattr(instance_upkeep, "COMPACT_MIN_BYTES", 0)  # however small the index is
    monkeypatch.setattr(instance_upkeep, "COMPACT_FREE_SHARE", 0.0)
    second = run_cycle(home, T0 + timedelta(hours=6), dry_run=True, instance=instance)
    assert any("deleted 1 Dagster runs older than 2e-05 days" in n for n in second.notes)
    (kept,) = instance.get_runs()
    assert kept.run_id != old.run_id
    assert not instance.all_logs(old.run_id)  # its events went with it
    index = instance.event_log_storage.path_for_shard("index")
    with contextlib.closing(sqlite3.connect(index)) as con:
        assert con.execute("PRAGMA freelist_count").fetchone()[0] == 0  # vacuumed


def test_runs_are_kept_30_days_unless_told_otherwise(tmp_path):
    """Kept whole, the operations log outgrew the crawl's own data tenfold (exploratory run):
    a home that does not say keeps 30 days of runs (by their wall-clock creation, so these
    cycles' runs stay); 0 keeps every run."""
    home = seeded_home(tmp_path, 2)
    instance = open_instance(home)
    for i in range(2):
        run_cycle(home, T0 + i * timedelta(hours=6), dry_run=True, instance=instance)
    assert len(instance.get_runs()) == 2
    assert load_config(home).keep_runs_days == 30
    (home / "freshness.toml").write_text("[dagster]\nkeep_runs_days = 0\n")
    assert load_config(home).keep_runs_days == 0
    (home / "freshness.toml").write_text("[dagster]\n")
    assert load_config(home).keep_runs_days == 30


@pytest.mark.parametrize("value", ["-1", '"30"', "true", "nan"])
def test_a_bad_retention_is_named(tmp_path, value):
    (tmp_path / "freshness.toml").write_text(f"[dagster]\nkeep_runs_days = {value}\n")
    with pytest.raises(ConfigError, match="dagster.keep_runs_days must be a number of days"):
        load_config(tmp_path)


def events_per_cycle(tmp_path, n_hosts: int) -> list[str]:
    home = seeded_home(tmp_path / str(n_hosts), n_hosts, "[partitioning]\nhost_buckets = 8\n")
    instance = open_instance(home)
    run_cycle(home, T0, dry_run=True, instance=instance)
    (run,) = instance.get_runs()
    return [e.dagster_event_type for e in instance.all_logs(run.run_id) if e.is_dagster_event]


def test_what_a_bucketed_cycle_records_does_not_grow_with_its_hosts(tmp_path):
    (tmp_path / "10").mkdir()
    (tmp_path / "200").mkdir()
    few, many = events_per_cycle(tmp_path, 10), events_per_cycle(tmp_path, 200)
    assert len(many) == len(few) < 200  # 8 buckets both times: per bucket and step, not host
    kinds = dg.DagsterEventType
    # the planning steps' five tables (their own three, robots and url_canonical), 8 buckets
    assert many.count(kinds.ASSET_MATERIALIZATION) == 5 * 8
    assert many.count(kinds.ASSET_OBSERVATION) == 3  # the run's totals, once per asset
    assert many.count(kinds.ASSET_CHECK_EVALUATION) == 3  # the blocking checks, once per run


def test_a_moved_or_copied_home_keeps_its_runs_and_views_in_itself(tmp_path):
    """The instance file and the views named the folder the home was made in: a moved home
    logged its runs at the old place (every cycle failed where that could not be written) and
    its views read the old files; a copy's runs went into the original's instance."""
    import shutil

    import duckdb

    home = seeded_home(tmp_path, 2)
    run_cycle(home, T0, dry_run=True, instance=open_instance(home))
    copy = tmp_path / "copy"
    shutil.copytree(home, copy)
    moved = tmp_path / "moved"
    shutil.move(home, moved)
    home.write_text("the old place cannot be written now")  # another disk, machine or user

    for place, cycles in ((moved, 2), (copy, 2)):
        instance = open_instance(place)
        run_cycle(place, T0 + timedelta(hours=6), dry_run=True, instance=instance)
        assert len(instance.get_runs()) == cycles, place
        assert (
            str(place / "dagster" / "storage") in (place / "dagster" / "dagster.yaml").read_text()
        )
        with duckdb.connect(str(place / "freshness.duckdb"), read_only=True) as con:
            (sql,) = con.execute(
                "SELECT sql FROM duckdb_views() WHERE view_name = 'url_state'"
            ).fetchone()
        assert str(place / "warehouse") in sql and f"{tmp_path}/home/" not in sql
    assert len(open_instance(moved).get_runs()) == 2  # the copy's run did not land here


def test_queued_runs_go_one_at_a_time_and_an_old_homes_queue_is_brought_in_line(tmp_path):
    """An asset-graph run ("Materialize all", an asset backfill) carries no cycle tag: beside
    a cycle over the same hosts it fetched every page twice and lost one run's rows (found by
    an exploratory run). The queue runs one run at a time; a home written with the old limit of
    four is brought to one, and a limit its user set is left alone."""
    import yaml

    from freshness_pipeline.defs.instance import DAGSTER_YAML, _paths, dagster_home

    def limit(folder) -> int:
        data = yaml.safe_load((folder / "dagster.yaml").read_text())
        return data["concurrency"]["runs"]["max_concurrent_runs"]

    fresh = dagster_home(tmp_path / "fresh")
    assert limit(fresh) == 1
    for name, written, expected in (("old", 4, 1), ("mine", 3, 3)):
        folder = tmp_path / name / "dagster"
        folder.mkdir(parents=True)
        text = DAGSTER_YAML.format(**_paths(folder))
        (folder / "dagster.yaml").write_text(
            text.replace("max_concurrent_runs: 1", f"max_concurrent_runs: {written}")
        )
        assert limit(dagster_home(tmp_path / name)) == expected
    with dg.DagsterInstance.from_config(str(fresh)) as instance:
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
