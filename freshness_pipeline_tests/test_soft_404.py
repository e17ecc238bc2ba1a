"""A page that answers a permanent redirect to its site's home page, or to a page we knew beside
it, is gone (a soft 404): shops send a discontinued product to its category, and taken as a
move it stayed 'active' with its last price exported as current, no tombstone sent. A page
that moved to a URL of its own, or a temporary redirect, is still a move."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from aiohttp import web
from typer.testing import CliRunner

from freshness_pipeline.app.cli import app
from freshness_pipeline.app.runner import load_seeds
from freshness_pipeline.science.redirects import soft_404_redirects
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.support import run_cycles, serve_on_loopback

T0 = datetime(2026, 3, 2, tzinfo=UTC)
DAY = timedelta(days=1)


def _page(title: str) -> web.Response:
    body = f"<html><title>{title}</title><body><main><p>{title} for sale, in stock.</p></main>"
    return web.Response(text=body + "</body></html>", content_type="text/html")


@pytest.mark.parametrize("seeded_at", [T0, T0 + 300 * DAY], ids=["on-its-clock", "seeded-later"])
def test_a_redirect_to_a_known_page_or_the_home_page_is_gone_and_a_move_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seeded_at: datetime
) -> None:
    """``seeded-later``: the seeds loaded at a wall clock after the crawl's own (cycles dated
    before the seeding, as a backfill or a simulation runs them): they are first seen at the
    first cycle, not after their own fetches, and the category is still a page known before."""
    monkeypatch.setenv("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    redirects: dict[str, tuple[int, str]] = {}

    async def handle(request: web.Request) -> web.Response:
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")
        if request.path in redirects:
            status, to = redirects[request.path]
            return web.Response(status=status, headers={"Location": to})
        return _page(request.path)

    home = tmp_path / "home"
    with serve_on_loopback(handle) as base:
        paths = ["/", "/c/lamps", "/p/lamp", "/p/desk", "/p/vase", "/p/pen"]
        seeds = "url\n" + "".join(f"{base}{p}\n" for p in paths)
        load_seeds(home, seeds.encode(), added_at=seeded_at)
        run_cycles(home, T0, 1, every=DAY)
        redirects.update(
            {
                "/p/lamp": (301, "/c/lamps"),  # discontinued: sent to its category
                "/p/vase": (308, f"{base}/"),  # removed: sent home
                "/p/desk": (301, "/p/desk-2"),  # moved to a URL of its own
                "/p/pen": (302, "/c/pens"),  # out for now, back later
            }
        )
        run_cycles(home, T0, 2, first=1, every=DAY)  # the next reads where they pointed
    wh = Warehouse(home)
    t1 = T0 + DAY
    log = wh.read("fetch_log").filter(pl.col("fetched_at") == t1)
    answer = {
        r["url"].removeprefix(base): (r["http_status"], r["outcome"])
        for r in log.iter_rows(named=True)
    }
    assert answer["/p/lamp"] == (301, "gone")
    assert answer["/p/vase"] == (308, "gone")
    assert answer["/p/desk"] == (301, "redirect")
    assert answer["/p/pen"] == (302, "redirect")
    results = wh.read("fetch_results").filter(pl.col("url") == f"{base}/p/lamp")
    assert results["error"].item().startswith("soft 404: HTTP 301 to a page known")
    state = {r["url"].removeprefix(base): r for r in wh.read("url_state").iter_rows(named=True)}
    assert state["/p/lamp"]["status"] == "gone" and state["/p/lamp"]["gone_at"] == t1
    assert state["/p/vase"]["status"] == "gone"
    assert state["/p/desk"]["status"] == "active"
    assert state["/p/desk"]["redirect_to"] == f"{base}/p/desk-2"
    assert all(state[p]["first_seen_at"] == T0 for p in paths)
    # the category is not taken for where the dead product went: it keeps its own record
    inventory = wh.read("url_inventory")
    pointed = inventory.filter(pl.col("source") == "redirect")["url"].to_list()
    assert f"{base}/p/desk-2" in pointed and f"{base}/c/lamps" not in pointed
    assert f"{base}/c/pens" in pointed
    exported = CliRunner().invoke(
        app, ["export", "--since", t1.isoformat(), "--home", str(home), "--out", "-"]
    )
    assert exported.exit_code == 0, exported.output
    rows = [json.loads(line) for line in exported.stdout.splitlines() if line.strip()]
    tombstones = {r["url"].removeprefix(base) for r in rows if r.get("status") == "gone"}
    assert all(r["url"] != f"{base}/p/lamp" for r in rows if r.get("status") != "gone")
    assert tombstones == {"/p/lamp", "/p/vase"}


def _verdicts(rows: list[tuple[str, int, str]], pages: dict[str, tuple[datetime, datetime]]):
    results = pl.DataFrame(
        [(u, "redirect", s, to, None) for u, s, to in rows],
        schema={
            "url": pl.String,
            "outcome": pl.String,
            "http_status": pl.Int64,
            "location": pl.String,
            "error": pl.String,
        },
        orient="row",
    )
    known = pl.DataFrame(
        [(u, seen, version) for u, (seen, version) in pages.items()],
        schema={
            "url": pl.String,
            "first_seen_at": pl.Datetime("us", "UTC"),
            "version_observed_at": pl.Datetime("us", "UTC"),
        },
        orient="row",
    )
    out = soft_404_redirects(results, known)
    return dict(zip(out["url"], out["outcome"], strict=True))


def test_which_redirects_are_soft_404s() -> None:
    site = "http://shop.example"
    pages = {
        f"{site}/old": (T0, T0 + 2 * DAY),
        f"{site}/c/a": (T0, T0 + 3 * DAY),
        f"{site}/late": (T0 + 3 * DAY, T0 + 3 * DAY),  # appeared after /old's last version
        f"{site}/": (T0, None),
        f"{site}/never": (T0, None),  # no version of its own: nothing to compare
    }
    got = _verdicts(
        [
            (f"{site}/old", 301, f"{site}/c/a"),
            (f"{site}/moved", 301, f"{site}/late"),
            (f"{site}/away", 301, "http://www.shop.example/"),  # home, www. aside
            (f"{site}/elsewhere", 301, "http://other.example/"),  # another site's home
            (f"{site}/q", 301, f"{site}/?from=q"),  # a query: not simply the home page
            ("http://www.shop.example/", 301, f"{site}/"),  # a home page going home
            (f"{site}/never", 301, f"{site}/c/a"),
            (f"{site}/temp", 307, f"{site}/"),
        ],
        {**pages, f"{site}/moved": (T0, T0 + 2 * DAY)},
    )
    assert got == {
        f"{site}/old": "gone",
        f"{site}/moved": "redirect",
        f"{site}/away": "gone",
        f"{site}/elsewhere": "redirect",
        f"{site}/q": "redirect",
        "http://www.shop.example/": "redirect",
        f"{site}/never": "redirect",
        f"{site}/temp": "redirect",
    }
