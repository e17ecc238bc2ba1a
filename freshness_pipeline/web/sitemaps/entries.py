"""What reading a sitemap or feed yields (entries, problems, the file's format), the limits
every reader keeps, and the dates the files carry: shared by the parsers, the walk and the
inventory that reports problems, none of which needs the others to speak of them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from typing import Literal, get_args

__all__ = [
    "FEED_FORMATS",
    "FORMAT_BY_ROOT",
    "MAX_FEED_BYTES",
    "MAX_SITEMAP_BYTES",
    "MAX_URLS_PER_FILE",
    "PROBLEM_KINDS",
    "PROBLEM_LABELS",
    "RECORD_TAG_BY_FORMAT",
    "ParsedSitemap",
    "ProblemKind",
    "SitemapEntry",
    "SitemapFormat",
    "SitemapProblem",
    "parse_w3c_datetime",
]

MAX_URLS_PER_FILE = 50_000  # the sitemaps.org limit per file
MAX_SITEMAP_BYTES = 50 * 1024 * 1024  # the sitemaps.org limit, uncompressed
# Feeds list recent items, not a site; feedparser builds a dict per element, so a feed gets a
# tighter cap than a sitemap and is read up to it.
MAX_FEED_BYTES = 8 * 1024 * 1024


ProblemKind = Literal[
    "http",
    "gzip",
    "size_cap",
    "not_sitemap",
    "entities",
    "malformed",
    "url_cap",
    "file_cap",
    "time_cap",
    "shrunk",
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
    "time_cap": "the host's time for sitemaps this cycle ran out, the rest not read",
    "shrunk": "sitemaps list under half the URLs of the last complete read: not taken as "
    "complete until they list as few again",
}
PROBLEM_KINDS: tuple[ProblemKind, ...] = get_args(ProblemKind)

SitemapFormat = Literal["urlset", "sitemapindex", "rss", "rdf", "atom", "jsonfeed", "text"]
#: The format a file is in, by the local name of its root element.
FORMAT_BY_ROOT: dict[str, SitemapFormat] = {
    "urlset": "urlset",
    "sitemapindex": "sitemapindex",
    "rss": "rss",
    "rdf": "rdf",
    "feed": "atom",
}
#: The formats read as feeds (through feedparser), not as sitemaps.
FEED_FORMATS: frozenset[SitemapFormat] = frozenset({"rss", "rdf", "atom", "jsonfeed"})
#: The element each format lists one URL in.
RECORD_TAG_BY_FORMAT: dict[SitemapFormat, str] = {
    "urlset": "url",
    "sitemapindex": "sitemap",
    "rss": "item",
    "rdf": "item",
    "atom": "entry",
}


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
    #: announced by a list of recent items only, a feed or a news sitemap (whose protocol keeps
    #: two days of articles): leaving it says nothing of whether the page is still there (a
    #: sitemap of the site's pages that stops listing a page does)
    from_feed: bool = False


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
    #: the ``<lastmod>`` an index gave a child, for the children it gave one (UTC)
    child_lastmods: dict[str, datetime] = field(default_factory=dict)
    problems: list[SitemapProblem] = field(default_factory=list)
    recovered: bool = False
    complete: bool = False
    #: a paged feed's next page (Atom's or RSS's ``<link rel="next">``, RFC 5005; JSON Feed's
    #: ``next_url``), absolute
    next_page: str | None = None


#: Sitemap and feed dates before this are placeholders, not dates (the web had few pages and no
#: sitemaps then; ``1970-01-01`` is what a zero timestamp prints as).
EARLIEST_DATE = datetime(1995, 1, 1, tzinfo=UTC)


def parse_w3c_datetime(text: str | None) -> datetime | None:
    """A sitemap/feed date as an aware UTC datetime, or None when it is not a date.

    Accepts the W3C profile of ISO 8601 (``2024-05-01``, with time, with or without seconds,
    fraction and zone; no zone means UTC), RFC 3339 (Atom) and RFC 822 (RSS ``pubDate``). A
    date that cannot be placed on the UTC line (year 9999 minus a zone) is None.

    Also None, though the profile allows or the calendar has them: a year or a month alone
    (``2024``, ``2024-05``), which read as their first instant said "unchanged since 2 January"
    of a page changed in June, and dates before :data:`EARLIEST_DATE` (``1970-01-01``,
    ``0001-01-01``: the placeholders of sites that do not know), which read as real made every
    page the quietest of its host. A date that cannot date a change is no date.
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
        if day is None:
            return None
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
        utc = when.astimezone(UTC)
    except (OverflowError, ValueError):
        return None
    return utc if utc >= EARLIEST_DATE else None


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
