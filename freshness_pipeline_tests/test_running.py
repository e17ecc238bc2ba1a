"""warehouse/running.py: a look at a home's writer lock that never waits, and the time of the
CLI cycle holding it, which an export window must not end after."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from freshness_pipeline.warehouse.running import (
    running_cycle_time,
    window_past_running_cycle,
    writer_at_work,
)
from freshness_pipeline.warehouse.storage import Warehouse

NOW = datetime(2026, 3, 1, 6, tzinfo=UTC)


def test_the_lock_is_looked_at_not_waited_for(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path)
    assert writer_at_work(tmp_path) is None  # no lock file yet
    with wh.exclusive(f"cycle {NOW.isoformat()}"):
        holder = writer_at_work(tmp_path)
        assert holder is not None and holder.startswith(f"cycle {NOW.isoformat()} (pid ")
        running = running_cycle_time(tmp_path)
        assert running is not None and running[0] == NOW
        assert window_past_running_cycle(tmp_path, NOW) is None  # ends at its time: fine
        assert window_past_running_cycle(tmp_path, NOW - timedelta(hours=1)) is None
        for until in (NOW + timedelta(seconds=1), None):
            why = window_past_running_cycle(tmp_path, until)
            assert why is not None and "--until 2026-03-01T06:00:00Z" in why
    assert writer_at_work(tmp_path) is None  # let go: free again
    with wh.exclusive("seed load"):  # another writer: no cycle time to keep to
        assert writer_at_work(tmp_path) is not None
        assert running_cycle_time(tmp_path) is None
        assert window_past_running_cycle(tmp_path, None) is None
