"""One sitemap file's bytes to its entries, as the web writes them: gzip by its magic bytes,
the encoding its bytes have rather than the one declared, bare ampersands escaped, a cut
kept up to its last full record, and lxml in recover mode for the rest."""

from __future__ import annotations

import codecs
import contextlib
import re
import zlib
from typing import Any

from lxml import etree  # type: ignore[import-untyped]

from freshness_pipeline.science.fingerprint.links import FEED_TYPES
from freshness_pipeline.web.sitemaps.entries import (
    FEED_FORMATS,
    FORMAT_BY_ROOT,
    MAX_FEED_BYTES,
    MAX_SITEMAP_BYTES,
    MAX_URLS_PER_FILE,
    RECORD_TAG_BY_FORMAT,
    ParsedSitemap,
    ProblemKind,
    SitemapEntry,
    SitemapProblem,
)
from freshness_pipeline.web.sitemaps.feeds import JSON_FEED_VERSION, parse_feed, parse_json_feed
from freshness_pipeline.web.sitemaps.records import RecordCollector, absolute_url, local_name

__all__ = [
    "is_feed",
    "is_listing",
    "parse_sitemap",
    "read_sitemap",
]

_PARSE_CHUNK = 1 << 20
_SNIFF_BYTES = 1 << 20  # how far into a file its root element may start
_FEED_SNIFF_BYTES = 4096  # how far into a page its feed's root or JSON Feed version must be


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


def _xml_errors(log: Any) -> list[Any]:
    return [e for e in log if e.level >= etree.ErrorLevels.ERROR]


def _lossy(errors: list[Any]) -> bool:
    """Whether any of libxml2's errors may have cost a record."""
    return any(e.domain not in _HARMLESS_DOMAINS and e.type not in _HARMLESS_TYPES for e in errors)


def _parse_urlset(data: bytes, records: RecordCollector, tag: str | None) -> list[Any]:
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


def _parse_text(data: bytes, source_url: str, max_urls: int) -> ParsedSitemap:
    # sitemaps.org allows a plain list of URLs, one per line, each fully qualified: a line that
    # is not one is skipped and said (the file is still read whole: no crawlable URL was in it).
    entries: list[SitemapEntry] = []
    capped = False
    skipped: list[str] = []
    for raw in data.decode("utf-8", errors="replace").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        url = None
        if line[:8].lower().startswith(("http://", "https://")) and not any(
            c.isspace() for c in line
        ):
            if len(entries) >= max_urls:
                capped = True
                break
            url = absolute_url(line, source_url)
        if url is None:
            skipped.append(line)
        else:
            entries.append(SitemapEntry(url, None, source_url))
    if not entries:
        return ParsedSitemap(
            None,
            problems=[SitemapProblem("not_sitemap", "no XML and no URL lines", source_url)],
        )
    parsed = ParsedSitemap("text", entries=entries, complete=not capped)
    if skipped:
        parsed.recovered = True
        parsed.problems.append(
            SitemapProblem(
                "malformed",
                f"URLs kept: {len(entries)}; {len(skipped)} line(s) not a full http(s) URL, "
                f"skipped (the first: {skipped[0][:80]!r})",
                source_url,
            )
        )
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
    root = local_name(root_tag) if root_tag else None
    fmt = FORMAT_BY_ROOT.get(root or "")
    if fmt is None or root_tag is None:
        what = f"root element <{root}>" if root else "no XML element"
        problems.append(SitemapProblem("not_sitemap", what, source_url))
        return ParsedSitemap(None, problems=problems)
    if fmt in FEED_FORMATS and len(data) > MAX_FEED_BYTES:
        data = data[:MAX_FEED_BYTES]
        problems.append(
            SitemapProblem(
                "size_cap", f"feed over {MAX_FEED_BYTES} bytes; read up to there", source_url
            )
        )
        cut = True
    data, truncated = _cut_at_last_record(data, root or "", RECORD_TAG_BY_FORMAT[fmt])
    records = RecordCollector(fmt, source_url, max_urls)
    lossy = False
    errors: list[Any] = []
    if fmt in FEED_FORMATS:
        lossy = parse_feed(data, records) if data else False
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
    return ParsedSitemap(
        fmt,
        entries=records.entries,
        children=records.children,
        child_lastmods=records.child_lastmods,
        problems=problems,
        recovered=recovered,
        complete=complete,
        next_page=records.next_page,
    )


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
    if data[:1] == b"{":
        feed = parse_json_feed(data[:MAX_FEED_BYTES], source_url, max_urls)
        if feed is not None:
            feed.problems[:0] = problems
            feed.complete = feed.complete and not cut
            return feed
    parsed = _parse_text(data, source_url, max_urls)
    parsed.problems[:0] = problems
    parsed.complete = parsed.complete and not cut
    return parsed


def is_feed(content_type: str | None, body: bytes) -> bool:
    """Whether a fetched page is a feed: by its media type, or an XML or JSON body whose root
    is one (many feeds are served as text/xml or application/json). A user who seeds a feed
    means its items; read as a page, none of them entered the crawl (found by an exploratory
    run)."""
    return _listing_kind(content_type, body) == "feed"


def is_listing(content_type: str | None, body: bytes) -> bool:
    """Whether a fetched page is a file that lists pages: a feed (:func:`is_feed`) or a sitemap
    (an XML ``urlset`` or ``sitemapindex``, gzipped or not). A user who seeds a sitemap robots.txt
    does not name means the pages it lists; read as a page, not one of them entered the crawl
    and the file was fetched as a page every cycle (found by an exploratory run)."""
    return _listing_kind(content_type, body) is not None


_FEED_ROOTS = frozenset({"rss", "feed", "RDF"})
_SITEMAP_ROOTS = frozenset({"urlset", "sitemapindex"})
#: media types a sitemap arrives under besides XML: gzipped files are often sent as such
_GZIP_TYPES = frozenset({"application/gzip", "application/x-gzip", "application/octet-stream"})


def _listing_kind(content_type: str | None, body: bytes) -> str | None:
    """ "feed", "sitemap" or None, by the media type and the first bytes of the body (gunzipped
    when it is gzip sent as XML or as a gzip type)."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media in FEED_TYPES:
        return "feed"
    head = body[:_FEED_SNIFF_BYTES]
    if head[:2] == _GZIP_MAGIC and (media.endswith("xml") or media in _GZIP_TYPES):
        with contextlib.suppress(zlib.error):
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(body, _FEED_SNIFF_BYTES)
        media = "application/xml"
    head = head.removeprefix(_UTF8_BOM).lstrip(b" \t\r\n")
    if media.endswith("json"):
        return "feed" if head[:1] == b"{" and JSON_FEED_VERSION.encode() in head else None
    if not media.endswith("xml") or head[:1] != b"<":
        return None
    root = _sniff_root(head)
    name = None if root is None else root.rsplit("}", 1)[-1]
    return "feed" if name in _FEED_ROOTS else "sitemap" if name in _SITEMAP_ROOTS else None


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
