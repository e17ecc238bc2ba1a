"""The records of a sitemap or feed (a ``<url>``, ``<sitemap>``, ``<item>`` or ``<entry>``)
turned into entries and child sitemaps, one finished element at a time and up to the URL
cap: the step the XML reader and the feed reader share."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urljoin

from freshness_pipeline.web.netguard import check_url_scheme
from freshness_pipeline.web.sitemaps.entries import (
    RECORD_TAG_BY_FORMAT,
    SitemapEntry,
    SitemapFormat,
    parse_w3c_datetime,
)


def local_name(tag: object) -> str:
    """An element's name without namespace or prefix: sitemaps in the 0.84 namespace, in none
    or in a misspelt one, and prefixes nobody declared, all name the same elements."""
    if not isinstance(tag, str):  # comments, processing instructions, entity references
        return ""
    return tag.rsplit("}", 1)[-1].rsplit(":", 1)[-1].lower()


def _child_text(elem: Any, name: str) -> str | None:
    # lxml's {*} finds the name in any namespace or none; only an undeclared prefix or an
    # odd case needs the look at every child.
    found = list(elem.iterchildren(f"{{*}}{name}")) or [
        child for child in elem if local_name(child.tag) == name
    ]
    for child in found:
        text = "".join(child.itertext()).strip()
        if text:
            return text
    return None


def _publication_date(elem: Any) -> datetime | None:
    """A Google News sitemap's ``<news:publication_date>``: news sitemaps usually give it and
    no ``<lastmod>``, and a new article's date is what puts it ahead of older entries."""
    for found in elem.iter("{*}publication_date"):
        when = parse_w3c_datetime("".join(found.itertext()).strip())
        if when is not None:
            return when
    return None


def _is_news(elem: Any) -> bool:
    """A Google News sitemap's record (``<news:news>``): such a file lists the articles of the
    last two days, so an article leaving it is an article growing old, not a page gone. Read
    as a listing of the site's pages, it had a news site's articles checked early as if gone
    two days after they appeared, whenever the site's own file that listed them too answered
    304 (found by an exploratory run)."""
    return next(elem.iterchildren("{*}news"), None) is not None


def absolute_url(loc: str | None, base: str) -> str | None:
    """``loc`` resolved against ``base``; None when empty or not an http(s) URL with a host."""
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


class RecordCollector:
    """Turns the records lxml finishes into entries and child sitemaps, up to the cap."""

    def __init__(self, fmt: SitemapFormat, source_url: str, max_urls: int) -> None:
        self.fmt = fmt
        self.record = RECORD_TAG_BY_FORMAT[fmt]
        self.source_url = source_url
        self.max_urls = max_urls
        self.entries: list[SitemapEntry] = []
        self.children: list[str] = []
        self.child_lastmods: dict[str, datetime] = {}
        self.capped = False
        self.next_page: str | None = None  # a paged feed's (ParsedSitemap.next_page)
        # language versions taken (they do not count against the cap on records, which is the
        # protocol's on <url> elements, but are bounded by it in their own right)
        self.alternates = 0

    def take(self, elem: Any) -> bool:
        """Use a finished element if it is a record; False once the cap stops the file."""
        if local_name(elem.tag) != self.record:
            return True
        if len(self.entries) - self.alternates + len(self.children) >= self.max_urls:
            self.capped = True
            return False
        url = absolute_url(_child_text(elem, "loc"), self.source_url)
        if url is not None:
            lastmod = parse_w3c_datetime(_child_text(elem, "lastmod"))
            if lastmod is None and self.fmt == "urlset":
                lastmod = _publication_date(elem)
            if self.fmt != "sitemapindex":
                self.entries.append(
                    SitemapEntry(url, lastmod, self.source_url, from_feed=_is_news(elem))
                )
                if self.fmt == "urlset":
                    self._take_alternates(elem, url)
            else:
                self.children.append(url)
                if lastmod is not None:
                    # a child listed twice keeps its newest date, as an entry does in a walk
                    known = self.child_lastmods.get(url)
                    self.child_lastmods[url] = lastmod if known is None else max(known, lastmod)
        # Keep memory flat on 50,000-record files: drop the record and what came before it,
        # unless a recovery nested it in a record not yet finished (whose <loc> that would be).
        elem.clear()
        parent = elem.getparent()
        if parent is not None and parent.getparent() is None:
            while elem.getprevious() is not None:
                del parent[0]
        return True

    def _take_alternates(self, elem: Any, url: str) -> None:
        """The language versions a ``<url>`` names (``<xhtml:link rel="alternate"
        hreflang=".." href="..">``), the way search engines are told of them: pages of the site
        the sitemap lists nowhere else were never found (found by an exploratory run). Undated:
        the record's lastmod is its own page's."""
        for link in elem.iterchildren("{*}link"):
            if (link.get("rel") or "").strip().lower() != "alternate":
                continue
            other = absolute_url(link.get("href"), self.source_url)
            if other is None or other == url or self.alternates >= self.max_urls:
                continue
            self.alternates += 1
            self.entries.append(SitemapEntry(other, None, self.source_url))
