"""Sitemaps and feeds as a source of URLs and of change hints (``lastmod``).

Sitemaps are written by strangers and are often large, gzipped, malformed or hostile. They are
read as the web writes them, and each file says what was wrong with it, because a parser that
stops at the first error and says nothing costs every URL listed after it, cycle after cycle.

- XML sitemaps go through lxml in recover mode, so a broken file gives every record it still
  holds. The commonest breakage, a bare ``&`` in a query string, is escaped before parsing:
  libxml2's own recovery drops the characters after it, and its push parser waits for a ``;``
  that never comes. A file whose bytes are not what its XML declaration claims is read as what
  the bytes are.
- Feeds (RSS 2.0, RSS 1.0/RDF, Atom) go through feedparser, which knows their dialects and
  dates; it is handed bytes only (a string would make it fetch a URL or open a file).
- A file cut short (truncated gzip, size cap, a server that stopped) keeps the records that
  ended before the cut; the record the cut went through is dropped rather than guessed at.
- Nothing expands entities or loads a DTD: a file declaring entities (billion laughs, external
  entities) is refused whole, and both parsers run with entities, DTDs and network off.
- Everything is bounded: decompressed size, feed size, URLs per file, files per walk. Bad input
  never raises; one broken sitemap must not fail a host's cycle.

The walk over sitemap indexes is breadth-first so the top-level files, usually the most useful,
are read before the budget runs out. :attr:`SitemapWalk.complete` says whether every file was
read to its end with nothing failed or cut: only then does a URL missing from a walk mean the
host stopped listing it.
"""

from __future__ import annotations

import calendar
import codecs
import contextlib
import io
import re
import time
import zlib
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Literal, get_args
from urllib.parse import urljoin

import aiohttp
import feedparser  # type: ignore[import-untyped]
from lxml import etree  # type: ignore[import-untyped]

from freshness_pipeline.archive import ArchiveWriteError, ArchiveWriter
from freshness_pipeline.web.archiving import archive_answer
from freshness_pipeline.web.client import BodyDecodeError, read_limited
from freshness_pipeline.web.client import host_key as url_host_key
from freshness_pipeline.web.netguard import check_url_scheme, find_blocked_error
from freshness_pipeline.web.politeness import LEDGER

__all__ = [
    "MAX_FEED_BYTES",
    "MAX_SITEMAP_BYTES",
    "MAX_URLS_PER_FILE",
    "PROBLEM_KINDS",
    "PROBLEM_LABELS",
    "ParsedSitemap",
    "ProblemKind",
    "SitemapEntry",
    "SitemapFile",
    "SitemapFormat",
    "SitemapProblem",
    "SitemapWalk",
    "fetch_sitemap_entries",
    "parse_sitemap",
    "parse_w3c_datetime",
    "read_sitemap",
]

MAX_URLS_PER_FILE = 50_000  # the sitemaps.org limit per file
MAX_SITEMAP_BYTES = 50 * 1024 * 1024  # the sitemaps.org limit, uncompressed
# Feeds list recent items, not a site; feedparser builds a dict per element, so a feed gets a
# tighter cap than a sitemap and is read up to it.
MAX_FEED_BYTES = 8 * 1024 * 1024
_MAX_REDIRECTS = 5
_PARSE_CHUNK = 1 << 20
_SNIFF_BYTES = 1 << 20  # how far into a file its root element may start

ProblemKind = Literal[
    "http", "gzip", "size_cap", "not_sitemap", "entities", "malformed", "url_cap", "file_cap"
]
# What each kind of problem means, for logs and run metadata.
PROBLEM_LABELS: dict[ProblemKind, str] = {
    "http": "sitemap not fetched (HTTP status, network, redirects)",
    "gzip": "compressed sitemap corrupt, truncated or in an unknown coding",
    "size_cap": f"sitemap over the size cap (sitemaps {MAX_SITEMAP_BYTES} bytes, feeds "
    f"{MAX_FEED_BYTES}), read up to it",
    "not_sitemap": "not a sitemap or feed (HTML, JSON, garbage, empty)",
    "entities": "sitemap declares XML entities, refused",
    "malformed": "malformed sitemap XML, entries recovered",
    "url_cap": "URL limit reached, the rest not read",
    "file_cap": "sitemap file limit reached, the rest not read",
}
PROBLEM_KINDS: tuple[ProblemKind, ...] = get_args(ProblemKind)

SitemapFormat = Literal["urlset", "sitemapindex", "rss", "rdf", "atom", "text"]
_ROOT_FORMATS: dict[str, SitemapFormat] = {
    "urlset": "urlset",
    "sitemapindex": "sitemapindex",
    "rss": "rss",
    "rdf": "rdf",
    "feed": "atom",
}
_FEEDS: frozenset[SitemapFormat] = frozenset({"rss", "rdf", "atom"})
# The element each format lists one URL in.
_RECORD_TAG: dict[SitemapFormat, str] = {
    "urlset": "url",
    "sitemapindex": "sitemap",
    "rss": "item",
    "rdf": "item",
    "atom": "entry",
}

# Entities, DTDs and the network stay off whatever a file asks for; recover keeps what a broken
# file still holds; huge_tree off keeps libxml2's limits on depth and text size. collect_ids must
# stay at its default: turned off, it makes libxml2 load a DOCTYPE's external subset (a local
# file is read; only no_network stops a URL).
_LXML_OPTIONS: dict[str, Any] = {
    "recover": True,
    "resolve_entities": False,
    "no_network": True,
    "load_dtd": False,
    "huge_tree": False,
    "dtd_validation": False,
    "attribute_defaults": False,
    "remove_comments": True,
    "remove_pis": True,
}
# libxml2 errors that lose nothing: an undeclared prefix (the element keeps its name) and
# content after the root element closed.
_HARMLESS_DOMAINS = frozenset({etree.ErrorDomains.NAMESPACE})
_HARMLESS_TYPES = frozenset({etree.ErrorTypes.ERR_DOCUMENT_END})

_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = codecs.BOM_UTF8
_ENTITY = re.compile(rb"<!ENTITY", re.IGNORECASE)
# An ampersand that starts none of the references XML allows without a DTD.
_BARE_AMPERSAND = re.compile(rb"&(?!(?:amp|lt|gt|quot|apos|#[0-9]{1,8}|#x[0-9a-fA-F]{1,8});)")
_DECLARED_ENCODING = re.compile(
    rb"""\A<\?xml[^>]{0,200}?\bencoding\s*=\s*["']([A-Za-z][A-Za-z0-9._:-]{0,39})["']"""
)
_W3C = re.compile(
    r"^(\d{4})(?:-(\d{1,2})(?:-(\d{1,2})"
    r"(?:[Tt ](\d{1,2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?\s*(Z|z|UTC|GMT|[+-]\d{2}(?::?\d{2})?)?)?"
    r")?)?$"
)


@dataclass
class SitemapEntry:
    """One URL a sitemap or feed announced, with its claimed last modification (UTC)."""

    loc: str
    lastmod: datetime | None
    source_url: str


@dataclass(frozen=True)
class SitemapProblem:
    """One thing wrong with one sitemap file (``sitemap_url``), or with the walk (None)."""

    kind: ProblemKind
    detail: str
    sitemap_url: str | None = None
    http_status: int | None = None

    def __str__(self) -> str:
        return f"{self.sitemap_url}: {self.detail}" if self.sitemap_url else self.detail


@dataclass
class ParsedSitemap:
    """What one file held. ``recovered``: the file was malformed and its entries came through
    recovery. ``complete``: every record the file holds was read, so a URL not in ``entries``
    is not in the file (a repaired ampersand or a stray namespace prefix loses nothing; a
    cut, a cap or a recovery libxml2 had to guess at does)."""

    format: SitemapFormat | None  # None: not a sitemap, or refused
    entries: list[SitemapEntry] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    problems: list[SitemapProblem] = field(default_factory=list)
    recovered: bool = False
    complete: bool = False


# ------------------------------------------------------------------------------------- dates


def parse_w3c_datetime(text: str | None) -> datetime | None:
    """A sitemap/feed date as an aware UTC datetime, or None when it is not a date.

    Accepts the W3C profile of ISO 8601 (``2024``, ``2024-05``, ``2024-05-01``, with time, with or
    without seconds, fraction and zone; no zone means UTC), RFC 3339 (Atom) and RFC 822 (RSS
    ``pubDate``). A date that cannot be placed on the UTC line (year 9999 minus a zone) is None.
    """
    if not text:
        return None
    value = text.strip()
    if not value:
        return None
    m = _W3C.match(value)
    when: datetime | None
    if m:
        year, month, day, hour, minute, second, frac, zone = m.groups()
        try:
            micro = int((frac or "0")[:6].ljust(6, "0"))
            when = datetime(
                int(year),
                int(month or 1),
                int(day or 1),
                int(hour or 0),
                int(minute or 0),
                int(second or 0),
                micro,
                tzinfo=_zone(zone),
            )
        except ValueError:
            return None
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            when = None
        if when is None:
            try:
                when = datetime.fromisoformat(value)
            except ValueError:
                return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
    try:
        return when.astimezone(UTC)
    except (OverflowError, ValueError):
        return None


def _zone(zone: str | None) -> timezone:
    if zone is None or zone.upper() in ("Z", "UTC", "GMT"):
        return UTC
    sign = -1 if zone[0] == "-" else 1
    digits = zone[1:].replace(":", "")
    hours = int(digits[:2])
    minutes = int(digits[2:4] or 0)
    if hours > 23 or minutes > 59:
        raise ValueError("bad zone")
    return timezone(sign * timedelta(hours=hours, minutes=minutes))


def _struct_time_utc(value: object) -> datetime | None:
    """feedparser's parsed dates are UTC ``struct_time``s."""
    if not isinstance(value, time.struct_time):
        return None
    try:
        return datetime.fromtimestamp(calendar.timegm(value), UTC)
    except (OverflowError, ValueError, OSError):
        return None


# ------------------------------------------------------------------------------- bytes in


def _gunzip(data: bytes, cap: int) -> tuple[bytes, tuple[ProblemKind, str] | None]:
    """Bounded gunzip (all members), with what went wrong; a corrupt, truncated or bomb-sized
    stream keeps what decoded."""
    out = bytearray()
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    rest = data
    try:
        while rest and len(out) <= cap:
            out += d.decompress(rest, cap - len(out) + 1)
            rest = d.unconsumed_tail
            if d.eof:
                rest = d.unused_data
                if rest[:2] != _GZIP_MAGIC:
                    break  # trailing bytes after the last member are ignored, as gzip does
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    except zlib.error as exc:
        return bytes(out[:cap]), ("gzip", f"corrupt gzip after {len(out)} bytes ({exc})")
    if len(out) > cap:
        return bytes(out[:cap]), ("size_cap", f"more than {cap} bytes decompressed; cut there")
    if not d.eof:
        return bytes(out), ("gzip", f"gzip stream ends early, after {len(out)} bytes")
    return bytes(out), None


def _transcode_utf16(data: bytes) -> tuple[bytes, bool]:
    """UTF-16 (with a BOM, or the ``<?`` pattern XML's appendix F names) as UTF-8, and whether
    it was UTF-16."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", "replace").encode(), True
    if data[:4] == b"<\x00?\x00":
        return data.decode("utf-16-le", "replace").encode(), True
    if data[:4] == b"\x00<\x00?":
        return data.decode("utf-16-be", "replace").encode(), True
    return data, False


def _as_utf8(data: bytes) -> tuple[bytes, str | None]:
    """The document as UTF-8 whatever its declaration says, and a note when the declaration
    was wrong. Bytes that are valid UTF-8 are UTF-8 (text in another encoding almost never is);
    others are read in the declared encoding, or windows-1252 when none other is declared."""
    m = _DECLARED_ENCODING.match(data)
    declared = m.group(1).decode("ascii") if m else None
    try:
        codec = codecs.lookup(declared).name if declared else "utf-8"
    except LookupError:
        codec = "utf-8"
    valid = True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.end == len(data) and "unexpected end" in exc.reason:
            data = data[: exc.start]  # a character cut in half by a truncation
        else:
            valid = False
    if valid:
        if codec != "utf-8" and not data.isascii():
            return data, f"declared {declared} but is UTF-8; read as UTF-8"
        return data, None
    if codec == "utf-8" or codec.startswith(("utf-16", "utf-32")):
        text = data.decode("cp1252", "replace")
        return text.encode(), f"not valid UTF-8 (declared {declared or 'nothing'}); read as cp1252"
    return data.decode(codec, "replace").encode(), None


def _escape_bare_ampersands(data: bytes) -> tuple[bytes, int]:
    """``&`` that starts no XML reference becomes ``&amp;`` (outside CDATA sections, where an
    ampersand is already literal); returns the new bytes and how many were escaped."""
    if b"&" not in data:
        return data, 0
    pieces: list[bytes] = []
    escaped = 0
    pos = 0
    while pos < len(data):
        start = data.find(b"<![CDATA[", pos)
        stop = len(data) if start < 0 else start
        fixed, n = _BARE_AMPERSAND.subn(b"&amp;", data[pos:stop])
        pieces.append(fixed)
        escaped += n
        if start < 0:
            break
        end = data.find(b"]]>", start + 9)
        end = len(data) if end < 0 else end + 3
        pieces.append(data[start:end])
        pos = end
    return b"".join(pieces), escaped


# ------------------------------------------------------------------------------ elements


def _local(tag: object) -> str:
    """An element's name without namespace or prefix: sitemaps in the 0.84 namespace, in none
    or in a misspelt one, and prefixes nobody declared, all name the same elements."""
    if not isinstance(tag, str):  # comments, processing instructions, entity references
        return ""
    return tag.rsplit("}", 1)[-1].rsplit(":", 1)[-1].lower()


def _child_text(elem: Any, name: str) -> str | None:
    # lxml's {*} finds the name in any namespace or none; only an undeclared prefix or an
    # odd case needs the look at every child.
    found = list(elem.iterchildren(f"{{*}}{name}")) or [
        child for child in elem if _local(child.tag) == name
    ]
    for child in found:
        text = "".join(child.itertext()).strip()
        if text:
            return text
    return None


def _absolute(loc: str | None, base: str) -> str | None:
    if not loc:
        return None
    loc = loc.strip()
    try:
        # Nearly every loc is absolute already: joining it would parse the base once more.
        url = loc if loc[:8].lower().startswith(("http://", "https://")) else urljoin(base, loc)
        check_url_scheme(url)
    except ValueError:
        return None
    return url


def _sniff_root(data: bytes) -> str | None:
    """The document's root element's tag as lxml names it, from its first bytes."""
    parser = etree.XMLPullParser(events=("start",), encoding="utf-8", **_LXML_OPTIONS)
    for offset in range(0, min(len(data), _SNIFF_BYTES), 1 << 14):
        parser.feed(data[offset : offset + (1 << 14)])
        for _event, elem in parser.read_events():
            return elem.tag if isinstance(elem.tag, str) else None
    return None


def _record_filter(root_tag: str, record: str) -> str | None:
    """The tag lxml can pick a file's records by, so the other elements cost no Python: None
    when the root's tag shows a prefix nobody declared, or an odd case, that {*} would miss."""
    name = root_tag.rsplit("}", 1)[-1]
    if ":" in name or name != name.lower():
        return None
    return f"{{*}}{record}"


def _last_end(pattern: re.Pattern[bytes], data: bytes) -> int:
    """Where the last match of ``pattern`` ends (-1 if none), searching back from the end."""
    window = 1 << 16
    while True:
        start = max(0, len(data) - window)
        last = None
        for last in pattern.finditer(data, start):  # noqa: B007 - the last one is wanted
            pass
        if last is not None:
            return last.end()
        if start == 0:
            return -1
        window *= 8


def _cut_at_last_record(data: bytes, root: str, record: str) -> tuple[bytes, bool]:
    """A document that ends before its root closes, cut after its last complete record, and
    whether it was cut: the record a truncation went through may hold half a URL."""
    prefix = rb"(?:[A-Za-z_][\w.-]*:)?"
    record_end = re.compile(rb"</" + prefix + re.escape(record.encode()) + rb"\s*>", re.I)
    root_end = re.compile(rb"</" + prefix + re.escape(root.encode()) + rb"\s*>", re.I)
    last = _last_end(record_end, data)
    if root_end.search(data, max(last, 0)):
        return data, False
    return (data[:last] if last >= 0 else b""), True


# -------------------------------------------------------------------------------- parsing


class _Records:
    """Turns the records lxml finishes into entries and child sitemaps, up to the cap."""

    def __init__(self, fmt: SitemapFormat, source_url: str, max_urls: int) -> None:
        self.fmt = fmt
        self.record = _RECORD_TAG[fmt]
        self.source_url = source_url
        self.max_urls = max_urls
        self.entries: list[SitemapEntry] = []
        self.children: list[str] = []
        self.capped = False

    def take(self, elem: Any) -> bool:
        """Use a finished element if it is a record; False once the cap stops the file."""
        if _local(elem.tag) != self.record:
            return True
        if len(self.entries) + len(self.children) >= self.max_urls:
            self.capped = True
            return False
        url = _absolute(_child_text(elem, "loc"), self.source_url)
        if url is not None:
            if self.fmt == "sitemapindex":
                self.children.append(url)
            else:
                lastmod = parse_w3c_datetime(_child_text(elem, "lastmod"))
                self.entries.append(SitemapEntry(url, lastmod, self.source_url))
        # Keep memory flat on 50,000-record files: drop the record and what came before it,
        # unless a recovery nested it in a record not yet finished (whose <loc> that would be).
        elem.clear()
        parent = elem.getparent()
        if parent is not None and parent.getparent() is None:
            while elem.getprevious() is not None:
                del parent[0]
        return True


def _xml_errors(log: Any) -> list[Any]:
    return [e for e in log if e.level >= etree.ErrorLevels.ERROR]


def _lossy(errors: list[Any]) -> bool:
    """Whether any of libxml2's errors may have cost a record."""
    return any(e.domain not in _HARMLESS_DOMAINS and e.type not in _HARMLESS_TYPES for e in errors)


def _parse_urlset(data: bytes, records: _Records, tag: str | None) -> list[Any]:
    """Stream the file through lxml into ``records`` (the elements named ``tag`` only, if
    given); returns libxml2's errors."""
    parser = etree.XMLPullParser(events=("end",), tag=tag, encoding="utf-8", **_LXML_OPTIONS)
    for offset in range(0, len(data), _PARSE_CHUNK):
        parser.feed(data[offset : offset + _PARSE_CHUNK])
        for _event, elem in parser.read_events():
            if not records.take(elem):
                return _xml_errors(parser.feed_error_log)
    with contextlib.suppress(etree.XMLSyntaxError):  # raised, recover or not, for no element
        parser.close()
    for _event, elem in parser.read_events():
        if not records.take(elem):
            break
    return _xml_errors(parser.feed_error_log)


def _feed_lastmod(entry: dict[str, Any]) -> datetime | None:
    """The entry's own date: updated, else published; the raw text first (it keeps fractions),
    feedparser's reading of other formats next. Read past FeedParserDict's aliases, which
    would pass a published date off as an update."""
    for key in ("updated", "published"):
        when = parse_w3c_datetime(dict.get(entry, key))
        if when is not None:
            return when
    for key in ("updated_parsed", "published_parsed"):
        when = _struct_time_utc(dict.get(entry, key))
        if when is not None:
            return when
    return None


def _parse_feed(data: bytes, records: _Records) -> bool:
    """Entries of an RSS, RDF or Atom feed through feedparser; True if it had to recover.

    feedparser gets a byte stream, never a string (it would fetch a URL or open a path), and
    runs with HTML sanitizing and URI rewriting off (only links and dates are used). Its strict
    parser is expat with external entities off; its loose one expands no entity it was not
    given, and files declaring entities never reach it.
    """
    result = feedparser.parse(
        io.BytesIO(data),
        sanitize_html=False,
        resolve_relative_uris=False,
        response_headers={"content-type": "application/xml; charset=utf-8"},
    )
    for entry in result.get("entries", []):
        if len(records.entries) >= records.max_urls:
            records.capped = True
            break
        link = entry.get("link")
        if not link and records.fmt == "rdf":
            link = entry.get("id")  # an RSS 1.0 item's rdf:about is its URL
        url = _absolute(link, records.source_url)
        if url is not None:
            records.entries.append(SitemapEntry(url, _feed_lastmod(entry), records.source_url))
    exc = result.get("bozo_exception")
    # Encoding and content-type notes are feedparser's own fussiness, not a broken feed.
    return bool(result.get("bozo")) and not isinstance(
        exc, feedparser.exceptions.ThingsNobodyCaresAboutButMe
    )


def _parse_text(data: bytes, source_url: str, max_urls: int) -> ParsedSitemap:
    # sitemaps.org allows a plain list of URLs, one per line.
    entries: list[SitemapEntry] = []
    capped = False
    for raw in data.decode("utf-8", errors="replace").splitlines():
        line = raw.strip()
        if line.startswith(("http://", "https://")) and not any(c.isspace() for c in line):
            if len(entries) >= max_urls:
                capped = True
                break
            url = _absolute(line, source_url)
            if url is not None:
                entries.append(SitemapEntry(url, None, source_url))
    if not entries:
        return ParsedSitemap(
            None,
            problems=[SitemapProblem("not_sitemap", "no XML and no URL lines", source_url)],
        )
    parsed = ParsedSitemap("text", entries=entries, complete=not capped)
    if capped:
        parsed.problems.append(_url_cap_problem(max_urls, source_url))
    return parsed


def _url_cap_problem(max_urls: int, source_url: str) -> SitemapProblem:
    return SitemapProblem(
        "url_cap", f"more than {max_urls} URLs in one file; the rest not read", source_url
    )


def _describe_errors(errors: list[Any]) -> str:
    first = errors[0]
    return f"libxml2 errors: {len(errors)}, the first at line {first.line}: {first.message.strip()}"


def _parse_xml(
    data: bytes,
    source_url: str,
    max_urls: int,
    problems: list[SitemapProblem],
    cut: bool,
    utf8: bool,
) -> ParsedSitemap:
    """An XML sitemap or feed; ``problems`` and ``cut`` say what happened to the bytes so far,
    ``utf8`` that they are UTF-8 already (transcoded from UTF-16)."""
    declaration = _ENTITY.search(data)
    if declaration:
        detail = f"<!ENTITY at byte {declaration.start()}"
        problems.append(SitemapProblem("entities", detail, source_url))
        return ParsedSitemap(None, problems=problems)
    encoding_note = None
    if not utf8:
        data, encoding_note = _as_utf8(data)
    repairs = [encoding_note] if encoding_note else []
    data, escaped = _escape_bare_ampersands(data)
    if escaped:
        repairs.append(f"{escaped} bare '&' escaped")
    root_tag = _sniff_root(data)
    root = _local(root_tag) if root_tag else None
    fmt = _ROOT_FORMATS.get(root or "")
    if fmt is None or root_tag is None:
        what = f"root element <{root}>" if root else "no XML element"
        problems.append(SitemapProblem("not_sitemap", what, source_url))
        return ParsedSitemap(None, problems=problems)
    if fmt in _FEEDS and len(data) > MAX_FEED_BYTES:
        data = data[:MAX_FEED_BYTES]
        problems.append(
            SitemapProblem(
                "size_cap", f"feed over {MAX_FEED_BYTES} bytes; read up to there", source_url
            )
        )
        cut = True
    data, truncated = _cut_at_last_record(data, root or "", _RECORD_TAG[fmt])
    records = _Records(fmt, source_url, max_urls)
    lossy = False
    errors: list[Any] = []
    if fmt in _FEEDS:
        lossy = _parse_feed(data, records) if data else False
        if lossy:
            repairs.append("feedparser recovered from a syntax error")
    elif data:
        errors = _parse_urlset(data, records, _record_filter(root_tag, records.record))
        if truncated:  # the cut explains libxml2's "premature end"; the rest is news
            errors = [e for e in errors if e.type != etree.ErrorTypes.ERR_TAG_NOT_FINISHED]
        lossy = _lossy(errors)
    n = len(records.entries) + len(records.children)
    if truncated and not cut:
        repairs.append("ends before its root element closes; read up to its last full record")
    if errors:
        repairs.append(_describe_errors(errors))
    recovered = bool(repairs)
    if recovered:
        problems.append(
            SitemapProblem("malformed", f"URLs kept: {n}; {'; '.join(repairs)}", source_url)
        )
    if records.capped:
        problems.append(_url_cap_problem(max_urls, source_url))
    complete = not (cut or truncated or lossy or records.capped)
    return ParsedSitemap(fmt, records.entries, records.children, problems, recovered, complete)


def read_sitemap(
    body: bytes,
    source_url: str,
    *,
    max_urls: int = MAX_URLS_PER_FILE,
    max_bytes: int = MAX_SITEMAP_BYTES,
    cut: bool = False,
) -> ParsedSitemap:
    """Entries and child sitemaps from a urlset, sitemapindex, RSS/RDF or Atom feed, or text,
    with what was wrong with the file.

    Gzip is recognised by its magic bytes (``.xml.gz`` files often arrive without any
    Content-Encoding). At most ``max_urls`` URLs (entries plus children) come back and at most
    ``max_bytes`` are decompressed, so a gzip bomb costs a bounded amount of work. Relative
    locations are resolved against ``source_url``; non-http(s) ones are dropped. ``cut``: the
    body was already cut short on the way (and reported there), so its missing end is not news.
    Never raises on bad input.
    """
    if max_urls <= 0:
        return ParsedSitemap(None, problems=[_url_cap_problem(max(0, max_urls), source_url)])
    problems: list[SitemapProblem] = []
    data = body
    if data[:2] == _GZIP_MAGIC:
        data, trouble = _gunzip(data, max_bytes)
        if trouble is not None:
            problems.append(SitemapProblem(trouble[0], trouble[1], source_url))
            cut = True
    elif len(data) > max_bytes:
        data = data[:max_bytes]
        problems.append(
            SitemapProblem("size_cap", f"over {max_bytes} bytes; cut there", source_url)
        )
        cut = True
    data, utf16 = _transcode_utf16(data)
    data = data.removeprefix(_UTF8_BOM).lstrip(b" \t\r\n\f").removeprefix(_UTF8_BOM)
    if not data:
        problems.append(SitemapProblem("not_sitemap", "empty body", source_url))
        return ParsedSitemap(None, problems=problems)
    if data[:1] == b"<":
        return _parse_xml(data, source_url, max_urls, problems, cut, utf16)
    parsed = _parse_text(data, source_url, max_urls)
    parsed.problems[:0] = problems
    parsed.complete = parsed.complete and not cut
    return parsed


def parse_sitemap(
    body: bytes,
    source_url: str,
    *,
    max_urls: int = MAX_URLS_PER_FILE,
    max_bytes: int = MAX_SITEMAP_BYTES,
) -> tuple[list[SitemapEntry], list[str]]:
    """(entries, child sitemaps) of :func:`read_sitemap`, for callers that need no report."""
    parsed = read_sitemap(body, source_url, max_urls=max_urls, max_bytes=max_bytes)
    return parsed.entries, parsed.children


# -------------------------------------------------------------------------------- the walk


@dataclass
class SitemapFile:
    """One sitemap URL the walk asked for (its redirects included) and what it gave."""

    url: str
    http_status: int | None  # the final answer's; None when there was none
    format: SitemapFormat | None  # None: nothing fetched, or not a sitemap
    entries: int = 0
    children: int = 0
    recovered: bool = False
    complete: bool = False


@dataclass
class SitemapWalk:
    """A walk over a host's sitemaps: the entries, every file asked for, and every problem."""

    entries: list[SitemapEntry] = field(default_factory=list)
    files: list[SitemapFile] = field(default_factory=list)
    problems: list[SitemapProblem] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Every file asked for was read to its end and nothing failed, was refused or cut."""
        return (
            bool(self.files)
            and all(f.complete for f in self.files)
            and all(p.kind == "malformed" for p in self.problems)
        )

    @property
    def files_recovered(self) -> int:
        return sum(f.recovered for f in self.files)

    @property
    def entries_recovered(self) -> int:
        """URLs (entries and child sitemaps, before de-duplication) from files that needed
        recovery: what a strict parser would have put at risk."""
        return sum(f.entries + f.children for f in self.files if f.recovered)


@dataclass
class _Fetched:
    body: bytes | None
    status: int | None
    problem: tuple[ProblemKind, str] | None
    requests: int


def _archive(
    writer: ArchiveWriter | None,
    url: str,
    resp: aiohttp.ClientResponse,
    body: bytes,
    at: datetime | None,
    *,
    truncated: bool,
) -> None:
    with contextlib.suppress(ValueError):  # an answer the archive cannot store: the walk goes on
        archive_answer(writer, url, resp, body, kind="sitemap", fetched_at=at, truncated=truncated)


async def _fetch_body(
    session: aiohttp.ClientSession,
    url: str,
    *,
    user_agent: str,
    timeout: float,
    budget: int,
    crawl_delays: Mapping[str, float],
    archive: ArchiveWriter | None = None,
    fetched_at: datetime | None = None,
) -> _Fetched:
    """GET with redirects followed by hand; every answer goes to ``archive`` when given."""
    made = 0
    status: int | None = None
    try:
        for _ in range(_MAX_REDIRECTS + 1):
            if made >= budget:
                return _Fetched(
                    None,
                    status,
                    ("file_cap", "sitemap fetch budget exhausted while following redirects"),
                    made,
                )
            made += 1
            host = url_host_key(url)
            await LEDGER.wait_turn(host, crawl_delays.get(host))
            async with session.get(
                url,
                headers={"User-Agent": user_agent},
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=timeout),
                auto_decompress=False,
            ) as resp:
                # Count the gap from the answer too: the server saw the request before this.
                LEDGER.note_start(host)
                status = resp.status
                location = resp.headers.get("Location")
                if status in (301, 302, 303, 307, 308) and location:
                    _archive(archive, url, resp, b"", fetched_at, truncated=True)
                    url = urljoin(url, location.strip())
                    check_url_scheme(url)
                    continue
                if not 200 <= status < 300:
                    _archive(archive, url, resp, b"", fetched_at, truncated=True)
                    return _Fetched(None, status, ("http", f"HTTP {status}"), made)
                read = await read_limited(
                    resp,
                    max_bytes=MAX_SITEMAP_BYTES,
                    max_decompressed_bytes=MAX_SITEMAP_BYTES,
                    truncate=True,
                )
                _archive(archive, url, resp, read.body, fetched_at, truncated=read.truncated)
                note: tuple[ProblemKind, str] | None = (
                    ("size_cap", f"truncated at {MAX_SITEMAP_BYTES} bytes")
                    if read.truncated
                    else None
                )
                return _Fetched(read.body, status, note, made)
        return _Fetched(None, status, ("http", f"more than {_MAX_REDIRECTS} redirects"), made)
    except ArchiveWriteError:
        raise  # a full disk fails the cycle
    except BodyDecodeError as exc:
        return _Fetched(None, status, ("gzip", str(exc)), made)
    except ValueError as exc:
        return _Fetched(None, status, ("http", f"bad URL: {exc}"), made)
    except Exception as exc:
        blocked = find_blocked_error(exc)
        if blocked is not None:
            return _Fetched(None, status, ("http", f"blocked: {blocked}"), made)
        if isinstance(exc, TimeoutError):
            return _Fetched(None, status, ("http", f"timeout after {timeout:g}s"), made)
        return _Fetched(None, status, ("http", f"{type(exc).__name__}: {exc}"), made)


async def fetch_sitemap_entries(
    session: aiohttp.ClientSession,
    sitemap_urls: Iterable[str],
    *,
    user_agent: str,
    max_sitemaps: int = 50,
    max_urls: int = 50_000,
    timeout: float = 30.0,
    crawl_delays: Mapping[str, float] | None = None,
    archive: ArchiveWriter | None = None,
    fetched_at: datetime | None = None,
) -> SitemapWalk:
    """Walk sitemaps and sitemap indexes breadth-first (every answer to ``archive`` when
    given, dated ``fetched_at``, the cycle's now).

    ``crawl_delays`` (host key to seconds) keeps each host's Crawl-delay between these
    requests and the cycle's other requests to it.

    Never more than ``max_sitemaps`` HTTP requests (redirect hops count) nor ``max_urls``
    entries. A URL listed twice keeps its newest ``lastmod``. Every file asked for is in
    ``files`` and every problem in ``problems``; hitting a limit is a problem too, so a cut
    walk is never mistaken for a complete one.
    """
    walk = SitemapWalk()
    queue: deque[str] = deque()
    seen: set[str] = set()
    for raw in sitemap_urls:
        url = raw.strip()
        try:
            check_url_scheme(url)
        except ValueError as exc:
            walk.problems.append(SitemapProblem("http", str(exc), raw))
            walk.files.append(SitemapFile(raw, None, None))
            continue
        if url not in seen:
            seen.add(url)
            queue.append(url)

    index: dict[str, int] = {}
    requests_made = 0
    dropped = 0
    entries = walk.entries
    while queue and requests_made < max_sitemaps and len(entries) < max_urls:
        url = queue.popleft()
        got = await _fetch_body(
            session,
            url,
            user_agent=user_agent,
            timeout=timeout,
            budget=max_sitemaps - requests_made,
            crawl_delays=crawl_delays or {},
            archive=archive,
            fetched_at=fetched_at,
        )
        requests_made += got.requests
        if got.problem is not None:
            walk.problems.append(SitemapProblem(*got.problem, url, got.status))
        if got.body is None:
            walk.files.append(SitemapFile(url, got.status, None))
            continue
        parsed = read_sitemap(got.body, url, cut=got.problem is not None)
        walk.problems.extend(parsed.problems)
        walk.files.append(
            SitemapFile(
                url,
                got.status,
                parsed.format,
                len(parsed.entries),
                len(parsed.children),
                parsed.recovered,
                parsed.complete,
            )
        )
        for entry in parsed.entries:
            at = index.get(entry.loc)
            if at is None:
                if len(entries) >= max_urls:
                    dropped += 1
                    continue
                index[entry.loc] = len(entries)
                entries.append(entry)
            else:
                old = entries[at]
                if entry.lastmod is not None and (
                    old.lastmod is None or entry.lastmod > old.lastmod
                ):
                    entries[at] = entry
        for child in parsed.children:
            if child not in seen:
                seen.add(child)
                queue.append(child)
    if len(entries) >= max_urls and (queue or dropped):
        walk.problems.append(
            SitemapProblem(
                "url_cap",
                f"URL limit {max_urls} reached; {dropped} URL(s) dropped, "
                f"{len(queue)} sitemap(s) not read",
            )
        )
    elif queue:
        walk.problems.append(
            SitemapProblem(
                "file_cap",
                f"sitemap limit {max_sitemaps} reached; {len(queue)} sitemap(s) not read",
            )
        )
    return walk
