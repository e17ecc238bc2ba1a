"""Real cycles over the synthetic web, for tests that look at the tables after each one."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

from freshness_pipeline.runner import load_seeds, run_cycle
from freshness_pipeline.synthweb import DEFAULT_START, SyntheticWeb


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
