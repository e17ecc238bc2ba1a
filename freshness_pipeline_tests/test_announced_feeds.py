"""Feeds found where sites put them: announced by their pages (``<link rel=alternate
type=application/rss+xml>``) or given as seeds, not only named in robots.txt. Found by an
exploratory run: a feed its pages linked to was never asked for, a seeded feed was crawled as a
page and none of its items entered the crawl, and JSON Feed was not read at all."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from aiohttp import web

from freshness_pipeline.app.runner import load_seeds
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.support import run_cycles, serve_on_loopback

T0 = datetime(2026, 5, 4, tzinfo=UTC)
HOME = (
    '<html><head><title>Home</title><link rel="alternate" type="application/rss+xml" '
    'title="Posts" href="/feed.xml"><link rel="alternate" hreflang="de" href="/de/"></head>'
    "<body><main><p>The front page of a small site, with words of its own.</p></main></body></html>"
)


# the same page once its feed is gone: no feed announced
NO_FEED_HOME = HOME.replace('type="application/rss+xml"', 'type="text/html"')


pytestmark = pytest.mark.usefixtures("loopback_crawl")


def _page(path: str, words: str) -> web.Response:
    body = f"<html><title>{path}</title><body><main><p>{path} {words}.</p></main></body></html>"
    return web.Response(text=body, content_type="text/html")


def _rss(base: str, posts: list[int], following: str = "") -> str:
    items = "".join(f"<item><title>{n}</title><link>{base}/post/{n}</link></item>" for n in posts)
    link = f'<atom:link rel="next" href="{following}"/>' if following else ""
    return (
        '<?xml version="1.0"?><rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom">'
        f"<channel><title>t</title>{link}{items}</channel></rss>"
    )


def _json_feed(posts: list[int]) -> str:
    items = [
        {"id": str(n), "url": f"/note/{n}", "date_published": "2026-05-03T10:00:00Z"} for n in posts
    ]
    return json.dumps({"version": "https://jsonfeed.org/version/1.1", "title": "n", "items": items})


def test_feeds_a_page_announces_and_a_seeded_feed_bring_their_items(tmp_path: Path) -> None:
    posts = [1, 2]
    asked: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        asked.append(request.path)
        base = f"http://{request.host}"
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")  # names no sitemap nor feed
        if request.path == "/sitemap.xml":
            return web.Response(status=404)
        if request.path == "/":
            return web.Response(text=HOME, content_type="text/html")
        if request.path == "/feed.xml" and request.query.get("page") == "2":
            return web.Response(text=_rss(base, [10, 11]), content_type="text/xml")
        if request.path == "/feed.xml":  # paged: its older items on page 2
            return web.Response(text=_rss(base, posts, "/feed.xml?page=2"), content_type="text/xml")
        if request.path == "/notes.json":
            return web.Response(
                text=_json_feed(posts), headers={"Content-Type": "application/feed+json"}
            )
        return _page(request.path, "says something")

    home = tmp_path / "home"
    with serve_on_loopback(handle) as base:
        load_seeds(home, f"url\n{base}/\n{base}/notes.json\n".encode(), added_at=T0)
        run_cycles(home, T0, 1)  # the pages are fetched: one announces a feed, one is a feed
        posts.append(3)
        run_cycles(home, T0, 1, first=1)  # both feeds read, their items fetched
    wh = Warehouse(home)
    inventory = wh.read("url_inventory")
    found = set(inventory.filter(pl.col("source") == "feed")["url"].to_list())
    assert {f"{base}/post/{n}" for n in (1, 2, 3)} <= found
    # the older items of the paged feed, read page by page the first time (an exploratory
    # web's 74 older items were never found: the announced feeds' walk took one request a feed)
    assert {f"{base}/post/10", f"{base}/post/11"} <= found
    assert {f"{base}/note/{n}" for n in (1, 2, 3)} <= found
    fetched = set(wh.read("fetch_log")["url"].to_list())
    assert {
        f"{base}/post/3",
        f"{base}/note/3",
    } <= fetched  # new items fetched the cycle they appeared
    robots = wh.read("robots").row(0, named=True)
    assert sorted(robots["feeds"]) == [f"{base}/feed.xml", f"{base}/notes.json"]
    assert "/de/" not in asked  # a language alternate is no feed


def test_a_feed_that_went_away_is_forgotten_without_a_warning_each_cycle(tmp_path: Path) -> None:
    gone = {"feed": False}

    async def handle(request: web.Request) -> web.Response:
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")
        if request.path == "/feed.xml":
            if gone["feed"]:
                return web.Response(status=404)
            return web.Response(text=_rss(f"http://{request.host}", [1]), content_type="text/xml")
        if request.path == "/":
            return web.Response(
                text=NO_FEED_HOME if gone["feed"] else HOME, content_type="text/html"
            )
        return web.Response(status=404)

    home = tmp_path / "home"
    with serve_on_loopback(handle) as base:
        load_seeds(home, f"url\n{base}/\n".encode(), added_at=T0)
        run_cycles(home, T0, 2)
        assert Warehouse(home).read("robots")["feeds"].to_list() == [[f"{base}/feed.xml"]]
        gone["feed"] = True
        run_cycles(home, T0, 1, first=2)
    assert Warehouse(home).read("robots")["feeds"].to_list() == [None]


def test_a_page_is_a_feed_by_its_media_type_or_its_root() -> None:
    from freshness_pipeline.web.sitemaps.read import is_feed, read_sitemap

    rss = b'<?xml version="1.0"?>\n<rss version="2.0"><channel></channel></rss>'
    assert is_feed("application/rss+xml; charset=utf-8", b"")
    assert is_feed("text/xml", rss) and is_feed("application/xml", b"<feed xmlns='x'/>")
    assert not is_feed("application/xml", b"<urlset/>") and not is_feed("text/html", rss)
    json_feed = _json_feed([1]).encode()
    assert is_feed("application/json", json_feed)
    assert not is_feed("application/json", b'{"version": 2, "items": []}')
    parsed = read_sitemap(json_feed, "https://a.example/notes.json")
    assert parsed.format == "jsonfeed" and parsed.complete
    assert [(e.loc, e.lastmod, e.from_feed) for e in parsed.entries] == [
        ("https://a.example/note/1", datetime(2026, 5, 3, 10, tzinfo=UTC), True)
    ]


def test_a_feed_robots_txt_disallows_is_not_read(tmp_path: Path) -> None:
    asked: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        asked.append(request.path)
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nDisallow: /feed.xml\n")
        if request.path == "/":
            return web.Response(text=HOME, content_type="text/html")
        return web.Response(status=404)

    home = tmp_path / "home"
    with serve_on_loopback(handle) as base:
        load_seeds(home, f"url\n{base}/\n".encode(), added_at=T0)
        run_cycles(home, T0, 2)
    assert "/feed.xml" not in asked


def test_a_page_is_a_sitemap_by_its_root_gzipped_or_not() -> None:
    import gzip

    from freshness_pipeline.web.sitemaps.read import is_listing

    sitemap = _urlset("https://a.example", [1]).encode()
    assert is_listing("application/xml", sitemap) and is_listing("text/xml", b"<sitemapindex/>")
    assert is_listing("text/xml; charset=utf-8", b"\xef\xbb\xbf\n" + sitemap)  # BOM, blank
    assert is_listing("application/x-gzip", gzip.compress(sitemap))
    assert is_listing("application/rss+xml", b"")  # a feed is a listing too
    assert not is_listing("text/html", sitemap)  # a page that quotes one is a page
    assert not is_listing("application/xml", b"<catalog><book/></catalog>")
    assert not is_listing("application/gzip", b"\x1f\x8b not a gzip stream")
    assert not is_listing("application/gzip", gzip.compress(b"<html></html>"))


def test_urls_that_read_as_sitemaps_or_feeds() -> None:
    from freshness_pipeline.science.normalize import looks_like_listing

    listing = [
        "https://a.example/feed/",
        "https://a.example/blog/feed/atom/",
        "https://a.example/news-sitemap.xml.gz",
        "https://a.example/sitemap_index.xml?page=2",
        "https://a.example/feeds/latest.rss",
        "https://a.example/all.atom",
        "https://a.example/index.xml",
        "https://a.example/feed.json",
        "https://a.example/?p=1&feed=rss2",
    ]
    pages = [
        "https://a.example/",
        "https://a.example/feed-the-birds",
        "https://a.example/feedback/",
        "https://a.example/sitemap.html",
        "https://a.example/rss-guide.html",
        "https://a.example/products/atomizer",
        "https://a.example/?feedback=1",
        "https://feed.example/",
    ]
    urls = pl.Series(listing + pages)
    assert pl.select(looks_like_listing(pl.lit(urls))).to_series().to_list() == [True] * len(
        listing
    ) + [False] * len(pages)


def _urlset(base: str, pages: list[int]) -> str:
    urls = "".join(f"<url><loc>{base}/item/{n}</loc></url>" for n in pages)
    return f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'


def test_a_seeded_sitemap_robots_txt_does_not_name_is_read_as_one(tmp_path: Path) -> None:
    """A user who seeds a sitemap means the pages it lists. Robots.txt naming no sitemap, a
    seeded gzipped sitemap index was fetched as a page every cycle and none of its pages
    entered the crawl (found by an exploratory run)."""
    import gzip

    from freshness_pipeline.app.runner import run_cycle

    listed = [1, 2, 3]
    asked: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        asked.append(request.path)
        base = f"http://{request.host}"
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")
        if request.path == "/sitemap.xml":
            return web.Response(status=404)
        if request.path == "/exports/pages.gz":  # a sitemap index, by its body alone
            index = (
                '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                f"<sitemap><loc>{base}/exports/part-1.xml</loc></sitemap></sitemapindex>"
            )
            return web.Response(
                body=gzip.compress(index.encode()), content_type="application/x-gzip"
            )
        if request.path == "/exports/part-1.xml":
            return web.Response(text=_urlset(base, listed), content_type="application/xml")
        return _page(request.path, "is on sale")

    home = tmp_path / "home"
    with serve_on_loopback(handle) as base:
        load_seeds(home, f"url\n{base}/\n{base}/exports/pages.gz\n".encode(), added_at=T0)
        run_cycles(home, T0, 2)  # the seed is fetched and found a sitemap; then read as one
        wh = Warehouse(home)
        inventory = wh.read("url_inventory")
        found = inventory.filter(pl.col("source") == "sitemap")
        assert set(found["url"].to_list()) == {f"{base}/item/{n}" for n in listed}
        assert set(found["listed_in"].to_list()) == {f"{base}/exports/part-1.xml"}
        listed.remove(2)  # the page leaves it: news, as when robots.txt names the sitemap
        run_cycle(home, T0 + timedelta(hours=12), budget=0)
        run_cycle(home, T0 + timedelta(hours=18), dry_run=True)
    plan = wh.read("revisit_plan")
    row = plan.filter(pl.col("url") == f"{base}/item/2").row(0, named=True)
    assert row["reason"] == "delisted" and row["selected"]


def test_a_seed_that_reads_as_a_feed_is_fetched_before_other_new_pages(tmp_path: Path) -> None:
    """A seeded feed waited behind thousands of never-fetched seeds of a small budget, and
    what it listed with it, cycle after cycle (found by an exploratory run): it goes first."""
    from freshness_pipeline.app.runner import run_cycle

    async def handle(request: web.Request) -> web.Response:
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")
        if request.path == "/feed/":
            return web.Response(
                text=_rss(f"http://{request.host}", [7]), content_type="application/rss+xml"
            )
        if request.path == "/sitemap.xml":
            return web.Response(status=404)
        return _page(request.path, "reads")

    home = tmp_path / "home"
    with serve_on_loopback(handle) as base:
        pages = "".join(f"{base}/page/{n},2.0\n" for n in range(40))
        load_seeds(home, f"url,value\n{pages}{base}/feed/,1.0\n".encode(), added_at=T0)
        run_cycle(home, T0, budget=3)
        run_cycle(home, T0 + timedelta(hours=6), budget=3)
    wh = Warehouse(home)
    first = wh.read("fetch_log").filter(pl.col("fetched_at") == T0)["url"].to_list()
    assert f"{base}/feed/" in first
    # its item is known the next cycle (and waits its turn by value with the other seeds)
    assert f"{base}/post/7" in wh.read("url_inventory")["url"].to_list()
    # read by discovery every cycle, the feed is a second copy as a page: fetched now and
    # then, not kept fresh beside the reads
    costs = dict(wh.read("revisit_plan").select("url", "cost").iter_rows())
    assert costs[f"{base}/feed/"] == 8 * costs[f"{base}/page/39"]
