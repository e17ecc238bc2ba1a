"""The crawled copy for a downstream consumer (``freshness export``): the newest version of
every page that changed or appeared in a time window, and a tombstone for every page that went
away in it.

An export reads the page_versions files of its window's cycles (history files are named after
their cycle), not the views file: a user's session or a cycle holding ``freshness.duckdb`` must
not stop it. It is a polars streaming query from those files to the output file, holding a
narrow key per URL of the window and the page text a batch at a time (DuckDB over thousands of
small files held hundreds of megabytes for their schemas alone: docs/crawled_copy.md).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, Literal, cast

import polars as pl

from freshness_pipeline.app.crawled_copy import (
    CopyError,
    QueryError,
    TargetError,
    iso_utc,
    require_warehouse,
)
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.layout import scan_files
from freshness_pipeline.warehouse.running import window_past_running_cycle
from freshness_pipeline.warehouse.storage import Warehouse

__all__ = ["FORMATS", "ExportSummary", "broken_pipe", "check_target", "export"]

#: What ``freshness export`` writes.
FORMATS = ("jsonl", "parquet", "csv")
Format = Literal["jsonl", "parquet", "csv"]


@dataclass(frozen=True)
class ExportSummary:
    versions: int
    gone: int

    @property
    def rows(self) -> int:
        return self.versions + self.gone


# An export's columns, in every format: a version's, then a tombstone's.
_VERSION_COLUMNS = ("url", "observed_at", "outcome", "title", "text", "fields", "fingerprint")
_EXPORT_COLUMNS = (*_VERSION_COLUMNS, "status", "gone_at")
# Rows per batch from the query to the output, and so per Parquet row group: a few MB of page
# text (polars' default row group of 512 Ki rows would hold half a gigabyte of it; fewer rows
# a batch held less, at no cost in time).
EXPORT_ROW_GROUP = 2048
# page_versions bytes on disk of the hosts whose newest-version keys are held at once: the
# export's memory, besides a batch of rows, whatever the window's size (see _Window).
EXPORT_BATCH_BYTES = 16 * 1024 * 1024


def check_target(out: Path) -> None:
    """Refuse an --out that cannot be written before any work is done, naming why."""
    if out.is_dir():
        raise TargetError(f"{out} is a folder, not a file")
    folder = out.parent
    if not folder.is_dir():
        raise TargetError(f"{out}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise TargetError(f"{out}: cannot write in folder {folder}")


@contextlib.contextmanager
def _atomic_file(out: Path) -> Iterator[Path]:
    """A temporary name beside ``out``, renamed to it once complete: a consumer watching the
    path never reads half an export, and a failed one leaves what was there."""
    tmp = out.with_name(f".{out.name}.tmp-{uuid.uuid4().hex}")
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, out)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def export(
    wh: Warehouse,
    since: datetime,
    until: datetime | None,
    fmt: str,
    *,
    out: Path | None = None,
    stream: BinaryIO | None = None,
) -> ExportSummary:
    """Write the window's copy (``since`` inclusive, ``until`` exclusive, None: open) to
    ``out`` (atomically) or else to ``stream``. Raises :class:`CopyError` for bad input before
    writing anything, :class:`QueryError` when the warehouse's files cannot be read."""
    if fmt not in FORMATS:
        raise CopyError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if until is not None and until < since:
        raise CopyError(
            f"the window ends before it starts: --until {iso_utc(until)} is before "
            f"--since {iso_utc(since)}"
        )
    if out is not None:
        check_target(out)
    elif stream is None:
        raise ValueError("export needs an output file or a stream")
    require_warehouse(wh)
    if (busy := window_past_running_cycle(wh.home, until)) is not None:
        raise CopyError(busy)
    try:
        window = _Window(wh, since, until)
        if out is not None:
            with _atomic_file(out) as tmp, tmp.open("wb") as sink:
                return window.write(cast(Format, fmt), sink)
        assert stream is not None
        if fmt != "parquet":
            summary = window.write(cast(Format, fmt), stream)
            stream.flush()
            return summary
        # a Parquet file's footer comes last: it is written whole, then copied
        with tempfile.TemporaryDirectory(prefix="freshness-export-") as scratch:
            path = Path(scratch) / "export.parquet"
            with path.open("wb") as sink:
                summary = window.write("parquet", sink)
            with path.open("rb") as fh:
                shutil.copyfileobj(fh, stream)
            stream.flush()
            return summary
    except pl.exceptions.PolarsError as exc:
        text = str(exc).strip()
        raise QueryError(text.splitlines()[0] if text else type(exc).__name__) from exc


class _Window:
    """One export as polars streaming queries, a group of hosts at a time.

    Each URL's row is its newest in the window (a ``freshness reextract`` row is dated after
    the row it re-read; among rows of one time, which older homes can have, the re-extraction
    wins), unless the URL went gone in the window: then only its tombstone. Finding the newest
    needs a key per URL of the window (its URL and newest time); a URL's rows are all in its
    host's files, so the keys are found and used for a group of hosts at a time (whole hosts,
    about :data:`EXPORT_BATCH_BYTES` of page_versions files), and what is held at once is that
    group's keys, the window's gone URLs and a batch of rows on its way to the output: the
    same at 10 thousand versions as at a million. The rows stream through a filter on the
    keys: a join would buffer them."""

    def __init__(self, wh: Warehouse, since: datetime, until: datetime | None) -> None:
        self.in_window = self._between("observed_at", since, until)
        self.files = wh.files("page_versions", since=since, until=until)
        # newest first by time, then a re-extraction over the row it re-read
        self.rank = pl.col("observed_at").dt.epoch("us") * 2 + (
            pl.col("outcome") == "reextracted"
        ).fill_null(False).cast(pl.Int64)
        self.gone = self._went_gone(wh, since, until)

    def _went_gone(self, wh: Warehouse, since: datetime, until: datetime | None) -> pl.DataFrame:
        """url, gone_at of every URL that went gone in the window and was still gone at its
        end, read from the request history (fetch_log), so that the same window exported
        again gives the same tombstones after a page came back (today's url_state would not
        say it was ever gone). gone_at is the first gone answer after its last live one
        (tables.SUCCESS_OUTCOMES); a URL whose answers before the window had already said
        gone, or that url_state says has been gone since before it, was told then."""
        answered = self._between("fetched_at", since, until) & pl.col("outcome").is_in(
            [*tables.SUCCESS_OUTCOMES, "gone"]
        )
        window = [str(f) for f in wh.files("fetch_log", since=since, until=until)]
        answers = self._scan("fetch_log", window, ("url", "host", "fetched_at", "outcome")).filter(
            answered
        )
        # what is held is the window's gone URLs, not a row per URL answered in it
        went = answers.filter(pl.col("outcome") == "gone").select("url").unique().collect()
        answers = answers.filter(pl.col("url").is_in(went["url"].implode()))
        alive = answers.group_by("url").agg(
            pl.col("fetched_at").filter(pl.col("outcome") != "gone").max().alias("_alive")
        )
        gone = (
            answers.filter(pl.col("outcome") == "gone")
            .join(alive, on="url", how="left")
            .filter(pl.col("_alive").is_null() | (pl.col("fetched_at") > pl.col("_alive")))
            .group_by("url")
            .agg(
                pl.col("fetched_at").min().cast(tables.UTC_TIME).alias("gone_at"),
                pl.col("host").first(),
                pl.col("_alive").first(),
            )
            .collect()
        )
        # url_state's current spells of gone: what fetch_log may no longer hold (the gone
        # pages only, however big the crawl)
        state = [str(f) for f in wh.files("url_state")]
        spells = (
            self._scan("url_state", state, ("url", "status", "gone_at"))
            .filter(pl.col("status") == "gone")
            .select("url", pl.col("gone_at").cast(tables.UTC_TIME))
            .collect()
        )
        # gone all through the window: gone before it already, unless its last answer before
        # the window was a live one
        unsure = gone.filter(pl.col("_alive").is_null())
        if unsure.height:
            # A URL still gone whose current spell began before the window was told then, even
            # where the answers that said so have been pruned from fetch_log (--retention-days
            # under the 30-day recheck gave each monthly recheck a tombstone of its own).
            told_before = spells.filter(
                pl.col("url").is_in(unsure["url"].implode())
                & (pl.col("gone_at") < pl.lit(since).cast(tables.UTC_TIME))
            ).select("url")
            gone = gone.join(told_before, on="url", how="anti")
            unsure = unsure.join(told_before, on="url", how="anti")
        if unsure.height:
            before = [
                str(f)
                for f in wh.files("fetch_log", unsure["host"].unique().to_list(), until=since)
            ]
            told = (
                self._scan("fetch_log", before, ("url", "fetched_at", "outcome"))
                .filter(
                    pl.col("url").is_in(unsure["url"].implode())
                    & pl.col("outcome").is_in([*tables.SUCCESS_OUTCOMES, "gone"])
                )
                .sort("fetched_at")
                .group_by("url")
                .agg(pl.col("outcome").last())
                .filter(pl.col("outcome") == "gone")
                .collect()
            )
            gone = gone.join(told.select("url"), on="url", how="anti")
        # A page whose current spell began in the window is gone whatever fetch_log still
        # holds: --retention-days prunes the answers that said so, and without them the page's
        # last version was handed out as live.
        pruned = spells.filter(self._between("gone_at", since, until)).join(
            gone, on="url", how="anti"
        )
        return pl.concat([gone.select("url", "gone_at"), pruned])

    @staticmethod
    def _between(column: str, since: datetime, until: datetime | None) -> pl.Expr:
        after = pl.col(column) >= pl.lit(since).cast(tables.UTC_TIME)
        if until is None:
            return after
        return after & (pl.col(column) < pl.lit(until).cast(tables.UTC_TIME))

    @staticmethod
    def _scan(table: str, files: list[str], columns: tuple[str, ...]) -> pl.LazyFrame:
        """The files' rows in the table's schema (a file of an older release may lack a
        column), or none: polars cannot scan an empty list of files."""
        schema = tables.SCHEMAS[table]
        if not files:
            return pl.LazyFrame(schema={c: schema[c] for c in columns})
        return scan_files(
            files,
            schema=schema,
            missing_columns="insert",
            extra_columns="ignore",
            hive_partitioning=False,
        ).select(columns)

    def _host_groups(self) -> Iterator[list[str]]:
        """The window's page_versions files, whole host folders at a time."""
        group: list[str] = []
        size = 0
        folder = None
        for path in self.files:
            if path.parent != folder and size >= EXPORT_BATCH_BYTES:
                yield group
                group, size = [], 0
            folder = path.parent
            group.append(str(path))
            with contextlib.suppress(FileNotFoundError):
                size += path.stat().st_size
        if group:
            yield group

    def _rows(self, files: list[str]) -> tuple[pl.LazyFrame, int]:
        """The newest row in the window of each URL of ``files`` that did not go gone, and
        how many there are."""

        def key(rank: pl.Expr) -> pl.Expr:
            return pl.concat_str([pl.col("url"), rank.cast(pl.String)], separator="\x00")

        keys = (
            self._scan("page_versions", files, ("url", "observed_at", "outcome"))
            .filter(self.in_window)
            .group_by("url")
            .agg(self.rank.max().alias("_rank"))
            .join(self.gone.lazy(), on="url", how="anti")
            .select(key(pl.col("_rank")).alias("_key"))
            .collect()["_key"]
        )
        rows = (
            self._scan("page_versions", files, _VERSION_COLUMNS)
            .filter(self.in_window)
            .filter(key(self.rank).is_in(keys.implode()))
            .with_columns(self._fields())
        )
        return rows, keys.len()

    @staticmethod
    def _iso(column: str) -> pl.Expr:
        """:func:`iso_utc` as an expression: to the second, or the microsecond if it has one."""
        moment = pl.col(column).dt.convert_time_zone("UTC")
        return (
            pl.when(moment.dt.microsecond() == 0)
            .then(moment.dt.strftime("%Y-%m-%dT%H:%M:%SZ"))
            .otherwise(moment.dt.strftime("%Y-%m-%dT%H:%M:%S%.6fZ"))
            .alias(column)
        )

    @staticmethod
    def _fields() -> pl.Expr:
        """The stored fields (a JSON object as text), ``{}`` where there are none."""
        fields = pl.col("fields")
        ok = fields.str.starts_with("{") & fields.str.ends_with("}")
        return pl.when(ok.fill_null(False)).then(fields).otherwise(pl.lit("{}")).alias("fields")

    def _shaped(self, fmt: Format, frame: pl.LazyFrame, *, gone: bool) -> pl.LazyFrame:
        """Versions, or tombstones (``gone``: url, status, gone_at), in the output's columns."""
        if fmt == "jsonl":
            return frame.select(self._json_line(gone=gone).alias("line"))
        if gone:
            versions = tables.empty("page_versions").lazy().select(_VERSION_COLUMNS)
            frame = pl.concat([versions, frame], how="diagonal")
        else:
            frame = frame.with_columns(
                status=pl.lit(None, pl.String), gone_at=pl.lit(None, tables.UTC_TIME)
            )
        frame = frame.select(_EXPORT_COLUMNS)
        if fmt == "csv":  # times as text: CSV readers guess at them
            return frame.with_columns(self._iso("observed_at"), self._iso("gone_at"))
        return frame

    def _json_line(self, *, gone: bool) -> pl.Expr:
        """One JSON object a line, keys in the documented order: a version with its fields as
        an object (stored as JSON text, spliced in whole), a gone URL as its tombstone alone.
        polars encodes the strings (``struct.json_encode``), so no row passes through Python."""
        if gone:
            return pl.struct("url", "status", self._iso("gone_at")).struct.json_encode()
        head = pl.struct(
            "url", self._iso("observed_at"), "outcome", "title", "text"
        ).struct.json_encode()
        tail = pl.struct("fingerprint").struct.json_encode()
        return pl.concat_str(
            [
                head.str.head(-1),
                pl.lit(',"fields":'),
                pl.col("fields"),
                pl.lit(","),
                tail.str.tail(-1),
            ]
        )

    def write(self, fmt: Format, sink: BinaryIO) -> ExportSummary:
        """Every host group's rows, then the tombstones, batch by batch into ``sink``."""
        writer = _BatchWriter(fmt, sink)
        versions = 0
        try:
            for files in self._host_groups():
                rows, n = self._rows(files)
                versions += n
                writer.write(self._shaped(fmt, rows, gone=False))
            tombstones = self.gone.lazy().select("url", pl.lit("gone").alias("status"), "gone_at")
            writer.write(self._shaped(fmt, tombstones, gone=True))
        finally:
            writer.close()
        return ExportSummary(versions, self.gone.height)


class _BatchWriter:
    """Batches of a streaming query into one output: Parquet through pyarrow's writer (a row
    group at a time), text through polars' CSV writer (JSON lines are one column of text)."""

    def __init__(self, fmt: Format, sink: BinaryIO) -> None:
        self.fmt = fmt
        self.sink = sink
        self.parquet: Any = None
        if fmt == "csv":
            # the header even for an empty window, as a CSV reader expects
            empty = pl.DataFrame(schema=dict.fromkeys(_EXPORT_COLUMNS, pl.String))
            empty.write_csv(sink)
        elif fmt == "parquet":
            import pyarrow.parquet as pq  # type: ignore[import-untyped]

            schema = (
                tables.empty("page_versions")
                .select(_VERSION_COLUMNS)
                .with_columns(status=pl.lit(None, pl.String), gone_at=pl.lit(None, tables.UTC_TIME))
            )
            self.schema = schema.to_arrow().schema
            self.parquet = pq.ParquetWriter(sink, self.schema, compression="zstd")

    def write(self, frame: pl.LazyFrame) -> None:
        for batch in frame.collect_batches(chunk_size=EXPORT_ROW_GROUP, maintain_order=False):
            if not batch.height:
                continue
            if self.parquet is not None:
                self.parquet.write_table(batch.to_arrow().cast(self.schema))
            elif self.fmt == "csv":
                batch.write_csv(self.sink, include_header=False)
            else:
                batch.write_csv(self.sink, include_header=False, quote_style="never")

    def close(self) -> None:
        if self.parquet is not None:
            self.parquet.close()


def broken_pipe(exc: OSError) -> bool:
    """The reader of stdout went away: Python says so with BrokenPipeError, polars' writers
    with a plain OSError carrying the OS's words and code."""
    return (
        isinstance(exc, BrokenPipeError)
        or exc.errno == errno.EPIPE
        or f"(os error {errno.EPIPE})" in str(exc)
    )
