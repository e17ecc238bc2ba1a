"""Who holds a home's writer lock now, and the time of the cycle it is writing: for readers
that must not read a window the cycle will still write into (``freshness export``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from freshness_pipeline.warehouse.locks import WRITER_LOCK, holder_of

__all__ = ["running_cycle_time", "window_past_running_cycle", "writer_at_work"]

# what a CLI cycle writes into the lock (app/runner.py): "cycle <its now, ISO 8601> (pid N)"
_RUNNING_CYCLE = re.compile(r"^cycle (\S+)")


def writer_at_work(home: Path) -> str | None:
    """What the holder of ``home``'s writer lock says it is doing, or None when no one holds
    it. A look only: the lock is taken and let go at once when free, never waited for."""
    return holder_of(Path(home) / WRITER_LOCK, exclusive=False)


def running_cycle_time(home: Path) -> tuple[datetime, str] | None:
    """The ``now`` of the CLI cycle writing into ``home`` and what its lock says, or None
    (no cycle running, or another writer: a seed load, a distributed cycle, retention)."""
    holder = writer_at_work(home)
    found = _RUNNING_CYCLE.match(holder or "")
    if holder is None or found is None:
        return None
    try:
        return datetime.fromisoformat(found.group(1)).astimezone(UTC), holder
    except ValueError:
        return None


def window_past_running_cycle(home: Path, until: datetime | None) -> str | None:
    """Why a window ending at ``until`` (None: open) cannot be read now, or None. A cycle dates
    its rows with its ``now`` and writes them when it ends: a window ending after the ``now``
    of a cycle still running would miss that cycle's rows, and the next window (from this
    one's end) would too, for good (found by an exploratory run)."""
    running = running_cycle_time(home)
    if running is None or (until is not None and until <= running[0]):
        return None
    at = running[0].strftime("%Y-%m-%dT%H:%M:%SZ")
    return (
        f"a cycle as of {at} is running ({running[1]}) and writes its versions when it ends: a "
        f"window ending after {at} would miss them for good; export with --until {at} now, "
        "or again once the cycle has ended"
    )
