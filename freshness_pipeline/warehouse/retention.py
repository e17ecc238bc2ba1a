"""Retention of the crawled copy: what ``[url_classes.C.retention]`` and ``[retention]`` in
freshness.toml (config.py) let a home forget, applied by every cycle run as its last step (the
``retention`` asset, defs/assets/retention.py), whether the CLI, the schedule or the UI started
it.

The excluded fields never reach disk (assets.versions drops them when the rows are built),
and a field excluded after its values were written is taken out of them at the next cycle
(warehouse.excluded_fields.scrub_history); this module expires what was written: page_versions and changes rows of a class older than its
``versions_days`` (but a live URL's newest version: the copy of what the page says now), every
version but each URL's newest (and every changes row) of a class with
``keep_history = false``, and whole WARC files older than ``archive_days``. A row's class is its
URL's class in url_state (a page_versions row of a URL url_state no longer has keeps its own),
so a page moved to another class is kept as its new class says.

Every file is replaced whole or not at all (Warehouse's atomic writes), one file at a time, and
the archive in archive.prune's two steps around the table rewrites that move rows off the
expired WARC files. The order is what keeps every pointer whole: first the originals kept
revisits need are copied into a kept file (nothing deleted), then every table row is moved
off the expired files (page_versions and changes host by host, then fetch_log and url_state),
and only then are the expired files deleted, each index before its WARC. A kill anywhere
(crashpoints.PRUNE_POINTS) therefore leaves rows that point into files still there or into
the kept copy, never into a deleted one, and the next cycle's prune finds what is left to do
and does it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl

from freshness_pipeline.config import PipelineConfig
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.archive import (
    ArchivedOriginal,
    PrunePlan,
    archive_dir_for,
    commit_prune,
    prepare_prune,
)
from freshness_pipeline.warehouse.crashpoints import crash_point
from freshness_pipeline.warehouse.excluded_fields import scrub_history
from freshness_pipeline.warehouse.layout import read_file, scan_files
from freshness_pipeline.warehouse.storage import HomeBusy, Warehouse

__all__ = ["RetentionSummary", "prune_history", "prune_home"]

_LOCATION = ("warc_filename", "warc_offset", "warc_length")


@dataclass
class RetentionSummary:
    """What one prune removed, for the cycle's notes and the retention asset's metadata.

    ``by_host``: page_versions and changes rows removed per host (the asset's partitions show
    their own); ``skipped``: why nothing was pruned (another process held the home)."""

    version_rows: int = 0
    change_rows: int = 0
    files_rewritten: int = 0
    files_removed: int = 0
    warc_files_removed: int = 0
    originals_carried: int = 0
    #: history rows a field excluded since they were written was taken out of
    rows_scrubbed: int = 0
    by_host: dict[str, tuple[int, int]] = field(default_factory=dict)
    skipped: str | None = None

    #: the counts, as the run's metadata carries them (ints, read back by the CLI)
    COUNTS = (
        "version_rows",
        "change_rows",
        "files_rewritten",
        "files_removed",
        "warc_files_removed",
        "originals_carried",
        "rows_scrubbed",
    )

    def counts(self) -> dict[str, int]:
        return {name: int(getattr(self, name)) for name in self.COUNTS}

    @classmethod
    def from_counts(cls, counts: Mapping[str, int]) -> RetentionSummary:
        """The summary a run's metadata describes (other keys ignored)."""
        summary = cls()
        for name in cls.COUNTS:
            setattr(summary, name, int(counts.get(name, 0)))
        return summary

    def add(self, other: RetentionSummary) -> None:
        """Fold another run's prune into this one (a CLI cycle can be several runs)."""
        for name in self.COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for host, (versions, changes) in other.by_host.items():
            self.count_host(host, versions, changes)
        self.skipped = self.skipped or other.skipped

    def count_host(self, host: str, versions: int = 0, changes: int = 0) -> None:
        had = self.by_host.get(host, (0, 0))
        self.by_host[host] = (had[0] + versions, had[1] + changes)

    def note(self) -> str | None:
        if self.skipped:
            return f"retention skipped ({self.skipped}); the next cycle prunes"
        parts = []
        if self.version_rows:
            parts.append(f"{self.version_rows} page_versions rows")
        if self.change_rows:
            parts.append(f"{self.change_rows} changes rows")
        if self.warc_files_removed:
            carried = (
                f" (carrying {self.originals_carried} originals kept revisits refer to)"
                if self.originals_carried
                else ""
            )
            parts.append(f"{self.warc_files_removed} WARC files{carried}")
        scrubbed = (
            f"retention took newly excluded fields out of {self.rows_scrubbed} history rows"
            if self.rows_scrubbed
            else None
        )
        if not parts:
            return scrubbed
        files = ""
        if self.files_rewritten or self.files_removed:
            files = (
                f"; {self.files_rewritten} history files rewritten, {self.files_removed} removed"
            )
        removed = f"retention removed {', '.join(parts)}{files}"
        return removed if scrubbed is None else f"{removed}; {scrubbed.removeprefix('retention ')}"


def prune_home(
    wh: Warehouse, config: PipelineConfig, now: datetime, what: str = "retention"
) -> RetentionSummary:
    """:func:`prune_history` under the home's writer lock: taken here for a run the Dagster
    daemon or the UI launched, already held by this very process for a CLI cycle (the runner
    takes it around the run). When another process holds it (the `freshness` command whose
    distributed cycle this group run is; a run the daemon or the UI started does not start
    beside a writer, warehouse/locks.py), nothing is pruned and ``skipped`` says who has it:
    rewriting the files it is writing would lose its rows, and the next cycle prunes instead."""
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(wh.exclusive(what))
        except HomeBusy as busy:
            if not _held_by_this_process(wh):
                return RetentionSummary(skipped=str(busy))
        summary = prune_history(wh, config, now)
    return summary


def _held_by_this_process(wh: Warehouse) -> bool:
    """Whether the writer lock's holder is this process (storage.Warehouse.exclusive writes
    "<what> (pid N)" into the lock file while it holds it). A flock cannot be asked who holds
    it, and a second flock from the same process on a new descriptor is refused like anyone's."""
    try:
        holder = (wh.home / "writer.lock").read_text(errors="replace").strip()
    except OSError:
        return False
    return holder.endswith(f"(pid {os.getpid()})")


def prune_history(wh: Warehouse, config: PipelineConfig, now: datetime) -> RetentionSummary:
    """Expire what the home's retention settings no longer keep, as of the cycle's ``now``
    (never the wall clock: a home on a simulated clock expires on its own time). Only under
    the home's exclusive lock (:func:`prune_home` takes it): it rewrites files a cycle
    writes."""
    summary = RetentionSummary()
    summary.rows_scrubbed = scrub_history(wh, config)
    plan = _prepare_archive(wh.home, config, now)
    relocating = plan is not None and bool(plan.expired)
    if relocating:
        crash_point("prune:archive_prepared")
    expiring = any(
        r.versions_days is not None or not r.keep_history for r in config.class_retention.values()
    )
    if expiring or relocating:
        hosts = sorted(set(wh.hosts_in("page_versions")) | set(wh.hosts_in("changes")))
        for host in hosts:
            _prune_host(wh, config, now, host, plan if relocating else None, summary)
    if relocating:
        assert plan is not None
        for host in wh.hosts_in("fetch_log"):
            _relocate_history(wh, "fetch_log", host, plan, summary)
        for host in wh.hosts_in("url_state"):
            _relocate_state(wh, host, plan)
        # no row points into an expired file any more: only now may they go
        crash_point("prune:tables_moved")
        summary.warc_files_removed = len(commit_prune(plan))
        summary.originals_carried = len(plan.relocated)
    return summary


def _prepare_archive(home: Path, config: PipelineConfig, now: datetime) -> PrunePlan | None:
    if config.archive_days is None:
        return None
    archive_dir = archive_dir_for(home)
    if not archive_dir.is_dir():
        return None
    return prepare_prune(archive_dir, expire_before=now - timedelta(days=config.archive_days))


def _classes(wh: Warehouse, host: str) -> pl.DataFrame:
    return (
        wh.read("url_state", [host], columns=["url", "url_class", "status"])
        .rename({"url_class": "_class", "status": "_status"})
        .unique(subset="url", keep="last")
    )


def _expired(config: PipelineConfig, now: datetime, at: str, class_col: str = "_class") -> pl.Expr:
    """Rows observed more than their class's ``versions_days`` before ``now``."""
    days = {
        c: r.versions_days for c, r in config.class_retention.items() if r.versions_days is not None
    }
    if not days:
        return pl.lit(False)
    cutoff = pl.lit(now).cast(tables.UTC_TIME) - pl.duration(
        seconds=pl.col(class_col).replace_strict(
            {c: d * 86_400 for c, d in days.items()}, default=None, return_dtype=pl.Float64
        )
    )
    return (pl.col(at) < cutoff).fill_null(False)


def _prune_host(
    wh: Warehouse,
    config: PipelineConfig,
    now: datetime,
    host: str,
    plan: PrunePlan | None,
    summary: RetentionSummary,
) -> None:
    classes = _classes(wh, host)
    unkept = [c for c, r in config.class_retention.items() if not r.keep_history]
    jobs: list[tuple[pl.DataFrame, Path]] = []
    empty: list[Path] = []

    version_files = wh.files("page_versions", [host])
    expiring = any(r.versions_days is not None for r in config.class_retention.values())
    newest = None
    if (unkept or expiring) and version_files:
        # each URL's newest version is known only across the host's files
        newest = (
            scan_files(version_files, schema=tables.SCHEMAS["page_versions"])
            .select("url", "observed_at")
            .group_by("url")
            .agg(pl.col("observed_at").max().alias("_newest"))
            .collect()
        )
    for path in version_files:
        rows = tables.conform("page_versions", read_file(path))
        rows = rows.join(classes, on="url", how="left").with_columns(
            pl.col("_class").fill_null(pl.col("url_class"))
        )
        drop = _expired(config, now, "observed_at")
        if newest is not None:
            rows = rows.join(newest, on="url", how="left")
            older = (pl.col("observed_at") < pl.col("_newest")).fill_null(False)
            # versions_days expires history, not the copy: a live page's newest version is
            # what it says now (a page unchanged for longer than the window still has one,
            # and its next change is diffed against it); a gone page's goes with the rest
            current = ~older & (pl.col("_status") != "gone").fill_null(False)
            drop = (drop & ~current) | (pl.col("_class").is_in(unkept).fill_null(False) & older)
        kept = rows.filter(~drop)
        moved = 0
        if plan is not None:
            kept, moved = _relocated_rows(kept, plan)
        dropped = rows.height - kept.height
        summary.version_rows += dropped
        summary.count_host(host, versions=dropped)
        _collect(path, tables.conform("page_versions", kept), dropped + moved, jobs, empty)

    for path in wh.files("changes", [host]):
        rows = tables.conform("changes", read_file(path)).join(classes, on="url", how="left")
        drop = _expired(config, now, "changed_at")
        if unkept:
            drop = drop | pl.col("_class").is_in(unkept).fill_null(False)
        kept = rows.filter(~drop)
        dropped = rows.height - kept.height
        summary.change_rows += dropped
        summary.count_host(host, changes=dropped)
        _collect(path, tables.conform("changes", kept), dropped, jobs, empty)
    _apply(wh, jobs, empty, summary)


def _collect(
    path: Path,
    kept: pl.DataFrame,
    changed: int,
    jobs: list[tuple[pl.DataFrame, Path]],
    empty: list[Path],
) -> None:
    if not changed:
        return
    if kept.is_empty():
        empty.append(path)
    else:
        jobs.append((kept, path))


def _apply(
    wh: Warehouse,
    jobs: list[tuple[pl.DataFrame, Path]],
    empty: list[Path],
    summary: RetentionSummary,
) -> None:
    # One file at a time, each whole: a kill between two leaves some of a host's files
    # pruned and the others as they were, all of them pointing into files that still exist.
    for job in jobs:
        wh._atomic_write_many([job])
        summary.files_rewritten += 1
        crash_point("prune:history_rewritten")
    for path in empty:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        summary.files_removed += 1
        crash_point("prune:history_rewritten")


def _relocated_rows(rows: pl.DataFrame, plan: PrunePlan) -> tuple[pl.DataFrame, int]:
    """``rows`` with the archive locations of records in expired files moved to where the
    prune carried them, or cleared: a row must never point at a file about to go."""
    if rows.is_empty() or "warc_filename" not in rows.columns:
        return rows, 0
    hit = pl.col("warc_filename").is_in(list(plan.expired)).fill_null(False)
    n = rows.select(hit.sum()).item()
    if not n:
        return rows, 0
    moves = pl.DataFrame(
        {
            "warc_filename": [old for old, _ in plan.relocated],
            "warc_offset": [offset for _, offset in plan.relocated],
            "_file": [loc.warc_filename for loc in plan.relocated.values()],
            "_offset": [loc.warc_offset for loc in plan.relocated.values()],
            "_length": [loc.warc_length for loc in plan.relocated.values()],
        },
        schema={
            "warc_filename": pl.String,
            "warc_offset": pl.Int64,
            "_file": pl.String,
            "_offset": pl.Int64,
            "_length": pl.Int64,
        },
    )
    out = (
        rows.join(moves, on=["warc_filename", "warc_offset"], how="left")
        .with_columns(
            pl.when(hit).then(pl.col("_file")).otherwise("warc_filename").alias("warc_filename"),
            pl.when(hit).then(pl.col("_offset")).otherwise("warc_offset").alias("warc_offset"),
            pl.when(hit).then(pl.col("_length")).otherwise("warc_length").alias("warc_length"),
        )
        .drop("_file", "_offset", "_length")
    )
    return out, n


def _relocate_history(
    wh: Warehouse, table: str, host: str, plan: PrunePlan, summary: RetentionSummary
) -> None:
    jobs: list[tuple[pl.DataFrame, Path]] = []
    for path in wh.files(table, [host]):
        rows = tables.conform(table, read_file(path))
        moved_rows, moved = _relocated_rows(rows, plan)
        if moved:
            jobs.append((tables.conform(table, moved_rows), path))
    wh._atomic_write_many(jobs)


def _relocate_state(wh: Warehouse, host: str, plan: PrunePlan) -> None:
    """url_state's kept original of each URL after the prune: the next 304 of a URL whose
    original went is archived as a full response again (PrunePlan.relocate)."""
    state = wh.read("url_state", [host])
    if state.is_empty():
        return
    expired = tuple(f'"file":"{name}"' for name in plan.expired)
    if not state.select(
        pl.any_horizontal(pl.col("archived").str.contains(e, literal=True) for e in expired)
        .fill_null(False)
        .any()
    ).item():
        return

    def moved(text: str | None) -> str | None:
        if text is None:
            return None
        kept = plan.relocate(ArchivedOriginal.from_json(text))
        return None if kept is None else kept.to_json()

    # a loop over the host's URLs only when one of its originals is in an expired file
    archived = pl.Series([moved(t) for t in state["archived"]], dtype=pl.String)
    wh.write_partition("url_state", host, state.with_columns(archived=archived))
