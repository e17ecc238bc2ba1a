"""The crawled copy read back: what changed in one page between two of its versions (``freshness
diff``), and, for a downstream consumer, the newest version of every page that changed or
appeared in a time window plus a tombstone for every page that went away in it (``freshness
export``).

Both read the Parquet files themselves rather than the views file: a user's session or a cycle
holding ``freshness.duckdb`` must not stop a read, a diff needs only the files of its page's
host (a private in-memory DuckDB reads them), and an export only the page_versions files of its
window's cycles (history files are named after their cycle). Nothing here collects a table into
Python: a diff holds one page's versions; an export is a polars streaming query from those
files to the output file, holding a narrow key per URL of the window and the page text a
batch at a time (DuckDB over thousands of small files held hundreds of megabytes for their
schemas alone: docs/crawled_copy.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, Literal, NamedTuple, cast

import duckdb
import polars as pl
from rich.console import Console
from rich.text import Text

from freshness_pipeline.config import ConfigError, load_config
from freshness_pipeline.science.changes import TEXT_FIELD
from freshness_pipeline.science.line_diff import unified_diff
from freshness_pipeline.science.normalize import InvalidURL, normalize_url, url_authority
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.layout import scan_files
from freshness_pipeline.warehouse.running import window_past_running_cycle
from freshness_pipeline.warehouse.storage import Warehouse

__all__ = [
    "FORMATS",
    "CopyError",
    "DiffLine",
    "ExportSummary",
    "QueryError",
    "TargetError",
    "Version",
    "VersionDiff",
    "check_target",
    "diff_lines",
    "export",
    "iso_utc",
    "page_versions",
    "print_diff",
    "version_diff",
]

#: What ``freshness export`` writes.
FORMATS = ("jsonl", "parquet", "csv")
Format = Literal["jsonl", "parquet", "csv"]

# An export's DuckDB may hold this much before it spills to a temporary folder. Its only state
# is the newest observation time per URL (narrow, and it spills); page text streams through.
# Rows are not sorted: sorting would hold the whole window's text.
EXPORT_MEMORY_LIMIT = "256MB"
# Rows per Arrow batch: about 10 MB of page text, what the process holds at a time.
EXPORT_BATCH_ROWS = 2048
# Lines of unchanged text around each changed part of a diff, as `diff -u` shows.
TEXT_CONTEXT_LINES = 3


class CopyError(ValueError):
    """Bad input to a read of the crawled copy (an unknown page, a time before its first
    version, a bad window or output); ``str(exc)`` names what was wrong."""


class TargetError(CopyError):
    """An output file that cannot be written; ``str(exc)`` starts with its path."""


class QueryError(RuntimeError):
    """Reading the warehouse's files failed (a damaged file, a full disk): not the user's
    input; ``str(exc)`` is the first line of DuckDB's or polars' error."""


def iso_utc(moment: datetime) -> str:
    """ISO 8601 in UTC with a ``Z``, to the second unless the time has a fraction: the form
    every time the copy hands out takes, here and in an export (``_Window._iso``)."""
    moment = moment.astimezone(UTC) if moment.tzinfo else moment
    spec = "microseconds" if moment.microsecond else "seconds"
    return moment.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


@contextlib.contextmanager
def _duckdb(
    config: dict[str, str | bool | int | float | list[str]] | None = None,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A private in-memory connection, closed after use, its failures as :class:`QueryError`."""
    con = duckdb.connect(config=config or {})
    try:
        # timestamps come back, and are formatted, in UTC whatever the machine's zone
        con.execute("SET TimeZone = 'UTC'")
        yield con
    except duckdb.Error as exc:
        text = str(exc).strip()
        raise QueryError(text.splitlines()[0] if text else type(exc).__name__) from exc
    finally:
        con.close()


def _require_warehouse(wh: Warehouse) -> None:
    if not wh.root.is_dir():
        raise CopyError(
            f"no warehouse in {wh.home}: run `freshness seed` and `freshness cycle` first"
        )


# ---------------------------------------------------------------------------- diff


@dataclass(frozen=True)
class Version:
    """One row of page_versions: what the page said when it was observed."""

    observed_at: datetime
    outcome: str
    title: str | None
    text: str | None
    fields: dict[str, object]
    fingerprint: str | None
    #: where the archive holds the version's body (None: not archived)
    warc_filename: str | None = None
    warc_offset: int | None = None

    @property
    def is_bytes(self) -> bool:
        """Content that is not text (an image, a PDF): only its bytes to compare."""
        return self.text is None and self.title is None and not self.fields


class DiffLine(NamedTuple):
    kind: Literal["header", "hunk", "removed", "added", "context"]
    text: str


@dataclass(frozen=True)
class VersionDiff:
    """A version and the one before it (``old`` None: the page's first version, shown as all
    added, as a new file is), and the unified diff of their fields and text."""

    url: str
    new: Version
    old: Version | None
    lines: list[DiffLine]

    def plain(self) -> str:
        return "".join(f"{line.text}\n" for line in self.lines)


def _page_url(wh: Warehouse, url: str) -> tuple[str, str]:
    """(the URL as the crawl stores it, its host): the crawl keeps normalized URLs, so a URL
    typed with a tracking parameter or an upper-case host still finds its page."""
    try:
        host = url_authority(url)
        try:
            strip = load_config(wh.home).strip_params_for(host)
        except ConfigError:
            strip = None
        stored = normalize_url(url) if strip is None else normalize_url(url, strip_params=strip)
    except InvalidURL as exc:
        raise CopyError(f"{url!r} is not a page address: {exc}") from None
    return stored, host


def page_versions(wh: Warehouse, url: str) -> tuple[str, list[Version]]:
    """(the URL as stored, every kept version of it, oldest first). Only its host's files are
    read."""
    _require_warehouse(wh)
    stored, host = _page_url(wh, url)
    files = [str(f) for f in wh.files("page_versions", [host])]
    if not files:
        return stored, []
    with _duckdb() as con:
        rows = con.execute(
            "SELECT url, observed_at, outcome, title, text, fields, fingerprint,"
            " warc_filename, warc_offset FROM read_parquet($files, union_by_name = true)"
            # a re-extraction after the row it re-read where an older home dated both alike
            " WHERE url IN ($raw, $stored) ORDER BY observed_at, outcome = 'reextracted'",
            {"files": files, "raw": url.strip(), "stored": stored},
        ).fetchall()
    # a URL stored exactly as typed wins over its normalized form
    exact = [r for r in rows if r[0] == url.strip()]
    chosen = exact or rows
    versions = [
        Version(
            observed_at=r[1].astimezone(UTC),
            outcome=r[2],
            title=r[3],
            text=r[4],
            fields=_fields(r[5]),
            fingerprint=r[6],
            warc_filename=r[7],
            warc_offset=r[8],
        )
        for r in chosen
    ]
    return (chosen[0][0] if chosen else stored), versions


def _fields(text: str | None) -> dict[str, object]:
    if not text:
        return {}
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


def _why_no_version(wh: Warehouse, url: str, host: str) -> str:
    """What url_state knows of a URL without a kept version: a user who typed a crawled URL
    wants to hear it was never fetched with content, not that it does not exist."""
    files = [str(f) for f in wh.files("url_state", [host])]
    if files:
        with _duckdb() as con:
            row = con.execute(
                "SELECT status, last_outcome, redirect_to"
                " FROM read_parquet($files, union_by_name = true) WHERE url = $url LIMIT 1",
                {"files": files, "url": url},
            ).fetchone()
        if row is not None:
            status, outcome, moved_to = row
            last = f", last fetch {outcome!r}" if outcome else ", never fetched"
            why = f"the crawl knows it (status {status!r}{last}) but kept no version of it"
            if outcome == "redirect" and moved_to:
                why += f": it redirects to {moved_to} (try that URL)"
            return why
    return "it is not a URL this home crawls (see url_state for the URLs it does)"


def version_diff(wh: Warehouse, url: str, at: datetime | None = None) -> VersionDiff:
    """The diff of the newest version observed at or before ``at`` (default: the newest) with
    the version before it. Raises :class:`CopyError` for a URL without versions or an ``at``
    before its first."""
    stored, versions = page_versions(wh, url)
    if not versions:
        _, host = _page_url(wh, url)
        raise CopyError(
            f"no version of {stored} in page_versions: {_why_no_version(wh, stored, host)}"
        )
    if at is not None:
        kept = [v for v in versions if v.observed_at <= at]
        if not kept:
            raise CopyError(
                f"no version of {stored} observed at or before --at {iso_utc(at)}: its first "
                f"was observed at {iso_utc(versions[0].observed_at)}"
            )
    else:
        kept = versions
    new = kept[-1]
    old = kept[-2] if len(kept) > 1 else None
    return VersionDiff(stored, new, old, diff_lines(stored, old, new))


def _field_lines(version: Version | None) -> list[str]:
    """A line per field (the text has a section of its own), values as JSON: a null, a number
    and a string that reads like one stay apart."""
    if version is None:
        return []
    return [
        f"{name}: {json.dumps(value, ensure_ascii=False)}"
        for name, value in sorted(version.fields.items())
        if name != TEXT_FIELD
    ]


def _text_lines(version: Version | None) -> list[str]:
    return (version.text or "").splitlines() if version is not None else []


def _label(url: str, part: str, version: Version | None) -> str:
    if version is None:
        return "/dev/null"
    return f"{url} {part} @ {iso_utc(version.observed_at)} ({version.outcome})"


def diff_lines(url: str, old: Version | None, new: Version) -> list[DiffLine]:
    """Two unified diffs, one of the fields (every field shown: there are few, and the
    unchanged ones say what the page is) and one of the text (three lines of context). A part
    that did not change has no section."""
    out: list[DiffLine] = []
    parts = (
        ("fields", _field_lines(old), _field_lines(new), None),
        ("text", _text_lines(old), _text_lines(new), TEXT_CONTEXT_LINES),
    )
    for part, before, after, context in parts:
        lines = unified_diff(
            before,
            after,
            _label(url, part, old),
            _label(url, part, new),
            max(len(before), len(after)) if context is None else context,
        )
        for i, line in enumerate(lines):
            out.append(DiffLine(_kind(i, line), line))
    return out


def _kind(index: int, line: str) -> Literal["header", "hunk", "removed", "added", "context"]:
    # the first two lines of each diff are its ---/+++ header, whatever a text line starts with
    if index < 2:
        return "header"
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("-"):
        return "removed"
    if line.startswith("+"):
        return "added"
    return "context"


_STYLES = {"header": "bold", "hunk": "cyan", "removed": "red", "added": "green", "context": ""}


#: Control characters a crawled page may hold (ESC, BEL, NUL, C1 codes), shown as ``\x1b``
#: on a terminal: written raw, a page could recolour, retitle or (OSC 52) write the clipboard
#: of whoever reads its diff. A tab stays a tab.
_VISIBLE_CONTROLS = {
    c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))
}


def print_diff(diff: VersionDiff, console: Console) -> None:
    """Coloured on a terminal, the page's control characters shown escaped; plain text
    otherwise, written as is, so that a pipe or a file gets a diff that `patch` and other
    tools read (no escapes, no wrapping, no markup)."""
    if not console.is_terminal:
        console.file.write(diff.plain())
        console.file.flush()
        return
    for line in diff.lines:
        text = line.text.translate(_VISIBLE_CONTROLS)
        console.print(Text(text, style=_STYLES[line.kind]), soft_wrap=True)


# ---------------------------------------------------------------------------- export


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
    _require_warehouse(wh)
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
        gone was told then."""
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
        # gone all through the window: gone before it already, unless its last answer before
        # the window was a live one
        unsure = gone.filter(pl.col("_alive").is_null())
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
        return gone.select("url", "gone_at")

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
