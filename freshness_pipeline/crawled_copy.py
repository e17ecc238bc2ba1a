"""The crawled copy read back: what changed in one page between two of its versions (``freshness
diff``), and, for a downstream consumer, the newest version of every page that changed or
appeared in a time window plus a tombstone for every page that went away in it (``freshness
export``).

Both read the Parquet files themselves, in a private in-memory DuckDB, rather than the views
file: a user's session or a cycle holding ``freshness.duckdb`` must not stop a read, a diff
needs only the files of its page's host, and an export only the page_versions files of its
window's cycles (history files are named after their cycle). Nothing here collects a table into
Python: a diff holds one page's versions, an export streams Arrow batches (JSON lines, CSV) or
lets DuckDB write the Parquet file, with DuckDB's memory capped so that a large window spills
to disk instead of growing the process.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, Literal, NamedTuple, cast

import duckdb
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.csv as pa_csv  # type: ignore[import-untyped]
from rich.console import Console
from rich.text import Text

from freshness_pipeline.config import ConfigError, load_config
from freshness_pipeline.science.changes import TEXT_FIELD
from freshness_pipeline.science.normalize import InvalidURL, normalize_url, url_authority
from freshness_pipeline.storage import Warehouse

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
    """DuckDB failed on the warehouse's files (a damaged file, a full disk): not the user's
    input; ``str(exc)`` is DuckDB's first line, which names the file."""


def iso_utc(moment: datetime) -> str:
    """ISO 8601 in UTC with a ``Z``, to the second unless the time has a fraction: the form
    every time the copy hands out takes, here and in :data:`_ISO_SQL`."""
    moment = moment.astimezone(UTC) if moment.tzinfo else moment
    spec = "microseconds" if moment.microsecond else "seconds"
    return moment.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


# The same form in DuckDB, for a timestamp column ({0}).
_ISO_SQL = (
    "CASE WHEN {0} IS NULL THEN NULL"
    " WHEN microsecond({0} AT TIME ZONE 'UTC') % 1000000 = 0"
    " THEN strftime({0} AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ')"
    " ELSE strftime({0} AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S.%fZ') END"
)


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
            "SELECT url, observed_at, outcome, title, text, fields, fingerprint"
            " FROM read_parquet($files, union_by_name = true)"
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
                "SELECT status, last_outcome FROM read_parquet($files, union_by_name = true)"
                " WHERE url = $url LIMIT 1",
                {"files": files, "url": url},
            ).fetchone()
        if row is not None:
            status, outcome = row
            last = f", last fetch {outcome!r}" if outcome else ", never fetched"
            return f"the crawl knows it (status {status!r}{last}) but kept no version of it"
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
        lines = difflib.unified_diff(
            before,
            after,
            fromfile=_label(url, part, old),
            tofile=_label(url, part, new),
            n=max(len(before), len(after)) if context is None else context,
            lineterm="",
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


def print_diff(diff: VersionDiff, console: Console) -> None:
    """Coloured on a terminal; plain text otherwise, written as is, so that a pipe or a file
    gets a diff that `patch` and other tools read (no escapes, no wrapping, no markup)."""
    if not console.is_terminal:
        console.file.write(diff.plain())
        console.file.flush()
        return
    for line in diff.lines:
        console.print(Text(line.text, style=_STYLES[line.kind]), soft_wrap=True)


# ---------------------------------------------------------------------------- export


@dataclass(frozen=True)
class ExportSummary:
    versions: int
    gone: int

    @property
    def rows(self) -> int:
        return self.versions + self.gone


_VERSION_COLUMNS = {
    "url": "VARCHAR",
    "observed_at": "TIMESTAMPTZ",
    "outcome": "VARCHAR",
    "title": "VARCHAR",
    "text": "VARCHAR",
    "fields": "VARCHAR",
    "fingerprint": "VARCHAR",
}
_STATE_COLUMNS = {"url": "VARCHAR", "status": "VARCHAR", "gone_at": "TIMESTAMPTZ"}
# An export's columns, in every format.
_EXPORT_COLUMNS = (*_VERSION_COLUMNS, "status", "gone_at")


def _source(param: str, files: list[str], columns: dict[str, str]) -> str:
    """The rows of ``files`` (a query parameter), or none with the same columns: DuckDB fails
    on a read of no files, and a home may have no versions yet."""
    if files:
        names = ", ".join(columns)
        return f"(SELECT {names} FROM read_parquet(${param}, union_by_name = true))"  # noqa: S608
    typed = ", ".join(f"NULL::{kind} AS {name}" for name, kind in columns.items())
    return f"(SELECT {typed} WHERE false)"


def _window(column: str, until: datetime | None) -> str:
    return f"{column} >= $since" + (f" AND {column} < $until" if until is not None else "")


def _export_sql(fmt: Format, versions: list[str], state: list[str], until: datetime | None) -> str:
    """The newest version in the window of each URL with one there, unless the URL went gone
    in the window (then only its tombstone: it is the URL's last word), in no set order."""
    pages = _source("versions", versions, _VERSION_COLUMNS)
    known = _source("state", state, _STATE_COLUMNS)
    rows = f"""
        WITH newest AS (
            SELECT url, max(observed_at) AS observed_at FROM {pages}
            WHERE {_window("observed_at", until)} GROUP BY url
        ),
        gone AS (
            SELECT url, min(gone_at) AS gone_at FROM {known}
            WHERE status = 'gone' AND {_window("gone_at", until)} GROUP BY url
        ),
        copy AS (
            SELECT v.url, v.observed_at, v.outcome, v.title, v.text,
                coalesce(v.fields, '{{}}') AS fields, v.fingerprint,
                NULL::VARCHAR AS status, NULL::TIMESTAMPTZ AS gone_at
            FROM {pages} AS v
            JOIN newest AS n ON v.url = n.url AND v.observed_at = n.observed_at
            ANTI JOIN gone AS g ON v.url = g.url
            WHERE {_window("v.observed_at", until)}
            UNION ALL
            SELECT url, NULL, NULL, NULL, NULL, NULL, NULL, 'gone', gone_at FROM gone
        )
    """  # noqa: S608 (fixed SQL; values are parameters)
    if fmt in ("jsonl", "csv"):
        # times as text for both: JSON has no time type, and CSV readers guess at them
        select = (
            f"url, {_ISO_SQL.format('observed_at')} AS observed_at, outcome, title, text, fields,"
            f" fingerprint, status, {_ISO_SQL.format('gone_at')} AS gone_at"
        )
    else:
        select = "url, observed_at, outcome, title, text, fields, fingerprint, status, gone_at"
    return f"{rows} SELECT {select} FROM copy"  # noqa: S608 (fixed SQL)


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
    writing anything."""
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
    versions = [str(f) for f in wh.files("page_versions", since=since, until=until)]
    state = [str(f) for f in wh.files("url_state")]
    sql = _export_sql(cast(Format, fmt), versions, state, until)
    params: dict[str, object] = {"since": since}
    if until is not None:
        params["until"] = until
    if versions:
        params["versions"] = versions
    if state:
        params["state"] = state
    settings: dict[str, str | bool | int | float | list[str]] = {
        "memory_limit": EXPORT_MEMORY_LIMIT,
        # no order is promised, and keeping the scan's order would buffer rows
        "preserve_insertion_order": False,
    }
    with (
        tempfile.TemporaryDirectory(prefix="freshness-export-") as spill,
        _duckdb(settings | {"temp_directory": spill}) as con,
    ):
        if out is not None:
            with _atomic_file(out) as tmp:
                return _write(con, fmt, sql, params, tmp, None)
        assert stream is not None
        return _write(con, fmt, sql, params, Path(spill) / "export.parquet", stream)


def _write(
    con: duckdb.DuckDBPyConnection,
    fmt: str,
    sql: str,
    params: dict[str, object],
    path: Path,
    stream: BinaryIO | None,
) -> ExportSummary:
    """Write to ``path``, or to ``stream`` when given (Parquet, whose footer comes last, goes
    through ``path`` first and is then copied)."""
    if fmt == "parquet":
        target = str(path).replace("'", "''")
        con.execute(f"COPY ({sql}) TO '{target}' (FORMAT parquet, COMPRESSION zstd)", params)
        row = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE status = 'gone') FROM read_parquet($p)",
            {"p": str(path)},
        ).fetchone()
        total, gone = row if row is not None else (0, 0)
        if stream is not None:
            with path.open("rb") as fh:
                shutil.copyfileobj(fh, stream)
            stream.flush()
        return ExportSummary(total - gone, gone)
    reader = con.sql(sql, params=params).to_arrow_reader(EXPORT_BATCH_ROWS)
    with contextlib.ExitStack() as stack:
        sink = stream if stream is not None else stack.enter_context(path.open("wb"))
        return _stream_batches(reader, fmt, sink)


def _stream_batches(reader: pa.RecordBatchReader, fmt: str, sink: BinaryIO) -> ExportSummary:
    total = gone = 0
    writer = pa_csv.CSVWriter(sink, reader.schema) if fmt == "csv" else None
    try:
        for batch in reader:
            status = batch.column(batch.schema.get_field_index("status"))
            total += batch.num_rows
            gone += batch.num_rows - status.null_count
            if writer is not None:
                writer.write_batch(batch)
            elif batch.num_rows:
                sink.write("".join(_json_lines(batch)).encode())
    finally:
        if writer is not None:
            writer.close()
    sink.flush()
    return ExportSummary(total - gone, gone)


def _json_lines(batch: pa.RecordBatch) -> Iterator[str]:
    """One JSON object per row, keys in the documented order: a version's fields as an
    object (they are stored as JSON text), a gone URL as its tombstone alone."""
    columns = batch.to_pydict()
    for url, observed_at, outcome, title, text, fields, fingerprint, status, gone_at in zip(
        *(columns[name] for name in _EXPORT_COLUMNS), strict=True
    ):
        if status == "gone":
            row: dict[str, object] = {"url": url, "status": status, "gone_at": gone_at}
        else:
            row = {
                "url": url,
                "observed_at": observed_at,
                "outcome": outcome,
                "title": title,
                "text": text,
                "fields": _fields(fields),
                "fingerprint": fingerprint,
            }
        yield json.dumps(row, ensure_ascii=False) + "\n"
