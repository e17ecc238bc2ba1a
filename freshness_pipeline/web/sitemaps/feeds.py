"""RSS 2.0, RSS 1.0/RDF and Atom feeds through feedparser, which knows their dialects and
dates better than a reading of their XML by hand would."""

from __future__ import annotations

import calendar
import io
import time
from datetime import UTC, datetime
from typing import Any

import feedparser  # type: ignore[import-untyped]

from freshness_pipeline.web.sitemaps.entries import SitemapEntry, parse_w3c_datetime
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
    exc = result.get("bozo_exception")
    # Encoding and content-type notes are feedparser's own fussiness, not a broken feed.
    return bool(result.get("bozo")) and not isinstance(
        exc, feedparser.exceptions.ThingsNobodyCaresAboutButMe
    )
