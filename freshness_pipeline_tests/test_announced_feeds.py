"""Feeds found where sites put them: announced by their pages (``<link rel=alternate
type=application/rss+xml>``) or given as seeds, not only named in robots.txt. Found by an
exploratory run: a feed its pages linked to was never asked for, a seeded feed was crawled as a
page and none of its items entered the crawl, and JSON Feed was not read at all."""

from __future__ import annotations

import json
from datetime import UTC, datetime
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
        page = f"<html><title>{request.path}</title><body><main><p>Post {request.path} says "
        return web.Response(
            text=page + "something.</p></main></body></html>", content_type="text/html"
        )

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
