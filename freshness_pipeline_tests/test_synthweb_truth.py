"""synthweb/truth.py on a hand-built world whose freshness is worked out by hand: each page's
fresh seconds (a fetch keeps the copy fresh until the next change; fetches before the window
count, fetches of a page not alive yet or of unknown URLs do not; disallowed pages are not
scored), the value-weighted share, the round-robin baseline's picks, the spellings of a URL
that still find its page, and, on the served web, that the truth's URLs are what the server
answers, alive or dead as the truth says."""

from __future__ import annotations

import ipaddress
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest

from freshness_pipeline.synthweb import DEFAULT_START, SyntheticWeb, World
from freshness_pipeline.synthweb.truth import Truth
from freshness_pipeline.synthweb.world import Page
from freshness_pipeline_tests.crawls import shop_world

S = DEFAULT_START
H = timedelta(hours=1)
BASE = "http://shop.test"


def page(
    pid: int,
    path: str,
    *,
    value: float = 1.0,
    changes: tuple[float, ...] = (),
    born: float = -90 * 24,
    dies: float = float("inf"),
    disallowed: bool = False,
    url_class: str = "article",
) -> Page:
    """Times in hours from S."""
    ts = S.timestamp()
    return Page(
        page_id=pid,
        site="shop",
        path=path,
        url_class=url_class,
        value=value,
        rate=0.5 + pid,
        change_times=np.array([ts + h * 3600 for h in changes], dtype=float),
        born_at=ts + born * 3600,
        dies_at=ts + dies * 3600,
        death_status=410,
        disallowed=disallowed,
    )


def world() -> World:
    pages = [
        page(0, "/a", changes=(6, 18)),
        page(1, "/b", value=3.0, url_class="product"),
        page(2, "/private/x", disallowed=True),
        page(3, "/late", born=12),
        page(4, "/dead", dies=12),
    ]
    return shop_world(pages, seed=1, horizon_days=2.0)


def fetches(*rows: tuple[str, float]) -> pl.DataFrame:
    return pl.DataFrame(
        {"url": [u for u, _ in rows], "fetched_at": [S + h * H for _, h in rows]},
        schema={"url": pl.String, "fetched_at": pl.Datetime("us", "UTC")},
    )


@pytest.fixture
def truth() -> Truth:
    return Truth(world(), {"shop": BASE + "/"})


def test_fresh_seconds_follow_each_fetch_until_the_next_change(truth: Truth) -> None:
    log = fetches(
        (f"{BASE}/a", 0),  # fresh 0..6 h
        (f"{BASE}/a", 3),  # the same version: adds nothing
        (f"{BASE}/a", 12),  # fresh 12..18 h
        (f"{BASE}/b", -24),  # before the window, never changes: fresh all day
        (f"{BASE}/late", 6),  # before it was born: ignored
        (f"{BASE}/dead", 3),  # fresh 3..12 h, when it dies
        (f"{BASE}/private/x", 0),  # not scored
        ("http://elsewhere.test/a", 0),  # unknown: ignored
    )
    table = truth.freshness_table(log, S, S + 24 * H).sort("url")
    assert table["url"].to_list() == [f"{BASE}/{p}" for p in ("a", "b", "dead", "late")]
    assert table["alive_seconds"].to_list() == [86_400.0, 86_400.0, 43_200.0, 43_200.0]
    assert table["fresh_seconds"].to_list() == [43_200.0, 86_400.0, 32_400.0, 0.0]
    assert table["freshness"].to_list() == [0.5, 1.0, 0.75, 0.0]
    assert table["host"].unique().to_list() == ["shop.test"]
    # weights: value x alive time
    expected = (1 * 43_200 + 3 * 86_400 + 32_400) / (86_400 + 3 * 86_400 + 43_200 + 43_200)
    assert truth.weighted_freshness(log, S, S + 24 * H) == pytest.approx(expected, rel=1e-12)
    assert truth.weighted_freshness(fetches(), S, S + 24 * H) == 0.0
    with pytest.raises(ValueError, match="end before start"):
        truth.freshness_table(log, S, S - H)


def test_naive_fetch_times_are_utc(truth: Truth) -> None:
    aware = fetches((f"{BASE}/a", 0))
    naive = aware.with_columns(pl.col("fetched_at").dt.replace_time_zone(None))
    window = (S, S + 24 * H)
    assert truth.weighted_freshness(naive, *window) == truth.weighted_freshness(aware, *window)


def test_the_round_robin_baseline_fetches_the_least_recently_fetched_live_pages(
    truth: Truth,
) -> None:
    cycles = [S + k * 6 * H for k in range(4)]
    picks = truth.uniform_fetches(1, cycles)
    # ties by URL; /dead is gone at 12 h, /late born then, the disallowed page never picked
    assert list(zip(picks["url"], picks["fetched_at"], strict=True)) == [
        (f"{BASE}/a", cycles[0]),
        (f"{BASE}/b", cycles[1]),
        (f"{BASE}/late", cycles[2]),
        (f"{BASE}/a", cycles[3]),
    ]
    # what was fetched before counts: /a an hour ago, so /b goes first
    earlier = fetches((f"{BASE}/a", -1))
    assert truth.uniform_fetches(1, cycles[:1], earlier)["url"].to_list() == [f"{BASE}/b"]
    assert truth.uniform_fetches(0, cycles).height == 0
    assert truth.uniform_baseline(1, cycles, S, S + 24 * H) == truth.weighted_freshness(
        picks, S, S + 24 * H
    )


def test_a_url_is_found_in_the_spellings_a_normalizer_may_keep(truth: Truth) -> None:
    for spelling in (
        f"{BASE}/a",
        "HTTP://Shop.TEST/a",
        "http://shop.test:80/a",
        f"{BASE}/a#top",
        f"{BASE}/a?utm=1",
        f"{BASE}/x/../a",
        f"{BASE}/%61",
        f"{BASE}/p/0",  # the server's redirect alias of page 0
        f"  {BASE}/a ",
    ):
        assert spelling in truth and truth.page(spelling).path == "/a", spelling
    for stranger in ("ftp://shop.test/a", f"{BASE}/p/99", f"{BASE}/nope", "http://other.test/a"):
        assert stranger not in truth
    with pytest.raises(KeyError):
        truth.page(f"{BASE}/nope")
    assert 42 not in truth  # type: ignore[operator]


def test_the_truth_of_each_page(truth: Truth) -> None:
    a = f"{BASE}/a"
    assert truth.urls() == [f"{BASE}{p.path}" for p in world().pages]
    assert (truth.value(f"{BASE}/b"), truth.url_class(f"{BASE}/b"), truth.rate(f"{BASE}/b")) == (
        3.0,
        "product",
        1.5,
    )
    assert [truth.version_at(a, S + h * H) for h in (0, 6, 17, 18, 30)] == [0, 1, 1, 2, 2]
    assert truth.change_counts(a, S, S + 18 * H) == 2
    assert truth.change_counts(a, S + 6 * H, S + 18 * H) == 1  # (t0, t1]: 6 h is out
    assert truth.is_alive(f"{BASE}/dead", S + 11 * H) and not truth.is_alive(
        f"{BASE}/dead", S + 12 * H
    )
    assert truth.disallowed(f"{BASE}/private/x") and not truth.disallowed(a)
    frame = truth.frame()
    assert frame.height == 5 and frame["disallowed"].sum() == 1
    dies = dict(zip(frame["path"], frame["dies_at"], strict=True))
    assert dies["/a"] is None and dies["/dead"] == S + 12 * H


def get(url: str) -> int:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return err.code


def test_the_served_web_answers_as_its_truth_says() -> None:
    with SyntheticWeb(world()) as web:
        truth = web.truth()
        assert truth.base_urls == {"shop": web.base_urls["shop"]}
        host = urllib.parse.urlsplit(web.base_urls["shop"]).hostname
        assert host is not None and ipaddress.ip_address(host).is_loopback
        for hours in (6, 13):
            now: datetime = S + hours * H
            web.set_now(now)
            for url in truth.urls():
                if truth.is_alive(url, now):
                    expected = 200
                elif truth.page(url).born_at > now.timestamp():
                    expected = 404  # not born yet: nothing there
                else:
                    expected = truth.page(url).death_status
                assert get(url) == expected, (url, hours)
