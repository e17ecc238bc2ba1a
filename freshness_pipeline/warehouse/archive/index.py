"""The CDXJ index pywb replays from: one sorted ``.cdxj`` file beside each ``.warc.gz``.

Why one index per WARC rather than one merged index: each fetch process completes its own
files, so each can write its own index with a rename and no lock, and nothing ever rewrites a
large shared file; pruning a WARC deletes its index with it. pywb reads a folder of indexes
as one (``index_paths`` pointing at the folder: its DirectoryIndexSource takes every
``*.cdxj`` there, ignores the ``.warc.gz`` files, and merges the lookups), at the price of one
binary search per index file per lookup.

The lines are what pywb's own indexer and cdxj-indexer write (``urlkey timestamp {json}``,
the urlkey from ``surt.surt`` as both compute it, sorted bytewise) with one deliberate
difference: pywb replays a server-not-modified revisit from the revisit's own HTTP headers,
which are a 304, so a browser would get an empty 304 for the time the page was revalidated
(pywb's resolving loader treats every 3xx revisit as a redirect and skips the payload). The
line of such a revisit therefore points at the original response (its filename, offset,
length, mime and status), so pywb replays at that time what the server confirmed was still
current; the revisit's own location is kept in ``revisit_filename``/``revisit_offset``/
``revisit_length``. An identical-payload revisit keeps the standard line (``warc/revisit``),
which pywb resolves itself through WARC-Refers-To-Target-URI, -Date and the digest.
Non-page fetches carry ``"kind"`` (robots, sitemap, feed).
"""

from __future__ import annotations

import functools
import json
import logging
import mmap
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import Any

import surt  # type: ignore[import-untyped]
from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]
from warcio.exceptions import ArchiveLoadFailed  # type: ignore[import-untyped]

from freshness_pipeline.warehouse.archive.files import (
    INDEX_SUFFIX,
    WARC_SUFFIX,
    atomic_write_bytes,
    index_name_for,
    list_warcs,
    warc_name_for_index,
)
from freshness_pipeline.warehouse.archive.records import (
    FETCH_KIND_FIELD,
    PROFILE_SERVER_NOT_MODIFIED,
    ArchiveFormatError,
    parse_warc_date,
)

__all__ = [
    "ArchiveIndex",
    "IndexEntry",
    "cdx_timestamp",
    "ensure_indexes",
    "index_warc",
    "url_key",
    "write_index",
    "write_index_lines",
]

log = logging.getLogger(__name__)

_INDEXED_TYPES = ("response", "revisit", "resource")


def url_key(url: str) -> str:
    """The SURT key pywb looks a URL up by (pywb and cdxj-indexer both call ``surt.surt``).

    Every new record needs one, and ``surt.surt`` costs as much as compressing the record, most
    of it spent on the parts of its canonicalization that leave a plain URL as it is. So a URL
    whose path and query that canonicalization provably leaves alone but for case, a trailing
    slash and the query's order (:func:`_plain_key`) is keyed here, its origin's part by
    ``surt.surt`` itself once per origin; any other URL goes to ``surt.surt`` whole.
    """
    key = _plain_key(url)
    if key is not None:
        return key
    return _surt_key(url)


def _surt_key(url: str) -> str:
    try:
        return str(surt.surt(url))
    except Exception:  # surt rejects a few odd URLs; pywb then keys them as given
        return url


# An http(s) URL with a host of letters, digits, dots and hyphens, an optional port and a path;
# path and query of printable ASCII without "%" (nothing to unescape or escape) and "#".
_PLAIN_URL = re.compile(
    r"(https?://[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.?(?::[0-9]{1,5})?)"
    r"(/[!\"$&-~]*)"
)


@functools.lru_cache(maxsize=4096)
def _origin_key(origin: str) -> str | None:
    """The key's part for ``scheme://host[:port]``, up to and with its ")"; None if surt does
    not key the origin's root as ``<host part>)/``."""
    key = _surt_key(origin + "/")
    return key[:-1] if key.endswith(")/") and len(key) > 2 else None


def _plain_key(url: str) -> str | None:
    """``surt.surt(url)`` for a URL that surt's canonicalization (scheme dropped, host reversed,
    default port dropped, path and query lower-cased, a trailing slash dropped, query arguments
    sorted) treats like any plain URL; None for any other, which goes to ``surt.surt``."""
    match = _PLAIN_URL.fullmatch(url)
    if match is None:
        return None
    origin, rest = match.groups()
    path, mark, query = rest.partition("?")
    path = path.lower()
    # What surt would rewrite in the path: dot segments, empty ones, an ASP.NET session id
    if "/." in path or "//" in path or ".aspx" in path:
        return None
    prefix = _origin_key(origin)
    if prefix is None:
        return None
    if len(path) > 1 and path.endswith("/"):
        path = path[:-1]
    if not query:
        return prefix + path
    query = query.lower()
    # the session ids surt strips from a query each contain one of these
    if "sessionid" in query or "sessid" in query or "sid=" in query or "cfid=" in query:
        return None
    if "&" in query:
        # surt.IAURLCanonicalizer.alphaReorderQuery: arguments sorted as (name, value) pairs,
        # an argument without "=" as the name alone
        args = sorted(query.split("&"), key=lambda arg: tuple(arg.split("=", 1)))
        query = "&".join(args)
    return f"{prefix}{path}?{query}"


@functools.lru_cache(maxsize=4096)  # a cycle's records share a handful of dates
def cdx_timestamp(when: datetime | str) -> str:
    """14-digit UTC timestamp of a WARC-Date, as the CDXJ line and pywb's URLs write it."""
    value = parse_warc_date(when) if isinstance(when, str) else when
    return value.strftime("%Y%m%d%H%M%S")


@dataclass(frozen=True)
class IndexEntry:
    """One CDXJ line."""

    urlkey: str
    timestamp: str
    fields: Mapping[str, str]

    def line(self) -> bytes:
        """The line as pywb's indexer writes it: the fields as ``json.dumps`` writes a dict
        (formatted here when every value is a str, as the writer's are: one line per record)."""
        fields = self.fields
        if all(type(v) is str for v in fields.values()):
            json_str = encode_basestring_ascii
            text = ", ".join([f"{json_str(k)}: {json_str(v)}" for k, v in fields.items()])
            return f"{self.urlkey} {self.timestamp} {{{text}}}\n".encode()
        return f"{self.urlkey} {self.timestamp} {json.dumps(dict(fields))}\n".encode()

    @classmethod
    def parse(cls, line: bytes | str, where: str = "") -> IndexEntry:
        text = line.decode("utf-8") if isinstance(line, bytes) else line
        try:
            urlkey, timestamp, data = text.rstrip("\n").split(" ", 2)
            fields = json.loads(data)
            if not isinstance(fields, dict):
                raise ValueError("the third part is not a JSON object")
        except ValueError as exc:
            raise ArchiveFormatError(f"not a CDXJ line{where}: {text[:200]!r} ({exc})") from exc
        return cls(urlkey, timestamp, {str(k): str(v) for k, v in fields.items()})

    @property
    def sort_key(self) -> tuple[str, str]:
        return (self.urlkey, self.timestamp)

    @property
    def filename(self) -> str:
        return self.fields["filename"]

    @property
    def offset(self) -> int:
        return int(self.fields["offset"])

    @property
    def length(self) -> int:
        return int(self.fields["length"])

    @property
    def is_revisit(self) -> bool:
        return self.fields.get("mime") == "warc/revisit"

    @property
    def is_resolved_revisit(self) -> bool:
        return "revisit_filename" in self.fields


def mime_type(content_type: str | None) -> str | None:
    """The bare mime type of a Content-Type header, as CDXJ lines give it."""
    if not content_type:
        return None
    return content_type.replace(";", " ").split()[0].strip() if content_type.strip() else None


@dataclass
class _Scanned:
    entry: IndexEntry
    refers_uri: str | None = None
    refers_date: str | None = None
    not_modified: bool = False


def _scan(path: Path, filename: str) -> list[_Scanned]:
    scanned: list[_Scanned] = []
    try:
        with open(path, "rb") as fh:
            iterator = ArchiveIterator(fh)
            for record in iterator:
                rec_type = record.rec_type
                headers = record.rec_headers
                http = record.http_headers
                record.raw_stream.read()  # the payload is not needed, only its end
                offset = iterator.get_record_offset()
                length = iterator.get_record_length()
                if rec_type not in _INDEXED_TYPES:
                    continue
                url = headers.get_header("WARC-Target-URI")
                date = headers.get_header("WARC-Date")
                if not url or not date:
                    continue
                fields: dict[str, str] = {"url": url}
                if rec_type == "revisit":
                    fields["mime"] = "warc/revisit"
                else:
                    mime = mime_type(
                        http.get_header("Content-Type")
                        if http
                        else headers.get_header("Content-Type")
                    )
                    if mime:
                        fields["mime"] = mime
                if http and rec_type in ("response", "revisit"):
                    status = http.get_statuscode()
                    if status:
                        fields["status"] = status
                digest = headers.get_header("WARC-Payload-Digest")
                if digest:
                    fields["digest"] = digest
                fields["length"] = str(length)
                fields["offset"] = str(offset)
                fields["filename"] = filename
                kind = headers.get_header(FETCH_KIND_FIELD)
                if kind and kind != "page":
                    fields["kind"] = kind
                scanned.append(
                    _Scanned(
                        IndexEntry(url_key(url), cdx_timestamp(date), fields),
                        refers_uri=headers.get_header("WARC-Refers-To-Target-URI"),
                        refers_date=headers.get_header("WARC-Refers-To-Date"),
                        not_modified=headers.get_header("WARC-Profile")
                        == PROFILE_SERVER_NOT_MODIFIED,
                    )
                )
    except (ArchiveLoadFailed, EOFError, OSError, ValueError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ArchiveFormatError(f"{path} is not a whole WARC file: {exc}") from exc
    return scanned


def lines_for_key(data: bytes | mmap.mmap, key: bytes) -> Iterator[bytes]:
    """The lines of a sorted CDXJ text whose urlkey is ``key``, by binary search on the bytes.

    Lines sort bytewise and a urlkey holds no space, so sorting whole lines sorts by urlkey
    first; nothing but the lines the search touches is read or parsed.
    """
    size = len(data)
    lo, hi = 0, size
    while lo < hi:  # lo and hi stay at line starts; lines before lo have a smaller key
        mid = (lo + hi) // 2
        start = data.rfind(b"\n", 0, mid) + 1
        end = data.find(b"\n", start)
        end = size if end < 0 else end
        space = data.find(b" ", start, end)
        line_key = data[start : end if space < 0 else space]
        if line_key < key:
            lo = end + 1
        else:
            hi = start
    position = lo
    while position < size:
        end = data.find(b"\n", position)
        end = size if end < 0 else end
        line = data[position:end]
        if line.split(b" ", 1)[0] != key:
            return
        yield line
        position = end + 1


class ArchiveIndex:
    """The archive folder's CDXJ files, searched in place.

    A lookup binary-searches each sorted file through a memory map, so finding the original
    of a revisit reads a few pages per index file, however long the crawl; ``entries`` parses
    a whole file for the callers that walk one (pruning, tests).
    """

    def __init__(self, archive_dir: Path) -> None:
        self.archive_dir = Path(archive_dir)

    def index_files(self) -> list[str]:
        try:
            names = os.listdir(self.archive_dir)
        except FileNotFoundError:
            return []
        return sorted(n for n in names if n.endswith(INDEX_SUFFIX))

    def entries(self, index_filename: str) -> list[IndexEntry]:
        path = self.archive_dir / index_filename
        return [
            IndexEntry.parse(line, f" in {path}")
            for line in path.read_bytes().splitlines()
            if line.strip()
        ]

    def lookup(self, url: str, index_files: Iterable[str] | None = None) -> Iterator[IndexEntry]:
        """Every line for ``url`` (by its SURT key) in the given index files (default: all)."""
        key = url_key(url).encode("utf-8")
        for name in self.index_files() if index_files is None else index_files:
            path = self.archive_dir / name
            try:
                with open(path, "rb") as fh:
                    if os.fstat(fh.fileno()).st_size == 0:
                        continue
                    with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                        lines = list(lines_for_key(data, key))
            except FileNotFoundError:
                continue
            for line in lines:
                yield IndexEntry.parse(line, f" in {path}")

    def find_original(
        self,
        target_uri: str,
        date: str | datetime | None,
        digest: str | None,
        *,
        prefer: Iterable[str] = (),
        extra: Iterable[IndexEntry] = (),
        among: Iterable[str] | None = None,
    ) -> list[IndexEntry]:
        """Candidate lines for the original a revisit refers to, best first.

        Non-revisit lines of ``target_uri`` with the digest (when given), those at the referred
        date first, then the closest in time; ``prefer`` names index files to search first
        (the caller's hint of where the original is), ``extra`` adds lines not yet on disk,
        ``among`` limits the search to those index files.
        """
        want_ts = cdx_timestamp(date) if date is not None else None
        key = url_key(target_uri)
        allowed = None if among is None else set(among)
        preferred = [
            p
            for p in prefer
            if (self.archive_dir / p).exists() and (allowed is None or p in allowed)
        ]
        seen: set[tuple[str, int]] = set()
        found: list[IndexEntry] = []

        def consider(entries: Iterable[IndexEntry]) -> None:
            for entry in entries:
                if entry.urlkey != key or entry.is_revisit or entry.is_resolved_revisit:
                    continue
                if digest and entry.fields.get("digest") != digest:
                    continue
                where = (entry.filename, entry.offset)
                if where not in seen:
                    seen.add(where)
                    found.append(entry)

        consider(extra)
        consider(self.lookup(target_uri, preferred))
        if not any(want_ts is None or e.timestamp == want_ts for e in found):
            rest = [
                n
                for n in self.index_files()
                if n not in preferred and (allowed is None or n in allowed)
            ]
            consider(self.lookup(target_uri, rest))

        def rank(entry: IndexEntry) -> tuple[int, int]:
            if want_ts is None:
                return (0, -int(entry.timestamp))
            return (
                0 if entry.timestamp == want_ts else 1,
                abs(int(entry.timestamp) - int(want_ts)),
            )

        return sorted(found, key=rank)


def index_warc(
    archive_dir: Path,
    warc_filename: str,
    *,
    index: ArchiveIndex | None = None,
    hints: Mapping[str, str] | None = None,
) -> list[IndexEntry]:
    """The sorted CDXJ lines of one complete WARC file (read back from disk).

    ``hints`` maps an original's ``(target URI, WARC date)`` -> the WARC file it is thought to
    be in, keyed as ``uri + ' ' + date``, so a server-not-modified revisit is resolved with
    one lookup in that file's index instead of all of them.
    """
    archive_dir = Path(archive_dir)
    index = index or ArchiveIndex(archive_dir)
    scanned = _scan(archive_dir / warc_filename, warc_filename)
    own = [s.entry for s in scanned]
    entries: list[IndexEntry] = []
    for item in scanned:
        entry = item.entry
        if item.not_modified and item.refers_uri and item.refers_date:
            hint = (hints or {}).get(f"{item.refers_uri} {item.refers_date}")
            prefer = [index_name_for(hint)] if hint and hint.endswith(WARC_SUFFIX) else []
            candidates = index.find_original(
                item.refers_uri,
                item.refers_date,
                entry.fields.get("digest"),
                prefer=prefer,
                extra=own,
            )
            exact = [c for c in candidates if c.timestamp == cdx_timestamp(item.refers_date)]
            if exact:
                entry = resolved_not_modified(entry, exact[0])
            else:
                log.warning(
                    "archive: the original of the 304 revisit of %s at %s (%s, %s) is not in the "
                    "index; pywb will replay that time as an empty 304",
                    item.refers_uri,
                    entry.timestamp,
                    item.refers_date,
                    warc_filename,
                )
        entries.append(entry)
    entries.sort(key=lambda e: e.line())
    return entries


def resolved_not_modified(revisit: IndexEntry, original: IndexEntry) -> IndexEntry:
    """The line of a 304 revisit that replays its original (see the module docstring)."""
    fields: dict[str, Any] = {"url": revisit.fields["url"]}
    for name in ("mime", "status", "digest", "length", "offset", "filename"):
        if name in original.fields:
            fields[name] = original.fields[name]
    fields["revisit_filename"] = revisit.fields.get("revisit_filename", revisit.filename)
    fields["revisit_offset"] = revisit.fields.get("revisit_offset", revisit.fields["offset"])
    fields["revisit_length"] = revisit.fields.get("revisit_length", revisit.fields["length"])
    if "kind" in revisit.fields:
        fields["kind"] = revisit.fields["kind"]
    return IndexEntry(revisit.urlkey, revisit.timestamp, fields)


def write_index(archive_dir: Path, warc_filename: str, entries: Iterable[IndexEntry]) -> str:
    """Write ``<warc>.cdxj`` atomically (sorted bytewise, as pywb's binary search needs)."""
    return write_index_lines(archive_dir, warc_filename, (e.line() for e in entries))


def write_index_lines(archive_dir: Path, warc_filename: str, lines: Iterable[bytes]) -> str:
    """:func:`write_index` of lines already formatted (``IndexEntry.line``'s bytes)."""
    name = index_name_for(warc_filename)
    atomic_write_bytes(Path(archive_dir) / name, b"".join(sorted(lines)))
    return name


def ensure_indexes(archive_dir: Path) -> list[str]:
    """Index every complete WARC that has no index yet (a crash between a WARC's rename and its
    index, or a failed index write); returns the index files written.

    A file that is not a whole WARC is reported in the log and skipped, the others are indexed.
    """
    archive_dir = Path(archive_dir)
    present = set(ArchiveIndex(archive_dir).index_files())
    written: list[str] = []
    index = ArchiveIndex(archive_dir)
    for warc in list_warcs(archive_dir):
        name = index_name_for(warc)
        if name in present:
            continue
        try:
            entries = index_warc(archive_dir, warc, index=index)
        except ArchiveFormatError as exc:
            log.error("archive: not indexing %s: %s", warc, exc)
            continue
        written.append(write_index(archive_dir, warc, entries))
    # An index whose WARC is gone (a prune that stopped between the two deletions) points at
    # nothing; pywb would fail on every line of it.
    for name in present:
        if not (archive_dir / warc_name_for_index(name)).exists():
            (archive_dir / name).unlink(missing_ok=True)
    return written
