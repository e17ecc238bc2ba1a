"""The home's two OS file locks: one writer at a time, and Dagster runs at work.

``writer.lock`` is taken exclusively by every writer the ``freshness`` command starts (a cycle,
a seed load, a re-extraction, a retirement; :meth:`Warehouse.exclusive`). A run Dagster starts
by itself (the schedule, the UI, ``dagster asset materialize``) takes no part in that: two such
writers at once planned from the same state, fetched every page twice (a host's Crawl-delay
broken) and recorded each change twice (found by an exploratory run). So every run holds
``runs.lock`` shared while it runs (:func:`dagster_run_hold`, from the warehouse resource), and a
``freshness`` writer refuses to start while anyone holds it (:func:`dagster_run_at_work`).
Runs share it among themselves: their own queue keeps cycle runs apart, and the groups of a
distributed cycle run side by side on purpose. The command's own runs (in process, or the
group processes of a distributed cycle) take it after the command has looked. Kernel locks,
not marker files: a run killed with -9 holds nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "RUNS_LOCK",
    "WRITER_LOCK",
    "cycle_record_lock",
    "dagster_run_at_work",
    "dagster_run_hold",
    "holder_of",
]

#: The home's writer lock (its text says what its holder is doing).
WRITER_LOCK = "writer.lock"
#: Held shared by every Dagster run writing the home, for as long as it runs.
RUNS_LOCK = "runs.lock"

# homes whose runs.lock this process holds: a writer started inside a run (its retention
# step) does not count its own run, or the runs beside it, as someone else's
_HELD: set[str] = set()


def _key(home: Path) -> str:
    return os.path.realpath(home)


@contextlib.contextmanager
def dagster_run_hold(home: Path) -> Iterator[None]:
    """Hold ``home``'s runs lock, shared, for the block: a Dagster run at work."""
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    fd = os.open(home / RUNS_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    key = _key(home)
    try:
        # only a writer's look takes it exclusively, for an instant: waited out
        fcntl.flock(fd, fcntl.LOCK_SH)
        already = key in _HELD
        _HELD.add(key)
        try:
            yield
        finally:
            if not already:
                _HELD.discard(key)
    finally:
        os.close(fd)  # lets the lock go


def dagster_run_at_work(home: Path) -> bool:
    """Whether a Dagster run other than this process's own holds ``home``'s runs lock. A look:
    the lock is taken exclusively and let go at once when free, never waited for."""
    home = Path(home)
    if _key(home) in _HELD:
        return False
    return holder_of(home / RUNS_LOCK, exclusive=True) is not None


def holder_of(path: Path, *, exclusive: bool) -> str | None:
    """None when no one holds the lock ``path`` (it is taken, exclusively or shared, and let go
    at once: a look, never a wait), else what its file says its holder is doing."""
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDWR if exclusive else os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


@contextlib.contextmanager
def cycle_record_lock(root: Path) -> Iterator[None]:
    """The record of each host's newest cycle (``_cycles.json``) is read, moved on and written
    by every run's state step; the group runs of a distributed cycle do it side by side, and
    one's write would lose another's hosts. Held for that read and write."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / "_cycles.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
