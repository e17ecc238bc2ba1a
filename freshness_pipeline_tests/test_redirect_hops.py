"""A fetch that follows redirects to other spellings of its page (a session or tracking
parameter the server adds) sends several requests for one planned page: fetch_log has a row
for each, as its contract says (one row per HTTP request sent), with its own status and WARC
record; fetch_results and url_state keep the page's last answer. A contract audit counted 9
requests in the server's log and the archive, and 4 rows in fetch_log."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from aiohttp import web

from freshness_pipeline.app.runner import load_seeds
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.support import run_cycles, serve_on_loopback

T0 = datetime(2026, 3, 2, tzinfo=UTC)


def _page(title: str) -> web.Response:
    body = f"<html><title>{title}</title><body><main><p>{title}, all about it.</p></main>"
    return web.Response(text=body + "</body></html>", content_type="text/html")


def test_every_request_of_a_fetch_that_followed_redirects_has_its_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    pages: list[str] = []
    minted = itertools.count(1)

    async def handle(request: web.Request) -> web.Response:
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")
        if request.path == "/sitemap.xml":
            return web.Response(status=404)
        pages.append(request.path_qs)
        if request.path == "/tagged" and "utm_source" not in request.query:
            return web.Response(status=301, headers={"Location": "/tagged?utm_source=feed"})
        if request.path == "/session" and len(request.query.getall("sid", [])) < 2:
            # a session id minted per request, twice over before the page is served
            sids = "&".join(f"sid={s}" for s in [*request.query.getall("sid", []), next(minted)])
            return web.Response(status=302, headers={"Location": f"/session?{sids}"})
        return _page(request.path)

    home = tmp_path / "home"
    with serve_on_loopback(handle) as base:
        seeds = "url\n" + "".join(f"{base}{p}\n" for p in ("/plain", "/tagged", "/session"))
        load_seeds(home, seeds.encode(), added_at=T0)
        run_cycles(home, T0, 1)
    wh = Warehouse(home)
    log = wh.read("fetch_log").sort("url", pl.col("hop").fill_null(99))
    assert log.height == len(pages) == 6
    rows = {
        (r["url"].removeprefix(base), r["hop"]): (r["http_status"], r["outcome"])
        for r in log.iter_rows(named=True)
    }
    assert rows == {
        ("/plain", None): (200, "new"),
        ("/tagged", 1): (301, "redirect"),
        ("/tagged", None): (200, "new"),
        ("/session", 1): (302, "redirect"),
        ("/session", 2): (302, "redirect"),
        ("/session", None): (200, "new"),
    }
    assert (log["fetched_at"] == T0).all()
    assert log["plan_reason"].null_count() == 0 and log["plan_reason"].n_unique() == 1
    # each request points at its own record in the archive
    records = log.select("warc_filename", "warc_offset")
    assert records.null_count().sum_horizontal().item() == 0
    assert records.unique().height == log.height
    # the page's answer is what the stage and the state keep
    results = wh.read("fetch_results")
    assert results.height == 3 and set(results["outcome"]) == {"new"}
    assert wh.read("fetch_totals")["requests"].sum() == 6
