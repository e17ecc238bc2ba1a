"""A placeholder served with HTTP 200 in place of a host's pages, titled with the site's own name
so that no error-page phrase gives it away: several pages that read differently before read the
same now. Found by an exploratory run: each page it stood in for was a false change, then
another when the page came back, and a version of the page it never had."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from aiohttp import web

from freshness_pipeline.app.runner import load_seeds
from freshness_pipeline.stages.placeholders import MIN_PAGES, placeholder_answers
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.support import run_cycles, serve_on_loopback

T0 = datetime(2026, 5, 4, tzinfo=UTC)
WORDS = ["harbour", "lantern", "meadow", "quartz", "saffron", "timber"]
NOTICE = (
    "<html><head><title>ACME Store</title></head><body><main><p>Our store is closed for an "
    "upgrade tonight. Thank you for your patience, we will be back with new arrivals soon.</p>"
    "</main></body></html>"
)


def page(n: int) -> str:
    word = WORDS[n % len(WORDS)]
    return (
        f"<html><head><title>ACME Store: {word}</title></head><body><main><p>The {word} "
        f"collection, item {word} {word}, described at length for anyone who asks.</p></main>"
        "</body></html>"
    )


@pytest.mark.usefixtures("loopback_crawl")
def test_a_host_wide_placeholder_is_no_version_and_no_change(tmp_path: Path) -> None:
    state = {"closed": False}
    shell = (
        "<html><head><title>App</title></head><body><div id=app>Loading the app</div></body></html>"
    )

    async def handle(request: web.Request) -> web.Response:
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")
        if request.path == "/sitemap.xml":
            return web.Response(status=404)
        if request.path.startswith("/app/"):  # an app shell: every page reads alike, always
            return web.Response(text=shell, content_type="text/html")
        n = int(request.path.rsplit("/", 1)[1])
        body = NOTICE if state["closed"] else page(n)
        return web.Response(text=body, content_type="text/html")

    home = tmp_path / "home"
    with serve_on_loopback(handle) as base:
        urls = [f"{base}/item/{n}" for n in range(5)] + [f"{base}/app/{n}" for n in range(4)]
        load_seeds(home, ("url\n" + "\n".join(urls) + "\n").encode(), added_at=T0)
        run_cycles(home, T0, 1)
        state["closed"] = True
        run_cycles(home, T0, 1, first=1)
        state["closed"] = False
        run_cycles(home, T0, 1, first=2)
    wh = Warehouse(home)
    log = wh.read("fetch_log").with_columns(item=pl.col("url").str.contains("/item/"))
    at = [T0 + k * timedelta(hours=6) for k in range(3)]
    by_cycle = {
        (t, item): sorted(
            log.filter((pl.col("fetched_at") == t) & (pl.col("item") == item))["outcome"]
        )
        for t in at
        for item in (True, False)
    }
    assert by_cycle[(at[0], True)] == ["new"] * 5
    assert by_cycle[(at[1], True)] == ["error"] * 5  # the notice, not a change
    assert by_cycle[(at[2], True)] == ["unchanged"] * 5  # back: the same pages as before
    assert (
        "placeholder served with HTTP 200" in log.filter(pl.col("outcome") == "error")["error"][0]
    )
    # the app shell's pages read alike from the start: not a placeholder
    assert set(log.filter(~pl.col("item"))["outcome"]) <= {"new", "unchanged", "not_modified"}
    versions = wh.read("page_versions")
    assert versions.filter(pl.col("text").str.contains("closed for an upgrade")).height == 0
    assert wh.read("changes").height == 0


def test_first_copies_alike_on_a_host_whose_pages_differ_are_a_placeholder() -> None:
    """A cold start that met the notice: never-fetched pages at other paths answering alike,
    with content none of the host's pages has, on a host whose pages read differently."""
    k = MIN_PAGES
    known = [f"http://h.example/p/{i}" for i in range(k)]
    fresh = [f"http://h.example/q/{i}" for i in range(k)]

    def answers(known_fps: list[str]) -> pl.DataFrame:
        raw = pl.DataFrame(
            {
                "url": fresh,
                "host": ["h.example"] * k,
                "outcome": ["new"] * k,
                "fingerprint": ["notice"] * k,
                "error": [None] * k,
            },
            schema_overrides={"error": pl.String},
        )
        plan = pl.DataFrame(
            {
                "url": known + fresh,
                "host": ["h.example"] * (2 * k),
                "fingerprint": [*known_fps, *([None] * k)],
            }
        )
        return placeholder_answers(raw, plan)

    assert answers([f"f{i}" for i in range(k)])["outcome"].to_list() == ["error"] * k
    # an app shell: the host's pages always read alike, and the new ones read as they do
    assert answers(["notice"] * k)["outcome"].to_list() == ["new"] * k
    assert answers(["shell"] * k)["outcome"].to_list() == ["new"] * k


def test_fewer_pages_than_the_minimum_or_pages_alike_before_are_left_alone() -> None:
    def frames(last: list[str | None], now: list[str], outcome: list[str]) -> pl.DataFrame:
        n = len(now)
        raw = pl.DataFrame(
            {
                "url": [f"u{i}" for i in range(n)],
                "host": ["h"] * n,
                "outcome": outcome,
                "fingerprint": now,
                "error": [None] * n,
            },
            schema_overrides={"error": pl.String},
        )
        plan = pl.DataFrame(
            {"url": [f"u{i}" for i in range(n)], "host": ["h"] * n, "fingerprint": last}
        )
        return placeholder_answers(raw, plan)

    k = MIN_PAGES
    few = frames([f"a{i}" for i in range(k - 1)], ["x"] * (k - 1), ["changed"] * (k - 1))
    assert few["outcome"].to_list() == ["changed"] * (k - 1)
    alike = frames(["a"] * k, ["x"] * k, ["changed"] * k)  # one page under k URLs: not this
    assert alike["outcome"].to_list() == ["changed"] * k
    # k pages that differed now read alike, and a new page with the same content: all four
    spread = frames(
        [*(f"a{i}" for i in range(k)), None], ["x"] * (k + 1), ["changed"] * k + ["new"]
    )
    assert spread["outcome"].to_list() == ["error"] * (k + 1)
    assert spread["fingerprint"].to_list() == [None] * (k + 1)


def test_one_page_under_several_spellings_is_one_page_not_a_placeholder() -> None:
    """``/p/3``, ``/p/3/``, ``/P/3`` and ``/p/3/index.html`` read alike, each naming ``/p/3``
    its canonical, and their last versions differ by when each was fetched: counted as four
    pages, every change of the page was taken for a placeholder and its new version dropped
    (found on an exploratory web). Pages are counted by the document they name."""
    base = "http://h.example"
    spellings = [f"{base}/p/3", f"{base}/p/3/", f"{base}/P/3", f"{base}/p/3/index.html"]
    raw = pl.DataFrame(
        {
            "url": [*spellings, f"{base}/p/3/?ref=x"],
            "host": ["h.example"] * 5,
            "outcome": ["changed"] * 4 + ["new"],
            "fingerprint": ["v9"] * 5,
            "error": [None] * 5,
            "canonical": [None, *spellings[:1] * 4],
        },
        schema_overrides={"error": pl.String, "canonical": pl.String},
    )
    plan = pl.DataFrame(
        {
            "url": [*spellings, f"{base}/p/3/?ref=x", f"{base}/p/4", f"{base}/p/5"],
            "host": ["h.example"] * 7,
            "fingerprint": ["v8", "v7", "v5", "v6", None, "w", "z"],
        }
    )
    out = placeholder_answers(raw, plan)
    assert out["outcome"].to_list() == ["changed"] * 4 + ["new"]
    assert out["fingerprint"].to_list() == ["v9"] * 5
    # three pages of their own that read differently and now alike are still a placeholder,
    # whatever spellings of one of them answered beside
    others = raw.with_columns(
        url=pl.Series([f"{base}/p/3", f"{base}/p/4", f"{base}/p/5", f"{base}/P/3", f"{base}/x"]),
        canonical=pl.Series([None, None, None, f"{base}/p/3", None], dtype=pl.String),
    )
    plan_others = plan.with_columns(
        url=pl.Series(
            [f"{base}/p/3", f"{base}/p/4", f"{base}/p/5", f"{base}/P/3", f"{base}/x", "a", "b"]
        ),
        fingerprint=pl.Series(["v8", "w", "z", "v6", None, None, None]),
    )
    assert placeholder_answers(others, plan_others)["outcome"].to_list() == ["error"] * 5
