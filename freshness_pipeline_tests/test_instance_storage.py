"""The instance a home gets keeps its sqlite event log open between events, and stays the
plain sqlite storage on disk: any Dagster process configured with ``storage: sqlite`` reads
what a cycle wrote, and a forked process writes through its own connections."""

from __future__ import annotations

import multiprocessing
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
from sqlalchemy import event
from sqlalchemy.engine import Engine

from freshness_pipeline.app.runner import dagster_home, load_seeds, open_instance, run_cycle
from freshness_pipeline.defs.instance_storage import (
    KEPT_OPEN_RUN_SHARDS,
    KeptOpenSqliteEventLogStorage,
)

T0 = datetime(2026, 3, 2, 12, tzinfo=UTC)


def plain_sqlite_instance(folder: Path, storage: Path) -> dg.DagsterInstance:
    folder.mkdir()
    (folder / "dagster.yaml").write_text(f"storage:\n  sqlite:\n    base_dir: {storage}\n")
    return dg.DagsterInstance.from_config(str(folder))


def count_connects() -> list[int]:
    """A counter of new sqlite connections made by any engine from now on."""
    opened = [0]

    def on_connect(*_: object) -> None:
        opened[0] += 1

    event.listen(Engine, "connect", on_connect)
    return opened


def test_a_home_cycle_is_read_back_by_plain_sqlite_storage(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    load_seeds(home, b"url\nhttps://a.example/1\nhttps://b.example/2\n", added_at=T0)
    instance = open_instance(home)
    assert isinstance(instance.event_log_storage, KeptOpenSqliteEventLogStorage)
    run_cycle(home, T0, dry_run=True, instance=instance)
    (run,) = instance.get_runs()
    ours = [e.dagster_event_type for e in instance.all_logs(run.run_id)]
    assert dg.DagsterEventType.ASSET_MATERIALIZATION in ours

    # the folder the home's dagster.yaml names as the storage's base_dir
    plain = plain_sqlite_instance(tmp_path / "plain", dagster_home(home) / "storage")
    assert type(plain.event_log_storage).__name__ == "SqliteEventLogStorage"
    assert [r.run_id for r in plain.get_runs()] == [run.run_id]
    assert [e.dagster_event_type for e in plain.all_logs(run.run_id)] == ours
    key = dg.AssetKey("revisit_plan")
    mine = instance.fetch_materializations(key, limit=10).records
    theirs = plain.fetch_materializations(key, limit=10).records
    assert [r.storage_id for r in theirs] == [r.storage_id for r in mine]
    assert mine


def test_events_reuse_the_open_connections(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    instance = open_instance(home)
    assert isinstance(instance.event_log_storage, KeptOpenSqliteEventLogStorage)
    instance.report_runless_asset_event(dg.AssetMaterialization("warm"))
    opened = count_connects()
    for i in range(40):
        instance.report_runless_asset_event(dg.AssetMaterialization("a", metadata={"i": i}))
    # the index and the runless events' shard were open already: 40 events, no new connection
    # (Dagster's own sqlite event log opens two per asset event)
    assert opened[0] <= 2, opened[0]
    assert len(instance.fetch_materializations(dg.AssetKey("a"), limit=100).records) == 40


def test_old_run_databases_are_closed(tmp_path: Path) -> None:
    storage = KeptOpenSqliteEventLogStorage(str(tmp_path / "runs"))
    for k in range(KEPT_OPEN_RUN_SHARDS + 3):
        with storage.run_connection(f"run{k}") as conn:
            conn.exec_driver_sql("select 1")
    with storage.index_connection() as conn:
        conn.exec_driver_sql("select 1")
    kept = list(storage._engines)
    assert "index" in kept
    assert [s for s in kept if s != "index"] == [
        f"run{k}" for k in range(3, KEPT_OPEN_RUN_SHARDS + 3)
    ]
    storage.dispose()
    assert not storage._engines


def _child_writes(folder: str, queue: multiprocessing.Queue) -> None:
    instance = CHILD_INSTANCE[0]
    inherited = len(instance.event_log_storage._engines)
    instance.report_runless_asset_event(dg.AssetMaterialization("from_child"))
    queue.put(inherited)


CHILD_INSTANCE: list[dg.DagsterInstance] = []


def test_a_forked_child_opens_its_own_connections(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    instance = open_instance(home)
    instance.report_runless_asset_event(dg.AssetMaterialization("from_parent"))
    assert instance.event_log_storage._engines  # open in the parent
    CHILD_INSTANCE[:] = [instance]
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_writes, args=(str(home), queue))
    child.start()
    inherited = queue.get(timeout=60)
    child.join(60)
    assert child.exitcode == 0
    assert inherited == 0  # the parent's engines were dropped in the child, not used
    instance.report_runless_asset_event(dg.AssetMaterialization("from_parent"))
    for key, n in (("from_parent", 2), ("from_child", 1)):
        records = instance.fetch_materializations(dg.AssetKey(key), limit=10).records
        assert len(records) == n, key
