"""A page's canonical link and meta refresh: read by the extraction (never hashed), turned by
the fetcher into a move or a named copy, found by the inventory, and preferred as the copy
kept of duplicates; over real cycles against a loopback site."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest
from aiohttp import web
from selectolax.lexbor import LexborHTMLParser

from freshness_pipeline.app.crawled_copy import CopyError, version_diff
from freshness_pipeline.app.runner import load_seeds, run_cycle
from freshness_pipeline.science.fingerprint import PageLinks, content_fingerprint, content_record
from freshness_pipeline.science.fingerprint.links import page_links, refresh_target
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.support import serve_on_loopback

T0 = datetime(2026, 4, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("0; url=/moved", "/moved"),
        ("0;URL='/quoted' trailing", "/quoted"),
        ('5, url="https://example.com/c"', "https://example.com/c"),
        ("0.5; url=/fraction", "/fraction"),
        (".5;url=/only-fraction", "/only-fraction"),
        ("0;/no-url-word", "/no-url-word"),
        ("  3 ; URL = /spaced ", "/spaced"),
        ("10; url=/at-the-limit", "/at-the-limit"),
        ("11; url=/slower", None),  # a page that rotates, not one that moved
        ("300", None),  # reloads itself
        ("0", None),
        ("", None),
        ("soon; url=/x", None),  # does not parse
    ],
)
def test_refresh_target(content: str, expected: str | None) -> None:
    assert refresh_target(content) == expected


def _links(html: str) -> PageLinks:
    return page_links(LexborHTMLParser(html), html.encode())


def test_page_links() -> None:
    assert _links('<link rel="alternate canonical" href=" /a ">') == PageLinks("/a")
    assert _links('<LINK REL=Canonical HREF="/a"><link rel=canonical href="/a">').canonical == "/a"
    # two canonicals that disagree name none, as search engines read them
    assert _links("<link rel=canonical href=/a><link rel=canonical href=/b>") == PageLinks()
    assert _links('<link rel=canonical href="">') == PageLinks()
    # the first <base href> is what both resolve against, read only when there is a link
    based = '<base href=" /root/ "><base href="/other/"><link rel=canonical href="a">'
    assert _links(based) == PageLinks("a", None, "/root/")
    assert _links('<base href="/root/"><title>t</title>') == PageLinks()
    assert _links('<meta http-equiv="Refresh" content="0; url=/m">') == PageLinks(None, "/m")
    # the first refresh counts, as in a browser; one for browsers without scripts does not
    assert (
        _links(
            '<noscript><meta http-equiv=refresh content="0;url=/nojs"></noscript>'
            '<meta http-equiv=refresh content="600;url=/late"><meta http-equiv=refresh content="0;url=/x">'
        )
        == PageLinks()
    )
    assert _links("<p>nothing canonical about a refresh here</p>") == PageLinks()


def test_links_are_not_content() -> None:
    """The fingerprint hashes content only: a page's canonical or refresh does not change it,
    so adding the reading of them changes no stored fingerprint."""
    body = b"<html><head><title>T</title></head><body><p>Same words.</p></body></html>"
    linked = body.replace(b"</head>", b'<link rel="canonical" href="https://e.test/t"></head>')
    assert content_fingerprint(body, content_type="text/html") == content_fingerprint(
        linked, content_type="text/html"
    )
    record = content_record(linked, content_type="text/html")
    unchanged = content_record(linked, content_type="text/html", previous=record.fingerprint)
    assert record.links == unchanged.links == PageLinks("https://e.test/t")


ARTICLE = "<p>{0} is a long article about rivers, gardens and the weather in spring.</p>"


class LinkingSite:
    """One loopback host: /old moves by meta refresh to /new; /print and /story carry the
    same article, /print naming /story as canonical; /story's twin /amp is found through
    /amp-list's canonical only. robots.txt and the sitemap are 404."""

    def __init__(self) -> None:
        self.requests: list[str] = []

    def requests_as_urls(self, base: str) -> list[str]:
        return [base + path for path in self.requests]

    def page(self, body: str, head: str = "") -> web.Response:
        return web.Response(
            text=f"<html><head><title>Site</title>{head}</head><body>{body}</body></html>",
            content_type="text/html",
        )

    async def handle(self, request: web.Request) -> web.Response:
        path = request.path
        self.requests.append(path)
        if path == "/old":
            return self.page("Moved.", '<meta http-equiv="refresh" content="0; url=/new">')
        if path == "/new":
            return self.page(ARTICLE.format("The new page"))
        # relative links under a root <base>, as CMSs write them
        if path == "/deep/dir/old":
            head = '<base href="/"><meta http-equiv="refresh" content="0; url=new">'
            return self.page("Moved.", head)
        if path == "/deep/dir/print":
            head = '<base href="/"><link rel="canonical" href="story">'
            return self.page(ARTICLE.format("The deep story"), head)
        if path in ("/print", "/story"):
            # absolute, with a tracking parameter: named as the inventory writes /story
            head = f'<link rel="canonical" href="http://{request.host}/story?utm_source=x">'
            return self.page(ARTICLE.format("The story"), head)
        return web.Response(status=404)


@pytest.fixture
def linking_site() -> Iterator[tuple[LinkingSite, str]]:
    site = LinkingSite()
    with serve_on_loopback(site.handle) as base:
        yield site, base


def test_a_meta_refresh_moves_a_page_and_a_canonical_names_the_copy_kept(
    linking_site, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    site, base = linking_site
    home = tmp_path / "home"
    seeds = "".join(f"{base}{p}\n" for p in ("/old", "/print", "/deep/dir/old", "/deep/dir/print"))
    load_seeds(home, f"url\n{seeds}".encode(), added_at=T0)
    wh = Warehouse(home)

    run_cycle(home, T0)
    first = wh.read("fetch_results").sort("url")
    rows = {r["url"].removeprefix(base): r for r in first.iter_rows(named=True)}
    assert rows["/old"]["outcome"] == "redirect" and rows["/old"]["http_status"] == 200
    assert rows["/old"]["location"] == f"{base}/new"
    assert rows["/print"]["outcome"] == "new"
    assert rows["/print"]["canonical"] == f"{base}/story"  # normalized: no utm_source
    versioned = wh.read("page_versions")["url"].to_list()
    assert sorted(versioned) == [f"{base}/deep/dir/print", f"{base}/print"]  # no empty version
    # a diff of the moved page says where it went, not only that it kept no version
    with pytest.raises(CopyError, match=rf"it redirects to {base}/new \(try that URL\)"):
        version_diff(wh, f"{base}/old")
    # relative to the page's <base href>, not to its own address
    assert rows["/deep/dir/old"]["location"] == f"{base}/new"
    assert rows["/deep/dir/print"]["canonical"] == f"{base}/story"

    run_cycle(home, T0 + timedelta(hours=6))
    inventory = wh.read("url_inventory")
    found = dict(zip(inventory["url"], inventory["source"], strict=True))
    assert found[f"{base}/new"] == "redirect"
    assert found[f"{base}/story"] == "canonical"
    assert {f"{base}/new", f"{base}/story"} <= set(site.requests_as_urls(base))
    state = wh.read("url_state").sort("url")
    by_url = {r["url"].removeprefix(base): r for r in state.iter_rows(named=True)}
    assert by_url["/old"]["redirect_to"] == f"{base}/new"
    assert by_url["/print"]["canonical"] == f"{base}/story"
    assert by_url["/story"]["canonical"] is None  # it names itself
    # the same content at two URLs: the one the site names is the copy kept, though
    # "/print" comes first in URL order
    assert by_url["/print"]["duplicate_of"] == f"{base}/story"
    assert by_url["/story"]["duplicate_of"] is None
    assert pl.Series(site.requests).is_in(["/robots.txt", "/sitemap.xml"]).sum() >= 2


def test_a_redirect_to_a_spelling_robots_txt_disallows_is_not_followed(
    tmp_path, monkeypatch
) -> None:
    """The fetcher follows a redirect to another spelling of the planned page; robots.txt was
    not asked, so a spelling it disallows was fetched, once per cycle (exploratory run)."""
    monkeypatch.setenv("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    seen: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.path_qs)
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nDisallow: /*utm_\n")
        if request.path_qs == "/spell":
            return web.Response(status=302, headers={"Location": "/spell?utm_source=x"})
        return web.Response(text=f"<html><title>t</title><p>{ARTICLE.format('A page')}</p>")

    home = tmp_path / "home"
    with serve_on_loopback(handle) as base:
        load_seeds(home, f"url\n{base}/spell\n".encode(), added_at=T0)
        for k in range(2):
            run_cycle(home, T0 + timedelta(hours=6 * k))
    assert not [p for p in seen if "utm_" in p]
    log = Warehouse(home).read("fetch_log").sort("fetched_at")
    spell = log.filter(pl.col("url") == f"{base}/spell")
    assert spell["outcome"].to_list() == ["error", "error"]
    assert spell["error"][0] == f"redirect to {base}/spell?utm_source=x, which robots.txt disallows"
