"""The URL policy on sites an exploratory run met, over real cycles against a loopback site: a
host's own session parameter in a redirect to the page itself, robots.txt rules written
against the site's own spelling of a query, and a user's seed row against a value inherited
through a redirect."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from aiohttp import web

from freshness_pipeline.app.runner import load_seeds
from freshness_pipeline.science.normalize import as_discovered, normalize_url, request_spelling
from freshness_pipeline.stages.candidates import TRAP_REASON
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.support import run_cycles, serve_on_loopback

T0 = datetime(2026, 5, 4, tzinfo=UTC)
PAGE = (
    "<html><title>{0}</title><body><main><p>{0}: a page of its own words.</p></main></body></html>"
)


pytestmark = pytest.mark.usefixtures("loopback_crawl")


def _site(
    route: Callable[[web.Request], web.Response | None], seen: list[str] | None = None
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """A loopback site whose robots.txt allows everything, answering what ``route`` says, and
    elsewhere (``route`` says None) a page of its own words; ``seen`` gets every request's path
    and query as sent."""

    async def handle(request: web.Request) -> web.Response:
        if seen is not None:
            seen.append(request.raw_path)
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")
        answer = route(request)
        if answer is not None:
            return answer
        return web.Response(text=PAGE.format(request.path), content_type="text/html")

    return handle


def test_a_page_that_redirects_to_itself_with_a_session_the_host_strips_is_fetched(
    tmp_path: Path,
) -> None:
    """With ``strip_params = ["sid"]`` (what the README says to set for a site's own session
    parameter) the fetcher keyed the redirect's target by the common rules: a move to another
    URL, which the candidates then keyed back onto the page. Never fetched, a 302 every cycle,
    and one more ?sid= row in the inventory each cycle."""
    seen: list[str] = []

    def session(request: web.Request) -> web.Response | None:
        if "sid" in request.query:
            return None
        return web.Response(
            status=302, headers={"Location": f"{request.path}?sid={uuid.uuid4().hex[:12]}"}
        )

    home = tmp_path / "home"
    with serve_on_loopback(_site(session, seen)) as base:
        host = base.removeprefix("http://")
        home.mkdir()
        (home / "freshness.toml").write_text(f'[hosts."{host}"]\nstrip_params = ["sid"]\n')
        load_seeds(home, f"url\n{base}/product/1\n{base}/product/2\n".encode(), added_at=T0)
        run_cycles(home, T0, 3)
    wh = Warehouse(home)
    state = wh.read("url_state").sort("url")
    assert state["url"].to_list() == [f"{base}/product/1", f"{base}/product/2"]
    assert state["fingerprint"].is_not_null().all(), state.select("url", "last_outcome")
    assert wh.read("page_versions").height == 2  # a version each, then unchanged
    assert wh.read("url_inventory").height == 2  # no ?sid= rows piling up
    # every cycle each page, asked for as the site spells it
    assert sum(p.startswith("/product/") and "sid=" in p for p in seen) == 6


def test_robots_rules_hold_for_the_spelling_the_site_wrote_not_only_the_sorted_key(
    tmp_path: Path,
) -> None:
    """``Disallow: /?s=`` is how a site keeps crawlers out of its search. The key sorts the
    query (``/?lang=en&s=drill``), which the rule does not match: the search pages a sitemap
    listed and a redirect led to were fetched every cycle. A rule against a tracking parameter
    still does not keep out the page it is stripped from."""
    seen: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.path_qs)
        base = f"http://{request.host}"
        if request.path == "/robots.txt":
            return web.Response(
                text="User-agent: *\nDisallow: /?s=\nDisallow: /search?q=\nDisallow: /*utm_\n"
                f"Sitemap: {base}/sitemap.xml\n"
            )
        if request.path == "/sitemap.xml":
            locs = ["/?s=drill&amp;lang=en", "/search?q=drill&amp;hl=en", "/list?b=2&amp;a=1"]
            body = "".join(f"<url><loc>{base}{loc}</loc></url>" for loc in locs)
            return web.Response(
                text=f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{body}</urlset>',
                content_type="application/xml",
            )
        if request.path == "/find":
            return web.Response(status=302, headers={"Location": "/?s=drill&post_type=product"})
        return web.Response(text=PAGE.format(request.path_qs), content_type="text/html")

    home = tmp_path / "home"
    with serve_on_loopback(handle) as base:
        seeds = f"url\n{base}/find\n{base}/news?utm_source=mail\n"
        load_seeds(home, seeds.encode(), added_at=T0)
        run_cycles(home, T0, 3)
    forbidden = [p for p in seen if p.startswith(("/?", "/search"))]
    assert forbidden == []
    assert "/list?b=2&a=1" in seen and "/news" in seen  # allowed pages, as the site wrote them
    candidates = Warehouse(home).read("url_candidates")
    blocked = candidates.filter(~pl.col("allowed"))["url"].to_list()
    assert sorted(blocked) == sorted(
        [
            f"{base}/?lang=en&s=drill",
            f"{base}/search?hl=en&q=drill",
            f"{base}/?post_type=product&s=drill",
        ]
    )


def test_as_discovered_keeps_the_sites_spelling_less_tracking_parameters() -> None:
    assert as_discovered("http://a.example/?s=x&lang=en#top") == "http://a.example/?s=x&lang=en"
    assert as_discovered("http://a.example/p?utm_source=m&b=1") == "http://a.example/p?b=1"
    assert as_discovered("http://a.example/p;jsessionid=AB12?x=1") == "http://a.example/p?x=1"
    assert as_discovered("http://a.example/p?sid=3", strip_params=["sid"]) == "http://a.example/p"


def test_a_request_spelling_is_the_sites_path_and_query_under_the_keys_authority() -> None:
    def spell(written: str, strip: list[str] | None = None) -> str | None:
        if strip is None:
            return request_spelling(written, normalize_url(written))
        return request_spelling(
            written, normalize_url(written, strip_params=strip), strip_params=strip
        )

    assert spell("http://a.example/p?a=1&b=2") is None  # the key as written
    assert spell("http://a.example/p?b=2&a=1") == "http://a.example/p?b=2&a=1"
    assert spell("HTTP://A.example:80/p?b=2&utm_source=m&a=1#x") == "http://a.example/p?b=2&a=1"
    assert spell("http://a.example/p?q=caf\u00e9") is None  # differs from the key in escapes only
    assert spell("http://a.example/p?sid=9&b=1", strip=["sid"]) is None
    assert spell("http://a.example/p?sid=9&b=1&a=2", strip=["sid"]) == "http://a.example/p?b=1&a=2"
    assert request_spelling("http://[::1", "http://a.example/") is None


def test_a_users_seed_row_wins_over_a_value_inherited_through_a_redirect(tmp_path: Path) -> None:
    def moved(request: web.Request) -> web.Response | None:
        if request.path == "/r":
            return web.Response(status=301, headers={"Location": "/t"})
        return None

    home = tmp_path / "home"
    with serve_on_loopback(_site(moved)) as base:
        load_seeds(home, f"url,value,url_class\n{base}/r,5,premium\n".encode(), added_at=T0)
        run_cycles(home, T0, 2)
        load_seeds(home, f"url,value,url_class\n{base}/t,0.1,cheap\n".encode(), added_at=T0)
        run_cycles(home, T0, 1, first=2)
    target = Warehouse(home).read("url_candidates").filter(pl.col("url") == f"{base}/t")
    assert target.select("value", "url_class").row(0) == (0.1, "cheap")
    assert target["sources"][0] == "redirect,seed"


def test_a_path_that_grows_on_every_answer_stops_at_a_segment_repeated_three_times(
    tmp_path: Path,
) -> None:
    """``/grow/`` answering ``302 Location: a/`` made /grow/a/, /grow/a/a/, ...: one more URL
    kept and fetched every cycle, the plan growing without end."""
    seen: list[str] = []

    def growing(request: web.Request) -> web.Response | None:
        if request.path.startswith("/grow/"):
            return web.Response(status=302, headers={"Location": "a/"})
        return None

    home = tmp_path / "home"
    with serve_on_loopback(_site(growing, seen)) as base:
        load_seeds(home, f"url\n{base}/grow/\n{base}/page\n".encode(), added_at=T0)
        run_cycles(home, T0, 6)
    grown = sorted({p for p in seen if p.startswith("/grow/")})
    assert grown == ["/grow/", "/grow/a/", "/grow/a/a/"]
    candidates = Warehouse(home).read("url_candidates")
    trap = candidates.filter(pl.col("url") == f"{base}/grow/a/a/a/")
    assert trap.select("allowed", "blocked_reason").row(0) == (False, TRAP_REASON)


def test_a_page_that_mints_a_session_in_a_redirect_to_itself_is_one_url(tmp_path: Path) -> None:
    """``/account/1`` answering ``302 /account/1?sid=<new id>`` on every request (sid being no
    parameter stripped by default): each answer was a move to another URL, one more a cycle,
    each fetched again every cycle after."""

    def minting(request: web.Request) -> web.Response | None:
        if request.path.startswith("/account/") and "sid" not in request.query:
            sid = uuid.uuid4().hex[:12]
            return web.Response(status=302, headers={"Location": f"{request.path}?sid={sid}"})
        if request.path == "/moved":
            return web.Response(status=301, headers={"Location": "/elsewhere?from=moved"})
        return None

    home = tmp_path / "home"
    with serve_on_loopback(_site(minting)) as base:
        load_seeds(home, f"url\n{base}/account/1\n{base}/moved\n".encode(), added_at=T0)
        run_cycles(home, T0, 4)
    wh = Warehouse(home)
    state = wh.read("url_state")
    account = state.filter(pl.col("url") == f"{base}/account/1")
    assert account["fingerprint"].is_not_null().all() and account["n_fetches"][0] == 4
    assert not state.filter(pl.col("url").str.contains("sid=")).height
    # a redirect to another path is a move, as before
    moved = state.filter(pl.col("url") == f"{base}/moved")
    assert moved["redirect_to"][0] == f"{base}/elsewhere?from=moved"


def test_a_querys_semicolons_and_equals_signs_go_on_the_wire_as_written(tmp_path: Path) -> None:
    """A legacy app separating its query with ';' was asked for `id=1%3Bcolor%3Dred`: a 404,
    and the page marked gone (found by an exploratory run). The key keeps what the site wrote,
    so the request does."""
    assert normalize_url("http://a.example/item?id=1;color=red") == (
        "http://a.example/item?id=1;color=red"
    )
    assert normalize_url("http://a.example/x?z=1&q=a=b") == "http://a.example/x?q=a=b&z=1"
    assert normalize_url("http://a.example/x?q=a%3Bb") == "http://a.example/x?q=a%3Bb"
    seen: list[str] = []

    def legacy(request: web.Request) -> web.Response | None:
        if request.raw_path == "/item?id=1;color=red":
            return web.Response(text=PAGE.format("Item 1 in red"), content_type="text/html")
        return web.Response(status=404)

    home = tmp_path / "home"
    with serve_on_loopback(_site(legacy, seen)) as base:
        load_seeds(home, f"url\n{base}/item?id=1;color=red\n".encode(), added_at=T0)
        run_cycles(home, T0, 1)
    assert "/item?id=1;color=red" in seen
    state = Warehouse(home).read("url_state")
    assert state["status"].to_list() == ["active"]


#: spellings a server answers only as written, each keyed otherwise (science.normalize)
ODD_SPELLINGS = ["/index.php?/blog/post-1", "/tag/c%2B%2B", "/feed?flag", "/sig?b=2&a=1"]


def _only_as_written(request: web.Request) -> web.Response:
    """A strict server: a page at each of ODD_SPELLINGS as written, 404 for any other."""
    if request.raw_path not in ODD_SPELLINGS:
        return web.Response(status=404)
    return web.Response(text=PAGE.format(f"Post {request.raw_path}"), content_type="text/html")


def test_a_page_is_asked_for_as_the_site_wrote_it_where_the_key_is_another_spelling(
    tmp_path: Path,
) -> None:
    """The key is for joining tables; servers answer their own spelling. A front-controller
    route (``index.php?/blog/post``) keyed as ``?%2Fblog%2Fpost=``, an escaped ``+`` in a path
    (``/tag/c%2B%2B``, a space to many path decoders) keyed as ``c++``, ``?flag`` as
    ``?flag=`` and an order-sensitive query sorted: each was a 404 and the page marked gone.
    A tracking parameter still stays off the wire, and results stay under the key."""
    written = ODD_SPELLINGS
    seen: list[str] = []

    def strict(request: web.Request) -> web.Response | None:
        if request.path == "/sitemap.xml":
            listed = "".join(
                f"<url><loc>http://{request.host}{p.replace('&', '&amp;')}&amp;utm_source=x</loc>"
                "</url>"
                if "?" in p
                else f"<url><loc>http://{request.host}{p}</loc></url>"
                for p in written
            )
            return web.Response(
                text=f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{listed}</urlset>',
                content_type="application/xml",
            )
        if request.path == "/":
            return None
        return _only_as_written(request)

    home = tmp_path / "home"
    with serve_on_loopback(_site(strict, seen)) as base:
        keys = sorted(normalize_url(base + p) for p in written)
        assert all(request_spelling(base + p, normalize_url(base + p)) for p in written)
        load_seeds(home, f"url\n{base}/\n".encode(), added_at=T0)
        run_cycles(home, T0, 2)
    wh = Warehouse(home)
    state = wh.read("url_state").filter(pl.col("url").is_in(keys)).sort("url")
    assert state["url"].to_list() == keys
    assert state["status"].to_list() == ["active"] * 4, state.select("url", "last_outcome")
    asked = [p for p in seen if p not in ("/robots.txt", "/sitemap.xml", "/")]
    assert sorted(set(asked)) == sorted(written)
    assert sorted(set(wh.read("fetch_log")["url"].to_list()) & set(keys)) == keys
    assert wh.read("fetch_log").filter(pl.col("http_status") == 404).height == 0


def test_a_seed_is_asked_for_as_the_seed_file_wrote_it(tmp_path: Path) -> None:
    """The same spellings given as seeds went out as their keys (`/tag/c++`,
    `/index.php?%2Fblog%2Fpost=`, `?flag=`, a sorted query): each a 404 and the page gone,
    while a sitemap's went out as written (found by an outside check of the README)."""
    written = ODD_SPELLINGS
    seen: list[str] = []
    home = tmp_path / "home"
    with serve_on_loopback(_site(_only_as_written, seen)) as base:
        keys = sorted(normalize_url(base + p) for p in written)
        # a tracking parameter the file carries stays off the wire
        lines = [base + p + ("&utm_source=mail" if "?" in p else "") for p in written]
        load_seeds(home, ("url\n" + "\n".join(lines) + "\n").encode(), added_at=T0)
        run_cycles(home, T0, 1)
    wh = Warehouse(home)
    assert sorted(wh.read("seeds")["url"].to_list()) == keys
    asked = [p for p in seen if p not in ("/robots.txt", "/sitemap.xml")]
    assert sorted(asked) == sorted(written)
    state = wh.read("url_state").sort("url")
    assert state["url"].to_list() == keys
    assert state["status"].to_list() == ["active"] * 4, state.select("url", "last_outcome")


def test_an_inventory_row_of_a_seed_keyed_before_moves_to_the_spelling_the_seed_now_has() -> None:
    """Homes made before seeds kept their spelling hold each seed's inventory row under its key,
    which, being the key written, would keep the key the spelling asked for; the row moves to
    the seed's spelling with its first sighting, and other rows stay as they are."""
    from freshness_pipeline.stages.inventory import seed_rows, seeds_as_written
    from freshness_pipeline.warehouse import tables

    key = "http://a.example/tag/c++"
    seeds = tables.conform(
        "seeds",
        pl.DataFrame(
            {
                "url": [key, "http://a.example/b"],
                "host": "a.example",
                "source": "seed",
                "added_at": [T0, T0],
                "written": ["http://a.example/tag/c%2B%2B", None],
            }
        ),
    )
    previous = tables.conform(
        "url_inventory",
        pl.DataFrame(
            {
                "url": [key, key, "http://a.example/b"],
                "host": "a.example",
                "source": ["seed", "sitemap", "seed"],
                "first_seen_at": [T0, T0, T0],
            }
        ),
    )
    moved = seeds_as_written(previous, seeds)
    assert moved.select("url", "source").rows() == [
        ("http://a.example/tag/c%2B%2B", "seed"),
        (key, "sitemap"),  # the site wrote the key itself: it stays
        ("http://a.example/b", "seed"),
    ]
    assert moved.columns == previous.columns
    assert seed_rows(seeds)["url"].to_list() == [
        "http://a.example/tag/c%2B%2B",
        "http://a.example/b",
    ]


def test_a_cycle_dated_before_the_newest_moves_a_urls_first_sighting_back(tmp_path: Path) -> None:
    """A backfill (a cycle dated before the newest) moved url_inventory's first sighting back
    but not url_state's, which was then later than the page's last fetch (an outside check)."""
    from freshness_pipeline.app.runner import run_cycle

    home = tmp_path / "home"
    with serve_on_loopback(_site(lambda request: None)) as base:
        load_seeds(home, f"url\n{base}/a\n".encode(), added_at=T0 + timedelta(days=3))
        run_cycle(home, T0 + timedelta(days=1))
        run_cycle(home, T0)
    row = Warehouse(home).read("url_state").row(0, named=True)
    assert row["first_seen_at"] == T0
    assert row["first_seen_at"] <= row["last_fetched_at"]
