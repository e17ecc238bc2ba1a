"""End-to-end quality: the product crawling a web its own tests did not write, through its CLI.

    .venv/bin/python benchmarks/e2e_quality.py                 # 20 hosts, ~3,000 pages, 40 cycles
    .venv/bin/python benchmarks/e2e_quality.py --quick         # the same hosts, ~600 pages, 12 cycles
    .venv/bin/python benchmarks/e2e_quality.py --freshness-bin ../base/.venv/bin/freshness
    .venv/bin/python benchmarks/e2e_quality.py --without lastmod --without validators

A web of twenty hosts on loopback (benchmarks/e2e_web: honest and lying validators, volatile
boilerplate, Crawl-delay and Disallow, a burst-throttled host, slow and flaky hosts, sitemaps
right and wrong, malformed and gzipped, feeds, pages that appear and go) with change events
drawn in advance. The harness sets the web's simulated clock to each cycle's time and runs
``freshness cycle --now <that time> --budget B`` as a subprocess; after each cycle it reads the
views in ``<home>/freshness.duckdb`` read-only. Freshness is scored from the truth and the
server's request log only, next to round robin, Nutch-style adaptive and an oracle simulated
in memory on the same truth, budget and host capacities. A full run writes
docs/e2e_quality.md (``--out`` elsewhere, ``--out ''`` nowhere).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e_web import baselines, score  # noqa: E402
from e2e_web.hosts import HOSTS, HostProfile, scaled_hosts  # noqa: E402
from e2e_web.product import ProductDriver, checkout_of, default_freshness_bin  # noqa: E402
from e2e_web.report import cell, share, table, verdict  # noqa: E402
from e2e_web.server import WebServer  # noqa: E402
from e2e_web.truth import DAY_S, Truth, build_truth  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "docs" / "e2e_quality.md"
BUDGET_SHARE = 0.10
CYCLE_HOURS = 6.0
QUICK_SCALE = 0.2
FULL_CYCLES = 40
QUICK_CYCLES = 12
#: signals a run can take off every host, to see what the crawler learns from fetches alone
WITHOUT = {
    "sitemaps": "no host has a sitemap or a feed: the crawl knows its seeds only, and no new pages appear",
    "lastmod": "no sitemap says when a page changed (every <lastmod> left out)",
    "validators": "no host sends ETag or Last-Modified (every answer a full 200)",
}
TARGET_VS_UNIFORM = 1.05
TARGET_VS_ORACLE = 0.95
TARGET_DEFERRED_SHARE = 0.05
DEFERRED_GRACE_CYCLES = 2
TARGET_NEW_PAGES = 0.95
NEW_PAGE_CYCLES = 3
GONE_CYCLES = 2
TARGET_GONE = 0.95
PRODUCT = "freshness-pipeline"
UNIFORM = "uniform round robin"
NUTCH = "Nutch-style adaptive"
ORACLE = "oracle (true rates and host capacities)"
POLICY_ORDER = (PRODUCT, UNIFORM, NUTCH, ORACLE)
#: what a kept run (--workdir) holds besides the server log and the home
RUN_FILE = "run.json"
FRAMES = ("plans", "results", "gone")  # read after each cycle
TABLES = ("fetch_log", "url_state", "robots", "inventory")  # read at the end
#: true-rate bands (changes per day) for the allocation table
RATE_BANDS = (
    (0.0, 0.0, "static"),
    (0.0, 0.1, "< 0.1"),
    (0.1, 1.0, "0.1-1"),
    (1.0, 10.0, "1-10"),
    (10.0, math.inf, ">= 10"),
)


@dataclass
class ProductRecord:
    """What the harness saw of the product, cycle by cycle."""

    seed_wall_s: float = 0.0
    seed_output: str = ""
    cycle_walls: list[float] = field(default_factory=list)
    failures: list[tuple[int, int, str]] = field(default_factory=list)
    plans: list[pl.DataFrame] = field(default_factory=list)
    results: list[pl.DataFrame] = field(default_factory=list)
    gone: list[pl.DataFrame] = field(default_factory=list)
    notes: Counter[str] = field(default_factory=Counter)
    fetch_log: pl.DataFrame | None = None
    url_state: pl.DataFrame | None = None
    robots: pl.DataFrame | None = None
    inventory: pl.DataFrame | None = None


@dataclass
class PolicyRun:
    """One policy's crawl: its copies per page and cycle, and its fetches per page."""

    copies: pl.DataFrame
    fetches: pl.DataFrame  # page_id, fetches
    seconds: pl.DataFrame = field(init=False)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="~600 pages, 12 cycles (a few minutes)"
    )
    parser.add_argument("--cycles", type=int, default=None, help="cycles (default 40, quick 12)")
    parser.add_argument(
        "--cycle-hours",
        type=float,
        default=CYCLE_HOURS,
        help=f"hours between cycles on the web's clock (default {CYCLE_HOURS:g})",
    )
    parser.add_argument(
        "--budget-share",
        type=float,
        default=BUDGET_SHARE,
        help=f"page fetches per cycle as a share of the starting pages (default {BUDGET_SHARE:g})",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the web's truth")
    parser.add_argument(
        "--without",
        action="append",
        choices=sorted(WITHOUT),
        default=[],
        help="take this signal off every host (repeatable): "
        + "; ".join(f"{k}: {v}" for k, v in WITHOUT.items()),
    )
    parser.add_argument(
        "--out",
        default=None,
        help="markdown report path (default docs/e2e_quality.md for a full run, none for "
        "--quick, --cycles or --rescore; '' for none)",
    )
    parser.add_argument(
        "--freshness-bin",
        type=Path,
        default=default_freshness_bin(),
        help="the `freshness` console script to drive (default: the one next to this python)",
    )
    parser.add_argument(
        "--workdir", type=Path, default=None, help="keep the home, seeds, server log and views here"
    )
    parser.add_argument(
        "--rescore", type=Path, default=None, help="score a kept --workdir again without crawling"
    )
    parser.add_argument(
        "--before",
        type=Path,
        default=None,
        help="a kept --workdir of an earlier product on the same web, set beside this run",
    )
    args = parser.parse_args(argv)
    if args.cycles is not None and args.cycles < 2:
        parser.error("--cycles must be at least 2")
    if not (math.isfinite(args.cycle_hours) and args.cycle_hours > 0):
        parser.error("--cycle-hours must be a positive number")
    if not (math.isfinite(args.budget_share) and 0 < args.budget_share <= 1):
        parser.error("--budget-share must be in (0, 1]")
    return args


# -- driving the product ------------------------------------------------------------------------


def with_page_ids(df: pl.DataFrame, host_keys: list[str], truth: Truth) -> pl.DataFrame:
    """Attach ``page_id`` and the web's host index (``h``) to a frame with a ``url`` column;
    URLs that name no page of the host they are on are dropped."""
    keys = pl.DataFrame({"host_key": host_keys, "h": list(range(len(host_keys)))})
    owners = truth.pages.select("page_id", pl.col("host").alias("owner"))
    return (
        df.with_columns(
            score.page_ids_from_urls(pl.col("url")).alias("page_id"),
            score.hosts_from_urls(pl.col("url")).alias("host_key"),
        )
        .join(keys, on="host_key", how="left")
        .join(owners, on="page_id", how="left")
        .filter(pl.col("owner").is_not_null() & (pl.col("owner") == pl.col("h")))
        .drop("owner", "host_key")
    )


def write_seeds(path: Path, truth: Truth, base_urls: list[str]) -> int:
    """The starting pages as the seed CSV (``url,value``), disallowed ones included."""
    rows = truth.pages.filter(pl.col("initial")).select("host", "path", "value")
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["url", "value"])
        for host, p, value in rows.iter_rows():
            writer.writerow([base_urls[host] + p, f"{value:.6g}"])
    return rows.height


def note_kind(line: str) -> str:
    """A product message with its URLs, hosts and numbers blanked, so like messages count together."""
    text = line.split("note:", 1)[-1] if "note:" in line else line.split(" - ")[-1]
    text = re.sub(r"https?://\S+", "<url>", text.strip())
    text = re.sub(r"\b\d+(\.\d+){3}:\d+\b", "<host>", text)
    return re.sub(r"\d+(\.\d+)?", "N", text)[:160]


def run_product(
    args: argparse.Namespace, truth: Truth, server: WebServer, workdir: Path, budget: int
) -> ProductRecord:
    record = ProductRecord()
    driver = ProductDriver(args.freshness_bin, workdir / "home")
    seeds = workdir / "seeds.csv"
    write_seeds(seeds, truth, server.base_urls)
    server.set_time(0.0)
    record.seed_wall_s, record.seed_output = driver.seed(seeds, truth.clock.iso(0))
    first_line = record.seed_output.splitlines()[0] if record.seed_output else ""
    print(f"seed: {first_line} ({record.seed_wall_s:.1f} s)", flush=True)
    with (workdir / "cycles.log").open("w") as cycles_log:
        for k in range(truth.clock.cycles):
            now = truth.clock.iso(k)
            server.set_time(truth.clock.cycle_time(k))
            run = driver.cycle(k, now, budget)
            record.cycle_walls.append(run.wall_s)
            cycles_log.write(f"== cycle {k} {now} rc={run.returncode} {run.wall_s:.1f}s\n")
            cycles_log.write(run.stdout + run.stderr + "\n")
            cycles_log.flush()
            for line in run.stderr.splitlines():
                if "note:" in line or "WARNING" in line:
                    record.notes[note_kind(line)] += 1
            if run.returncode != 0:
                last = (run.stderr.strip().splitlines() or [""])[-1][:300]
                record.failures.append((k, run.returncode, last))
                print(f"cycle {k:2d} {now}: FAILED rc={run.returncode}: {last}", flush=True)
                continue
            seen = driver.after_cycle(now)
            record.plans.append(seen["plan"].with_columns(pl.lit(k).alias("cycle")))
            record.results.append(seen["results"].with_columns(pl.lit(k).alias("cycle")))
            gone = with_page_ids(seen["gone"], server.host_keys, truth).select("page_id")
            record.gone.append(gone.with_columns(pl.lit(k).alias("cycle")))
            res = seen["results"]
            print(
                f"cycle {k:2d} {now}: {run.wall_s:5.1f} s, planned {int(seen['plan']['planned'].sum())}, "
                f"sent {int(res['sent'].sum())}, "
                f"deferred {int(res.filter(pl.col('outcome') == 'deferred')['n'].sum())}",
                flush=True,
            )
    # A view another version of the product shaped differently costs its tables, not the run.
    for name in TABLES:
        try:
            setattr(record, name, getattr(driver, name)())
        except duckdb.Error as exc:
            print(f"cannot read the product's {name} view: {exc}", flush=True)
    return record


# -- keeping a run ---------------------------------------------------------------------------


def concat(frames: list[pl.DataFrame], schema: dict[str, Any]) -> pl.DataFrame:
    frames = [f for f in frames if f.height]
    return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame(schema=schema)


def save_run(
    workdir: Path, record: ProductRecord, host_keys: list[str], log: pl.DataFrame, meta: dict
) -> None:
    """Keep what the run saw, so that ``--rescore`` can score it again without crawling."""
    log.write_parquet(workdir / "server_log.parquet")
    for name in FRAMES:
        concat(getattr(record, name), {"cycle": pl.Int64}).write_parquet(
            workdir / f"{name}.parquet"
        )
    for name in TABLES:
        frame = getattr(record, name)
        if frame is not None:
            frame.write_parquet(workdir / f"{name}.parquet")
    meta = {
        **meta,
        "host_keys": host_keys,
        "seed_wall_s": record.seed_wall_s,
        "seed_output": record.seed_output,
        "cycle_walls": record.cycle_walls,
        "failures": record.failures,
        "notes": dict(record.notes),
    }
    (workdir / RUN_FILE).write_text(json.dumps(meta, indent=1))


def load_run(workdir: Path) -> tuple[ProductRecord, list[str], pl.DataFrame, dict]:
    path = workdir / RUN_FILE
    if not path.exists():
        raise SystemExit(f"--rescore {workdir}: no {RUN_FILE} there (run with --workdir first)")
    meta = json.loads(path.read_text())
    record = ProductRecord(
        seed_wall_s=meta["seed_wall_s"],
        seed_output=meta["seed_output"],
        cycle_walls=meta["cycle_walls"],
        failures=[(int(k), int(rc), str(msg)) for k, rc, msg in meta["failures"]],
        notes=Counter(meta["notes"]),
    )
    for name in FRAMES:
        setattr(record, name, [pl.read_parquet(workdir / f"{name}.parquet")])
    for name in TABLES:
        if (workdir / f"{name}.parquet").exists():
            setattr(record, name, pl.read_parquet(workdir / f"{name}.parquet"))
    log = pl.read_parquet(workdir / "server_log.parquet")
    return record, meta["host_keys"], log, meta


# -- measuring -----------------------------------------------------------------------------------


@dataclass
class Measures:
    """Everything the report shows, computed once."""

    truth: Truth
    budget: int
    runs: dict[str, PolicyRun]
    overall: dict[str, float]
    second: dict[str, float]
    log: pl.DataFrame
    pages_log: pl.DataFrame
    fetch_log: pl.DataFrame  # the product's, with page_id, h and cycle
    plans: pl.DataFrame  # h, cycle, planned
    results: pl.DataFrame  # h, cycle, outcome, error, n, sent
    deferred: pl.DataFrame  # cycle, n
    sent: pl.DataFrame  # cycle, sent
    disallowed: pl.DataFrame
    delay_gaps: pl.DataFrame
    retry_after: pl.DataFrame
    discovery: dict[str, dict[str, float]]
    gone: pl.DataFrame
    detection: pl.DataFrame | None
    rates: pl.DataFrame | None
    record: ProductRecord
    host_keys: list[str]


def measure(
    truth: Truth,
    budget: int,
    host_keys: list[str],
    log: pl.DataFrame,
    record: ProductRecord,
    runs: dict[str, PolicyRun],
) -> Measures:
    clock = truth.clock
    cycles = clock.cycles
    pages_log = log.filter(pl.col("kind") == "page")
    runs = {
        PRODUCT: PolicyRun(
            score.copies_from_log(truth, log),
            pages_log.group_by("page_id").agg(pl.len().cast(pl.Int64).alias("fetches")),
        ),
        **runs,
    }
    for run in runs.values():
        run.seconds = score.fresh_seconds(truth, run.copies)
    half = cycles // 2
    overall = {name: score.weighted_freshness(r.seconds) for name, r in runs.items()}
    second = {
        name: score.weighted_freshness(r.seconds, from_cycle=half) for name, r in runs.items()
    }

    keymap = {key: i for i, key in enumerate(host_keys)}
    fetch_log = (
        record.fetch_log
        if record.fetch_log is not None
        else pl.DataFrame(schema={"url": pl.String})
    )
    fl = with_page_ids(fetch_log, host_keys, truth)
    if fl.height:
        fl = fl.with_columns(
            ((pl.col("fetched_at").dt.epoch("us") / 1e6 - clock.start.timestamp()) / clock.cycle_s)
            .round()
            .cast(pl.Int64)
            .alias("cycle")
        )
    plans = concat(record.plans, {"host": pl.String, "planned": pl.Int64, "cycle": pl.Int64})
    results = concat(
        record.results,
        {
            "host": pl.String,
            "outcome": pl.String,
            "error": pl.String,
            "n": pl.Int64,
            "sent": pl.Int64,
            "cycle": pl.Int64,
        },
    )
    plans = plans.with_columns(pl.col("host").replace_strict(keymap, default=-1).alias("h"))
    results = results.with_columns(pl.col("host").replace_strict(keymap, default=-1).alias("h"))
    every_cycle = pl.DataFrame({"cycle": np.arange(cycles, dtype=np.int64)})
    deferred = every_cycle.join(
        results.filter(pl.col("outcome") == "deferred").group_by("cycle").agg(pl.col("n").sum()),
        on="cycle",
        how="left",
    ).with_columns(pl.col("n").fill_null(0))
    sent = every_cycle.join(
        pages_log.group_by("cycle").agg(pl.len().alias("sent")), on="cycle", how="left"
    ).with_columns(pl.col("sent").fill_null(0))

    detection = None
    if fl.height:
        detection = score.change_detection(
            runs[PRODUCT].copies, log, fl.select("page_id", "cycle", "outcome")
        )
    rates = None
    if record.url_state is not None and record.url_state.height:
        state = with_page_ids(record.url_state, host_keys, truth)
        estimates = (
            state.filter(pl.col("change_rate").is_not_null())
            .group_by("page_id")
            .agg(pl.col("change_rate").first())
        )
        rates = score.rate_accuracy(truth, estimates, log)
    return Measures(
        truth=truth,
        budget=budget,
        runs=runs,
        overall=overall,
        second=second,
        log=log,
        pages_log=pages_log,
        fetch_log=fl,
        plans=plans,
        results=results,
        deferred=deferred,
        sent=sent,
        disallowed=score.disallowed_requests(truth.hosts, log),
        delay_gaps=score.crawl_delay_gaps(truth.hosts, log),
        retry_after=score.retry_after_violations(log),
        discovery={
            name: score.new_page_discovery(truth, r.copies, within=NEW_PAGE_CYCLES)
            for name, r in runs.items()
        },
        gone=score.gone_marking(
            truth, concat(record.gone, {"page_id": pl.Int64, "cycle": pl.Int64}), within=GONE_CYCLES
        ),
        detection=detection,
        rates=rates,
        record=record,
        host_keys=host_keys,
    )


# -- the report -----------------------------------------------------------------------------------


def ratio(m: Measures, name: str, to: str, *, second: bool = False) -> float:
    scores = m.second if second else m.overall
    return share(scores[name], scores[to])


def targets(m: Measures) -> list[tuple[str, str, str, bool | None]]:
    late = m.deferred.filter(pl.col("cycle") >= DEFERRED_GRACE_CYCLES)
    worst = int(late["n"].max() or 0) if late.height else 0  # type: ignore[arg-type]
    mean_deferred = float(late["n"].mean() or 0.0) if late.height else 0.0  # type: ignore[arg-type]
    max_sent = int(m.sent["sent"].max() or 0)  # type: ignore[arg-type]
    mean_sent = float(m.sent["sent"].mean() or 0.0)  # type: ignore[arg-type]
    delay_violations = int(m.delay_gaps["violations"].sum() or 0)
    new = m.discovery[PRODUCT]
    listed = m.gone.filter(pl.col("listed"))
    unlisted = m.gone.filter(~pl.col("listed"))
    listed_share = share(float(listed["on_time"].sum()), listed.height)
    unlisted_share = share(float(unlisted["on_time"].sum()), unlisted.height)
    unlisted_ever = share(float(unlisted["marked_cycle"].is_not_null().sum()), unlisted.height)
    rows: list[tuple[str, str, str, bool | None]] = []
    for second in (False, True):
        when = "second half" if second else "all cycles"
        vs_uniform = ratio(m, PRODUCT, UNIFORM, second=second)
        vs_oracle = ratio(m, PRODUCT, ORACLE, second=second)
        rows.append(
            (
                f"crawler / uniform round robin ({when})",
                f"{vs_uniform:.3f}",
                f">= {TARGET_VS_UNIFORM}",
                vs_uniform >= TARGET_VS_UNIFORM,
            )
        )
        rows.append(
            (
                f"crawler / oracle ({when})",
                f"{vs_oracle:.3f}",
                f">= {TARGET_VS_ORACLE}",
                vs_oracle >= TARGET_VS_ORACLE,
            )
        )
    rows += [
        (
            f"deferred per cycle after the first {DEFERRED_GRACE_CYCLES} (worst; mean)",
            f"{worst} ({share(worst, m.budget):.1%}); {mean_deferred:.1f}",
            f"<= {TARGET_DEFERRED_SHARE:.0%} of {m.budget}",
            worst <= TARGET_DEFERRED_SHARE * m.budget,
        ),
        (
            "page requests sent per cycle (max; mean)",
            f"{max_sent}; {mean_sent:.1f}",
            f"<= budget {m.budget}",
            max_sent <= m.budget,
        ),
        ("requests to disallowed paths", str(m.disallowed.height), "0", m.disallowed.height == 0),
        (
            f"Crawl-delay violations (gap < delay - {score.CRAWL_DELAY_TOLERANCE_S * 1000:.0f} ms)",
            str(delay_violations),
            "0",
            delay_violations == 0,
        ),
        (
            "Retry-After violations (a request during the pause)",
            str(m.retry_after.height),
            "0",
            m.retry_after.height == 0,
        ),
        (
            f"new pages fetched within {NEW_PAGE_CYCLES} cycles of appearing",
            f"{_percent(new['share'])} of {int(new['eligible'])} (ever: {_percent(new['ever_share'])})",
            f">= {TARGET_NEW_PAGES:.0%}",
            new["share"] >= TARGET_NEW_PAGES if new["eligible"] else None,
        ),
        (
            f"gone pages marked gone within {GONE_CYCLES} cycles, hosts with a sitemap or feed",
            f"{_percent(listed_share)} of {listed.height}",
            f">= {TARGET_GONE:.0%}",
            listed_share >= TARGET_GONE if listed.height else None,
        ),
        (
            f"gone pages marked gone within {GONE_CYCLES} cycles, hosts without",
            f"{_percent(unlisted_share)} of {unlisted.height} (ever: {_percent(unlisted_ever)})",
            "(no signal but a fetch)",
            None,
        ),
        (
            "cycles that failed (exit code != 0)",
            str(len(m.record.failures)),
            "0",
            not m.record.failures,
        ),
    ]
    return rows


def _percent(x: float) -> str:
    """A share as a percentage; a share of nothing (no such page on this web) as a dash."""
    return "—" if math.isnan(x) else f"{x:.1%}"


def _lookup(df: pl.DataFrame | None, key: str, value: int, col: str, default: Any = None) -> Any:
    if df is None or df.is_empty():
        return default
    row = df.filter(pl.col(key) == value)
    return row[col][0] if row.height and row[col][0] is not None else default


def _rate(value: object) -> str:
    return (
        "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.2f}"
    )


def host_rows(m: Measures) -> list[list[object]]:
    truth = m.truth
    clock = truth.clock
    statuses = m.pages_log.group_by("host").agg(
        pl.len().alias("sent"),
        (pl.col("status") == 200).sum().alias("s200"),
        (pl.col("status") == 304).sum().alias("s304"),
        (pl.col("status") == 429).sum().alias("s429"),
        (pl.col("status") >= 500).sum().alias("s5xx"),
        pl.col("status").is_in([404, 410]).sum().alias("s_gone"),
        (pl.col("if_none_match").is_not_null() | pl.col("if_modified_since").is_not_null())
        .mean()
        .alias("conditional"),
    )
    discovery = (
        m.log.filter(pl.col("kind") != "page")
        .group_by("host")
        .agg(pl.len().alias("requests"), (pl.col("status") == 429).sum().alias("throttled"))
    )
    planned = m.plans.group_by("h").agg(pl.col("planned").sum())
    deferred = (
        m.results.filter(pl.col("outcome") == "deferred").group_by("h").agg(pl.col("n").sum())
    )
    # pages that existed before the last cycle and were never requested
    requested = m.pages_log.select("page_id").unique()
    never = (
        truth.pages.filter(
            pl.col("scored") & (pl.col("appear_s") <= clock.cycle_time(clock.cycles - 1))
        )
        .join(requested, on="page_id", how="anti")
        .group_by("host")
        .agg(pl.len().alias("never"))
    )
    inventory = m.record.inventory
    # of the scored pages, those the inventory took from a sitemap or feed (any and new ones)
    known = pl.DataFrame(schema={"h": pl.Int64, "known": pl.UInt32, "known_new": pl.UInt32})
    if inventory is not None and inventory.height:
        known = (
            with_page_ids(inventory.filter(pl.col("source") != "seed"), m.host_keys, truth)
            .join(truth.pages.filter(pl.col("scored")).select("page_id", "initial"), on="page_id")
            .select("h", "page_id", "initial")
            .unique()
            .group_by("h")
            .agg(pl.len().alias("known"), (~pl.col("initial")).sum().alias("known_new"))
        )
    det = (
        score.detection_rates(m.detection, by="host")
        if m.detection is not None and m.detection.height
        else None
    )
    fresh = score.freshness_by(m.runs[PRODUCT].seconds, "host")
    best = score.freshness_by(m.runs[ORACLE].seconds, "host")
    rows: list[list[object]] = []
    for h, profile in enumerate(truth.hosts):
        n_pages = truth.pages.filter((pl.col("host") == h) & pl.col("scored")).height
        new = truth.pages.filter(
            (pl.col("host") == h)
            & ~pl.col("initial")
            & (pl.col("appear_s") <= clock.cycle_time(clock.cycles - 1))
        ).height
        codes = "/".join(
            str(_lookup(statuses, "host", h, c, 0))
            for c in ("s200", "s304", "s429", "s5xx", "s_gone")
        )
        rows.append(
            [
                f"{h + 1} {profile.name}",
                n_pages,
                _lookup(planned, "h", h, "planned", 0),
                _lookup(statuses, "host", h, "sent", 0),
                _lookup(deferred, "h", h, "n", 0),
                codes,
                _lookup(statuses, "host", h, "conditional"),
                f"{_lookup(discovery, 'host', h, 'requests', 0)} ({_lookup(discovery, 'host', h, 'throttled', 0)})",
                _lookup(known, "h", h, "known", 0) if profile.lists_pages else "—",
                f"{_lookup(known, 'h', h, 'known_new', 0)} of {new}" if new else "—",
                _lookup(never, "host", h, "never", 0),
                _rate(_lookup(det, "host", h, "false_change_rate")),
                _rate(_lookup(det, "host", h, "missed_change_rate")),
                _lookup(fresh, "host", h, "freshness"),
                _lookup(best, "host", h, "freshness"),
            ]
        )
    return rows


def allocation_rows(m: Measures) -> list[list[object]]:
    """Per true-rate band: the value share, fetches per page and freshness of each policy."""
    pages = m.truth.pages.filter(pl.col("scored")).select("page_id", "value", "rate_per_day")
    band = pl.lit(None, pl.String)
    for low, high, name in reversed(RATE_BANDS):
        cond = (
            (pl.col("rate_per_day") == 0)
            if high == 0
            else (pl.col("rate_per_day") > 0)
            & (pl.col("rate_per_day") >= low)
            & (pl.col("rate_per_day") < high)
        )
        band = pl.when(cond).then(pl.lit(name)).otherwise(band)
    pages = pages.with_columns(band.alias("band"))
    total_value = float(pages["value"].sum())
    rows = []
    per_policy = {}
    for name in POLICY_ORDER:
        run = m.runs[name]
        fetched = pages.join(run.fetches, on="page_id", how="left").with_columns(
            pl.col("fetches").fill_null(0)
        )
        per_policy[name] = (
            fetched.group_by("band").agg(pl.col("fetches").mean().alias("per_page")),
            run.seconds.join(pages.select("page_id", "band"), on="page_id").pipe(
                score.freshness_by, "band"
            ),
        )
    for _, _, name in RATE_BANDS:
        part = pages.filter(pl.col("band") == name)
        row: list[object] = [name, part.height, float(part["value"].sum()) / total_value]
        for policy in (PRODUCT, UNIFORM, ORACLE):
            row.append(_lookup_str(per_policy[policy][0], name, "per_page"))
        for policy in (PRODUCT, ORACLE):
            row.append(_lookup_str(per_policy[policy][1], name, "freshness"))
        rows.append(row)
    return rows


def _lookup_str(df: pl.DataFrame, band: str, col: str) -> Any:
    row = df.filter(pl.col("band") == band)
    return row[col][0] if row.height else None


def cycle_rows(m: Measures) -> list[list[object]]:
    per_cycle = {
        name: score.freshness_by(m.runs[name].seconds, "cycle")
        for name in (PRODUCT, UNIFORM, ORACLE)
    }
    planned = m.plans.group_by("cycle").agg(pl.col("planned").sum())
    throttled = (
        m.pages_log.filter(pl.col("status") == 429).group_by("cycle").agg(pl.len().alias("n"))
    )
    walls = m.record.cycle_walls
    rows: list[list[object]] = []
    for k in range(m.truth.clock.cycles):
        rows.append(
            [
                k,
                m.truth.clock.iso(k),
                cell(walls[k], 1) if k < len(walls) else "—",
                _lookup(planned, "cycle", k, "planned", 0),
                _lookup(m.sent, "cycle", k, "sent", 0),
                _lookup(m.deferred, "cycle", k, "n", 0),
                _lookup(throttled, "cycle", k, "n", 0),
                *(
                    _lookup(per_cycle[name], "cycle", k, "freshness")
                    for name in (PRODUCT, UNIFORM, ORACLE)
                ),
            ]
        )
    return rows


def is_this_checkout(checkout: str) -> bool:
    return Path(checkout).resolve() == REPO


def command_line(args: argparse.Namespace, truth: Truth, commit: str, checkout: str) -> str:
    """The command that made the figures; another checkout's install is named by its commit."""
    default_cycles = QUICK_CYCLES if args.quick else FULL_CYCLES
    if args.freshness_bin == default_freshness_bin():
        binary = ""
    elif is_this_checkout(checkout) or commit == "unknown":
        binary = f" --freshness-bin {args.freshness_bin}"
    else:
        binary = f" --freshness-bin <clone at {commit[:7]}>/.venv/bin/freshness"
    return (
        "python benchmarks/e2e_quality.py"
        + (" --quick" if args.quick else "")
        + (f" --cycles {truth.clock.cycles}" if truth.clock.cycles != default_cycles else "")
        + (f" --seed {truth.seed}" if truth.seed else "")
        + (
            f" --cycle-hours {truth.clock.cycle_s / 3600:g}"
            if truth.clock.cycle_s != CYCLE_HOURS * 3600
            else ""
        )
        + (f" --budget-share {args.budget_share:g}" if args.budget_share != BUDGET_SHARE else "")
        + "".join(f" --without {w}" for w in args.without)
        + binary
    )


def before_rows(m: Measures, before: Measures) -> list[list]:
    """Every target's figure and verdict for an earlier product beside this one's."""
    rows = []
    for old, new in zip(targets(before), targets(m), strict=True):
        rows.append([new[0], old[1], verdict(old[3]), new[1], verdict(new[3]), new[2]])
    return rows


def render(
    m: Measures,
    args: argparse.Namespace,
    commit: str,
    checkout: str,
    timings: dict[str, float],
    before: tuple[Measures, str] | None = None,
) -> str:
    truth = m.truth
    clock = truth.clock
    hosts = truth.hosts
    half = clock.cycles // 2
    initial = int(truth.pages["initial"].sum())
    out: list[str] = [
        "# End-to-end quality on a held-out web",
        "",
        "Generated by `benchmarks/e2e_quality.py` (see `benchmarks/README.md`); do not edit by hand. "
        "The product is driven only through its console script (`freshness seed`, `freshness cycle "
        "--now T --budget B`) and read only through its DuckDB views; every freshness and politeness "
        "figure is computed from the web's own truth and its server's request log.",
        "",
        f"- command: `{command_line(args, truth, commit, checkout)}`",
        f"- product: commit `{commit}`, "
        + (
            "this checkout"
            if is_this_checkout(checkout)
            else "from a checkout not found (no `python` beside the `--freshness-bin` script)"
            if commit == "unknown"
            else f"installed from {'a modified' if commit.endswith('+dirty') else 'a clean'} clone"
        ),
        f"- web: {len(hosts)} hosts, {initial} pages at the start ({int(truth.pages['disallowed'].sum())} of "
        f"them disallowed by robots.txt, not scored), {truth.pages.height - initial} appearing during the run, "
        f"{int(truth.pages['gone_s'].is_finite().sum())} going; "
        f"{truth.events.filter(pl.col('t_s') >= 0).height} change events during the run; seed {truth.seed}",
        f"- {clock.cycles} cycles of {clock.cycle_s / 3600:g} h from {clock.iso(0)} "
        f"({clock.horizon_s / DAY_S:g} days), budget {m.budget} page fetches per cycle "
        f"({args.budget_share:.0%} of the starting pages); second half = cycles {half}-{clock.cycles - 1}",
        *(f"- taken off every host: {WITHOUT[w]}" for w in args.without),
        "",
        "## Freshness",
        "",
        table(
            [
                "policy, same budget and host capacities",
                "value-weighted freshness",
                "/ oracle",
                "second half",
                "/ oracle",
            ],
            [
                [
                    name,
                    m.overall[name],
                    ratio(m, name, ORACLE),
                    m.second[name],
                    ratio(m, name, ORACLE, second=True),
                ]
                for name in POLICY_ORDER
            ],
        ),
        "",
        f"crawler / uniform: {ratio(m, PRODUCT, UNIFORM):.3f} (second half "
        f"{ratio(m, PRODUCT, UNIFORM, second=True):.3f}); crawler / oracle: {ratio(m, PRODUCT, ORACLE):.3f} "
        f"(second half {ratio(m, PRODUCT, ORACLE, second=True):.3f})",
        "",
        "## Targets",
        "",
        table(
            ["target", "figure", "wanted", "verdict"], [[*t[:3], verdict(t[3])] for t in targets(m)]
        ),
        "",
    ]
    if before is not None:
        old, old_commit = before
        out += [
            f"## Before: commit `{old_commit[:7]}` on the same web",
            "",
            f"A kept run of `{old_commit[:7]}` on the same web (`--before DIR`), scored the same "
            "way: its freshness and every target beside this run's.",
            "",
            table(
                ["policy", f"{old_commit[:7]}", "/ oracle", f"{commit[:7]}", "/ oracle"],
                [
                    [PRODUCT, old.overall[PRODUCT], ratio(old, PRODUCT, ORACLE)]
                    + [m.overall[PRODUCT], ratio(m, PRODUCT, ORACLE)]
                ],
            ),
            "",
            table(
                ["target", old_commit[:7], "verdict", commit[:7], "verdict", "wanted"],
                before_rows(m, old),
            ),
            "",
        ]
    out += [
        f"New pages fetched within {NEW_PAGE_CYCLES} cycles of appearing, and ever, by every policy:",
        "",
        table(
            ["policy", f"within {NEW_PAGE_CYCLES} cycles", "ever"],
            [
                [name, m.discovery[name]["share"], m.discovery[name]["ever_share"]]
                for name in POLICY_ORDER
            ],
        ),
        "",
        "## Where the fetches went",
        "",
        "Pages by their true long-run change rate (per day): the band's share of the value, fetches "
        "per page over the run, and value-weighted freshness.",
        "",
        table(
            [
                "true rate /day",
                "pages",
                "value share",
                "fetches/page: product",
                "uniform",
                "oracle",
                "freshness: product",
                "oracle",
            ],
            allocation_rows(m),
            digits=2,
        ),
        "",
        "## Per host",
        "",
        "planned: revisit_plan rows selected, summed over cycles; sent: page requests the server saw; "
        "deferred: fetch_results rows with outcome 'deferred'; 200/304/429/5xx/gone: statuses of the page "
        "requests (gone: 404 or 410); cond.: share of page requests with If-None-Match or "
        "If-Modified-Since; discovery: robots.txt, sitemap and feed requests (of which 429); "
        "from listing: pages the product's url_inventory took from a sitemap or feed; new known: of "
        "the pages that appeared before the last cycle, those it took; never: pages "
        "never requested; false/missed change: fetch_log outcomes against the versions served; "
        "freshness of the product and of the oracle on the host.",
        "",
        table(
            [
                "host",
                "pages",
                "planned",
                "sent",
                "deferred",
                "200/304/429/5xx/gone",
                "cond.",
                "discovery (429)",
                "from listing",
                "new known",
                "never",
                "false change",
                "missed change",
                "freshness",
                "oracle",
            ],
            host_rows(m),
            digits=2,
        ),
        "",
    ]
    if m.detection is not None and m.detection.height:
        d = score.detection_rates(m.detection).row(0, named=True)
        out += [
            f"Change detection over {d['graded']} graded fetches (re-fetches with a copy to compare "
            f"against): false-change rate {d['false_change_rate']:.3f} ({d['false_changes']} of "
            f"{d['truly_unchanged']} unchanged), missed-change rate {d['missed_change_rate']:.3f} "
            f"({d['missed_changes']} of {d['truly_changed_n']} changed).",
            "",
        ]
    if m.delay_gaps.height:
        out += [
            "Crawl-delay per host (every request, real time):",
            "",
            table(
                ["host", "Crawl-delay s", "requests", "shortest gap s", "violations"],
                [
                    [
                        f"{r['host'] + 1} {hosts[r['host']].name}",
                        r["delay"],
                        r["requests"],
                        r["min_gap"],
                        r["violations"],
                    ]
                    for r in m.delay_gaps.iter_rows(named=True)
                ],
            ),
            "",
        ]
    if m.retry_after.height:
        examples = "; ".join(
            f"{hosts[r['host']].name} {r['path']} ({r['status']})"
            for r in m.retry_after.head(3).iter_rows(named=True)
        )
        out += [f"Retry-After violations: {m.retry_after.height}, e.g. {examples}.", ""]
    if m.disallowed.height:
        examples = "; ".join(
            f"{hosts[r['host']].name} {r['path']}"
            for r in m.disallowed.head(3).iter_rows(named=True)
        )
        out += [f"Requests to disallowed paths: {m.disallowed.height}, e.g. {examples}.", ""]
    reasons = (
        m.results.filter(pl.col("outcome") == "deferred")
        .with_columns(pl.col("error").str.replace_all(r"\d+(\.\d+)?", "N"))
        .group_by("h", "error")
        .agg(pl.col("n").sum())
        .sort("n", "h", descending=[True, False])
        .head(12)
    )
    if reasons.height:
        out += [
            "Deferred fetches by host and reason (fetch_results.error):",
            "",
            table(
                ["host", "reason", "deferred"],
                [
                    [_host_name(hosts, r["h"]), r["error"] or "—", r["n"]]
                    for r in reasons.iter_rows(named=True)
                ],
            ),
            "",
        ]
    robots = m.record.robots
    if robots is not None and robots.height:
        keymap = {key: i for i, key in enumerate(m.host_keys)}
        rb = robots.with_columns(pl.col("host").replace_strict(keymap, default=-1).alias("h")).sort(
            "h"
        )
        out += [
            "What the product's `robots` view holds at the end:",
            "",
            table(
                ["host", "status", "mode", "crawl_delay", "sitemaps named", "error"],
                [
                    [
                        _host_name(hosts, r["h"]),
                        r["http_status"],
                        r["mode"],
                        r["crawl_delay"],
                        len(r["sitemaps"] or []),
                        r["error"],
                    ]
                    for r in rb.iter_rows(named=True)
                ],
            ),
            "",
        ]
    out += [
        "## Change-rate estimates at the end",
        "",
        "`url_state.change_rate` (per day) against each page's true long-run rate, over pages with at "
        "least 3 and at least 5 successful fetches (200 or 304 in the server log); bias = median "
        "log(estimate / true), error = median |log(estimate / true)|. Static pages have no true rate "
        "to divide by: their median estimate is the figure.",
        "",
    ]
    if m.rates is not None:
        out.append(
            table(
                [
                    "fetches",
                    "pattern",
                    "pages",
                    "median log bias",
                    "median abs log error",
                    "median estimate /day",
                    "median true /day",
                ],
                [
                    [
                        f">= {r['min_fetches']}",
                        r["pattern"],
                        r["pages"],
                        r["median_log_bias"],
                        r["median_abs_log_error"],
                        r["median_estimate"],
                        r["median_true"],
                    ]
                    for r in m.rates.iter_rows(named=True)
                ],
            )
        )
        out.append("")
    if m.record.notes:
        out += [
            "Notes and warnings the product printed, over all cycles (URLs, hosts and numbers blanked):",
            "",
            table(
                ["message", "count"],
                [[msg.replace("|", "/"), n] for msg, n in m.record.notes.most_common(12)],
            ),
            "",
        ]
    walls = m.record.cycle_walls or [math.nan]
    out += [
        "## Per cycle",
        "",
        table(
            [
                "cycle",
                "now",
                "wall s",
                "planned",
                "sent",
                "deferred",
                "429",
                "freshness",
                "uniform",
                "oracle",
            ],
            cycle_rows(m),
        ),
        "",
        "## Timings",
        "",
        "Wall seconds on this machine's two cores, shared with other work while it ran.",
        "",
        table(
            ["step", "seconds"],
            [
                ["truth (pages and change events)", timings.get("truth", math.nan)],
                ["baselines (three policies, in memory)", timings.get("baselines", math.nan)],
                ["freshness seed", m.record.seed_wall_s],
                [
                    f"freshness cycle x {len(m.record.cycle_walls)} (mean {np.mean(walls):.1f}, max {np.max(walls):.1f})",
                    float(np.sum(walls)),
                ],
                ["the whole run", timings.get("run", math.nan)],
            ],
            digits=1,
        ),
        "",
        WEB_AND_SCORING.replace(
            "{behaviours}",
            "\n".join(
                f"{h + 1}. **{p.name}** ({p.n_pages} pages): {p.describe()}"
                for h, p in enumerate(hosts)
            ),
        ),
    ]
    return "\n".join(out)


def _host_name(hosts: tuple[HostProfile, ...], h: int) -> str:
    return f"{h + 1} {hosts[h].name}" if 0 <= h < len(hosts) else "?"


WEB_AND_SCORING = """## The web

Twenty hosts, each on its own loopback address and port, served by aiohttp in one thread of the
harness. Its clock is simulated and set to each cycle's time before the cycle runs (held during
it); the politeness rules act in real time. Pages are ordinary HTML (head, navigation, an
article, a footer). Each page follows one change pattern drawn in advance for the whole run:
Poisson at rates spread over four and a half decades (every few minutes to every few hundred
days), daily at a fixed time of day with a quarter-hour of jitter, every 3-12 hours, bursty
(Markov-modulated: quiet spells of days, bursts of hours at tens of changes a day), or static.
A change edits one sentence of the article and its figures (a price, a count). Values are
Zipf-like (exponent 0.8, mean 1) over the starting pages and passed in the seed CSV; pages that
appear later are worth 1 and are announced only by their host's sitemap or feed.

The hosts mix honest ETag and Last-Modified (304 when unchanged), Last-Modified only and no
validators; lying validators (a new ETag on every response, a Last-Modified that is always the
response time, a 304 although the content changed); volatile boilerplate that is not content (a
generation timestamp, rotating advertisements at the top of the page or inside the article with
`class="ad"`, `rel="sponsored"` and "Sponsored:"/"Advertisement" labels, a CSRF token, a view
counter); robots.txt with fractional Crawl-delay and Disallow rules whose paths are also in the
sitemap (and in the seeds); a host that answers 429 with Retry-After: 2 whenever two requests
come closer than 0.4 s; a host with 300 ms latency and one with 15 % 5xx answers; sitemaps with
accurate, missing, "now" or stale lastmod, two hosts whose sitemap URLs carry query strings with
a bare `&` (not well-formed XML, as on the real web), a gzipped sitemap behind a sitemap index,
sitemaps robots.txt does not name (served at /sitemap.xml, or a 404 there), an RSS and an Atom
feed of new items; and pages that go (leaving an honest sitemap, or on hosts without one) and
answer 404 or 410 from then on. The hosts, numbered as in the per-host table:

{behaviours}

## How it is scored

The server records every request (real and simulated time, host, path and query, status, the
content version served, the validators sent, the User-Agent). The crawler's copy of a page is
the content version of its last 200 (a 304 keeps the copy; a 404 or 410 makes it "gone"). A
page is fresh at a moment when the copy equals the live state (the live version, or gone after
it went), and stale from the moment it exists until first fetched; freshness is integrated
exactly over the change events between cycles, weighted by value and divided by the
value-weighted time the pages existed. Disallowed pages are left out.

The baselines are simulated in memory on the same truth, the same budget per cycle and the same
per-host capacity (what a host takes in a 600 s fetch window: the window over its Crawl-delay,
over the throttled host's 0.4 s gap, else 4 requests a second). Each has perfect change
detection, learns a new page at the first cycle after it appears in a sitemap or feed, drops a
page once a fetch saw it gone, and meets the flaky host's failures where the product does:
uniform round robin (never fetched first, then least recently fetched); Nutch-style adaptive
(AdaptiveFetchSchedule: interval x0.8 after a change, x1.4 after none, between one cycle and 60
days, starting at pages / budget cycles; due pages by value, spare budget on the next most nearly
due); and an oracle that knows every page's true long-run rate, the values and the capacities
and picks greedily by value x (1/rate) x g(rate x age), g(r) = 1 - (1 + r) e^-r (a page it never
fetched: value x the fresh time it can still gain before the run ends).

Politeness is read from the same log: a Crawl-delay violation is a gap between two request
arrivals at a host shorter than its delay minus 50 ms; a Retry-After violation is a request
arriving at a host before the pause its last 429 asked for ran out. Deferred fetches and the
plan come from the views (`fetch_results`, `revisit_plan`) read after each cycle; gone marks
from `url_state.status`; estimates from `url_state.change_rate`; change detection compares
`fetch_log.outcome` with the versions the server actually served.
"""


def without(hosts: tuple[HostProfile, ...], signals: list[str]) -> tuple[HostProfile, ...]:
    """The same hosts with the named signals taken off: the web most of the real one is, where a
    crawler has only what its own fetches tell it."""
    if "sitemaps" in signals:
        hosts = tuple(replace(h, sitemap="none", feed=None, new_per_day=0.0) for h in hosts)
    if "lastmod" in signals:
        hosts = tuple(replace(h, lastmod="missing") for h in hosts)
    if "validators" in signals:
        hosts = tuple(replace(h, validators="none") for h in hosts)
    return hosts


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    timings: dict[str, float] = {}
    meta: dict = {}
    if args.rescore is not None:
        record, host_keys, log, meta = load_run(args.rescore)
        args.quick, args.cycles, args.seed = meta["quick"], meta["cycles"], meta["seed"]
        # runs saved before these options existed had the defaults
        args.cycle_hours = meta.get("cycle_hours", CYCLE_HOURS)
        args.budget_share = meta.get("budget_share", BUDGET_SHARE)
        args.without = meta.get("without", [])
        args.freshness_bin = Path(meta["freshness_bin"])
        commit, checkout = meta["commit"], meta["checkout"]
        timings["run"] = meta.get("run_wall_s", math.nan)
    else:
        commit, checkout = checkout_of(args.freshness_bin)
    args.without = sorted(set(args.without))
    hosts = without(scaled_hosts(QUICK_SCALE) if args.quick else HOSTS, args.without)
    cycles = args.cycles or (QUICK_CYCLES if args.quick else FULL_CYCLES)
    out_path: Path | None
    if args.out is None:
        other_web = (
            args.cycle_hours != CYCLE_HOURS or args.budget_share != BUDGET_SHARE or args.without
        )
        out_path = None if args.quick or args.cycles or args.rescore or other_web else DEFAULT_OUT
    else:
        out_path = Path(args.out) if args.out else None
    print(f"product: {commit} ({checkout}) via {args.freshness_bin}", flush=True)

    t = time.perf_counter()
    truth = build_truth(hosts, seed=args.seed, cycles=cycles, cycle_s=args.cycle_hours * 3600)
    timings["truth"] = time.perf_counter() - t
    n_initial = int(truth.pages["initial"].sum())
    budget = max(1, round(args.budget_share * n_initial))
    print(
        f"web: {len(hosts)} hosts, {n_initial} starting pages, {truth.pages.height - n_initial} new, "
        f"{cycles} cycles, budget {budget}",
        flush=True,
    )
    t = time.perf_counter()
    web = baselines.BaselineWeb(truth, budget)
    runs: dict[str, PolicyRun] = {}
    for name, policy in baselines.POLICIES.items():
        copies, state = web.run(policy)
        runs[name] = PolicyRun(
            copies, pl.DataFrame({"page_id": web.page_id, "fetches": state.fetches})
        )
    timings["baselines"] = time.perf_counter() - t

    if args.rescore is None:
        workdir = args.workdir or Path(tempfile.mkdtemp(prefix="e2e-quality-"))
        workdir.mkdir(parents=True, exist_ok=True)
        if (workdir / "home").exists():
            shutil.rmtree(workdir / "home")
        try:
            with WebServer(truth) as server:
                try:
                    record = run_product(args, truth, server, workdir, budget)
                finally:  # what the web saw is kept even when the product run broke off
                    host_keys = list(server.host_keys)
                    log = server.log()
                    log.write_parquet(workdir / "server_log.parquet")
            timings["run"] = time.perf_counter() - started
            meta = {
                "quick": args.quick,
                "cycles": cycles,
                "seed": args.seed,
                "cycle_hours": args.cycle_hours,
                "budget_share": args.budget_share,
                "without": args.without,
                "commit": commit,
                "checkout": checkout,
                "freshness_bin": str(args.freshness_bin),
                "run_wall_s": timings["run"],
            }
            save_run(workdir, record, host_keys, log, meta)
        finally:
            if args.workdir is None:
                shutil.rmtree(workdir, ignore_errors=True)
    earlier = None
    if args.before is not None:
        old_record, old_keys, old_log, old_meta = load_run(args.before)
        same = ("quick", "cycles", "seed", "cycle_hours", "budget_share", "without")
        defaults = {"cycle_hours": CYCLE_HOURS, "budget_share": BUDGET_SHARE, "without": []}
        if any(old_meta.get(k, defaults.get(k)) != meta.get(k, getattr(args, k)) for k in same):
            raise SystemExit(f"--before {args.before}: a run on another web ({old_meta})")
        earlier = (
            measure(truth, budget, old_keys, old_log, old_record, runs),
            old_meta["commit"],
        )
    text = render(
        measure(truth, budget, host_keys, log, record, runs),
        args,
        commit,
        checkout,
        timings,
        earlier,
    )
    print(text)
    if out_path is not None:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(text)
        print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
