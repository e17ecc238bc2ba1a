"""Sitemaps and feeds as the web writes them: a corpus of malformed and hostile files
(freshness_pipeline_tests/data/sitemaps/, see its README), read by the parser, by discovery
over real HTTP from loopback servers, and by the url_inventory asset in a real Dagster run.

Each malformed fixture is first shown to break a strict parser (the one this package used to
have lost everything after the first error), so the corpus is what it claims to be."""

from __future__ import annotations

import gzip
import logging
import os
import threading
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from aiohttp import web

from freshness_pipeline.defs.assets.inventory import url_inventory
from freshness_pipeline.defs.io_manager import WarehouseIOManager
from freshness_pipeline.defs.partitions import hosts_partitions, range_tags
from freshness_pipeline.defs.resources import CycleResource, HttpClientResource, WarehouseResource
from freshness_pipeline.stages.inventory import cycle_inventory
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline.web.client import FetchRequest, FetchSettings, fetch_all_sync
from freshness_pipeline.web.discovery import (
    COUNT_KEYS,
    DiscoveryTarget,
    HostDiscovery,
    discover_hosts,
)
from freshness_pipeline.web.netguard import allowed_networks
from freshness_pipeline.web.politeness import LEDGER
from freshness_pipeline.web.sitemaps.entries import PROBLEM_LABELS, ParsedSitemap
from freshness_pipeline.web.sitemaps.read import read_sitemap
from freshness_pipeline_tests.support import LoopThread
from freshness_pipeline_tests.test_sitemaps import LOOPBACK

CORPUS = Path(__file__).parent / "data" / "sitemaps"
SRC = "https://src.example/dir/sitemap.xml"
T0 = datetime(2026, 3, 2, 12, tzinfo=UTC)


def fixture(name: str) -> bytes:
    return (CORPUS / name).read_bytes()


def read(name: str, source: str = SRC) -> ParsedSitemap:
    return read_sitemap(fixture(name), source)


def kinds(parsed: ParsedSitemap) -> list[str]:
    return [p.kind for p in parsed.problems]


def breaks_a_strict_parser(body: bytes) -> bool:
    try:
        ET.fromstring(body)
    except ET.ParseError:
        return True
    return False


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


# ------------------------------------------------------------------ the parser


def test_bare_ampersands_keep_every_entry_with_the_ampersand_intact() -> None:
    body = fixture("bare_ampersands.xml")
    assert breaks_a_strict_parser(body)
    parsed = read("bare_ampersands.xml")
    assert [e.loc for e in parsed.entries] == [
        "https://shop.example/list?page=1",
        "https://shop.example/list?page=2&sort=price",
        "https://shop.example/list?page=3&sort=price&dir=asc",  # a mix of &amp; and bare &
        "https://shop.example/item?id=7&copy=1&lang=en",  # no HTML entity is read into it
        "https://shop.example/search?q=a&b",
        "https://shop.example/search?q=&",
        "https://shop.example/anchor?a=1&#top",
        "https://shop.example/last?x=1&y=2&z=3",
    ]
    assert parsed.entries[1].lastmod == utc(2024, 5, 2)
    assert parsed.entries[-1].lastmod == utc(2024, 5, 7, 8)
    # Reported, and still complete: escaping a bare ampersand loses nothing.
    assert kinds(parsed) == ["malformed"] and parsed.recovered and parsed.complete
    assert "9 bare '&' escaped" in parsed.problems[0].detail


@pytest.mark.parametrize(
    ("name", "locs", "strict_breaks"),
    [
        ("namespace_084.xml", ["https://old.example/a", "https://old.example/b"], False),
        ("namespace_none.xml", ["https://plain.example/a", "https://plain.example/b"], False),
        ("namespace_typo.xml", ["https://typo.example/a", "https://typo.example/b"], False),
        # prefixes nobody declared; image:loc is an image, not a page
        ("undeclared_prefixes.xml", ["https://prefix.example/a", "https://prefix.example/b"], True),
    ],
)
def test_any_namespace_or_none_names_the_same_elements(
    name: str, locs: list[str], strict_breaks: bool
) -> None:
    assert breaks_a_strict_parser(fixture(name)) == strict_breaks
    parsed = read(name)
    assert (parsed.format, [e.loc for e in parsed.entries]) == ("urlset", locs)
    assert parsed.complete  # a namespace error loses nothing
    assert kinds(parsed) == (["malformed"] if strict_breaks else [])


def test_a_bom_and_leading_whitespace_are_skipped() -> None:
    assert fixture("bom_and_whitespace.xml").startswith(b"\xef\xbb\xbf\r\n")
    parsed = read("bom_and_whitespace.xml")
    assert [e.loc for e in parsed.entries] == ["https://bom.example/a", "https://bom.example/b"]
    assert parsed.problems == [] and parsed.complete


@pytest.mark.parametrize(
    ("name", "locs", "mislabelled"),
    [
        (
            "declared_latin1_but_utf8.xml",
            ["https://enc.example/caf\u00e9", "https://enc.example/men\u00fc?k\u00e4se=1"],
            True,
        ),
        (
            "declared_utf8_but_latin1.xml",
            [
                "https://enc.example/plain",
                "https://enc.example/caf\u00e9",
                "https://enc.example/men\u00fc",
            ],
            True,
        ),
        ("declared_utf16_but_utf8.xml", ["https://enc.example/sixteen"], False),  # ASCII only
    ],
)
def test_the_bytes_win_over_a_wrong_xml_declaration(
    name: str, locs: list[str], mislabelled: bool
) -> None:
    parsed = read(name)
    assert [e.loc for e in parsed.entries] == locs
    assert parsed.complete
    assert kinds(parsed) == (["malformed"] if mislabelled else [])


def test_a_real_utf16_sitemap_is_not_called_mislabelled() -> None:
    text = fixture("declared_latin1_but_utf8.xml").decode().replace("ISO-8859-1", "UTF-16")
    parsed = read_sitemap(text.encode("utf-16"), SRC)
    assert [e.loc for e in parsed.entries][0] == "https://enc.example/caf\u00e9"
    assert parsed.problems == [] and parsed.complete


def test_html_served_as_a_sitemap_yields_nothing_and_says_so() -> None:
    parsed = read("html_soft_404.html")
    assert (parsed.format, parsed.entries, parsed.children) == (None, [], [])
    assert kinds(parsed) == ["not_sitemap"] and "<html>" in parsed.problems[0].detail
    assert not parsed.complete


def test_a_truncated_gzip_keeps_the_records_before_the_cut_at_every_cut() -> None:
    """Cut a gzipped sitemap at every byte: what comes back is always a prefix of the full list
    (never a half-written URL), grows with the cut, and is reported until the file is whole."""
    whole = fixture("children/child-1.xml")
    full = [e.loc for e in read_sitemap(whole, SRC).entries]
    assert len(full) == 12
    packed = gzip.compress(whole)
    kept_before = 0
    for cut in range(len(packed) + 1):
        parsed = read_sitemap(packed[:cut], SRC)
        kept = [e.loc for e in parsed.entries]
        assert kept == full[: len(kept)], cut
        assert len(kept) >= kept_before, cut
        kept_before = len(kept)
        if 2 <= cut < len(packed) - 8:  # gzip's magic is in, its trailer is not
            assert "gzip" in kinds(parsed) and not parsed.complete, cut
    assert kept_before == 12 and read_sitemap(packed, SRC).complete
    middle = read_sitemap(packed[: len(packed) * 2 // 3], SRC)
    assert 0 < len(middle.entries) < 12
    assert "ends early" in middle.problems[0].detail


def test_a_file_cut_short_without_gzip_keeps_its_full_records() -> None:
    parsed = read("truncated_plain.xml")
    assert [e.loc for e in parsed.entries] == ["https://cut.example/a", "https://cut.example/b"]
    assert kinds(parsed) == ["malformed"] and not parsed.complete
    assert "before its root element closes" in parsed.problems[0].detail


def test_libxml2_recovery_keeps_the_records_of_broken_tags() -> None:
    body = fixture("broken_tags.xml")
    assert breaks_a_strict_parser(body)
    parsed = read("broken_tags.xml")
    assert sorted(e.loc for e in parsed.entries) == [f"https://broken.example/{c}" for c in "abcde"]
    # Recovered, but not complete: libxml2 had to guess where records end.
    assert kinds(parsed) == ["malformed"] and parsed.recovered and not parsed.complete


def test_content_after_the_root_loses_nothing() -> None:
    parsed = read("trailing_garbage.xml")
    assert [e.loc for e in parsed.entries] == ["https://tail.example/a", "https://tail.example/b"]
    assert kinds(parsed) == ["malformed"] and parsed.complete


@pytest.mark.parametrize("name", ["billion_laughs.xml", "external_entities.xml"])
def test_entity_declarations_are_refused_quickly(name: str) -> None:
    started = time.perf_counter()
    parsed = read(name)
    assert time.perf_counter() - started < 0.5
    assert (parsed.format, parsed.entries) == (None, [])
    assert kinds(parsed) == ["entities"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
@pytest.mark.parametrize("kind", ["urlset", "rss"])
def test_an_external_dtd_is_never_opened(tmp_path: Path, kind: str) -> None:
    """A DOCTYPE naming a local DTD: the DTD is a named pipe, and opening a pipe for reading
    blocks until someone writes; a parser that touched it would hang, so the parse runs on a
    thread and must finish on its own."""
    pipe = tmp_path / "evil.dtd"
    os.mkfifo(pipe)
    doctype = f'<!DOCTYPE {kind} SYSTEM "file://{pipe}">\n'
    if kind == "urlset":
        body = fixture("external_dtd.xml").replace(
            b'<!DOCTYPE urlset SYSTEM "LEAK_ORIGIN/sitemap.dtd">\n', doctype.encode()
        )
    else:
        body = (
            b'<?xml version="1.0"?>\n' + doctype.encode() + b'<rss version="2.0"><channel>'
            b"<item><link>https://dtd.example/a</link></item></channel></rss>"
        )
    assert str(pipe).encode() in body
    result: list[ParsedSitemap] = []
    worker = threading.Thread(target=lambda: result.append(read_sitemap(body, SRC)), daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():  # it opened the pipe: let it go, then fail
        with open(pipe, "wb") as unblock:
            unblock.write(b"")
        worker.join(5)
        pytest.fail("the parser opened the external DTD")
    (parsed,) = result
    assert [e.loc for e in parsed.entries] == ["https://dtd.example/a"]


def test_cdata_is_literal_and_bare_ampersands_outside_it_are_escaped() -> None:
    parsed = read("cdata.xml")
    assert [(e.loc, e.lastmod) for e in parsed.entries] == [
        ("https://cdata.example/a?x=1&y=2", None),
        ("https://cdata.example/b", utc(2024, 3, 4)),
        ("https://cdata.example/c?x=1&y=2", None),
        ("https://cdata.example/d?q=&amp;", None),  # CDATA holds no references
    ]
    assert "1 bare '&' escaped" in parsed.problems[0].detail


LASTMODS = [
    ("2024-05-01", utc(2024, 5, 1)),
    ("2024-05-01T10:30:00.000+0200", utc(2024, 5, 1, 8, 30)),
    ("2024-05-01T10:30:00.123456789Z", datetime(2024, 5, 1, 10, 30, 0, 123456, tzinfo=UTC)),
    ("2024-05-01 10:30:00", utc(2024, 5, 1, 10, 30)),
    ("2024-05-01T10:30Z", utc(2024, 5, 1, 10, 30)),  # wrapped in newlines and spaces
    ("Wed, 01 May 2024 10:30:00 GMT", utc(2024, 5, 1, 10, 30)),
    ("2024-05-01T10:30:00 +02:00", utc(2024, 5, 1, 8, 30)),
    ("2024-05-01T10:30:00+02", utc(2024, 5, 1, 8, 30)),
    ("20240501", utc(2024, 5, 1)),
    ("2024/05/01", None),
    ("yesterday", None),
    ("", None),
    ("2024-02-30", None),
    ("0000-01-01", None),
    ("9999-12-31T23:59:59-05:00", None),  # past the end of time in UTC; used to raise
]


def test_lastmod_in_odd_formats_keeps_every_entry() -> None:
    body = fixture("lastmod_odd_formats.xml")
    for text, _ in LASTMODS:
        assert f"<lastmod>{text}".encode() in body or text == "2024-05-01T10:30Z"
    parsed = read("lastmod_odd_formats.xml")
    assert [(e.loc, e.lastmod) for e in parsed.entries] == [
        (f"https://dates.example/{i}", want) for i, (_, want) in enumerate(LASTMODS)
    ]
    assert parsed.problems == [] and parsed.complete


def test_an_index_names_gzipped_children_relative_to_itself() -> None:
    parsed = read("index_of_gzipped_children.xml")
    assert (parsed.format, parsed.entries) == ("sitemapindex", [])
    assert parsed.children == [
        "https://src.example/children/child-1.xml.gz",
        "https://src.example/dir/children/child-2.xml.gz",
    ]


def test_feeds_through_feedparser_keep_links_and_dates() -> None:
    assert breaks_a_strict_parser(fixture("rss_bare_ampersands.xml"))
    rss = read("rss_bare_ampersands.xml")
    assert [(e.loc, e.lastmod) for e in rss.entries] == [
        ("https://feed.example/a?id=1&src=rss", utc(2003, 6, 10, 4)),
        ("https://feed.example/b?id=2&src=rss", utc(2003, 6, 11, 7, 30)),
        ("https://feed.example/c?id=3&x", None),  # a permalink guid; the tag: one is no URL
    ]
    assert (rss.format, kinds(rss), rss.complete) == ("rss", ["malformed"], True)
    rdf = read("rdf_items.xml")
    assert [(e.loc, e.lastmod) for e in rdf.entries] == [
        ("https://rdf.example/1", utc(2020, 1, 2, 3, 4, 5)),
        ("https://rdf.example/2", utc(2020, 1, 3)),  # rdf:about is the item's URL
    ]
    assert (rdf.format, rdf.problems) == ("rdf", [])
    atom = read("atom_odd_dates.xml", "https://atom.example/feed.xml")
    assert [(e.loc, e.lastmod) for e in atom.entries] == [
        ("https://atom.example/posts/a?x=1&y=2", datetime(2003, 12, 13, 18, 30, 2, 250000, UTC)),
        ("https://atom.example/posts/b", utc(2003, 12, 13, 23, 30, 2)),
        ("https://atom.example/posts/c", utc(2003, 12, 13)),  # feedparser's reading
    ]


def test_a_feed_cut_short_drops_the_item_the_cut_went_through() -> None:
    body = fixture("rss_bare_ampersands.xml")
    cut = body[: body.index(b"Wed, 11 Jun") + 8]  # in the second item's date
    parsed = read_sitemap(cut, SRC)
    assert [e.loc for e in parsed.entries] == ["https://feed.example/a?id=1&src=rss"]
    assert not parsed.complete


def test_a_text_sitemap_keeps_its_url_lines() -> None:
    parsed = read("text_sitemap.txt")
    assert [e.loc for e in parsed.entries] == [
        "https://text.example/a",
        "https://text.example/b?x=1&y=2",
        "https://text.example/d",
    ]
    assert (parsed.format, parsed.complete) == ("text", True)
    # the lines that are no http(s) URL are said, not silently dropped
    assert [(p.kind, p.detail) for p in parsed.problems] == [
        (
            "malformed",
            "URLs kept: 3; 2 line(s) not a full http(s) URL, skipped (the first: 'not a url')",
        )
    ]


def test_a_feed_is_read_up_to_its_own_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    from freshness_pipeline.web.sitemaps import read as sitemaps

    monkeypatch.setattr(sitemaps, "MAX_FEED_BYTES", 400)
    body = fixture("rss_bare_ampersands.xml")
    assert len(body) > 400
    parsed = read_sitemap(body, SRC)
    assert [e.loc for e in parsed.entries] == ["https://feed.example/a?id=1&src=rss"]
    assert kinds(parsed)[0] == "size_cap" and not parsed.complete


# ------------------------------------------------------------------ over HTTP


@dataclass
class Site:
    """One loopback host: path -> (status, body, headers); every request's path is logged."""

    routes: dict[str, tuple[int, bytes, dict[str, str]]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    base: str = ""
    #: (path, monotonic time) of every request
    arrivals: list[tuple[str, float]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append(request.path)
        self.arrivals.append((request.path, time.monotonic()))
        status, body, headers = self.routes.get(request.path, (404, b"", {}))
        return web.Response(status=status, body=body, headers=headers)

    def serve(self, path: str, body: bytes, status: int = 200, **headers: str) -> None:
        self.routes[path] = (status, body, headers)

    def take(self) -> list[str]:
        taken, self.requests[:] = list(self.requests), []
        return taken

    @property
    def host(self) -> str:
        return self.base.removeprefix("http://")


@pytest.fixture
def sites() -> Iterator[list[Site]]:
    """Three loopback hosts on one background loop."""
    loop = LoopThread()
    runners: list[web.AppRunner] = []
    made: list[Site] = []

    async def start(site: Site) -> None:
        app = web.Application()
        app.router.add_get("/{tail:.*}", site.handle)
        runner = web.AppRunner(app, shutdown_timeout=0.5)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        runners.append(runner)
        site.base = f"http://127.0.0.1:{runner.addresses[0][1]}"

    for _ in range(3):
        site = Site()
        loop.run(start(site))
        made.append(site)
    yield made
    for runner in runners:
        loop.run(runner.cleanup())
    loop.close()


def discover(site: Site, now: datetime, cached: dict | None = None) -> HostDiscovery:
    (found,) = discover_hosts(
        [DiscoveryTarget(site.host, site.base, cached)],
        now=now,
        settings=FetchSettings(),
        allow=LOOPBACK,
    )
    return found


def broken_host(site: Site) -> dict[str, int]:
    """Serve the corpus from ``site``; returns the entries each sitemap should give."""
    leak = site.base.encode()
    cut_source = fixture("lastmod_odd_formats.xml")
    packed = gzip.compress(cut_source)
    cut_gzip = packed[: len(packed) * 3 // 4]
    named = {
        "/index.xml": fixture("index_of_gzipped_children.xml"),
        "/bare.xml": fixture("bare_ampersands.xml"),
        "/soft404.xml": fixture("html_soft_404.html"),
        "/cut.xml.gz": cut_gzip,
        "/laughs.xml": fixture("billion_laughs.xml"),
        "/xxe.xml": fixture("external_entities.xml").replace(b"LEAK_ORIGIN", leak),
        "/dtd.xml": fixture("external_dtd.xml").replace(b"LEAK_ORIGIN", leak),
    }
    for path, body in named.items():
        site.serve(path, body, **{"Content-Type": "application/xml"})
    site.serve(
        "/children/child-1.xml.gz",
        gzip.compress(fixture("children/child-1.xml")),
        **{"Content-Type": "application/gzip"},
    )
    site.serve(
        "/children/child-2.xml.gz",
        gzip.compress(fixture("children/child-2.xml")),
        **{"Content-Type": "application/xml", "Content-Encoding": "gzip"},
    )
    lines = [f"Sitemap: {site.base}{path}" for path in [*named, "/gone.xml"]]
    site.serve("/robots.txt", ("User-agent: *\nAllow: /\n" + "\n".join(lines) + "\n").encode())
    return {"index": 12 + 30, "bare": 8, "dtd": 1}


def test_discovery_over_http_keeps_what_a_broken_host_lists_and_counts_the_rest(
    sites: list[Site],
) -> None:
    site = sites[0]
    expected = broken_host(site)
    found = discover(site, T0)
    served = site.take()
    assert {"/leak.txt", "/evil.dtd", "/sitemap.dtd"}.isdisjoint(served)  # nothing fetched
    assert "/sitemap.xml" not in served  # robots.txt names its sitemaps
    locs = [e.loc for e in found.entries]
    assert "https://shop.example/list?page=2&sort=price" in locs
    assert "https://index.example/two/29?a=29&b=2" in locs  # a gzipped child, bare & intact
    cut = [u for u in locs if u.startswith("https://dates.example/")]
    assert 0 < len(cut) < 15
    assert len(locs) == sum(expected.values()) + len(cut)
    problems = Counter(p.kind for p in found.problems)
    assert problems == {"malformed": 2, "not_sitemap": 1, "gzip": 1, "entities": 2, "http": 1}
    (gone,) = [p for p in found.problems if p.kind == "http"]
    assert (gone.sitemap_url, gone.http_status) == (f"{site.base}/gone.xml", 404)
    counts = found.counts
    assert set(counts) == set(COUNT_KEYS)
    assert counts["sitemap_files"] == 10  # 8 named, 2 children
    assert counts["sitemap_files_read"] == 6  # index, children, bare, cut, dtd
    assert counts["sitemap_files_recovered"] == 2  # bare and child-2 (bare & in both)
    assert counts["sitemap_entries_recovered"] == 30 + 8
    assert counts["sitemap_entries"] == len(locs)
    assert counts["sitemap_hosts_read_completely"] == 0 and counts["sitemap_probes"] == 0
    row = found.robots_row
    assert row["sitemaps_read_at"] is None and row["sitemap_probed_at"] is None


def test_a_complete_walk_is_remembered_and_a_broken_one_keeps_the_last(
    sites: list[Site],
) -> None:
    site = sites[0]
    site.serve("/robots.txt", f"Sitemap: {site.base}/index.xml\n".encode())
    site.serve("/index.xml", fixture("index_of_gzipped_children.xml"))
    for n in (1, 2):
        site.serve(f"/children/child-{n}.xml.gz", gzip.compress(fixture(f"children/child-{n}.xml")))
    first = discover(site, T0)
    assert first.walk is not None and first.walk.complete
    assert first.problems and {p.kind for p in first.problems} == {"malformed"}
    assert (first.robots_row["sitemaps_read_at"], first.robots_row["sitemaps_read_entries"]) == (
        T0,
        42,
    )
    site.serve("/children/child-2.xml.gz", b"", status=503)
    later = T0 + timedelta(hours=6)
    second = discover(site, later, cached=first.robots_row)
    assert second.walk is not None and not second.walk.complete
    assert len(second.entries) == 12
    # The last complete reading stands: a URL child-2 no longer gave is not news.
    assert (second.robots_row["sitemaps_read_at"], second.robots_row["sitemaps_read_entries"]) == (
        T0,
        42,
    )


def test_an_emptied_sitemap_is_no_complete_read_until_it_stays_empty(sites: list[Site]) -> None:
    """A valid but empty urlset (a generator that failed, a CDN stub) was taken as a complete
    read: every page it stopped listing became an early check, with no warning (found by an
    exploratory run). It is a warning, the last complete read stands, and a listing that stays
    small is taken on its third read."""
    site = sites[0]
    site.serve("/robots.txt", f"Sitemap: {site.base}/sitemap.xml\n".encode())
    urls = "".join(f"<url><loc>{site.base}/p/{n}</loc></url>" for n in range(40))
    site.serve(
        "/sitemap.xml",
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'.encode(),
    )
    row = discover(site, T0).robots_row
    assert (row["sitemaps_read_at"], row["sitemaps_read_entries"]) == (T0, 40)
    site.serve(
        "/sitemap.xml",
        b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"></urlset>',
    )
    for k in (1, 2, 3):
        found = discover(site, T0 + timedelta(hours=6 * k), cached=row)
        row = found.robots_row
        assert found.walk is not None and found.walk.complete == (k == 3)
        if k < 3:
            assert [p.kind for p in found.problems] == ["shrunk"]
            assert "lists 0 URLs, 40 at its last complete read" in str(found.problems[0])
            assert found.counts["sitemap_hosts_read_completely"] == 0
            assert (row["sitemaps_read_at"], row["sitemaps_read_entries"]) == (T0, 40)
        else:  # three reads in a row: the site's own listing
            assert found.problems == []
            assert (row["sitemaps_read_at"], row["sitemaps_read_entries"]) == (
                T0 + timedelta(hours=18),
                0,
            )
    # a host that drops a few of many, or half, is read as it says
    site.serve(
        "/sitemap.xml",
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'.encode(),
    )
    row = discover(site, T0 + timedelta(days=2), cached=row).robots_row
    half = "".join(f"<url><loc>{site.base}/p/{n}</loc></url>" for n in range(20))
    site.serve(
        "/sitemap.xml",
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{half}</urlset>'.encode(),
    )
    found = discover(site, T0 + timedelta(days=3), cached=row)
    assert found.problems == [] and found.robots_row["sitemaps_read_entries"] == 20


def test_sitemap_xml_is_guessed_once_per_robots_ttl_and_a_404_is_no_warning(
    sites: list[Site],
) -> None:
    absent, present, failing = sites
    present.serve("/robots.txt", b"User-agent: *\nDisallow: /private\n")  # names no sitemap
    present.serve("/sitemap.xml", fixture("bare_ampersands.xml"))
    failing.serve("/sitemap.xml", b"", status=503)

    rows: dict[str, dict] = {}
    first: dict[str, HostDiscovery] = {}
    for site in sites:
        first[site.host] = discover(site, T0)
        rows[site.host] = first[site.host].robots_row
        assert site.take() == ["/robots.txt", "/sitemap.xml"]
        assert first[site.host].counts["sitemap_probes"] == 1
    found_absent = first[absent.host]
    assert found_absent.problems == [] and len(found_absent.notes) == 1  # info, not warning
    assert "404" in found_absent.notes[0]
    assert sum(v for k, v in found_absent.counts.items() if k.startswith("sitemap_problems")) == 0
    assert (
        rows[absent.host]["sitemap_probe_status"],
        rows[absent.host]["sitemap_probe_found"],
    ) == (
        404,
        False,
    )
    assert rows[present.host]["sitemap_probe_found"] is True
    assert rows[present.host]["sitemaps_read_at"] == T0
    assert rows[failing.host]["sitemap_probe_status"] == 503

    # Half an hour on: the 404 is remembered for a day, the 503 for an hour, and a guessed
    # sitemap that was one is read every cycle, like a named one.
    soon = T0 + timedelta(minutes=30)
    for site in sites:
        found = discover(site, soon, cached=rows[site.host])
        asked = site.take()
        if site is present:
            assert asked == ["/sitemap.xml"] and len(found.entries) == 8
            assert found.robots_row["sitemaps_read_at"] == soon
            rows[site.host] = found.robots_row
        else:
            assert asked == [], site.host
            assert found.counts["sitemap_probes"] == 0 and found.walk is None
            assert found.robots_row["sitemap_probed_at"] == T0

    failing_row = rows[failing.host]
    found = discover(failing, T0 + timedelta(minutes=61), cached=failing_row)
    assert failing.take() == ["/sitemap.xml"]  # robots.txt's 404 is an answer, good for a day
    assert [(p.kind, p.http_status) for p in found.problems] == [("http", 503)]  # a warning

    found = discover(absent, T0 + timedelta(hours=23), cached=rows[absent.host])
    assert absent.take() == []
    found = discover(absent, T0 + timedelta(hours=24), cached=rows[absent.host])
    assert absent.take() == ["/robots.txt", "/sitemap.xml"]
    assert found.robots_row["sitemap_probed_at"] == T0 + timedelta(hours=24)


# ------------------------------------------------------------------ the asset


def test_url_inventory_sums_problems_in_metadata_and_warns_once_per_host_and_kind(
    sites: list[Site], tmp_path: Path
) -> None:
    broken, absent, _ = sites
    body = fixture("bare_ampersands.xml").replace(b"https://shop.example", broken.base.encode())
    broken.serve("/bare.xml", body)
    broken.serve("/bare2.xml", body.replace(broken.base.encode(), f"{broken.base}/two".encode()))
    broken.serve("/soft404.xml", fixture("html_soft_404.html"))
    broken.serve("/laughs.xml", fixture("billion_laughs.xml"))
    named = ["/bare.xml", "/bare2.xml", "/soft404.xml", "/laughs.xml", "/gone.xml", "/gone2.xml"]
    broken.serve("/robots.txt", "".join(f"Sitemap: {broken.base}{p}\n" for p in named).encode())

    hosts = sorted([broken.host, absent.host])
    wh = Warehouse(tmp_path)
    for site in (broken, absent):
        seeds = pl.DataFrame({"url": [f"{site.base}/"], "host": [site.host], "added_at": [T0]})
        wh.write_partition("seeds", site.host, seeds)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(hosts_partitions.name, hosts)
    result = dg.materialize(
        [url_inventory],
        instance=instance,
        resources={
            "io_manager": WarehouseIOManager(home=str(tmp_path)),
            "warehouse": WarehouseResource(home=str(tmp_path)),
            "cycle": CycleResource(now=T0.isoformat()),
            "http": HttpClientResource(allow_networks="127.0.0.0/8"),
        },
        tags=range_tags(hosts[0], hosts[-1], bucket="test"),
    )
    events = [
        e
        for e in result.get_asset_materialization_events()
        if e.asset_key == dg.AssetKey("url_inventory")
    ]
    assert len(events) == len(hosts)  # one per host partition, each with its own figures
    own = {e.partition: {k: v.value for k, v in e.materialization.metadata.items()} for e in events}
    assert {h: (m["hosts"], m["rows"] > 0) for h, m in own.items()} == {h: (1, True) for h in hosts}
    # the run's totals: once, in one observation of the asset
    observations = [
        e.asset_observation_data.asset_observation
        for e in result.all_events
        if e.event_type_value == "ASSET_OBSERVATION"
    ]
    assert len(observations) == 1
    meta = {k: v.value for k, v in observations[0].metadata.items()}
    assert {k: meta[k] for k in COUNT_KEYS if meta[k]} == {
        "sitemap_files": 6 + 1,  # the named six, and the guess at the other host
        "sitemap_files_read": 2,
        "sitemap_files_recovered": 2,
        "sitemap_entries": 16,
        "sitemap_entries_recovered": 16,
        "sitemap_probes": 1,
        "sitemap_problems_malformed": 2,
        "sitemap_problems_not_sitemap": 1,
        "sitemap_problems_entities": 1,
        "sitemap_problems_http": 2,
    }
    inventory = wh.read("url_inventory", [broken.host])
    assert f"{broken.base}/list?page=2&sort=price" in inventory["url"].to_list()

    logs = instance.all_logs(result.run_id)
    warnings = [e.user_message for e in logs if e.level == logging.WARNING]
    mine = [w for w in warnings if broken.host in w or absent.host in w]
    assert sorted(w.split(": ", 2)[1] for w in mine if broken.host in w) == sorted(
        PROBLEM_LABELS[k] for k in ("malformed", "not_sitemap", "entities", "http")
    )  # one per kind, though two files were malformed and two missing
    assert any("(and 1 more)" in w for w in mine)
    assert not [w for w in mine if absent.host in w]
    infos = [e.user_message for e in logs if e.level == logging.INFO]
    assert any(absent.host in m and "sitemap.xml" in m and "404" in m for m in infos)

    robots = wh.read("robots", hosts).sort("host")
    by_host = {r["host"]: r for r in robots.iter_rows(named=True)}
    assert by_host[absent.host]["sitemap_probed_at"] == T0
    assert by_host[absent.host]["sitemap_probe_status"] == 404
    assert by_host[broken.host]["sitemaps_read_at"] is None


def test_a_sitemap_speaks_only_for_its_own_host(sites: list[Site], tmp_path: Path) -> None:
    """A host's sitemap listing another crawled host's URL: dropped and counted (it was taken
    into the other host's inventory and fetched every cycle: any site could plant URLs in a
    host it does not own). A sitemap stored elsewhere but named by the host's own robots.txt
    still speaks for that host."""
    owner, other, store = sites
    listed = [f"{owner.base}/mine", f"{other.base}/planted"]
    urlset = "".join(f"<url><loc>{u}</loc></url>" for u in listed)
    body = f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urlset}</urlset>'
    store.serve("/owner-sitemap.xml", body.encode(), **{"Content-Type": "application/xml"})
    owner.serve("/robots.txt", f"Sitemap: {store.base}/owner-sitemap.xml\n".encode())
    other.serve("/robots.txt", b"User-agent: *\nAllow: /\n")
    hosts = sorted([owner.host, other.host])
    wh = Warehouse(tmp_path)
    for site in (owner, other):
        seeds = pl.DataFrame({"url": [f"{site.base}/"], "host": [site.host], "added_at": [T0]})
        wh.write_partition("seeds", site.host, seeds)
    made = cycle_inventory(wh, hosts, T0, http=HttpClientResource(allow_networks="127.0.0.0/8"))
    urls = set(made.frame["url"].to_list())
    assert f"{owner.base}/mine" in urls and f"{other.base}/planted" not in urls
    assert made.discovery["sitemap_entries_of_other_hosts"] == 1


def test_a_session_id_minted_into_every_sitemap_url_adds_no_row(
    sites: list[Site], tmp_path: Path
) -> None:
    """A servlet sitemap writes a new ``;jsessionid=`` into every URL at every read: each read
    added a row per URL to url_inventory, 150 a cycle for 150 pages, each counted as a new URL
    (found by an exploratory run). The inventory keeps the URL as written less the session;
    the spelling it keeps is still the site's (its query order)."""
    site = sites[0]
    hosts = [site.host]
    wh = Warehouse(tmp_path)
    seeds = pl.DataFrame({"url": [f"{site.base}/"], "host": [site.host], "added_at": [T0]})
    wh.write_partition("seeds", site.host, seeds)
    site.serve("/robots.txt", f"Sitemap: {site.base}/sitemap.xml\n".encode())
    http = HttpClientResource(allow_networks="127.0.0.0/8")
    rows = []
    for cycle, session in enumerate(("0BD0727DCB25", "130D396220BB")):
        urlset = "".join(
            f"<url><loc>{site.base}/item/{i};jsessionid={session}?b=2&amp;a=1</loc></url>"
            for i in range(3)
        )
        body = f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urlset}</urlset>'
        site.serve("/sitemap.xml", body.encode(), **{"Content-Type": "application/xml"})
        made = cycle_inventory(wh, hosts, T0 + timedelta(hours=6 * cycle), http=http)
        wh.write_partition("url_inventory", site.host, made.frame)
        rows.append(sorted(made.frame.filter(pl.col("source") == "sitemap")["url"].to_list()))
    assert rows[0] == rows[1] == [f"{site.base}/item/{i}?b=2&a=1" for i in range(3)]


def test_a_retry_after_given_to_a_sitemap_request_holds_the_pages_of_the_run(
    sites: list[Site], tmp_path: Path
) -> None:
    """A 503 with Retry-After: 2 answered the sitemap request of discovery, and the first page
    request of the same run left 1.79 s later (found by an exploratory web): the pause is the
    host's, not the stage's."""
    site = sites[0]
    site.serve("/robots.txt", f"Sitemap: {site.base}/sitemap.xml\n".encode())
    site.serve("/sitemap.xml", b"busy", status=503, **{"Retry-After": "2"})
    site.serve("/page", b"<html><body><article>a page</article></body></html>")
    wh = Warehouse(tmp_path)
    seeds = pl.DataFrame({"url": [f"{site.base}/page"], "host": [site.host], "added_at": [T0]})
    wh.write_partition("seeds", site.host, seeds)
    cycle_inventory(wh, [site.host], T0, http=HttpClientResource(allow_networks="127.0.0.0/8"))
    results = fetch_all_sync(
        [FetchRequest(url=f"{site.base}/page")],
        FetchSettings(),
        allow=allowed_networks({"FRESHNESS_ALLOW_NETWORKS": "127.0.0.0/8"}),
    )
    assert results[0].outcome == "new"
    times = dict(site.arrivals)
    assert times["/page"] - times["/sitemap.xml"] >= 2.0
    # a robots.txt answered so is held the same way (its host is disallowed for the cycle)
    busy = sites[1]
    busy.serve("/robots.txt", b"", status=429, **{"Retry-After": "3"})
    busy_seeds = seeds.with_columns(url=pl.lit(f"{busy.base}/page"), host=pl.lit(busy.host))
    wh.write_partition("seeds", busy.host, busy_seeds)
    cycle_inventory(wh, [busy.host], T0, http=HttpClientResource(allow_networks="127.0.0.0/8"))
    held = LEDGER.held_until(busy.host)
    assert held is not None and held - time.monotonic() > 1.5


def test_discovery_lines_are_capped_per_cycle_and_the_rest_counted():
    """Ten thousand hosts without a sitemap must not write ten thousand log events (each is a
    Dagster event): MAX_HOST_LINES per severity, then one line that counts the rest by kind."""
    from freshness_pipeline.stages.inventory import MAX_HOST_LINES, log_discovery
    from freshness_pipeline.web.discovery import HostDiscovery
    from freshness_pipeline.web.sitemaps.entries import SitemapProblem

    class Lines:
        def __init__(self) -> None:
            self.info: list[str] = []
            self.warning: list[str] = []

    sink = Lines()

    class Log:
        def info(self, line: str) -> None:
            sink.info.append(line)

        def warning(self, line: str) -> None:
            sink.warning.append(line)

    found = [
        HostDiscovery(f"h{i}.example", {}, notes=["robots.txt names no sitemap and it 404s"])
        for i in range(MAX_HOST_LINES + 30)
    ] + [
        HostDiscovery(f"m{i}.example", {}, problems=[SitemapProblem("malformed", "bad &")])
        for i in range(MAX_HOST_LINES + 5)
    ]
    log_discovery(Log(), found)  # type: ignore[arg-type]
    assert len(sink.info) == MAX_HOST_LINES + 1
    assert sink.info[-1] == (
        "... and 30 more host lines like these (robots.txt names no sitemap: 30)"
    )
    assert len(sink.warning) == MAX_HOST_LINES + 1 and "5 more host lines" in sink.warning[-1]
    few = Lines()
    sink = few
    log_discovery(Log(), found[:3])  # type: ignore[arg-type]
    assert len(few.info) == 3 and not few.warning


def test_the_robots_row_remembers_which_index_children_were_read(sites: list[Site]) -> None:
    """A walk capped at 50 files reads an index's next children the next cycle, through the
    robots row as the warehouse stores it (a Parquet row of the robots schema)."""
    site = sites[0]
    children = "".join(f"<sitemap><loc>{site.base}/c{i}.xml</loc></sitemap>" for i in range(70))
    site.serve("/robots.txt", f"Sitemap: {site.base}/index.xml\n".encode())
    site.serve(
        "/index.xml",
        f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{children}'
        "</sitemapindex>".encode(),
    )
    for i in range(70):
        site.serve(f"/c{i}.xml", f"{site.base}/p{i}\n".encode())

    def stored(row: dict) -> dict:
        return pl.DataFrame([row], schema=tables.empty("robots").schema).row(0, named=True)

    first = discover(site, T0)
    read_first = {p for p in site.take() if p.startswith("/c")}
    assert len(read_first) == 49 and len(first.entries) == 49
    row = stored(first.robots_row)
    # the files asked for: the index and 49 children
    assert {r["url"] for r in row["sitemap_reads"] if r["read_at"] == T0} == {
        f"{site.base}/index.xml",
        *(f"{site.base}{p}" for p in read_first),
    }
    assert len(row["sitemap_reads"]) == 50
    second = discover(site, T0 + timedelta(hours=6), cached=row)
    read_second = {p for p in site.take() if p.startswith("/c")}
    # the 21 never read first, then 28 of the first cycle's
    assert read_second >= {f"/c{i}.xml" for i in range(70)} - read_first
    assert len(read_second) == 49 and len(second.entries) == 49
