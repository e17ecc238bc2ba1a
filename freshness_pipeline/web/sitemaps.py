"""Sitemaps and feeds as a source of URLs and of change hints (``lastmod``).

Sitemaps are written by strangers and are often large, gzipped, malformed or hostile, so parsing
is bounded everywhere: decompressed size, URLs per file, files per walk; no DTDs or entities
(billion laughs) are ever expanded; and garbage yields nothing rather than an exception, because
one broken sitemap must not fail a host's cycle. The walk over sitemap indexes is breadth-first
so the top-level files, usually the most useful, are read before the budget runs out.
"""

from __future__ import annotations

import re
import zlib
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from urllib.parse import urljoin
from xml.etree import ElementTree as ET

import aiohttp

from freshness_pipeline.web.client import BodyDecodeError, read_limited
from freshness_pipeline.web.client import host_key as url_host_key
from freshness_pipeline.web.netguard import check_url_scheme, find_blocked_error
from freshness_pipeline.web.politeness import LEDGER

__all__ = [
    "MAX_SITEMAP_BYTES",
    "MAX_URLS_PER_FILE",
    "SitemapEntry",
    "fetch_sitemap_entries",
    "parse_sitemap",
    "parse_w3c_datetime",
]

MAX_URLS_PER_FILE = 50_000  # the sitemaps.org limit per file
MAX_SITEMAP_BYTES = 50 * 1024 * 1024  # the sitemaps.org limit, uncompressed
_MAX_REDIRECTS = 5
_FEED_CHUNK = 1 << 20

_GZIP_MAGIC = b"\x1f\x8b"
_DOCTYPE_WITH_SUBSET = re.compile(rb"<!DOCTYPE[^>\[]*\[", re.IGNORECASE)
_DOCTYPE = re.compile(rb"<!DOCTYPE[^>\[]*>", re.IGNORECASE)
_ENTITY = re.compile(rb"<!ENTITY", re.IGNORECASE)
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


def parse_w3c_datetime(text: str | None) -> datetime | None:
    """A sitemap/feed date as an aware UTC datetime, or None when it is not a date.

    Accepts the W3C profile of ISO 8601 (``2024``, ``2024-05``, ``2024-05-01``, with time, with or
    without seconds, fraction and zone; no zone means UTC), RFC 3339 (Atom) and RFC 822 (RSS
    ``pubDate``).
    """
    if not text:
        return None
    value = text.strip()
    if not value:
        return None
    m = _W3C.match(value)
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
        return when.astimezone(UTC)
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


def _gunzip(data: bytes, cap: int) -> bytes:
    """Bounded gunzip (all members); a corrupt or bomb-sized stream keeps what decoded."""
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
                    break
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    except zlib.error:
        pass
    return bytes(out[:cap])


def _local(tag: object) -> str:
    if not isinstance(tag, str):  # comments and processing instructions
        return ""
    return tag.rsplit("}", 1)[-1].lower()


def _child_text(elem: ET.Element, *names: str) -> str | None:
    for name in names:
        for child in elem:
            if _local(child.tag) == name and child.text and child.text.strip():
                return child.text.strip()
    return None


def _absolute(loc: str | None, base: str) -> str | None:
    if not loc:
        return None
    url = urljoin(base, loc.strip())
    try:
        check_url_scheme(url)
    except ValueError:
        return None
    return url


def _atom_link(elem: ET.Element) -> str | None:
    fallback = None
    for child in elem:
        if _local(child.tag) != "link":
            continue
        href = child.get("href")
        if not href:
            if child.text and child.text.strip():  # RSS <link> inside a mixed feed
                return child.text.strip()
            continue
        if child.get("rel") in (None, "", "alternate"):
            return href
        fallback = fallback or href
    return fallback


def _rss_link(elem: ET.Element) -> str | None:
    link = _atom_link(elem)
    if link:
        return link
    for child in elem:
        if (
            _local(child.tag) == "guid"
            and (child.get("isPermaLink") or "true").lower() != "false"
            and child.text
        ):
            return child.text.strip()
    return None


class _Collector:
    def __init__(self, source_url: str, max_urls: int) -> None:
        self.source_url = source_url
        self.max_urls = max_urls
        self.entries: list[SitemapEntry] = []
        self.children: list[str] = []
        self.kind: str | None = None

    @property
    def full(self) -> bool:
        return len(self.entries) + len(self.children) >= self.max_urls

    def add(self, loc: str | None, lastmod: str | None) -> None:
        url = _absolute(loc, self.source_url)
        if url is not None and not self.full:
            self.entries.append(SitemapEntry(url, parse_w3c_datetime(lastmod), self.source_url))

    def handle(self, elem: ET.Element) -> bool:
        """Take a finished record element; True if it was one (and may be dropped)."""
        name = _local(elem.tag)
        if self.kind == "urlset" and name == "url":
            self.add(_child_text(elem, "loc"), _child_text(elem, "lastmod"))
        elif self.kind == "sitemapindex" and name == "sitemap":
            url = _absolute(_child_text(elem, "loc"), self.source_url)
            if url is not None and not self.full:
                self.children.append(url)
        elif self.kind in ("rss", "rdf") and name == "item":
            about = elem.get("{http://www.w3.org/1999/02/22-rdf-syntax-ns#}about")
            self.add(
                _rss_link(elem) or about,
                _child_text(elem, "pubdate", "date", "updated", "modified", "published"),
            )
        elif self.kind == "feed" and name == "entry":
            self.add(_atom_link(elem), _child_text(elem, "updated", "modified", "published"))
        else:
            return False
        return True


def _parse_xml(data: bytes, collector: _Collector) -> None:
    if _ENTITY.search(data) or _DOCTYPE_WITH_SUBSET.search(data):
        return  # entity definitions have no business in a sitemap: refuse the whole file
    data = _DOCTYPE.sub(b"", data, count=1)
    parser = ET.XMLPullParser(events=("start", "end"))
    stack: list[ET.Element] = []
    try:
        for offset in range(0, len(data), _FEED_CHUNK):
            parser.feed(data[offset : offset + _FEED_CHUNK])
            for event, elem in parser.read_events():
                if event == "start":
                    if not stack:
                        root = _local(elem.tag)
                        collector.kind = (
                            root
                            if root in ("urlset", "sitemapindex", "rss", "rdf", "feed")
                            else None
                        )
                        if collector.kind is None:
                            return
                    stack.append(elem)
                    continue
                stack.pop()
                if collector.handle(elem) and stack:
                    stack[-1].remove(elem)  # keep memory flat on 50,000-entry files
                if collector.full:
                    return
        parser.close()
    except ET.ParseError:
        return  # keep what parsed before the damage


def _parse_text(data: bytes, collector: _Collector) -> None:
    # sitemaps.org allows a plain list of URLs, one per line.
    for raw in data.decode("utf-8", errors="replace").splitlines():
        line = raw.strip()
        if line.startswith(("http://", "https://")) and not any(c.isspace() for c in line):
            collector.add(line, None)
            if collector.full:
                return


def parse_sitemap(
    body: bytes,
    source_url: str,
    *,
    max_urls: int = MAX_URLS_PER_FILE,
    max_bytes: int = MAX_SITEMAP_BYTES,
) -> tuple[list[SitemapEntry], list[str]]:
    """Entries and child sitemaps from a urlset, sitemapindex, RSS/RDF or Atom feed, or text.

    Gzip is recognised by its magic bytes (``.xml.gz`` files often arrive without any
    Content-Encoding). At most ``max_urls`` URLs (entries plus children) come back and at most
    ``max_bytes`` are decompressed, so a gzip bomb costs a bounded amount of work. Relative
    locations are resolved against ``source_url``; non-http(s) ones are dropped. Never raises
    on bad input.
    """
    collector = _Collector(source_url, max(0, max_urls))
    if max_urls <= 0:
        return [], []
    data = body
    if data[:2] == _GZIP_MAGIC:
        data = _gunzip(data, max_bytes)
    elif len(data) > max_bytes:
        data = data[:max_bytes]
    data = data.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not data:
        return [], []
    if data[:1] == b"<":
        _parse_xml(data, collector)
    else:
        _parse_text(data, collector)
    return collector.entries, collector.children


async def _fetch_body(
    session: aiohttp.ClientSession,
    url: str,
    *,
    user_agent: str,
    timeout: float,
    budget: int,
    crawl_delays: Mapping[str, float],
) -> tuple[bytes | None, str | None, int]:
    """GET with redirects followed by hand; returns (body, error, requests made)."""
    made = 0
    try:
        for _ in range(_MAX_REDIRECTS + 1):
            if made >= budget:
                return None, "sitemap fetch budget exhausted while following redirects", made
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
                    url = urljoin(url, location.strip())
                    check_url_scheme(url)
                    continue
                if not 200 <= status < 300:
                    return None, f"HTTP {status}", made
                read = await read_limited(
                    resp,
                    max_bytes=MAX_SITEMAP_BYTES,
                    max_decompressed_bytes=MAX_SITEMAP_BYTES,
                    truncate=True,
                )
                note = f"truncated at {MAX_SITEMAP_BYTES} bytes" if read.truncated else None
                return read.body, note, made
        return None, f"more than {_MAX_REDIRECTS} redirects", made
    except BodyDecodeError as exc:
        return None, str(exc), made
    except ValueError as exc:
        return None, f"bad URL: {exc}", made
    except Exception as exc:
        blocked = find_blocked_error(exc)
        if blocked is not None:
            return None, f"blocked: {blocked}", made
        if isinstance(exc, TimeoutError):
            return None, f"timeout after {timeout:g}s", made
        return None, f"{type(exc).__name__}: {exc}", made


async def fetch_sitemap_entries(
    session: aiohttp.ClientSession,
    sitemap_urls: Iterable[str],
    *,
    user_agent: str,
    max_sitemaps: int = 50,
    max_urls: int = 50_000,
    timeout: float = 30.0,
    crawl_delays: Mapping[str, float] | None = None,
) -> tuple[list[SitemapEntry], list[str]]:
    """Walk sitemaps and sitemap indexes breadth-first; returns (entries, errors).

    ``crawl_delays`` (host key to seconds) keeps each host's Crawl-delay between these
    requests and the cycle's other requests to it.

    Never more than ``max_sitemaps`` HTTP requests (redirect hops count) nor ``max_urls``
    entries. A URL listed twice keeps its newest ``lastmod``. Errors are strings naming the
    sitemap; hitting a limit is reported there too, so a truncated walk is visible.
    """
    queue: deque[str] = deque()
    seen: set[str] = set()
    errors: list[str] = []
    for raw in sitemap_urls:
        url = raw.strip()
        try:
            check_url_scheme(url)
        except ValueError as exc:
            errors.append(f"{raw}: {exc}")
            continue
        if url not in seen:
            seen.add(url)
            queue.append(url)

    entries: list[SitemapEntry] = []
    index: dict[str, int] = {}
    requests_made = 0
    dropped = 0
    while queue and requests_made < max_sitemaps and len(entries) < max_urls:
        url = queue.popleft()
        body, note, made = await _fetch_body(
            session,
            url,
            user_agent=user_agent,
            timeout=timeout,
            budget=max_sitemaps - requests_made,
            crawl_delays=crawl_delays or {},
        )
        requests_made += made
        if note is not None:
            errors.append(f"{url}: {note}")
        if body is None:
            continue
        found, children = parse_sitemap(body, url)
        for entry in found:
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
        for child in children:
            if child not in seen:
                seen.add(child)
                queue.append(child)
    if len(entries) >= max_urls and (queue or dropped):
        errors.append(
            f"URL limit {max_urls} reached; {dropped} URL(s) dropped, "
            f"{len(queue)} sitemap(s) not read"
        )
    elif queue:
        errors.append(f"sitemap limit {max_sitemaps} reached; {len(queue)} sitemap(s) not read")
    return entries, errors
