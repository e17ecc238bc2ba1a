"""`freshness undo`, and the check that decides when a cycle keeps something to undo.

A cycle dated ahead of the machine's clock is either a simulated clock (a benchmark, a replay)
or a mistyped ``--now``; which one, only the user knows, and a script driving a simulated
clock must never wait on a question. So the cycle runs, says so, and keeps a snapshot of the
home from before it (warehouse/undo.py); ``freshness undo`` puts it back. Cycles dated at or
before the clock keep nothing: they cost no snapshot, and a wrong one of those does not freeze
pages for long.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline.warehouse.undo import NothingToUndo, UndoSummary, undo_to_point

__all__ = ["FUTURE_NOW_SLACK", "SNAPSHOT_NOTE", "future_note", "undo_cycle"]

#: a --now further than this past the machine's clock is said, and the home snapshotted first
FUTURE_NOW_SLACK = timedelta(days=1)


def future_note(moment: datetime, clock: datetime | None = None) -> str | None:
    """What to tell of a cycle dated ahead of the clock (None when it is not): every page it
    fetches is unplanned until that time comes, and later cycles, dated right, cannot repair
    that; the snapshot can."""
    ahead = moment - (clock or datetime.now(UTC))
    if ahead <= FUTURE_NOW_SLACK:
        return None
    return (
        f"--now {moment.isoformat()} is {ahead / timedelta(days=1):.0f} days after this "
        "machine's clock: the pages this cycle fetches are not planned again until their next "
        "check after it, and later cycles with earlier times do not undo that"
    )


#: said once the cycle ran, and only then: a cycle refused (the home busy) kept nothing
SNAPSHOT_NOTE = (
    "a snapshot of the home from before this cycle is kept: `freshness undo` takes the cycle back"
)


def undo_cycle(home: str | Path | None, *, since_ok: bool = False) -> UndoSummary:
    """Put the home back as it was before the last cycle dated ahead of the clock, under the
    home's writer lock (HomeBusy when a cycle or a Dagster run holds it); NothingToUndo when no
    snapshot is kept, ValueError when later cycles would go too and ``since_ok`` is not set."""
    warehouse = Warehouse(home)
    with warehouse.exclusive("undo"):
        warehouse.sweep_temp_files()
        try:
            summary = undo_to_point(warehouse, since_ok=since_ok)
        except NothingToUndo as exc:
            ahead = still_ahead_note(warehouse)
            if ahead is None:
                raise
            raise NothingToUndo(f"{exc}; {ahead}") from None
        warehouse.ensure_views()
    return summary


def still_ahead_note(warehouse: Warehouse, clock: datetime | None = None) -> str | None:
    """With nothing left to undo, a home may still hold a cycle dated ahead of the clock (two
    mistyped in a row: only the last kept a snapshot), and the refusal alone hid it (found by
    a newcomer). None when the home's newest cycle is not ahead."""
    newest = warehouse.newest_cycles()
    if not newest:
        return None
    latest = max(newest.values())
    if latest - (clock or datetime.now(UTC)) <= FUTURE_NOW_SLACK:
        return None
    return (
        f"the home still holds cycles dated up to {latest.isoformat()}, ahead of the clock, "
        "which no snapshot can take back: their pages wait for checks after that time, and "
        "cycles dated after it plan as usual"
    )
