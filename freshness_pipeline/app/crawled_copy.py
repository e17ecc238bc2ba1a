"""The crawled copy read back: what changed in one page between two of its versions (``freshness
diff``), and the errors every read of the copy reports (the export, ``freshness export``, is in
:mod:`freshness_pipeline.app.export`).

Reads go to the Parquet files themselves rather than the views file: a user's session or a
cycle holding ``freshness.duckdb`` must not stop a read, and a diff needs only the files of its
page's host (a private in-memory DuckDB reads them) and holds one page's versions.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, NamedTuple

import duckdb
from rich.console import Console
from rich.text import Text

from freshness_pipeline.config import ConfigError, load_config
from freshness_pipeline.science.changes import TEXT_FIELD
from freshness_pipeline.science.line_diff import unified_diff
from freshness_pipeline.science.normalize import InvalidURL, normalize_url, url_authority
from freshness_pipeline.warehouse.storage import Warehouse

__all__ = [
    "CopyError",
    "DiffLine",
    "QueryError",
    "TargetError",
    "Version",
    "VersionDiff",
    "diff_lines",
    "iso_utc",
    "page_versions",
    "print_diff",
    "require_warehouse",
    "version_diff",
]

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


def require_warehouse(wh: Warehouse) -> None:
    """Refuse a read of a home that was never crawled, saying what to run first."""
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

    @property
    def archived_at(self) -> str:
        """Where the archive holds it, as `freshness diff` names it."""
        if self.warc_filename is None:
            return "not archived"
        return f"archive/{self.warc_filename} at offset {self.warc_offset}"


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
    require_warehouse(wh)
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
    seeds = [str(f) for f in wh.files("seeds", [host])]
    if seeds:
        with _duckdb() as con:
            seeded = con.execute(
                "SELECT 1 FROM read_parquet($files, union_by_name = true) WHERE url = $url LIMIT 1",
                {"files": seeds, "url": url},
            ).fetchone()
        if seeded is not None:
            return "it is seeded, and no cycle has fetched it yet (run `freshness cycle`)"
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
