"""web/sitemaps/records.py and web/sitemaps/feeds.py: records of a sitemap or feed turned into
entries, whatever namespace they come in, and up to the cap."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from lxml import etree

from freshness_pipeline.web.sitemaps.feeds import parse_feed
from freshness_pipeline.web.sitemaps.records import RecordCollector, absolute_url, local_name

BASE = "https://example.test/sitemap.xml"


def test_names_and_urls() -> None:
    assert local_name("{http://www.google.com/schemas/sitemap/0.84}URL") == "url"
    assert local_name("x:loc") == "loc" and local_name(None) == ""
    assert absolute_url(" /a ", BASE) == "https://example.test/a"
    assert absolute_url("javascript:alert(1)", BASE) is None
    assert absolute_url("", BASE) is None


def test_url_records_become_entries_up_to_the_cap() -> None:
    xml = b"""<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
    <url><loc>/a</loc><lastmod>2026-03-01</lastmod></url>
    <url><loc>https://example.test/b</loc></url>
    <url><loc>https://example.test/c</loc></url></urlset>"""
    records = RecordCollector("urlset", BASE, max_urls=2)
    for _, elem in etree.iterparse(io.BytesIO(xml), events=("end",)):
        if not records.take(elem):
            break
    assert [e.loc for e in records.entries] == ["https://example.test/a", "https://example.test/b"]
    assert records.entries[0].lastmod == datetime(2026, 3, 1, tzinfo=UTC)
    assert records.capped


def test_feed_items_become_entries_with_their_dates() -> None:
    rss = b"""<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>
    <item><link>https://example.test/post</link>
    <pubDate>Mon, 02 Mar 2026 12:00:00 GMT</pubDate></item></channel></rss>"""
    records = RecordCollector("rss", "https://example.test/feed", max_urls=10)
    assert parse_feed(rss, records) is False
    (entry,) = records.entries
    assert entry.loc == "https://example.test/post"
    assert entry.lastmod == datetime(2026, 3, 2, 12, tzinfo=UTC)
