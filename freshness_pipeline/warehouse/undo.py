"""Taking back a mistaken cycle: a snapshot of the home's tables and archive kept before a
cycle dated ahead of the clock, and putting it back.

A cycle as of a mistyped ``--now`` (a year too late) records its fetches in the future: the
pages it fetched are not planned again until then, robots.txt and sitemaps count as read until
then, a retention setting prunes against that date, and no cycle dated right can repair it,
since each one builds on that state. Every file the warehouse and the archive hold is written
whole under a temporary name and renamed into place, never changed where it lies, so hard links
are a snapshot that costs a directory entry per file: what the cycle replaces or prunes stays
alive under the snapshot's names, and undoing is putting those names back and removing what
came after.

What is never taken back:

* the seeds: URLs seeded after the snapshot stay seeded (a host seeded since has no state to
  go back to, and is crawled from the start by the next cycle);
* hosts retired since stay retired (their files are not brought back);
* Dagster's run history (it says what ran; the runs' tables are what the undo restores).

A restore killed half way is finished by running it again: the snapshot is removed last.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from freshness_pipeline.warehouse.archive.files import ARCHIVE_DIRNAME, OPEN_SUFFIX
from freshness_pipeline.warehouse.crashpoints import crash_point
from freshness_pipeline.warehouse.storage import Warehouse

__all__ = [
    "LEAP",
    "UNDONE_FILE",
    "UNDO_DIRNAME",
    "NothingToUndo",
    "UndoPoint",
    "UndoSummary",
    "keep_undo_point",
    "leaped_from",
    "read_undo_point",
    "undo_to_point",
    "undone_cycles",
]

#: ``<home>/undo``: the snapshot (hard links mirroring ``warehouse/`` and ``archive/``)
UNDO_DIRNAME = "undo"
_POINT_FILE = "point.json"
#: the cycles run since the snapshot, whatever their time (one that wrote no dated history
#: file, a backfill of nothing, is known by this alone)
_LATER_FILE = "later.json"
#: what a restore leaves as it is now (see the module's docstring)
_KEPT_AS_IS = ("seeds",)
#: the home's record of restores (warehouse root): what the notification cursor must step back
UNDONE_FILE = "_undone.json"
_VIEWS_FILE = "_views.json"


class NothingToUndo(Exception):
    """No snapshot to go back to: no cycle ahead of the clock ran since the last undo."""


@dataclass(frozen=True)
class UndoPoint:
    """The snapshot taken before the cycle dated ``moment``: ``files`` hard links."""

    moment: datetime
    files: int


@dataclass
class UndoSummary:
    """What a restore did. ``cycles``: the cycle times whose history files it removed, the
    mistaken one and any that ran after it."""

    moment: datetime
    restored: int = 0
    removed: int = 0
    cycles: list[datetime] = field(default_factory=list)

    @property
    def later(self) -> list[datetime]:
        """The cycles taken back besides the mistaken one."""
        return [at for at in self.cycles if at != self.moment]


def _undo_dir(wh: Warehouse) -> Path:
    return wh.home / UNDO_DIRNAME


def _roots(wh: Warehouse) -> dict[str, Path]:
    return {"warehouse": wh.root, ARCHIVE_DIRNAME: wh.home / ARCHIVE_DIRNAME}


def _finished_files(root: Path) -> Iterator[tuple[str, Path]]:
    """(path relative to ``root``, path) of every whole file under ``root``: the temporary
    files of writes in progress or killed (``*.tmp-*``, ``*.open``) are not the home's state."""
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
            elif (
                entry.is_file(follow_symlinks=False)
                and ".tmp-" not in entry.name
                and not entry.name.endswith(OPEN_SUFFIX)
            ):
                yield os.path.relpath(entry.path, root), Path(entry.path)


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # a file system without hard links: a copy is the same snapshot, dearer
        shutil.copy2(source, target)


def _remove_tree(folder: Path) -> None:
    """Out of the way at once (a rename), then removed: a kill in between leaves a folder no
    reader looks at, and the next snapshot clears it."""
    if not folder.exists():
        return
    doomed = folder.with_name(f"{folder.name}.old-{uuid.uuid4().hex[:8]}")
    os.replace(folder, doomed)
    shutil.rmtree(doomed, ignore_errors=True)


#: a cycle dated further than this past its hosts' newest cycle keeps a snapshot, wherever it
#: was launched from (a year typed wrong in the UI's launchpad as on the command line)
LEAP = timedelta(days=7)


def leaped_from(newest: dict[str, datetime], hosts: list[str], moment: datetime) -> datetime | None:
    """The hosts' newest cycle when ``moment`` is more than :data:`LEAP` after it (None
    otherwise, or when none of them has run yet)."""
    known = [newest[h] for h in hosts if h in newest]
    if not known or moment - max(known) <= LEAP:
        return None
    return max(known)


def keep_undo_point(wh: Warehouse, moment: datetime) -> UndoPoint:
    """Snapshot the home before the cycle dated ``moment``; replaces any earlier snapshot but
    one of the same cycle (its other runs, a re-execution: the snapshot from before its first
    stays). Call under the home's writer lock (``Warehouse.exclusive``), or in a run (which
    holds the runs lock, so no writer of the command is at work)."""
    kept = read_undo_point(wh)
    if kept is not None and kept.moment == moment.astimezone(UTC):
        return kept
    for left in wh.home.glob(f"{UNDO_DIRNAME}.*"):  # killed snapshots and removals
        shutil.rmtree(left, ignore_errors=True)
    building = wh.home / f"{UNDO_DIRNAME}.tmp-{uuid.uuid4().hex[:8]}"
    files = 0
    for name, root in _roots(wh).items():
        for relative, path in _finished_files(root):
            target = building / name / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            _link_or_copy(path, target)
            files += 1
    building.mkdir(parents=True, exist_ok=True)
    (building / _POINT_FILE).write_text(
        json.dumps({"moment": moment.astimezone(UTC).isoformat(), "files": files}),
        encoding="utf-8",
    )
    _remove_tree(_undo_dir(wh))
    os.replace(building, _undo_dir(wh))
    return UndoPoint(moment.astimezone(UTC), files)


def note_cycle_run(wh: Warehouse, moment: datetime) -> None:
    """Remember that a cycle dated ``moment`` ran since the snapshot (nothing when there is none,
    or when it is the snapshot's own cycle): a backfill that fetched nothing wrote no dated
    history file, so undo took it back too without --yes (found by an outside audit). Call
    where the snapshot is kept, under the same locks."""
    point = read_undo_point(wh)
    when = moment.astimezone(UTC)
    if point is None or point.moment == when:
        return
    path = _undo_dir(wh) / _LATER_FILE
    later = _later_cycles(wh)
    if when in later:
        return
    temp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    temp.write_text(json.dumps(sorted(at.isoformat() for at in {*later, when})), encoding="utf-8")
    os.replace(temp, path)


def _later_cycles(wh: Warehouse) -> set[datetime]:
    try:
        text = (_undo_dir(wh) / _LATER_FILE).read_text(encoding="utf-8")
        return {datetime.fromisoformat(at) for at in json.loads(text)}
    except (FileNotFoundError, ValueError, TypeError):
        return set()


def read_undo_point(wh: Warehouse) -> UndoPoint | None:
    """The snapshot there is to go back to, if any."""
    try:
        data = json.loads((_undo_dir(wh) / _POINT_FILE).read_text(encoding="utf-8"))
        return UndoPoint(datetime.fromisoformat(data["moment"]), int(data["files"]))
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None


def _cycle_of(relative: str) -> datetime | None:
    """The cycle a history file belongs to, from its name (``cycle-<stamp>.parquet``)."""
    name = os.path.basename(relative)
    if not name.startswith("cycle-"):
        return None
    with contextlib.suppress(ValueError):
        stamp = name.removeprefix("cycle-").split(".")[0]
        return datetime.strptime(stamp[:15], "%Y%m%dT%H%M%S").replace(tzinfo=UTC)
    return None


def _kept_as_is(relative: str, seeded: set[str]) -> bool:
    """Left as it is now by a restore: the seeds, the views' marker, the record of restores,
    and every file of a host that is no longer seeded (retired since)."""
    parts = Path(relative).parts
    if len(parts) == 1:
        return parts[0] in (_VIEWS_FILE, UNDONE_FILE)
    if parts[0] in _KEPT_AS_IS:
        return True
    return len(parts) >= 3 and parts[1].startswith("host=") and parts[1] not in seeded


def undo_to_point(wh: Warehouse, *, since_ok: bool = False) -> UndoSummary:
    """Put the home back as the snapshot has it (see the module's docstring). Call under the
    home's writer lock. With cycles run after the mistaken one, refuses (ValueError naming
    them) unless ``since_ok``: those are taken back too."""
    point = read_undo_point(wh)
    if point is None:
        raise NothingToUndo(
            f"nothing to undo in {wh.home}: a snapshot is kept only before a cycle dated ahead "
            "of the machine's clock or more than 7 days after its hosts' newest, and none is left"
        )
    snapshot = _undo_dir(wh)
    seeds_dir = wh.table_dir("seeds")
    seeded = {e.name for e in os.scandir(seeds_dir)} if seeds_dir.is_dir() else set()
    summary = UndoSummary(point.moment)
    plans: list[tuple[dict[str, Path], dict[str, Path], Path]] = []
    cycles: set[datetime] = set()
    for name, root in _roots(wh).items():
        kept = dict(_finished_files(snapshot / name))
        now = dict(_finished_files(root))
        plans.append((kept, now, root))
        for relative in set(now) - set(kept):
            at = _cycle_of(relative)
            if at is not None and not _kept_as_is(relative, seeded):
                cycles.add(at)
    summary.cycles = sorted(cycles | _later_cycles(wh))
    later = summary.later
    if later and not since_ok:
        shown = ", ".join(at.isoformat() for at in later[:3]) + (" ..." if len(later) > 3 else "")
        raise ValueError(
            f"{len(later)} cycle(s) ran after the cycle of {point.moment.isoformat()} "
            f"({shown}); undoing takes them back too: pass --yes to do it"
        )
    # read before anything moves, so that a restore killed and run again records the same
    went_back = Warehouse(snapshot).newest_cycles(), set(wh.newest_cycles())
    for kept, now, root in plans:
        for relative, source in kept.items():
            if _kept_as_is(relative, seeded):
                continue
            target = root / relative
            with contextlib.suppress(FileNotFoundError):
                if os.path.samefile(source, target):
                    continue
            target.parent.mkdir(parents=True, exist_ok=True)
            temp = target.with_name(f"{target.name}.tmp-undo-{uuid.uuid4().hex[:8]}")
            _link_or_copy(source, temp)
            os.replace(temp, target)
            summary.restored += 1
            crash_point("undo:file_restored")
        for relative, path in now.items():
            if relative not in kept and not _kept_as_is(relative, seeded):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    summary.removed += 1
                    crash_point("undo:file_removed")
    _record_undone(wh, point.moment, *went_back)
    _remove_tree(snapshot)
    return summary


def _record_undone(
    wh: Warehouse, moment: datetime, kept: dict[str, datetime], hosts: set[str]
) -> None:
    """Remember where each host's newest cycle went back to (None: to no cycle at all): a
    reader that keeps its place by cycle time (the notification cursor) steps back with it."""
    records = undone_cycles(wh)
    back = {
        host: kept[host].isoformat() if host in kept else None for host in sorted(hosts | set(kept))
    }
    records.append({"moment": moment.isoformat(), "back_to": back})
    path = wh.root / UNDONE_FILE
    temp = path.with_name(f"{UNDONE_FILE}.tmp-{uuid.uuid4().hex[:8]}")
    temp.write_text(json.dumps(records), encoding="utf-8")
    os.replace(temp, path)


def undone_cycles(wh: Warehouse) -> list[dict]:
    """Every restore this home has had: ``{"moment": ISO, "back_to": {host: ISO or None}}``,
    oldest first."""
    try:
        data = json.loads((wh.root / UNDONE_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return []
    return data if isinstance(data, list) else []
