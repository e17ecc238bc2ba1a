"""A page that answers 404 for a while and comes back changed: its version is 'new' again (for
whoever was told it went), and the change is a `changes` row, as the README's price query and
notifications read it. Driven through the CLI over real HTTP."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from aiohttp import web

from freshness_pipeline.warehouse.archive import read_record
from freshness_pipeline_tests.support import LoopThread, run_freshness

START = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Cycles over two lamps, /p/1 and /p/3, at 19.99, gone (404), then back a day and a half
    later, /p/1 at 14.99 and /p/3 at 19.99 again, beside a steady chair (/p/2); the home. (One
    crawl for both tests: each reads its own lamp's rows.)"""
    tmp_path = tmp_path_factory.mktemp("back")
    prices = {"/p/1": {0: "19.99", 2: "14.99"}, "/p/3": {0: "19.99", 2: "19.99"}}
    names = {"/p/1": "Lamp", "/p/3": "Desk lamp"}
    state = {"phase": 0}

    async def product(request: web.Request) -> web.Response:
        phase = state["phase"]
        if request.path not in prices or phase == 1:
            return web.Response(status=404)
        name, price = names[request.path], prices[request.path][phase]
        body = (
            f"<html><title>{name}</title><main><h1>{name}</h1><p>A brass lamp.</p>"
            f'<span class="price">{price}</span></main></html>'
        )
        return web.Response(text=body, content_type="text/html")

    async def steady(request: web.Request) -> web.Response:
        body = '<html><title>Chair</title><main><p>A chair.</p><span class="price">45.00</span></main></html>'
        return web.Response(text=body, content_type="text/html")

    loop = LoopThread()
    app = web.Application()
    app.router.add_get("/p/2", steady)
    app.router.add_get("/{tail:.*}", product)
    runner = web.AppRunner(app)
    home = tmp_path / "home"
    home.mkdir()
    (home / "freshness.toml").write_text('[url_classes.product.fields]\nprice = ".price"\n')
    try:
        loop.run(runner.setup())
        loop.run(web.TCPSite(runner, "127.0.0.1", 0).start())
        base = f"http://127.0.0.1:{runner.addresses[0][1]}"
        seeds = tmp_path / "seeds.csv"
        seeds.write_text("url,url_class\n" + "".join(f"{base}/p/{k},product\n" for k in (1, 2, 3)))
        assert run_freshness("seed", str(seeds), home=home).returncode == 0
        # fetched, then gone (404), then back a day and a half later
        for phase, hours in ((0, 0), (1, 6), (2, 42)):
            state["phase"] = phase
            now = (START + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")
            done = run_freshness("cycle", "--now", now, "--budget", "100", home=home)
            assert done.returncode == 0, done.stderr
    finally:
        loop.run(runner.cleanup())
        loop.close()
    return home


def test_a_price_that_moved_while_the_page_was_gone_is_a_change(home: Path) -> None:
    with duckdb.connect(str(home / "freshness.duckdb"), read_only=True) as con:
        outcomes = con.sql(
            "SELECT outcome FROM page_versions WHERE url LIKE '%/p/1' ORDER BY observed_at"
        ).fetchall()
        changes = con.sql(
            "SELECT url, changed_fields, old_values, new_values, previous_observed_at FROM changes"
        ).fetchall()
    assert [o for (o,) in outcomes] == ["new", "new"]  # back: new again to its consumers
    assert len(changes) == 1, changes  # the lamp back at its price and the chair: none
    url, fields, old, new, previous = changes[0]
    assert url.endswith("/p/1"), changes
    assert fields == ["price", "text"]  # the price is in the text too
    assert json.loads(old) == {"price": "19.99"} and json.loads(new) == {"price": "14.99"}
    assert previous.astimezone(UTC) == START


def test_a_page_back_unchanged_has_its_version_where_its_body_is(home: Path) -> None:
    """Back with the body the archive already held, the fetch wrote a revisit record (no
    payload): the version points at the original it refers to, not at a record without the
    page in it."""
    with duckdb.connect(str(home / "freshness.duckdb"), read_only=True) as con:
        versions = con.sql(
            "SELECT outcome, warc_filename, warc_offset, warc_length FROM page_versions"
            " WHERE url LIKE '%/p/3' ORDER BY observed_at"
        ).fetchall()
        (revisit,) = con.sql(
            "SELECT warc_filename, warc_offset FROM fetch_log"
            " WHERE url LIKE '%/p/3' AND fetched_at = $t",
            params={"t": START + timedelta(hours=42)},
        ).fetchall()
    assert [v[0] for v in versions] == ["new", "new"]
    first, back = (v[1:] for v in versions)
    assert back == first  # the body is where it was first archived
    archive = home / "archive"
    assert read_record(archive, revisit[0], revisit[1]).record_type == "revisit"
    record = read_record(archive, back[0], back[1])
    assert record.record_type == "response" and b"19.99" in record.payload
