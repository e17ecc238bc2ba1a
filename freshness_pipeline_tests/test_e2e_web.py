"""The end-to-end benchmark's own web and scorer (benchmarks/e2e_web), not the product.

The benchmark is the judge of every planning and fetching change, so its scorer must be exact
and its server must do what the benchmark's report says it does: a hand-made truth with a known
answer for the scorer, and real requests over loopback for the server's behaviours.
"""

from __future__ import annotations

import gzip
import math
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from xml.etree import ElementTree as ET

import numpy as np
import polars as pl
import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from e2e_web import baselines, score  # noqa: E402
from e2e_web.hosts import HostProfile  # noqa: E402
from e2e_web.server import LOG_SCHEMA, WebServer, page_id_of  # noqa: E402
from e2e_web.truth import DEFAULT_START, HOUR_S, Clock, Truth, build_truth  # noqa: E402

ADDRESS_PREFIX = "127.0.61."  # away from the full benchmark's 127.0.60.N


# -- the scorer on a hand-made truth ---------------------------------------------------------


def _hand_made_truth() -> Truth:
    """Four pages, two cycles of 100 s: A changes at 30 and 150; B is static and goes at 120;
    C appears at 50 and changes at 160; D goes at 50."""
    host = HostProfile("hand", 4, "page")
    pages = pl.DataFrame(
        {
            "page_id": [1, 2, 3, 4],
            "host": [0, 0, 0, 0],
            "path": [f"/page/p-{i}.html" for i in (1, 2, 3, 4)],
            "pattern": ["poisson", "static", "poisson", "static"],
            "rate_per_day": [1.0, 0.0, 1.0, 0.0],
            "birth_s": [-10.0, -10.0, 50.0, -10.0],
            "appear_s": [-10.0, -10.0, 50.0, -10.0],
            "gone_s": [math.inf, 120.0, math.inf, 50.0],
            "gone_status": [404, 404, 404, 410],
            "disallowed": [False] * 4,
            "initial": [True, True, False, True],
            "listed": [True] * 4,
            "value": [1.0, 3.0, 2.0, 1.0],
            "scored": [True] * 4,
        }
    )
    times = {1: np.array([30.0, 150.0]), 2: np.array([]), 3: np.array([160.0]), 4: np.array([])}
    return Truth.from_tables((host,), Clock(DEFAULT_START, 100.0, 2), 0, pages, times)


def _log(rows: list[tuple[int, int, int, int | None]]) -> pl.DataFrame:
    """Page requests (page_id, cycle, status, served version) in arrival order; the live
    version is the truth's (what a 304 stood for)."""
    truth = _hand_made_truth()
    full = []
    for serial, (page_id, cycle, status, version) in enumerate(rows):
        full.append(
            {
                "serial": serial,
                "arrived_s": float(serial),
                "answered_s": float(serial) + 0.01,
                "sim_s": cycle * 100.0,
                "cycle": cycle,
                "host": 0,
                "path": f"/page/p-{page_id}.html",
                "kind": "page",
                "page_id": page_id,
                "status": status,
                "served_version": version,
                "live_version": truth.version_at(page_id, cycle * 100.0),
            }
        )
    return pl.DataFrame(full, schema=LOG_SCHEMA)


def test_scorer_integrates_freshness_exactly_on_a_hand_made_truth() -> None:
    truth = _hand_made_truth()
    log = _log(
        [
            (1, 0, 200, 0),  # A: fresh 0-30, then stale
            (2, 0, 200, 0),  # B: fresh 0-120, stale once gone
            (3, 0, 404, None),  # C asked for before it appeared: a gone copy, never fresh
            (1, 1, 304, None),  # a lying 304 keeps A's copy, stale since 30
            (3, 1, 500, None),  # an error sets nothing ...
            (3, 1, 200, 0),  # ... the retry does: C fresh 100-160
            (4, 1, 404, None),  # D: a gone copy, fresh once D went
        ]
    )
    copies = score.copies_from_log(truth, log)
    seconds = score.fresh_seconds(truth, copies)
    # fresh:  A 30, B 100 + 20, C 60, D 100; existing: 200 each, C 150 (from 50)
    assert score.weighted_freshness(seconds) == pytest.approx(
        (1 * 30 + 3 * 120 + 2 * 60 + 1 * 100) / (1 * 200 + 3 * 200 + 2 * 150 + 1 * 200)
    )
    assert score.weighted_freshness(seconds, from_cycle=1) == pytest.approx(
        (0 + 3 * 20 + 2 * 60 + 1 * 100) / (100 + 300 + 200 + 100)
    )
    by_host = score.freshness_by(seconds, "host")
    assert by_host["freshness"][0] == pytest.approx(610 / 1300)


def test_scorer_counts_a_never_fetched_page_stale_and_a_disallowed_one_not_at_all() -> None:
    truth = _hand_made_truth()
    truth.pages = truth.pages.with_columns(
        pl.when(pl.col("page_id") == 4).then(False).otherwise(pl.col("scored")).alias("scored")
    )
    copies = score.copies_from_log(truth, _log([(1, 0, 200, 0)]))
    assert set(copies["page_id"].unique().to_list()) == {1, 2, 3}
    seconds = score.fresh_seconds(truth, copies)
    assert score.weighted_freshness(seconds) == pytest.approx(30 / (200 + 600 + 300))


def test_baselines_fetch_within_budget_and_host_capacity() -> None:
    hosts = (
        HostProfile("a", 30, "a", crawl_delay=100.0),  # capacity 600 / 100 = 6 per cycle
        HostProfile("b", 30, "b"),
    )
    truth = build_truth(hosts, seed=3, cycles=4)
    web = baselines.BaselineWeb(truth, budget=10)
    for name, policy in baselines.POLICIES.items():
        copies, state = web.run(policy)
        assert int(state.fetches.sum()) == 4 * 10, name
        assert int(state.fetches[web.host == 0].sum()) <= 4 * 6, name
        assert copies.filter(pl.col("cycle") == 0)["copy"].ge(0).sum() == 10, name


def test_oracle_index_prefers_the_stale_slow_page_and_skips_a_fetched_static_one() -> None:
    value = np.array([1.0, 1.0, 1.0, 1.0])
    rate = np.array([0.1, 10.0, 0.0, 0.0])  # per day
    age = np.array([20.0, 20.0, 5.0, math.inf])  # days
    index = baselines.lagrangian_index(value, rate, age, remaining_days=10.0)
    assert index[0] > index[1] > 0  # a fast page is worth less: it will be stale again soon
    assert index[2] == 0.0  # a static page with a copy gains nothing
    assert index[3] == pytest.approx(10.0)  # never fetched: fresh for the rest of the run


# -- the server over loopback -----------------------------------------------------------------


HOSTS = (
    HostProfile(
        "honest-amp",
        6,
        "item",
        query_urls=True,
        crawl_delay=0.5,
        disallow=("/private/",),
        disallowed_share=0.34,
        sitemap="plain",
        lastmod="accurate",
    ),
    HostProfile(
        "burst",
        4,
        "listing",
        burst_min_gap_s=0.4,
        retry_after_s=2,
        sitemap="index_gz",
        lastmod="accurate",
    ),
    HostProfile(
        "churn",
        6,
        "job",
        gone_share=0.5,
        gone_status=410,
        sitemap="plain",
        lastmod="accurate",
        new_per_day=8.0,
        validators="stuck_304",
    ),
)


@pytest.fixture(scope="module")
def web():
    truth = build_truth(HOSTS, seed=5, cycles=8)
    with WebServer(truth, address_prefix=ADDRESS_PREFIX) as server:
        yield truth, server


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers={"User-Agent": "e2e-test/1", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def _a_changing_page(truth: Truth, host: int) -> tuple[dict, float]:
    """An allowed starting page of the host and the time of its first change after t = 0."""
    for row in truth.pages.filter(
        (pl.col("host") == host) & pl.col("initial") & ~pl.col("disallowed")
    ).iter_rows(named=True):
        times = truth.event_times(row["page_id"])
        later = times[(times > 0) & (times < truth.clock.horizon_s) & (times < row["gone_s"])]
        if later.size:
            return row, float(later[0])
    raise AssertionError("the test web has no changing page")


def _figures(html: bytes) -> bytes:
    return html.split(b'class="figures">')[1].split(b"</p>")[0]


def test_robots_txt_states_crawl_delay_disallow_and_sitemap(web) -> None:
    truth, server = web
    status, headers, body = _get(server.base_urls[0] + "/robots.txt")
    text = body.decode()
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    assert "Crawl-delay: 0.5" in text
    assert "Disallow: /private/" in text
    assert f"Sitemap: {server.base_urls[0]}/sitemap.xml" in text


def test_honest_validators_answer_304_until_the_content_changes(web) -> None:
    truth, server = web
    row, changes_at = _a_changing_page(truth, 0)
    url = server.base_urls[0] + row["path"]
    server.set_time(changes_at - 1.0)
    status, headers, first = _get(url)
    assert status == 200
    etag, last_modified = headers["ETag"], headers["Last-Modified"]
    assert _get(url, {"If-None-Match": etag})[0] == 304
    assert _get(url, {"If-Modified-Since": last_modified})[0] == 304
    server.set_time(changes_at + 1.0)
    status, headers, second = _get(url, {"If-None-Match": etag})
    assert status == 200 and headers["ETag"] != etag
    assert _figures(first) != _figures(second)  # the edit is in the article's text
    versions = (
        server.log().filter(pl.col("page_id") == row["page_id"])["served_version"].drop_nulls()
    )
    assert versions.to_list()[-1] == versions.to_list()[0] + 1


def test_stuck_validators_answer_304_although_the_content_changed(web) -> None:
    truth, server = web
    row, changes_at = _a_changing_page(truth, 2)
    url = server.base_urls[2] + row["path"]
    server.set_time(changes_at - 1.0)
    _, headers, _ = _get(url)
    server.set_time(changes_at + 1.0)
    assert _get(url, {"If-None-Match": headers["ETag"]})[0] == 304
    last = server.log().filter(pl.col("page_id") == row["page_id"]).tail(1).row(0, named=True)
    assert last["served_version"] is None and last["live_version"] >= 1


def test_burst_gets_429_with_retry_after_and_a_paced_crawler_does_not(web) -> None:
    truth, server = web
    server.set_time(0.0)
    pages = truth.pages.filter((pl.col("host") == 1) & pl.col("initial"))["path"].to_list()
    base = server.base_urls[1]
    assert _get(base + pages[0])[0] == 200
    status, headers, _ = _get(base + pages[1])  # closer than 0.4 s
    assert status == 429 and headers["Retry-After"] == "2"
    time.sleep(0.5)
    assert _get(base + pages[2])[0] == 429  # paced, but inside the pause
    time.sleep(2.1)
    assert _get(base + pages[2])[0] == 200
    time.sleep(0.5)
    assert _get(base + pages[3])[0] == 200
    violations = score.retry_after_violations(server.log().filter(pl.col("host") == 1))
    assert violations.height == 1  # the request 0.5 s into the 2 s pause


def test_crawl_delay_gaps_are_measured_from_the_log(web) -> None:
    truth, server = web
    base = server.base_urls[0]
    before = score.crawl_delay_gaps(truth.hosts, server.log())
    already = int(before["violations"].sum()) if before.height else 0
    _get(base + "/robots.txt")
    _get(base + "/robots.txt")  # far closer than 0.5 s
    gaps = score.crawl_delay_gaps(truth.hosts, server.log())
    assert int(gaps["violations"].sum()) >= already + 1
    assert gaps.filter(pl.col("host") == 0)["min_gap"][0] < 0.45


def test_sitemap_with_bare_ampersands_is_served_as_the_real_web_writes_it(web) -> None:
    truth, server = web
    server.set_time(0.0)
    status, headers, body = _get(server.base_urls[0] + "/sitemap.xml")
    assert status == 200 and headers["Content-Type"].startswith("application/xml")
    assert b"&cat=" in body and b"&amp;" not in body
    with pytest.raises(ET.ParseError):
        ET.fromstring(body)  # not well-formed, as specified
    listed = {page_id_of(part.split("</loc>")[0]) for part in body.decode().split("<loc>")[1:]}
    host_pages = truth.pages.filter(pl.col("host") == 0)
    assert listed == set(host_pages["page_id"].to_list())
    assert host_pages["disallowed"].any()  # disallowed pages are listed too


def test_gzipped_sitemap_behind_an_index(web) -> None:
    truth, server = web
    server.set_time(0.0)
    base = server.base_urls[1]
    time.sleep(2.5)  # the burst host: clear of any pause an earlier request started
    _, _, index = _get(base + "/sitemap_index.xml")
    locs = [
        e.text
        for e in ET.fromstring(index).iter("{http://www.sitemaps.org/schemas/sitemap/0.9}loc")
    ]
    assert locs == [base + "/sitemaps/pages-1.xml.gz", base + "/sitemaps/pages-2.xml"]
    time.sleep(0.5)  # paced
    _, headers, packed = _get(locs[0])
    assert headers["Content-Type"] == "application/gzip" and "Content-Encoding" not in headers
    urls = ET.fromstring(gzip.decompress(packed)).iter(
        "{http://www.sitemaps.org/schemas/sitemap/0.9}url"
    )
    assert len(list(urls)) >= 1


def test_pages_appear_in_the_sitemap_and_go_with_410(web) -> None:
    truth, server = web
    pages = truth.pages.filter(pl.col("host") == 2)
    gone = pages.filter(pl.col("gone_s").is_finite()).row(0, named=True)
    new = pages.filter(~pl.col("initial") & (pl.col("appear_s") > HOUR_S)).row(0, named=True)
    base = server.base_urls[2]
    server.set_time(gone["gone_s"] - 1.0)
    assert f"-{gone['page_id']}.html".encode() in _get(base + "/sitemap.xml")[2]
    assert _get(base + gone["path"])[0] == 200
    server.set_time(gone["gone_s"] + 1.0)
    assert f"-{gone['page_id']}.html".encode() not in _get(base + "/sitemap.xml")[2]
    assert _get(base + gone["path"])[0] == 410
    server.set_time(new["appear_s"] - 1.0)
    assert _get(base + new["path"])[0] == 404
    assert f"-{new['page_id']}.html".encode() not in _get(base + "/sitemap.xml")[2]
    server.set_time(new["appear_s"] + 1.0)
    assert f"-{new['page_id']}.html".encode() in _get(base + "/sitemap.xml")[2]
    assert _get(base + new["path"])[0] == 200


def test_page_ids_survive_the_crawlers_url_normalization() -> None:
    urls = pl.Series(
        [
            "http://127.0.60.2:4000/item.php?cat=3&id=20017&lang=en",  # query sorted
            "http://127.0.60.2:4000/item.php?id=20017",  # parameters dropped
            "http://127.0.60.1:4000/news/harbor-cedar-index-10004.html",
            "http://127.0.60.1:4000/about.html",
        ]
    )
    ids = pl.DataFrame({"url": urls}).select(score.page_ids_from_urls(pl.col("url")))["url"]
    assert ids.to_list() == [20017, 20017, 10004, None]
    assert page_id_of("/item.php?lang=en&id=20017&cat=3") == 20017


def test_without_takes_each_signal_off_every_host_and_the_web_still_builds() -> None:
    import e2e_quality
    from e2e_web.hosts import HOSTS

    bare = e2e_quality.without(HOSTS, ["sitemaps", "lastmod", "validators"])
    assert [h.name for h in bare] == [h.name for h in HOSTS]
    assert not any(h.lists_pages or h.new_per_day for h in bare)
    assert {h.validators for h in bare} == {"none"} and {h.lastmod for h in bare} == {"missing"}
    # the rest of each host stays: politeness, failures, boilerplate
    assert [(h.crawl_delay, h.burst_min_gap_s, h.boilerplate) for h in bare] == [
        (h.crawl_delay, h.burst_min_gap_s, h.boilerplate) for h in HOSTS
    ]
    truth = build_truth(bare, seed=0, cycles=2)
    assert truth.pages["initial"].all()  # no page appears without a list to appear in
    assert e2e_quality.without(HOSTS, []) == HOSTS
    with pytest.raises(SystemExit):
        e2e_quality.parse_args(["--without", "robots"])
