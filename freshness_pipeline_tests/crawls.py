"""Real cycles over the synthetic web, for tests that look at the tables after each one."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from freshness_pipeline.app.runner import load_seeds, run_cycle
from freshness_pipeline.synthweb import DEFAULT_START, SiteSpec, SyntheticWeb, World
from freshness_pipeline.synthweb.world import Page


def crawl(
    web: SyntheticWeb, home: Path, workdir: Path, cycles: int, *, budget: int = 1000
) -> Iterator[datetime]:
    """Seed ``home`` with every page of ``web``, then run ``cycles`` six-hour cycles from
    DEFAULT_START, yielding each cycle's ``now`` once it has run (the web stands still at it)."""
    web.set_now(DEFAULT_START)
    seeds = web.seeds_csv(workdir / "seeds.csv", variants=False).read_bytes()
    load_seeds(home, seeds, added_at=DEFAULT_START)
    for k in range(cycles):
        now = DEFAULT_START + timedelta(hours=6 * k)
        web.set_now(now)
        run_cycle(home, now, budget=budget)
        yield now


def hand_page(
    pid: int,
    path: str,
    url_class: str,
    changes: tuple[int, ...] = (),
    *,
    site: str = "shop",
) -> Page:
    """A page of a hand-built World: alive long before DEFAULT_START and for good, its content
    changing ``changes`` hours after DEFAULT_START (the tests that need pages to move at known
    cycles: prices, edits, re-extraction)."""
    ts = DEFAULT_START.timestamp()
    return Page(
        page_id=pid,
        site=site,
        path=path,
        url_class=url_class,
        value=1.0,
        rate=0.5,
        change_times=np.array([ts + h * 3600 for h in changes], dtype=float),
        born_at=ts - 90 * 86_400,
        dies_at=float("inf"),
        death_status=410,
        disallowed=False,
    )


def shop_world(pages: list[Page], *, seed: int, horizon_days: float = 1.0) -> World:
    """A hand-built World from DEFAULT_START: one honest site, "shop" (ETags and 304s, so a
    page's body comes back only when it changed), holding ``pages``."""
    return World(
        seed=seed,
        start=DEFAULT_START,
        horizon_days=horizon_days,
        sites=[SiteSpec("shop", "honest", len(pages))],
        pages=pages,
    )


def crawl_as_class(
    web: SyntheticWeb, home: Path, workdir: Path, url_class: str, times: list[datetime]
) -> None:
    """Seed ``home`` with every page of ``web`` as ``url_class`` (added at the first of
    ``times``), then run a cycle at each of ``times`` with the web standing at it."""
    web.set_now(times[0])
    seeds = pl.read_csv(web.seeds_csv(workdir / "seeds.csv", variants=False))
    rows = seeds.with_columns(url_class=pl.lit(url_class)).write_csv().encode()
    load_seeds(home, rows, added_at=times[0])
    for now in times:
        web.set_now(now)
        run_cycle(home, now, budget=1000)
