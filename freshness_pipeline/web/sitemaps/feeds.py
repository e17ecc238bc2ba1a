"""RSS 2.0, RSS 1.0/RDF and Atom feeds through feedparser, which knows their dialects and
dates better than a reading of their XML by hand would; JSON Feed (jsonfeed.org), which
feedparser does not read, through the standard library's JSON parser."""

from __future__ import annotations

import calendar
import io
import json
import time
from datetime import UTC, datetime
from typing import Any

import feedparser  # type: ignore[import-untyped]

from freshness_pipeline.web.sitemaps.entries import (
    ParsedSitemap,
    SitemapEntry,
    SitemapProblem,
    parse_w3c_datetime,
)
from freshness_pipeline.web.sitemaps.records import RecordCollector, absolute_url


def _struct_time_utc(value: object) -> datetime | None:
    """feedparser's parsed dates are UTC ``struct_time``s."""
    if not isinstance(value, time.struct_time):
        return None
    try:
        return datetime.fromtimestamp(calendar.timegm(value), UTC)
    except (OverflowError, ValueError, OSError):
        return None


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


def parse_feed(data: bytes, records: RecordCollector) -> bool:
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
        url = absolute_url(link, records.source_url)
        if url is not None:
            records.entries.append(
                SitemapEntry(url, _feed_lastmod(entry), records.source_url, from_feed=True)
            )
    feed = result.get("feed") or {}
    for link in feed.get("links", []) if isinstance(feed, dict) else []:
        if isinstance(link, dict) and link.get("rel") == "next":
            records.next_page = absolute_url(link.get("href"), records.source_url)
            break
    exc = result.get("bozo_exception")
    # Encoding and content-type notes are feedparser's own fussiness, not a broken feed.
    return bool(result.get("bozo")) and not isinstance(
        exc, feedparser.exceptions.ThingsNobodyCaresAboutButMe
    )


#: what a JSON Feed's ``version`` starts with (1.0 and 1.1)
JSON_FEED_VERSION = "https://jsonfeed.org/version/"


def parse_json_feed(data: bytes, source_url: str, max_urls: int) -> ParsedSitemap | None:
    """Entries of a JSON Feed: each item's ``url`` (else ``external_url``) dated by its
    ``date_modified``, else ``date_published``; None when ``data`` is no JSON Feed. A file over
    the feed cap was cut before it got here and does not parse: it is no feed then."""
    try:
        feed = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(feed, dict) or not str(feed.get("version", "")).startswith(JSON_FEED_VERSION):
        return None
    items = feed.get("items")
    entries: list[SitemapEntry] = []
    skipped = 0
    capped = False
    for item in items if isinstance(items, list) else []:
        if len(entries) >= max_urls:
            capped = True
            break
        link = item.get("url") or item.get("external_url") if isinstance(item, dict) else None
        url = absolute_url(link, source_url) if isinstance(link, str) else None
        if url is None:
            skipped += 1
            continue
        when = next(
            (
                parse_w3c_datetime(item[key])
                for key in ("date_modified", "date_published")
                if isinstance(item.get(key), str) and parse_w3c_datetime(item[key]) is not None
            ),
            None,
        )
        entries.append(SitemapEntry(url, when, source_url, from_feed=True))
    parsed = ParsedSitemap("jsonfeed", entries=entries, complete=not capped)
    next_url = feed.get("next_url")
    if isinstance(next_url, str):
        parsed.next_page = absolute_url(next_url, source_url)
    if skipped:
        parsed.recovered = True
        parsed.problems.append(
            SitemapProblem(
                "malformed", f"{skipped} item(s) without a usable url, skipped", source_url
            )
        )
    if capped:
        parsed.problems.append(
            SitemapProblem(
                "url_cap", f"more than {max_urls} URLs in one file; the rest not read", source_url
            )
        )
    return parsed
