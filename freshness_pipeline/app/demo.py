"""`freshness demo`: the whole product on a synthetic web whose truth we know.

The synthetic web runs on loopback with a simulated clock; each cycle sets the clock to the
cycle's ``now`` and runs the same Dagster graph a real crawl runs. At the end the ground truth
scores the crawl (value-weighted share of time our copy matched the live page) against a
round-robin crawler given the same budget at the same cycle times.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from freshness_pipeline.app.report import latest_cycle_time, open_views, print_report, report_totals
from freshness_pipeline.app.runner import DEMO_MARKER as MARKER
from freshness_pipeline.app.runner import load_seeds, open_instance, run_cycle
from freshness_pipeline.synthweb import DEFAULT_START, SyntheticWeb, build_world
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.storage import HOME_ENV, Warehouse, resolve_home
from freshness_pipeline.web.netguard import ALLOW_ENV

CYCLE = timedelta(hours=6)
LOOPBACK = "127.0.0.0/8"


class DemoError(RuntimeError):
    pass


def prepare_home(home: Path, *, from_env: bool = False) -> None:
    """A demo home is wiped and rebuilt; any other home with data is refused, not overwritten.
    ``from_env``: $FRESHNESS_HOME chose the home, which the refusal says: a user with their
    crawl's home exported was refused their own folder and left to work out why."""
    marker = home / MARKER
    if (home / "warehouse").exists() and not marker.exists():
        chosen, way_out = (
            (f" (chosen by ${HOME_ENV})", f"unset {HOME_ENV} or pass --home")
            if from_env
            else ("", "pass --home")
        )
        raise DemoError(
            f"{home}{chosen} holds a warehouse that the demo did not create; {way_out} to an "
            "empty folder (the demo resets its home on every run)"
        )
    for name in ("warehouse", "archive", "dagster", "freshness.duckdb", "freshness.duckdb.wal"):
        path = home / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    home.mkdir(parents=True, exist_ok=True)
    marker.write_text("created by `freshness demo`; the demo resets this folder\n")


def allow_loopback() -> None:
    current = [p for p in os.environ.get(ALLOW_ENV, "").split(",") if p.strip()]
    if LOOPBACK not in current:
        os.environ[ALLOW_ENV] = ",".join([*current, LOOPBACK])


def _print_report(warehouse: Warehouse, console: Console) -> None:
    """The demo promises the report (the README says so): the same tables, as of the same newest
    cycle, that `freshness report` shows afterwards."""
    with open_views(warehouse) as (views, note):
        if note:
            console.print(f"note: {note}")
        print_report(views, latest_cycle_time(views), console)


def run_demo(
    home: str | Path | None,
    *,
    cycles: int = 24,
    budget_share: float = 0.1,
    seed: int = 0,
    console: Console | None = None,
) -> dict[str, float]:
    console = console or Console()
    home_path = resolve_home(home)
    prepare_home(home_path, from_env=not home and bool(os.environ.get(HOME_ENV)))
    allow_loopback()
    os.environ.pop("DAGSTER_HOME", None)  # the demo's instance lives in its own home
    start = DEFAULT_START
    world = build_world(seed, start=start, horizon_days=cycles * CYCLE / timedelta(days=1) + 1)
    warehouse = Warehouse(home_path)
    # closed with the web: its kept-open event-log databases and their WAL files
    with open_instance(home_path) as instance, SyntheticWeb(world) as web:
        web.set_now(start)
        truth = web.truth()
        with tempfile.TemporaryDirectory() as tmp:
            seeds_path = web.seeds_csv(Path(tmp) / "seeds.csv", at=start)
            load_seeds(home_path, seeds_path.read_bytes(), added_at=start)
        crawlable = [u for u in truth.urls() if not truth.disallowed(u)]
        budget = max(1, round(budget_share * len(crawlable)))
        console.print(
            f"synthetic web: {len(web.base_urls)} sites on loopback, {len(crawlable)} crawlable pages; "
            f"budget {budget} fetches per 6 h cycle, {cycles} cycles"
        )
        cycle_times = [start + i * CYCLE for i in range(cycles)]
        durations: list[float] = []
        progress = Progress(
            TextColumn("[bold]cycle"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[now]}"),
            TimeElapsedColumn(),
            console=console,
        )
        with progress:
            task = progress.add_task("cycles", total=cycles, now="")
            for now in cycle_times:
                web.set_now(now)
                progress.update(task, now=f"{now:%Y-%m-%d %H:%M}")
                began = time.perf_counter()
                run_cycle(home_path, now, budget=budget, instance=instance)
                durations.append(time.perf_counter() - began)
                progress.advance(task)
        end = cycle_times[-1] + CYCLE
        fetches = (
            warehouse.read("fetch_log")
            .filter(pl.col("outcome").is_in(tables.SUCCESS_OUTCOMES))
            .select("url", "fetched_at")
        )
        ours = truth.weighted_freshness(fetches, start, end)
        uniform = truth.uniform_baseline(budget, cycle_times, start, end)
    totals = report_totals(warehouse, end).row(0, named=True)
    summary = {
        "weighted_freshness": ours,
        "uniform_freshness": uniform,
        "ratio": ours / uniform if uniform else float("nan"),
        "cycle_mean_s": sum(durations) / len(durations),
        "cycle_max_s": max(durations),
        "share_304": totals["share_304"] or 0.0,
        "unchanged_share": totals["unchanged_share"] or 0.0,
        "requests_per_change": totals["requests_per_change"] or float("nan"),
    }
    table = Table(title=f"Demo: {cycles} cycles of 6 h, {budget} fetches per cycle")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("value-weighted freshness, freshness-pipeline", f"{ours:.3f}")
    table.add_row("value-weighted freshness, round robin (same budget)", f"{uniform:.3f}")
    table.add_row("ratio", f"{summary['ratio']:.3f}")
    table.add_row("requests sent", str(totals["requests"]))
    table.add_row("304 share of conditional requests", f"{summary['share_304']:.3f}")
    table.add_row("unchanged share of re-fetched bodies", f"{summary['unchanged_share']:.3f}")
    table.add_row("requests per detected change", f"{summary['requests_per_change']:.2f}")
    table.add_row("pages gone / blocked", f"{totals['gone']} / {totals['blocked']}")
    table.add_row(
        "cycle time, mean / max (s)",
        f"{summary['cycle_mean_s']:.2f} / {summary['cycle_max_s']:.2f}",
    )
    console.print(table)
    _print_report(warehouse, console)
    _print_crawled_copy(warehouse, home_path, console, since=cycle_times[-1])
    example = "SELECT status, count(*) FROM url_state GROUP BY 1"
    console.print(
        f"DuckDB views are ready in {warehouse.duckdb_path}\n"
        f"  Python:     python -c \"import duckdb; print(duckdb.connect('{warehouse.duckdb_path}', "
        f"read_only=True).sql('{example}'))\"\n"
        # pip installs DuckDB's Python package, not its CLI: what works after the install first
        f"  DuckDB CLI, if installed: duckdb -readonly {warehouse.duckdb_path}\n"
        f"Report: freshness report --home {home_path}"
    )
    return summary


#: lines of the example diff the demo shows (the command shows all of it)
DIFF_LINES_SHOWN = 24


def _print_crawled_copy(
    warehouse: Warehouse, home: Path, console: Console, *, since: datetime
) -> None:
    """The copy the crawl kept, as a user first meets it: the newest change of one page as
    `freshness diff` shows it, and where the WARC archive is."""
    from freshness_pipeline.app.crawled_copy import version_diff
    from freshness_pipeline.warehouse.archive import archive_dir_for, list_warcs

    changed = warehouse.query(
        "SELECT url FROM changes WHERE len(changed_fields) > 0 OR text_lines_added > 0 "
        "ORDER BY changed_at DESC, url LIMIT 1"
    )
    if changed.height:
        url = changed["url"][0]
        diff = version_diff(warehouse, url)
        lines = diff.plain().splitlines()
        console.print(f"The newest change of {url}, as `freshness diff` shows it:")
        for line in lines[:DIFF_LINES_SHOWN]:
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        if len(lines) > DIFF_LINES_SHOWN:
            console.print(f"... ({len(lines) - DIFF_LINES_SHOWN} more lines)")
        console.print(f'  freshness diff "{url}" --home {home}')
    archive = archive_dir_for(home)
    warcs = list_warcs(archive)
    console.print(
        f"Archive: {len(warcs)} WARC files in {archive} (every request and response, unchanged "
        "pages as revisit records), with CDXJ indexes for replay.\n"
        f"The last cycle's new and changed pages: freshness export --since {since.isoformat()} "
        f"--home {home}"
    )
