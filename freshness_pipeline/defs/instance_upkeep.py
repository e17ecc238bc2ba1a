"""The Dagster instance's upkeep: ``[dagster] keep_runs_days`` deletes old finished runs with
their events, and a sqlite event log index that is mostly free pages is compacted. A CLI cycle
(app.runner) and each tick of the cycle schedule (schedules) call it.
"""

from __future__ import annotations

import contextlib
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg

#: runs deleted at most per cycle by ``keep_runs_days``: a first prune of a long history is
#: spread over cycles instead of holding one up
MAX_PRUNED_RUNS = 200
#: compact the event log index once this share of it is free pages (sqlite reuses them, so
#: the file does not grow past its peak either way; compacting gives the space back)
COMPACT_FREE_SHARE = 0.25
COMPACT_MIN_BYTES = 64 * 1024 * 1024


def prune_instance(instance: dg.DagsterInstance, keep_runs_days: float) -> str | None:
    """Delete finished runs older than ``keep_runs_days`` (0: keep all) with their events, and
    compact a sqlite event log index that is mostly free pages. Runs are stamped with the wall
    clock when created, so this is the one place below the CLI that reads it. Returns a note
    when anything was done."""
    if not keep_runs_days:
        return None
    cutoff = datetime.now(UTC) - timedelta(days=keep_runs_days)
    finished = [
        dg.DagsterRunStatus.SUCCESS,
        dg.DagsterRunStatus.FAILURE,
        dg.DagsterRunStatus.CANCELED,
    ]
    old = instance.get_run_records(
        filters=dg.RunsFilter(created_before=cutoff, statuses=finished),
        limit=MAX_PRUNED_RUNS,
        ascending=True,
    )
    for record in old:
        instance.delete_run(record.dagster_run.run_id)
    if not old:
        return None
    compacted = compact_event_index(instance)
    return f"deleted {len(old)} Dagster runs older than {keep_runs_days:g} days" + (
        f"; compacted the event index by {compacted / 1e6:,.0f} MB" if compacted else ""
    )


def compact_event_index(instance: dg.DagsterInstance) -> int:
    """VACUUM the sqlite event log index when at least COMPACT_FREE_SHARE of it is free; the
    bytes given back (0 when not sqlite, not worth it, or in use by another process)."""
    from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
        INDEX_SHARD_NAME,
        SqliteEventLogStorage,
    )

    storage = instance.event_log_storage
    if not isinstance(storage, SqliteEventLogStorage):
        return 0
    path = Path(storage.path_for_shard(INDEX_SHARD_NAME))
    if not path.exists() or path.stat().st_size < COMPACT_MIN_BYTES:
        return 0
    before = path.stat().st_size
    with contextlib.closing(sqlite3.connect(path, timeout=5)) as con:
        free, total = (
            con.execute(f"PRAGMA {p}").fetchone()[0] for p in ("freelist_count", "page_count")
        )
        if not total or free / total < COMPACT_FREE_SHARE:
            return 0
        try:
            con.execute("VACUUM")
        except sqlite3.OperationalError:  # a webserver or daemon holds it: next time
            return 0
    return max(0, before - path.stat().st_size)
