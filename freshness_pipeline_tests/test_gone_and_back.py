"""A page that answers 404 for one cycle (a deploy glitch) and then comes back unchanged, over
real cycles on the synthetic web: it is gone at once (its tombstone exported), checked again a
day later rather than a month, and back as a new version that the next export hands
downstream, although its content never changed."""

from __future__ import annotations

import dataclasses
import json
import os
from datetime import timedelta

import polars as pl
from typer.testing import CliRunner

from freshness_pipeline.app.cli import app
from freshness_pipeline.synthweb import DEFAULT_START, Page, SyntheticWeb, World
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.crawls import crawl, hand_page, shop_world

BLIPPED = "/products/lamp"


class BlippingWorld(World):
    """The hand-built shop, except that one page answers 404 while ``blip`` is set."""

    blip = False

    def page_at(self, site: str, path: str) -> Page | None:
        page = super().page_at(site, path)
        if page is not None and path == BLIPPED and self.blip:
            return dataclasses.replace(page, dies_at=float("-inf"), death_status=404)
        return page


def _world() -> BlippingWorld:
    base = shop_world(
        [hand_page(0, BLIPPED, "product"), hand_page(1, "/products/chair", "product")], seed=9
    )
    return BlippingWorld(
        seed=9, start=DEFAULT_START, horizon_days=3.0, sites=base.sites, pages=base.pages
    )


def _export(home, since, until=None) -> list[dict]:
    window = ["--since", since.isoformat(), *(["--until", until.isoformat()] if until else [])]
    result = CliRunner().invoke(app, ["export", *window, "--home", str(home), "--out", "-"])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def test_a_404_blip_is_gone_for_a_day_and_comes_back_downstream(tmp_path) -> None:
    os.environ.setdefault("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    home = tmp_path / "home"
    world = _world()
    cycles = []
    with SyntheticWeb(world) as web:
        url = web.url(world.pages[0])
        for now in crawl(web, home, tmp_path, 6):
            cycles.append(now)
            if len(cycles) == 2:  # what a consumer exporting after each cycle got then
                after_glitch = _export(home, now)
            # the glitch: the page answers 404 in the second cycle only
            world.blip = len(cycles) == 1
    t_gone, t_back = cycles[1], cycles[5]
    assert t_back - t_gone == timedelta(days=1)

    log = Warehouse(home).read("fetch_log").filter(pl.col("url") == url).sort("fetched_at")
    by_time = {row["fetched_at"]: row for row in log.iter_rows(named=True)}
    assert by_time[t_gone]["outcome"] == "gone" and by_time[t_gone]["http_status"] == 404
    # not asked for again until a day later, and then without validators: its copy was
    # tombstoned, so a 304 would not bring it back
    assert [t for t in by_time if t_gone < t < t_back] == []
    back = by_time[t_back]
    assert (back["http_status"], back["outcome"], back["conditional"]) == (200, "new", False)

    state = Warehouse(home).read("url_state").filter(pl.col("url") == url).row(0, named=True)
    assert state["status"] == "active" and state["gone_at"] is None
    versions = Warehouse(home).read("page_versions").filter(pl.col("url") == url)
    assert sorted(versions["observed_at"].to_list()) == [DEFAULT_START, t_back]

    assert after_glitch == [
        {"url": url, "status": "gone", "gone_at": t_gone.strftime("%Y-%m-%dT%H:%M:%SZ")}
    ]
    returned = [row for row in _export(home, t_back) if row["url"] == url]
    assert len(returned) == 1 and returned[0].get("status") is None
    assert returned[0]["outcome"] == "new" and returned[0]["text"]
    # the glitch's window exported again now that the page is back: the same tombstone (it
    # was read from today's url_state, which no longer says the page was ever gone)
    assert _export(home, t_gone, until=t_gone + timedelta(hours=6)) == after_glitch
    # and a window over the whole spell: the page is back by its end, so no tombstone
    spell = [
        row for row in _export(home, t_gone, until=t_back + timedelta(hours=1)) if row["url"] == url
    ]
    assert [row.get("status") for row in spell] == [None]
