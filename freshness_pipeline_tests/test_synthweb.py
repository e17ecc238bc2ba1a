"""The synthetic web must behave like the real web it stands for (validators, robots, sitemaps,
births and deaths) and its truth must score exactly, or every benchmark built on it lies."""

from __future__ import annotations

import asyncio
import csv
import gzip
import json
import math
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import aiohttp
import numpy as np
import polars as pl
import pytest
from protego import Protego

from freshness_pipeline.synthweb import (
    SiteSpec,
    SyntheticWeb,
    Truth,
    World,
    build_world,
)
from freshness_pipeline.synthweb.world import Page, http_date, to_dt

UA = "freshness-pipeline/test"


@pytest.fixture(scope="module")
def world() -> World:
    return build_world(0)


@pytest.fixture(scope="module")
def web(world: World) -> Iterator[SyntheticWeb]:
    with SyntheticWeb(world) as w:
        yield w


def fetch(url: str, headers: dict[str, str] | None = None, *, method: str = "GET"):
    """One real HTTP request over loopback; returns (status, headers, body bytes)."""

    async def go():
        async with (
            aiohttp.ClientSession(headers={"User-Agent": UA}) as s,
            s.request(method, url, headers=headers or {}, allow_redirects=False) as r,
        ):
            return r.status, r.headers, await r.read()

    return asyncio.run(go())


def article(body: bytes) -> str:
    m = re.search(rb"<article>.*</article>", body, re.S)
    assert m, body[:200]
    return m.group(0).decode()


def changing_page(world: World, site: str) -> tuple[Page, float]:
    """A page on `site` alive at start with a change a few hours after start."""
    s = world.start.timestamp()
    for p in world.pages_of(site):
        if p.disallowed or not p.is_alive(s) or not math.isinf(p.dies_at):
            continue
        later = p.change_times[(p.change_times > s + 3600) & (p.change_times < s + 5 * 86400)]
        if later.size:
            return p, float(later[0])
    raise AssertionError("no changing page")


# ---------------------------------------------------------------------- world
def test_world_is_deterministic_and_follows_the_recipe() -> None:
    a, b, c = build_world(7), build_world(7), build_world(8)
    assert [p.path for p in a.pages] == [p.path for p in b.pages]
    assert all(
        np.array_equal(p.change_times, q.change_times)
        for p, q in zip(a.pages, b.pages, strict=True)
    )
    assert [p.rate for p in a.pages] != [p.rate for p in c.pages]
    assert {s.behaviour for s in a.sites} >= {
        "honest",
        "lastmod_only",
        "no_validators",
        "volatile",
        "polite",
    }
    assert 300 <= len(a.pages) <= 600
    assert all(60 <= len(a.pages_of(s.name)) <= 120 for s in a.sites)

    big = build_world(1, sites=[SiteSpec("big", "honest", 5000)])
    rates = np.array([p.rate for p in big.pages])
    values = np.array([p.value for p in big.pages])
    assert values.mean() == pytest.approx(1.0)
    assert values.max() / np.median(values) > 50  # Zipf: a few pages matter a lot
    shares = [np.mean(rates >= 4), np.mean((rates >= 1) & (rates < 4)), np.mean(rates < 1 / 120)]
    assert shares == pytest.approx([0.05, 0.18, 0.30], abs=0.025)
    start = big.start.timestamp()
    assert np.mean([p.born_at > start for p in big.pages]) == pytest.approx(0.10, abs=0.02)
    assert np.mean([math.isfinite(p.dies_at) for p in big.pages]) == pytest.approx(0.03, abs=0.01)
    # Realised change counts follow the rates (Poisson over the warm-up + horizon).
    fast = [p for p in big.pages if p.rate > 2 and p.born_at < start - 30 * 86400]
    expected = sum(p.rate for p in fast) * 60
    assert sum(len(p.change_times) for p in fast) == pytest.approx(expected, rel=0.05)
    assert {p.url_class for p in big.pages} == {"article", "listing", "static"}


def test_page_version_and_last_modified_follow_change_times(world: World) -> None:
    p, c = changing_page(world, "honest")
    assert p.version_at(c - 1) + 1 == p.version_at(c)  # a change at t is live at t
    assert p.last_modified_at(c) == c
    assert p.last_modified_at(c - 1) < c
    a1 = world.article_html(p, p.version_at(c - 1))
    a2 = world.article_html(p, p.version_at(c))
    assert a1 != a2 and a1 == world.article_html(p, p.version_at(c - 1))


def test_product_pages_show_a_price_that_moves_with_every_version() -> None:
    """A hand-built shop (build_world draws no products): the price is in the page's text
    and in its schema.org Product JSON-LD, differs at every version, and other pages carry
    neither."""
    s = datetime(2025, 1, 6, tzinfo=UTC).timestamp()
    changes = np.array([s + h * 3600 for h in range(1, 40)], dtype=float)

    def page(i: int, path: str, url_class: str) -> Page:
        return Page(
            page_id=i, site="shop", path=path, url_class=url_class, value=1.0, rate=1.0,
            change_times=changes, born_at=s - 86400, dies_at=math.inf, death_status=404,
            disallowed=False,
        )  # fmt: skip

    lamp, about = page(0, "/products/lamp", "product"), page(1, "/about", "article")
    shop = World(
        seed=3, start=to_dt(s), horizon_days=2, sites=[SiteSpec("shop", "honest", 2)],
        pages=[lamp, about],
    )  # fmt: skip
    prices = [shop.price(lamp, v) for v in range(40)]
    assert all(a != b for a, b in zip(prices, prices[1:], strict=False))
    assert all(re.fullmatch(r"\d+\.\d\d", p or "") for p in prices)
    assert shop.price(about, 3) is None
    for hours in (0, 5):
        html = shop.render(lamp, s + hours * 3600 + 1)
        price = shop.price(lamp, lamp.version_at(s + hours * 3600 + 1))
        assert f'<span class="price">${price}</span>' in html
        script = re.search(r'<script type="application/ld\+json">(.*?)</script>', html, re.S)
        assert script is not None
        item = json.loads(script.group(1))
        assert item["@type"] == "Product" and item["name"] == "Product lamp"
        assert item["offers"]["price"] == price
    plain = shop.render(about, s + 1)
    assert "ld+json" not in plain and 'class="price"' not in plain


# ---------------------------------------------------------------------- validators
def test_honest_site_answers_304_to_etag_and_to_date(web: SyntheticWeb, world: World) -> None:
    p, c = changing_page(world, "honest")
    web.set_now(to_dt(c - 600))
    status, h, body = fetch(web.url(p))
    assert status == 200 and body
    etag, lm = h["ETag"], h["Last-Modified"]
    assert etag.startswith('"') and not etag.startswith("W/")
    assert fetch(web.url(p), {"If-None-Match": etag})[0] == 304
    assert fetch(web.url(p), {"If-None-Match": f'"nope", W/{etag}'})[0] == 304
    assert fetch(web.url(p), {"If-Modified-Since": lm})[0] == 304
    assert fetch(web.url(p), {"If-None-Match": '"other"'})[0] == 200
    # After the change: new ETag and Last-Modified, old validators get the full page.
    web.set_now(to_dt(c + 1))
    status, h2, body2 = fetch(web.url(p), {"If-None-Match": etag})
    assert status == 200 and h2["ETag"] != etag and h2["Last-Modified"] == http_date(c)
    assert article(body2) != article(body)
    assert fetch(web.url(p), {"If-Modified-Since": lm})[0] == 200
    assert fetch(web.url(p), {"If-None-Match": h2["ETag"]})[0] == 304


def test_lastmod_only_site_revalidates_by_date_only(web: SyntheticWeb, world: World) -> None:
    p, c = changing_page(world, "lastmod")
    web.set_now(to_dt(c - 600))
    status, h, _ = fetch(web.url(p))
    assert status == 200 and "ETag" not in h
    lm = h["Last-Modified"]
    assert fetch(web.url(p), {"If-Modified-Since": lm})[0] == 304
    assert fetch(web.url(p), {"If-None-Match": '"whatever"'})[0] == 200
    web.set_now(to_dt(c))
    assert fetch(web.url(p), {"If-Modified-Since": lm})[0] == 200


def test_no_validators_site_always_answers_200(web: SyntheticWeb, world: World) -> None:
    p, _ = changing_page(world, "novalid")
    web.set_now(world.start)
    status, h, _ = fetch(web.url(p))
    assert status == 200 and "ETag" not in h and "Last-Modified" not in h
    cond = {"If-None-Match": "*", "If-Modified-Since": http_date(world.start.timestamp())}
    assert fetch(web.url(p), cond)[0] == 200


def test_volatile_site_changes_bytes_not_article(web: SyntheticWeb, world: World) -> None:
    p, c = changing_page(world, "volatile")
    web.set_now(to_dt(c - 600))
    s1, h1, b1 = fetch(web.url(p))
    s2, h2, b2 = fetch(
        web.url(p), {"If-None-Match": h1["ETag"], "If-Modified-Since": h1["Last-Modified"]}
    )
    assert s1 == s2 == 200  # lying validators: never a 304
    assert b1 != b2 and h1["ETag"] != h2["ETag"]
    assert article(b1) == article(b2)
    web.set_now(to_dt(c))
    assert article(fetch(web.url(p))[2]) != article(b1)


def test_sitemap_shows_pages_born_later_only_after_birth(web: SyntheticWeb, world: World) -> None:
    start = world.start.timestamp()
    p = next(q for q in world.pages if q.born_at > start + 3600 and q.site == "lastmod")
    sitemap = web.base_urls[p.site] + "/sitemap.xml"
    web.set_now(to_dt(p.born_at - 1))
    assert web.url(p).encode() not in fetch(sitemap)[2]
    assert fetch(web.url(p))[0] == 404
    web.set_now(to_dt(p.born_at))
    body = fetch(sitemap)[2]
    assert f"<loc>{web.url(p)}</loc><lastmod>".encode() in body
    assert fetch(web.url(p))[0] == 200


def test_dead_pages_answer_404_or_410_and_leave_the_sitemap(
    web: SyntheticWeb, world: World
) -> None:
    dead = [p for p in world.pages if math.isfinite(p.dies_at) and p.born_at < p.dies_at - 10]
    assert {p.death_status for p in dead} == {404, 410}
    for status in (404, 410):
        p = next(q for q in dead if q.death_status == status)
        web.set_now(to_dt(p.dies_at - 1))
        assert fetch(web.url(p))[0] == 200
        web.set_now(to_dt(p.dies_at))
        assert fetch(web.url(p))[0] == status
        assert web.url(p).encode() not in fetch(web.base_urls[p.site] + "/sitemap.xml")[2]
    assert fetch(web.base_urls["honest"] + "/no/such/page")[0] == 404


def test_polite_robots_and_sitemap_bait(web: SyntheticWeb, world: World) -> None:
    web.set_now(world.start)
    base = web.base_urls["polite"]
    status, _, body = fetch(base + "/robots.txt")
    text = body.decode()
    assert status == 200 and "Crawl-delay: 0.05" in text and "Disallow: /private/" in text
    assert f"Sitemap: {base}/sitemap.xml" in text
    rp = Protego.parse(text)
    assert rp.crawl_delay("freshness-pipeline") == pytest.approx(0.05)
    assert not rp.can_fetch(base + "/private/report-1", "freshness-pipeline")
    assert rp.can_fetch(base + "/articles/1", "freshness-pipeline")
    # The sitemap lists private pages on purpose: robots.txt has to win.
    assert re.search(rb"<loc>[^<]*/private/report-\d+</loc>", fetch(base + "/sitemap.xml")[2])
    # Every other site: no delay, nothing disallowed for us, an absolute Sitemap line.
    for name, b in web.base_urls.items():
        rp = Protego.parse(fetch(b + "/robots.txt")[2].decode())
        assert list(rp.sitemaps) and all(s.startswith(b + "/") for s in rp.sitemaps)
        if name != "polite":
            assert rp.crawl_delay("freshness-pipeline") is None
            assert rp.can_fetch(b + "/private/x", "freshness-pipeline")


def test_honest_site_uses_a_gzip_sitemap_index(web: SyntheticWeb, world: World) -> None:
    web.set_now(world.start)
    base = web.base_urls["honest"]
    rp = Protego.parse(fetch(base + "/robots.txt")[2].decode())
    assert list(rp.sitemaps) == [base + "/sitemap_index.xml"]
    index = fetch(base + "/sitemap_index.xml")[2].decode()
    children = re.findall(r"<loc>([^<]+)</loc>", index)
    assert len(children) >= 2 and all(c.endswith(".xml.gz") for c in children)
    locs = []
    for child in children:
        status, h, body = fetch(child)
        assert status == 200 and h["Content-Type"].startswith("application/gzip")
        locs += re.findall(r"<loc>([^<]+)</loc>", gzip.decompress(body).decode())
    live = {web.url(p) for p in world.live_pages("honest", world.start)}
    assert set(locs) == live


def test_request_log_records_what_was_sent(web: SyntheticWeb, world: World) -> None:
    p, _ = changing_page(world, "honest")
    web.set_now(world.start)
    web.request_log.clear()
    fetch(web.url(p) + "?a=1", {"If-None-Match": '"x"'})
    fetch(web.url(p), {"If-Modified-Since": http_date(world.start.timestamp())}, method="HEAD")
    r1, r2 = web.request_log.snapshot()
    assert (r1.site, r1.method, r1.status, r1.path) == ("honest", "GET", 200, p.path + "?a=1")
    assert r1.host == web.hosts["honest"] and r1.user_agent == UA
    assert r1.if_none_match == '"x"' and r1.if_modified_since is None
    assert r1.bytes_sent > 0 and r1.sim_now == world.start
    assert r2.method == "HEAD" and r2.status == 304 and r2.bytes_sent == 0
    assert r2.real_time >= r1.real_time


def test_each_site_has_its_own_host(web: SyntheticWeb) -> None:
    assert len(set(web.hosts.values())) == len(web.hosts)
    assert all(h.startswith("127.") for h in web.hosts.values())
    assert all(web.base_urls[n] == f"http://{h}" for n, h in web.hosts.items())


def test_variants_and_aliases_reach_the_same_page(web: SyntheticWeb, world: World) -> None:
    web.set_now(world.start)
    truth = web.truth()
    pairs = world.variant_urls(web.base_urls)
    assert len(pairs) >= 4 and any("utm_source" in v for v, _ in pairs)
    for variant, canonical in pairs:
        assert variant != canonical
        s1, _, b1 = fetch(variant)
        s2, _, b2 = fetch(canonical)
        assert s1 == s2 == 200 and article(b1) == article(b2)
        assert truth.page(variant) is truth.page(canonical)
    for alias, canonical in world.redirect_aliases(web.base_urls):
        status, h, _ = fetch(alias)
        assert (
            status == 301 and web.base_urls[truth.page(canonical).site] + h["Location"] == canonical
        )
        assert truth.page(alias) is truth.page(canonical)


def test_seeds_csv(web: SyntheticWeb, world: World, tmp_path) -> None:
    alive = [p for p in world.pages if p.is_alive(world.start)]
    path = web.seeds_csv(tmp_path / "seeds.csv")
    rows = list(csv.DictReader(path.open()))
    assert list(rows[0]) == ["url", "value", "url_class"]
    urls = [r["url"] for r in rows]
    assert set(urls) >= {web.url(p) for p in alive}
    assert len(urls) == len(alive) + len(world.variant_urls(web.base_urls))
    assert any("/private/" in u for u in urls)
    assert all(r["url"].lower().startswith("http://") for r in rows)
    bad = web.seeds_csv(tmp_path / "bad.csv", invalid_rows=True, variants=False)
    bad_urls = [r["url"] for r in csv.DictReader(bad.open())]
    assert "ftp://x/y" in bad_urls and "not a url" in bad_urls
    assert len(bad_urls) == len(alive) + 2


def test_injected_failures_and_test_endpoints(web: SyntheticWeb, world: World) -> None:
    p, _ = changing_page(world, "novalid")
    web.set_now(world.start)
    web.inject_failures("novalid", 503, 2, retry_after=3, path_prefix=p.path)
    assert fetch(web.base_urls["novalid"] + "/robots.txt")[0] == 200
    status, h, _ = fetch(web.url(p))
    assert status == 503 and h["Retry-After"] == "3"
    assert fetch(web.url(p))[0] == 503
    assert fetch(web.url(p))[0] == 200
    base = web.base_urls["novalid"]
    assert fetch(base + "/_test/redirect/2")[0] == 302
    assert fetch(base + "/_test/status/429?retry_after=7")[1]["Retry-After"] == "7"


def test_clock_can_run(world: World) -> None:
    with SyntheticWeb(world) as w:
        w.run_clock(3600.0, world.start)
        time.sleep(0.05)
        assert w.now > world.start + timedelta(seconds=60)
        w.set_now(world.start)
        assert w.now == world.start


# ---------------------------------------------------------------------- truth
S = datetime(2025, 3, 1, tzinfo=UTC)
DAY = 86400.0


def _hand_world() -> tuple[World, Truth]:
    s = S.timestamp()

    def page(i, path, value, changes=(), born=-100, dies=math.inf, disallowed=False):
        return Page(
            page_id=i, site="a", path=path, url_class="article", value=value, rate=0.1,
            change_times=np.array([s + c * DAY for c in changes], dtype=float),
            born_at=s + born * DAY, dies_at=s + dies * DAY, death_status=404,
            disallowed=disallowed,
        )  # fmt: skip

    pages = [
        page(0, "/never-changes", 1.0),
        page(1, "/changes", 3.0, changes=(2, 5)),
        page(2, "/born-late", 2.0, born=6),
        page(3, "/private/x", 5.0, disallowed=True),
        page(4, "/dies", 1.0, dies=5),
    ]
    spec = SiteSpec("a", "polite", 5, disallow=("/private/",), n_private=1)
    world = World(seed=0, start=S, horizon_days=10, sites=[spec], pages=pages)
    return world, Truth(world, {"a": "http://127.0.0.9:1"})


def _fetches(*rows: tuple[str, float]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "url": ["http://127.0.0.9:1" + p for p, _ in rows],
            "fetched_at": [S + timedelta(days=d) for _, d in rows],
        }
    )


def test_weighted_freshness_is_one_for_a_static_page_fetched_at_start() -> None:
    _, truth = _hand_world()
    f = _fetches(("/never-changes", 0))
    table = truth.freshness_table(f, S, S + timedelta(days=10))
    row = table.filter(pl.col("url").str.ends_with("/never-changes"))
    assert row["freshness"].item() == 1.0
    only = World(seed=0, start=S, horizon_days=10, sites=truth.world.sites, pages=truth.pages[:1])
    assert Truth(only, truth.base_urls).weighted_freshness(f, S, S + timedelta(days=10)) == 1.0


def test_weighted_freshness_matches_hand_computation() -> None:
    _, truth = _hand_world()
    fetches = _fetches(
        ("/never-changes", 0),  # fresh all 10 days
        ("/changes", -1),  # before the window: fresh until the change at day 2
        ("/changes", 3),  # fresh from day 3 until the change at day 5
        ("/changes", 4),  # same version as day 3: adds nothing
        ("/dies", 1),  # fresh days 1-5, then dead (not counted)
        ("/dies", 7),  # after death: ignored
        ("/private/x", 0),  # disallowed: not scored at all
        ("/unknown", 0),  # not a page: ignored
    )
    end = S + timedelta(days=10)
    # weights = value x alive days: 1x10, 3x10, 2x4 (born day 6, never fetched), 1x5
    expected = (1 * 10 + 3 * 4 + 2 * 0 + 1 * 4) / (1 * 10 + 3 * 10 + 2 * 4 + 1 * 5)
    assert truth.weighted_freshness(fetches, S, end) == pytest.approx(expected, rel=1e-12)
    # Naive datetimes are UTC; a sub-window is scored on its own.
    naive = fetches.with_columns(pl.col("fetched_at").dt.replace_time_zone(None))
    assert truth.weighted_freshness(naive, S, end) == pytest.approx(expected, rel=1e-12)
    sub = truth.weighted_freshness(fetches, S + timedelta(days=3), S + timedelta(days=5))
    assert sub == pytest.approx((1 * 2 + 3 * 2 + 1 * 2) / (1 * 2 + 3 * 2 + 1 * 2))
    assert truth.weighted_freshness(fetches.head(0), S, end) == 0.0
    assert truth.change_counts("http://127.0.0.9:1/changes", S, end) == 2
    assert truth.change_counts("http://127.0.0.9:1/changes", S + timedelta(days=2), end) == 1
    assert truth.version_at("http://127.0.0.9:1/changes", S + timedelta(days=2)) == 1
    assert not truth.is_alive("http://127.0.0.9:1/dies", S + timedelta(days=5))
    assert truth.disallowed("http://127.0.0.9:1/private/x")


def test_weighted_freshness_agrees_with_sampling(world: World) -> None:
    truth = Truth(world, {s.name: f"http://127.0.0.{i + 2}:1" for i, s in enumerate(world.sites)})
    rng = np.random.default_rng(5)
    urls = truth.urls()
    s0 = world.start.timestamp()
    picks = rng.integers(0, len(urls), 2000)
    times = s0 + rng.uniform(-2, 6, 2000) * DAY
    rows = [(urls[i], t) for i, t in zip(picks, times, strict=True) if truth.pages[i].is_alive(t)]
    fetches = pl.DataFrame({"url": [u for u, _ in rows], "fetched_at": [to_dt(t) for _, t in rows]})
    start, end = s0 + DAY, s0 + 5 * DAY
    grid = np.linspace(start, end, 4001)[:-1] + (end - start) / 8000
    by_url: dict[str, list[float]] = {}
    for u, t in rows:
        by_url.setdefault(u, []).append(t)
    num = den = 0.0
    for p, u in zip(truth.pages, urls, strict=True):
        alive = (grid >= p.born_at) & (grid < p.dies_at)
        if p.disallowed or not alive.any():
            continue
        fs = np.sort(np.array(by_url.get(u, [])))
        fresh = np.zeros(grid.size, dtype=bool)
        if fs.size:
            k = np.searchsorted(fs, grid, side="right")
            last = fs[np.maximum(k - 1, 0)]
            same = np.searchsorted(p.change_times, last, "right") == np.searchsorted(
                p.change_times, grid, "right"
            )
            fresh = (k > 0) & same
        num += p.value * (fresh & alive).sum()
        den += p.value * alive.sum()
    exact = truth.weighted_freshness(fetches, to_dt(start), to_dt(end))
    assert exact == pytest.approx(num / den, abs=0.003)


def test_uniform_baseline_grows_with_budget(web: SyntheticWeb, world: World) -> None:
    truth = web.truth()
    start, end = world.start, world.start + timedelta(days=7)
    cycles = [start + timedelta(hours=6 * i) for i in range(28)]
    scores = [truth.uniform_baseline(b, cycles, start, end) for b in (5, 20, 80)]
    assert all(0 < s < 1 for s in scores)
    assert scores[0] < scores[1] < scores[2]
    fetches = truth.uniform_fetches(20, cycles)
    assert fetches.height == 20 * 28
    assert fetches.group_by("fetched_at").len()["len"].max() == 20
    assert not any(truth.disallowed(u) for u in fetches["url"].unique())
    # Starting from a full crawl at start can only help.
    everything = pl.DataFrame(
        {"url": [u for u in truth.urls() if truth.is_alive(u, start)], "fetched_at": start}
    )
    warm = truth.uniform_baseline(20, cycles[1:], start, end, initial_fetches=everything)
    assert warm > scores[1]
