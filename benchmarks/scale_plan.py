"""How far the planning path of one cycle is from the cheapest thing polars can do with the same
data: one worker, a million URLs.

    .venv/bin/python benchmarks/scale_plan.py                 # 1,000,000 URLs, 10,000 hosts
    .venv/bin/python benchmarks/scale_plan.py --quick         # 100,000 URLs, 1,000 hosts
    .venv/bin/python benchmarks/scale_plan.py --urls 2000000 --hosts 20000 --repeat 2

A synthetic url_state (the table's schema, ``--obs`` observations per URL in the list columns)
is written twice: one file per host through ``storage.Warehouse`` (the layout the pipeline
uses) and one big Parquet file (what a bucketed layout tends to), so the cost of the file count
shows apart from the cost of the work. Then, each phase in a fresh interpreter so that its peak
RSS is its own (VmHWM of the child):

- floor: read the url_state and order it by a precomputed score (``next_check_at``); the least
  a planner that already knew every score would have to do;
- full: the project's path: read url_state (``Warehouse.read`` / ``read_parquet``), append one
  new observation to ``--fetched`` of the URLs (``append_observations``), re-estimate every
  rate from its whole history (``estimate_rates``), plan a ``--budget`` share of the URLs under
  per-host capacities (``build_plan``);
- incremental: the same with ``estimate_rates(..., only_rows=<rows observed this cycle>)``;
- incremental-scan (host files only): the incremental path reading with the floor's one scan,
  which tells the reader's cost from the work's.

The ratio of each path to the floor on the same layout, from the same run, is the figure to
read: other work on the machine moves seconds, much less ratios (and less still the CPU-second
ratios, also printed). Not a unit test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
# The next cycle plans 6 h after this one's fetches: a page fetched now is not due at once.
PLAN_AFTER = timedelta(hours=6)
BIG_FILE = "url_state_one_file.parquet"
LAYOUTS = ("hosts", "one")
PHASES = ("floor", "full", "incremental")
# Also on the host files: the incremental path with the read done as one lazy scan over all the
# files (what the floor does) instead of Warehouse.read's file-by-file reads, to show how much of
# the gap is the reader and how much the work.
SCAN_PHASE = "incremental-scan"


def cpu_seconds() -> float:
    """User + system CPU of this process (all its threads): less moved by other jobs on the
    machine than wall time, so the CPU ratios back up the wall-clock ones under load."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mb() -> float:
    """VmHWM of this process: the peak resident set, which is what an OOM killer looks at."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# ---- the synthetic url_state ------------------------------------------------------------------


def synthetic_state(n_urls: int, n_hosts: int, n_obs: int, seed: int):
    """A url_state as the pipeline would hold it after ``n_obs`` fetches of every URL.

    Rates are log-uniform from one change in 90 days to four a day, each URL is fetched at
    its own regular-ish interval (6 h to 2 weeks, jittered) and each observation is drawn from
    the censored model, so that the estimator does the work it does in production (Newton
    steps, lower-bound rows) rather than a degenerate case.
    """
    import numpy as np
    import polars as pl

    from freshness_pipeline import tables
    from freshness_pipeline.science.estimate import (
        PRIORS_BY_CLASS,
        estimate_rates,
        prior_columns,
    )

    rng = np.random.default_rng(seed)
    per_host = -(-n_urls // n_hosts)
    idx = np.arange(n_urls)
    true_rate = np.exp(rng.uniform(np.log(1 / 90), np.log(4.0), n_urls))
    base = rng.choice([0.25, 1.0, 3.0, 7.0, 14.0], size=n_urls)
    intervals = base[:, None] * rng.uniform(0.8, 1.25, size=(n_urls, n_obs))
    changed = rng.random((n_urls, n_obs)) < -np.expm1(-true_rate[:, None] * intervals)
    age_days = rng.uniform(0.0, 1.5, n_urls) * base
    classes = np.array(list(PRIORS_BY_CLASS))
    status = np.where(rng.random(n_urls) < 0.98, "active", "gone")
    day_us = 86_400 * 1_000_000
    now_lit = pl.lit(NOW).cast(tables.UTC_TIME)

    def ago(days) -> pl.Expr:
        return now_lit - pl.duration(microseconds=pl.Series(np.round(days * day_us)).cast(pl.Int64))

    frame = pl.DataFrame(
        {
            "host_id": idx // per_host,
            "page": idx % per_host,
            "status": status,
            "value": rng.pareto(1.2, n_urls) + 1.0,
            "url_class": classes[rng.integers(0, len(classes), n_urls)],
            "last_outcome": np.where(changed[:, -1], "changed", "not_modified"),
            "n_not_modified": (~changed).sum(axis=1),
            "has_etag": rng.random(n_urls) < 0.6,
        }
    ).with_columns(
        pl.Series("obs_interval_days", intervals.ravel())
        .reshape((n_urls, n_obs))
        .cast(pl.List(pl.Float64)),
        pl.Series("obs_changed", changed.ravel())
        .reshape((n_urls, n_obs))
        .cast(pl.List(pl.Boolean)),
    )
    frame = frame.with_columns(
        host=pl.format("h{}.example", pl.col("host_id").cast(pl.String).str.zfill(6))
    ).with_columns(url=pl.format("https://{}/page/{}", "host", "page"))
    frame = frame.with_columns(
        first_seen_at=ago(age_days + intervals.sum(axis=1)),
        last_fetched_at=ago(age_days),
        last_seen_at=ago(age_days),
        last_changed_at=ago(age_days + rng.uniform(0, 1, n_urls) * base * 3),
        fingerprint=pl.col("url").hash(seed).cast(pl.String),
        fingerprint_version=pl.lit(1, pl.Int64),
        etag=pl.when("has_etag").then(pl.format('"{}"', pl.col("url").hash(seed + 1) % 10**12)),
        last_modified=pl.when(~pl.col("has_etag")).then(pl.lit("Mon, 02 Mar 2026 06:00:00 GMT")),
        last_http_status=pl.when(pl.col("last_outcome") == "changed").then(200).otherwise(304),
        gone_at=pl.when(pl.col("status") == "gone").then(ago(age_days)),
        n_fetches=pl.lit(n_obs, pl.Int64),
        consecutive_errors=pl.lit(0, pl.Int64),
    )
    estimated = estimate_rates(prior_columns(frame))
    next_days = (1.0 / estimated["change_rate"].to_numpy()).clip(1 / 24, 30.0)
    estimated = estimated.with_columns(
        next_check_at=pl.col("last_fetched_at")
        + pl.duration(microseconds=pl.Series(np.round(next_days * day_us)).cast(pl.Int64))
    )
    return tables.conform("url_state", estimated).sort(["host", "url"])


# ---- one cycle's planning, as the assets do it --------------------------------------------------


def this_cycle_observations(state, fetched_share: float, seed: int):
    """Which URLs this cycle fetched and what it saw, fixed per URL (a hash, not row order),
    so every phase and layout gets exactly the same observations."""
    import polars as pl

    from freshness_pipeline import tables

    buckets = 1_000_000
    pick = (pl.col("url").hash(seed + 2) % buckets) < int(fetched_share * buckets)
    draw = (pl.col("url").hash(seed + 3) % buckets).cast(pl.Float64) / buckets
    interval = (
        pl.lit(NOW).cast(tables.UTC_TIME) - pl.col("last_seen_at")
    ).dt.total_microseconds().cast(pl.Float64) / 86_400e6
    return state.select(
        "url",
        pick.alias("fetched"),
        interval.alias("interval_days"),
        (draw < 1.0 - (-pl.col("change_rate") * interval).exp()).alias("changed"),
    )


def cycle_update(state, fetched_share: float, seed: int):
    """The state after this cycle's fetches: one new observation per fetched URL, and its last
    fetch moved to now (what url_state's merge does before the estimate)."""
    import polars as pl

    from freshness_pipeline import tables
    from freshness_pipeline.science.estimate import append_observations

    obs = this_cycle_observations(state, fetched_share, seed)
    fetched = obs["fetched"]
    observations = obs.filter("fetched").drop("fetched")
    now_lit = pl.lit(NOW).cast(tables.UTC_TIME)
    updated = append_observations(state, observations).with_columns(
        last_fetched_at=pl.when(fetched).then(now_lit).otherwise("last_fetched_at"),
        last_seen_at=pl.when(fetched).then(now_lit).otherwise("last_seen_at"),
        n_fetches=pl.col("n_fetches") + fetched.cast(pl.Int64),
    )
    return updated, fetched


def plan_next(state, budget_share: float, seed: int):
    """The next cycle's plan from the updated state, with the columns plan_inputs passes and a
    per-host capacity between 5 and 30 fetches (binding on some hosts, not all)."""
    import polars as pl

    from freshness_pipeline.science.schedule import build_plan

    inputs = state.select(
        "url",
        "host",
        "value",
        "url_class",
        "status",
        "last_fetched_at",
        "change_rate",
        "n_obs",
        "n_changes",
        pl.lit(1.0).alias("cost"),
    )
    capacity = (
        inputs.select(pl.col("host").unique())
        .with_columns(capacity=(pl.col("host").hash(seed + 4) % 26 + 5).cast(pl.Int64))
        .sort("host")
    )
    return build_plan(
        inputs, capacity, now=NOW + PLAN_AFTER, budget=int(budget_share * state.height)
    )


# ---- phases, each in its own interpreter ------------------------------------------------------


def url_state_files(home: Path) -> list[str]:
    from freshness_pipeline.storage import Warehouse

    root = Warehouse(home).table_dir("url_state")
    return sorted(str(p) for p in root.glob("host=*/data.parquet"))


def phase_generate(args: argparse.Namespace) -> dict:
    from freshness_pipeline.storage import Warehouse

    t0 = time.perf_counter()
    state = synthetic_state(args.urls, args.hosts, args.obs, args.seed)
    t1 = time.perf_counter()
    warehouse = Warehouse(args.home)
    hosts = state["host"].unique(maintain_order=True).to_list()
    warehouse.write_partitions("url_state", hosts, state)
    t2 = time.perf_counter()
    big = Path(args.home) / BIG_FILE
    state.write_parquet(big, compression="zstd", statistics=True)
    t3 = time.perf_counter()
    per_host_bytes = sum(os.path.getsize(f) for f in url_state_files(Path(args.home)))
    return {
        "rows": state.height,
        "seconds": {"build": t1 - t0, "write_hosts": t2 - t1, "write_one": t3 - t2},
        "bytes": {"hosts": per_host_bytes, "one": big.stat().st_size},
        "files": len(hosts),
    }


def read_state(layout: str, home: Path, bare: bool, scan: bool = False):
    """The floor reads with one lazy scan; the project's path reads as its assets do (one
    ``Warehouse.read`` over every host file, or the one big file conformed to the schema), or
    with ``scan`` as one lazy scan conformed to the schema."""
    import polars as pl

    from freshness_pipeline import tables
    from freshness_pipeline.storage import Warehouse

    files = url_state_files(home) if layout == "hosts" else [str(home / BIG_FILE)]
    if bare:
        return pl.scan_parquet(files, hive_partitioning=False)
    if scan:
        lazy = pl.scan_parquet(files, hive_partitioning=False)
        return tables.conform("url_state", lazy.collect())
    if layout == "hosts":
        return Warehouse(home).read("url_state")
    return tables.conform("url_state", pl.read_parquet(files[0]))


def phase_run(args: argparse.Namespace) -> dict:
    import polars as pl

    from freshness_pipeline.science.estimate import estimate_rates, prior_columns

    home = Path(args.home)
    seconds: dict[str, float] = {}
    cpu0 = cpu_seconds()
    t = time.perf_counter()
    if args.phase == "floor":
        ordered = read_state(args.layout, home, bare=True).sort("next_check_at").collect()
        seconds["read+sort"] = time.perf_counter() - t
        return {"rows": ordered.height, "seconds": seconds, "cpu": cpu_seconds() - cpu0}
    state = read_state(args.layout, home, bare=False, scan=args.phase == SCAN_PHASE)
    seconds["read"] = time.perf_counter() - (t0 := t)
    t = time.perf_counter()
    updated, fetched = cycle_update(state, args.fetched, args.seed)
    seconds["append"] = time.perf_counter() - t
    t = time.perf_counter()
    with_priors = prior_columns(updated)
    only = None if args.phase == "full" else fetched
    estimated = estimate_rates(with_priors, only_rows=only)
    seconds["estimate"] = time.perf_counter() - t
    t = time.perf_counter()
    plan = plan_next(estimated, args.budget, args.seed)
    seconds["plan"] = time.perf_counter() - t
    seconds["total"] = time.perf_counter() - t0
    chosen = plan.filter(pl.col("selected")).sort("url")
    return {
        "rows": plan.height,
        "seconds": seconds,
        "cpu": cpu_seconds() - cpu0,
        "selected": chosen.height,
        "observed": int(fetched.sum()),
        # the same plan from both estimation modes is the check that incremental is exact
        "plan_digest": int(chosen.select(pl.col("url").hash(0).sum()).item()),
        "rate_digest": float(estimated["change_rate"].sum()),
    }


def child(args: argparse.Namespace) -> None:
    result = phase_generate(args) if args.phase == "generate" else phase_run(args)
    result["peak_rss_mb"] = peak_rss_mb()
    print(json.dumps(result))


def spawn(args: argparse.Namespace, phase: str, layout: str = "") -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--phase",
        phase,
        "--layout",
        layout or "hosts",
        "--home",
        args.home,
        *("--urls", str(args.urls), "--hosts", str(args.hosts), "--obs", str(args.obs)),
        *("--fetched", str(args.fetched), "--budget", str(args.budget), "--seed", str(args.seed)),
    ]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"phase {phase} {layout} failed")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall"] = time.perf_counter() - start
    return result


# ---- the table ------------------------------------------------------------------------------


def phases(layout: str) -> tuple[str, ...]:
    return (*PHASES, SCAN_PHASE) if layout == "hosts" else PHASES


def machine_note() -> str:
    load = os.getloadavg()
    cpus = os.cpu_count()
    mem = next(
        (
            line.split()[1]
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal:")
        ),
        "0",
    )
    return (
        f"{cpus} CPUs, {int(mem) / 1024**2:.0f} GB RAM, load average "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1 / 5 / 15 min) at the end of the run"
    )


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def report(args: argparse.Namespace, gen: dict, runs: dict[tuple[str, str], list[dict]]) -> str:
    lines = [
        f"url_state: {gen['rows']:,} URLs over {args.hosts:,} hosts, {args.obs} observations "
        f"each; {args.fetched:.0%} of URLs observed this cycle, budget {args.budget:.0%}, "
        f"{args.repeat} run(s) per phase (median shown)",
        f"generated in {gen['seconds']['build']:.1f} s; written as {gen['files']:,} host files "
        f"({gen['bytes']['hosts'] / 1e6:.0f} MB, {gen['seconds']['write_hosts']:.1f} s through "
        f"Warehouse.write_partitions) and as one file ({gen['bytes']['one'] / 1e6:.0f} MB, "
        f"{gen['seconds']['write_one']:.1f} s)",
        "",
        "| layout | phase | read s | append s | estimate s | plan s | total s | x floor "
        "| CPU s | x floor (CPU) | peak RSS MB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for layout in LAYOUTS:
        floor = median([r["seconds"]["read+sort"] for r in runs[(layout, "floor")]])
        floor_cpu = median([r["cpu"] for r in runs[(layout, "floor")]])
        for phase in phases(layout):
            rs = runs[(layout, phase)]
            rss = max(r["peak_rss_mb"] for r in rs)
            cpu = median([r["cpu"] for r in rs])
            label = {"hosts": f"{gen['files']:,} host files", "one": "one file"}[layout]
            if phase == "floor":
                lines.append(
                    f"| {label} | floor: scan + sort by next_check_at | | | | | {floor:.2f} "
                    f"| 1.0 | {cpu:.2f} | 1.0 | {rss:,.0f} |"
                )
                continue
            sec = {k: median([r["seconds"][k] for r in rs]) for k in rs[0]["seconds"]}
            name = {
                "full": "full re-estimation",
                "incremental": "incremental (only_rows)",
                SCAN_PHASE: "incremental, one-scan read",
            }[phase]
            lines.append(
                f"| {label} | {name} | {sec['read']:.2f} | {sec['append']:.2f} | "
                f"{sec['estimate']:.2f} | {sec['plan']:.2f} | {sec['total']:.2f} | "
                f"{sec['total'] / floor:.1f} | {cpu:.2f} | {cpu / floor_cpu:.1f} | {rss:,.0f} |"
            )
    lines.append("")
    for layout in LAYOUTS:
        full, incr = runs[(layout, "full")][0], runs[(layout, "incremental")][0]
        same = (full["plan_digest"], full["rate_digest"]) == (
            incr["plan_digest"],
            incr["rate_digest"],
        )
        lines.append(
            f"{layout}: {full['observed']:,} URLs observed, {full['selected']:,} selected; "
            f"incremental gives the same rates and plan as full: {'yes' if same else 'NO'}"
        )
    lines.append(f"peak RSS of a child that only imports the modules: {runs['idle']:,.0f} MB")
    lines.append(f"machine: {machine_note()}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--obs", type=int, default=20, help="observations per URL")
    parser.add_argument("--fetched", type=float, default=0.10, help="share observed this cycle")
    parser.add_argument("--budget", type=float, default=0.10, help="plan budget, share of URLs")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="100,000 URLs over 1,000 hosts")
    parser.add_argument("--tmp", default=None, help="parent folder of the temporary warehouse")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--layout", default="hosts", help=argparse.SUPPRESS)
    parser.add_argument("--home", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        child(args)
        return
    if args.quick:
        args.urls, args.hosts = 100_000, 1_000
    with tempfile.TemporaryDirectory(prefix="scale-plan-", dir=args.tmp) as tmp:
        args.home = tmp
        print(f"generating {args.urls:,} URLs over {args.hosts:,} hosts in {tmp} ...", flush=True)
        gen = spawn(args, "generate")
        runs: dict = {}
        runs["idle"] = float(
            subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import polars, numpy, duckdb, freshness_pipeline.storage, "
                    "freshness_pipeline.science.schedule;"
                    f"exec(open({__file__!r}).read().split('# ---- the synthetic')[0]);"
                    "print(peak_rss_mb())",
                ],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
        # Interleaved (floor, full, incremental per layout, per repeat) so that a burst of load
        # from elsewhere lands on all phases alike instead of on one.
        for _ in range(args.repeat):
            for layout in LAYOUTS:
                for phase in phases(layout):
                    result = spawn(args, phase, layout)
                    runs.setdefault((layout, phase), []).append(result)
                    took = result["seconds"].get("total", result["seconds"].get("read+sort"))
                    peak = result["peak_rss_mb"]
                    print(f"  {layout:5} {phase:16} {took:6.2f} s  peak {peak:,.0f} MB", flush=True)
        print()
        print(report(args, gen, runs))


if __name__ == "__main__":
    main()
