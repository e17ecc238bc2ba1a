"""Each sitemap file on its own: asked for with the validators of its last complete read (a 304
stands for that read again, an index's children included), and judged complete on its own, so
that a URL leaving one file is checked early whatever the host's other files did. Found by an
exploratory run: every sitemap was downloaded whole every cycle though the server sent ETag and
Last-Modified (a 50,000-URL file, 10.9 MB a read), and one child file failing for good kept
every page leaving the host's other files from its early check."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from aiohttp import web

from freshness_pipeline.app.cycle_lines import discovery_line
from freshness_pipeline.app.runner import load_seeds, run_cycle
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline.web.client.settings import FetchSettings
from freshness_pipeline.web.discovery import DiscoveryTarget, HostDiscovery, discover_hosts
from freshness_pipeline_tests.support import run_cycles, serve_on_loopback

T0 = datetime(2026, 5, 4, tzinfo=UTC)
LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"),)
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


class SitemapSite:
    """Sitemap files with ETags that answer 304 to a matching If-None-Match; pages always 200.
    ``files``: path -> body (None: HTTP 500). Every request is logged with its If-None-Match."""

    def __init__(self) -> None:
        self.files: dict[str, str | None] = {}
        self.asked: list[tuple[str, str | None]] = []

    def urlset(self, base: str, paths: list[str]) -> str:
        urls = "".join(f"<url><loc>{base}{p}</loc></url>" for p in paths)
        return f"<urlset {NS}>{urls}</urlset>"

    def index(self, base: str, children: list[str]) -> str:
        kids = "".join(f"<sitemap><loc>{base}{c}</loc></sitemap>" for c in children)
        return f"<sitemapindex {NS}>{kids}</sitemapindex>"

    def taken(self) -> list[tuple[str, str | None]]:
        got, self.asked[:] = list(self.asked), []
        return got

    async def handle(self, request: web.Request) -> web.Response:
        sent = request.headers.get("If-None-Match")
        self.asked.append((request.path, sent))
        if request.path == "/robots.txt":
            base = f"http://{request.host}"
            return web.Response(text=f"User-agent: *\nAllow: /\nSitemap: {base}/index.xml\n")
        if request.path in self.files:
            body = self.files[request.path]
            if body is None:
                return web.Response(status=500)
            etag = f'"{abs(hash(body)):x}"'
            if sent == etag:
                return web.Response(status=304, headers={"ETag": etag})
            return web.Response(text=body, content_type="application/xml", headers={"ETag": etag})
        page = f"<html><title>{request.path}</title><body><main><p>Page {request.path} reads "
        return web.Response(text=page + "on.</p></main></body></html>", content_type="text/html")


def discover(
    base: str,
    now: datetime,
    cached: dict | None = None,
    holding: frozenset[str] | None = None,
    settings: FetchSettings | None = None,
) -> HostDiscovery:
    host = base.removeprefix("http://")
    (found,) = discover_hosts(
        [DiscoveryTarget(host, base, cached, listing_files=holding)],
        now=now,
        settings=settings or FetchSettings(),
        allow=LOOPBACK,
    )
    return found


def test_a_walk_asks_for_at_most_max_sitemap_files_and_reads_the_rest_next() -> None:
    site = SitemapSite()
    two = FetchSettings(max_sitemap_files=2)
    with serve_on_loopback(site.handle) as base:
        site.files = {
            "/index.xml": site.index(base, ["/a.xml", "/b.xml"]),
            "/a.xml": site.urlset(base, ["/a/1"]),
            "/b.xml": site.urlset(base, ["/b/1"]),
        }
        first = discover(base, T0, settings=two)
        assert [k for k, _ in site.taken()] == ["/robots.txt", "/index.xml", "/a.xml"]
        assert [p.kind for p in first.problems] == ["file_cap"]
        discover(base, T0 + timedelta(hours=6), cached=first.robots_row, settings=two)
        assert [k for k, _ in site.taken()] == ["/index.xml", "/b.xml"]  # the one not read
    with pytest.raises(ValueError, match="max_sitemap_files"):
        FetchSettings(max_sitemap_files=0)


def test_unchanged_files_answer_304_and_stand_for_their_last_complete_read() -> None:
    site = SitemapSite()
    with serve_on_loopback(site.handle) as base:
        site.files = {
            "/index.xml": site.index(base, ["/a.xml", "/b.xml"]),
            "/a.xml": site.urlset(base, ["/a/1", "/a/2", "/a/3"]),
            "/b.xml": site.urlset(base, ["/b/1", "/b/2"]),
        }
        first = discover(base, T0)
        assert first.walk is not None and first.walk.complete
        assert len(first.entries) == 5 and first.unchanged == []
        assert [s for _, s in site.taken()] == [None] * 4  # robots.txt and three files, whole

        second = discover(base, T0 + timedelta(hours=6), cached=first.robots_row)
        asked = dict(site.taken())
        assert "/robots.txt" not in asked  # still fresh
        assert all(asked[p] is not None for p in ("/index.xml", "/a.xml", "/b.xml")), asked
        assert second.walk is not None and second.walk.complete
        assert second.entries == []  # nothing read: the inventory has what they listed
        assert sorted(second.unchanged) == [f"{base}/a.xml", f"{base}/b.xml"]
        assert second.counts["sitemap_files_unchanged"] == 3
        row = second.robots_row
        assert (row["sitemaps_read_at"], row["sitemaps_read_entries"]) == (
            T0 + timedelta(hours=6),
            5,
        )

        # one child changes: it alone is read whole, the index and the other stand
        site.files["/b.xml"] = site.urlset(base, ["/b/1", "/b/2", "/b/3"])
        third = discover(base, T0 + timedelta(hours=12), cached=row)
        assert {e.loc for e in third.entries} == {f"{base}/b/{n}" for n in (1, 2, 3)}
        assert third.unchanged == [f"{base}/a.xml"]
        assert third.walk is not None and third.walk.complete
        reads = {r["url"]: r for r in third.robots_row["sitemap_reads"]}
        assert reads[f"{base}/b.xml"]["entries"] == 3
        assert reads[f"{base}/index.xml"]["children"] == [f"{base}/a.xml", f"{base}/b.xml"]
        assert all(r["complete_at"] == T0 + timedelta(hours=12) for r in reads.values())

        # a file whose URLs the inventory no longer holds (one restored from before its read)
        # is asked for whole: a 304 could not give them back
        site.taken()
        fourth = discover(
            base, T0 + timedelta(hours=18), cached=third.robots_row, holding=frozenset()
        )
        asked = dict(site.taken())
        assert asked["/a.xml"] is None and asked["/b.xml"] is None
        assert asked["/index.xml"] is not None  # an index holds its children itself
        assert len(fourth.entries) == 6 and fourth.unchanged == []


def plan_of(home: Path, at: datetime) -> pl.DataFrame:
    plan = Warehouse(home).read("revisit_plan")
    return plan.filter(pl.col("planned_at") == at)


def delisted(plan: pl.DataFrame, base: str) -> set[str]:
    return {u.removeprefix(base) for u in plan.filter("delisted")["url"]}


@pytest.mark.usefixtures("loopback_crawl")
def test_a_page_leaving_one_file_is_checked_early_while_another_file_fails(
    tmp_path: Path,
) -> None:
    site = SitemapSite()
    home = tmp_path / "home"
    at: Callable[[int], datetime] = lambda k: T0 + k * timedelta(hours=6)  # noqa: E731
    with serve_on_loopback(site.handle) as base:
        a_pages = [f"/a/{n}" for n in range(1, 6)]
        site.files = {
            "/index.xml": site.index(base, ["/a.xml", "/b.xml"]),
            "/a.xml": site.urlset(base, a_pages),
            "/b.xml": site.urlset(base, ["/b/1", "/b/2"]),
        }
        load_seeds(home, f"url\n{base}/\n".encode(), added_at=T0)
        first = run_cycle(home, T0)  # every file read whole, the pages fetched
        assert discovery_line(first.discovery) == (
            "discovery: 3 sitemap files read, 7 URLs listed, 7 new URLs"
        )
        # b.xml fails from now on, and /a/5 leaves a.xml
        site.files["/b.xml"] = None
        site.files["/a.xml"] = site.urlset(base, a_pages[:4])
        site.taken()
        run_cycles(home, T0, 1, first=1)
        assert delisted(plan_of(home, at(1)), base) == {"/a/5"}
        # nothing changes any more: a.xml and the index answer 304, which lists /a/1-4 still
        site.taken()
        third = run_cycle(home, at(2))
        assert discovery_line(third.discovery) == (
            "discovery: 2 sitemap files read (2 unchanged, 304: their URLs stay listed), "
            "0 new URLs, "
            "1 sitemap problems (warnings in the log)"
        )
        asked = [(p, s) for p, s in site.taken() if p.endswith(".xml")]
        assert ("/a.xml", None) not in asked and ("/index.xml", None) not in asked, asked
        assert delisted(plan_of(home, at(2)), base) <= {"/a/5"}
    robots = Warehouse(home).read("robots")
    assert robots["sitemaps_read_at"].to_list() == [T0]  # the host's walk: never complete since


def test_guessed_sitemaps_that_are_not_there_say_nothing() -> None:
    """Eighteen hosts with no sitemap read as '18 sitemap files, 0 URLs' on every cycle that
    asked for /sitemap.xml (found by an exploratory run): a guess that is not there is no read."""
    assert discovery_line({"sitemap_files": 18, "sitemap_probes": 18}) is None
    assert discovery_line({"sitemap_files": 1, "sitemap_problems_http": 1}) == (
        "discovery: 0 sitemap files read, 0 URLs listed, 0 new URLs, "
        "1 sitemap problems (warnings in the log)"
    )


def test_a_file_the_url_cap_cut_is_not_a_complete_read() -> None:
    """A child the walk's URL cap cut half way was remembered as read whole: its next answer,
    a 304, stood for URLs the inventory never took, and they were never taken (an index of
    three 30,000-URL children kept 20,000 of the second for good; found by an exploratory run)."""
    import asyncio

    from freshness_pipeline.web.client import open_session
    from freshness_pipeline.web.sitemaps.walk import SitemapWalk, fetch_sitemap_entries

    site = SitemapSite()

    async def walk(base: str, at: datetime, reads: dict) -> SitemapWalk:
        async with open_session(FetchSettings(), allow=LOOPBACK) as session:
            return await fetch_sitemap_entries(
                session,
                [f"{base}/index.xml"],
                user_agent=FetchSettings().user_agent,
                max_urls=3,
                fetched_at=at,
                reads=reads,
            )

    with serve_on_loopback(site.handle) as base:
        site.files = {
            "/index.xml": site.index(base, ["/a.xml", "/b.xml"]),
            "/a.xml": site.urlset(base, ["/a/1", "/a/2"]),
            "/b.xml": site.urlset(base, ["/b/1", "/b/2"]),
        }
        first = asyncio.run(walk(base, T0, {}))
        assert len(first.entries) == 3  # b.xml cut after its first URL
        assert first.reads[f"{base}/b.xml"].complete is None
        assert first.reads[f"{base}/a.xml"].complete is not None
        site.taken()
        second = asyncio.run(walk(base, T0 + timedelta(hours=6), first.reads))
        asked = dict(site.taken())
        assert asked["/a.xml"] is not None and asked["/b.xml"] is None  # b.xml whole again
        assert {e.loc for e in second.entries} == {f"{base}/b/1", f"{base}/b/2"}
        assert second.unchanged == [f"{base}/a.xml"]
        assert second.reads[f"{base}/b.xml"].complete is not None


NEWS = 'xmlns:news="http://www.google.com/schemas/sitemap-news/0.9"'


def news_sitemap(base: str, paths: list[str], published: datetime) -> str:
    """A Google News sitemap: the articles of the last two days, each with its date."""
    when = published.strftime("%Y-%m-%dT%H:%M:%SZ")
    urls = "".join(
        f"<url><loc>{base}{p}</loc><lastmod>{when}</lastmod><news:news><news:publication>"
        "<news:name>Daily</news:name><news:language>en</news:language></news:publication>"
        f"<news:publication_date>{when}</news:publication_date><news:title>{p}</news:title>"
        "</news:news></url>"
        for p in paths
    )
    return f"<urlset {NS} {NEWS}>{urls}</urlset>"


@pytest.mark.usefixtures("loopback_crawl")
def test_an_article_leaving_the_news_sitemap_is_not_checked_early(tmp_path: Path) -> None:
    """A news sitemap keeps two days of articles. Read before the file of the site's pages,
    it owned the articles both listed with one date, and two days on, when that file answered
    304, each article leaving the news sitemap was checked early as if gone: a third of a news
    site's early checks at a month's turn (found by an exploratory run). A page the site's own
    file drops is still checked early."""
    site = SitemapSite()
    home = tmp_path / "home"
    at: Callable[[int], datetime] = lambda k: T0 + k * timedelta(hours=6)  # noqa: E731
    day = T0 - timedelta(hours=3)
    stamped = "".join(
        f"<url><loc>{{base}}/n/{n}</loc><lastmod>{day:%Y-%m-%dT%H:%M:%SZ}</lastmod></url>"
        for n in (1, 2, 3)
    )
    with serve_on_loopback(site.handle) as base:
        posts = f"<urlset {NS}>{stamped.format(base=base)}</urlset>"
        site.files = {
            "/index.xml": site.index(base, ["/news.xml", "/posts.xml"]),
            "/news.xml": news_sitemap(base, ["/n/1", "/n/2", "/n/3", "/n/only"], day),
            "/posts.xml": posts,
        }
        load_seeds(home, f"url\n{base}/\n".encode(), added_at=T0)
        run_cycle(home, T0)
        inventory = Warehouse(home).read("url_inventory")
        owners = {
            u.removeprefix(base): (s, f.removeprefix(base))
            for u, s, f in inventory.select("url", "source", "listed_in").iter_rows()
            if f is not None
        }
        assert owners["/n/1"] == ("sitemap", "/posts.xml")  # not the news sitemap
        assert owners["/n/only"] == ("feed", "/news.xml")  # a list of recent items
        # two days on the articles leave the news sitemap; the site's file stands (304)
        site.files["/news.xml"] = news_sitemap(base, ["/n/9"], at(1))
        run_cycles(home, T0, 1, first=1)
        assert delisted(plan_of(home, at(1)), base) == set()
        # the site's own file drops /n/3: that is checked early
        site.files["/posts.xml"] = (
            f"<urlset {NS}>"
            + "".join(
                f"<url><loc>{base}/n/{n}</loc><lastmod>{day:%Y-%m-%dT%H:%M:%SZ}</lastmod></url>"
                for n in (1, 2)
            )
            + "</urlset>"
        )
        run_cycles(home, T0, 1, first=2)
        assert delisted(plan_of(home, at(2)), base) == {"/n/3"}
