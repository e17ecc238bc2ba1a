"""How far the planning path of one cycle is from the cheapest thing polars can do with the same
data: one worker, a million URLs.

    .venv/bin/python benchmarks/scale_plan.py                 # 1,000,000 URLs, 10,000 hosts
    .venv/bin/python benchmarks/scale_plan.py --quick         # 100,000 URLs, 1,000 hosts
    .venv/bin/python benchmarks/scale_plan.py --urls 2000000 --hosts 20000 --repeat 2

A synthetic url_state (the table's schema, ``--obs`` observations per URL in the list columns,
``last_seen_at`` at the end of each history) and the change_prior table that the cycles before
this one left (two untimed ``refit_change_prior`` passes, stamped 12 h and 6 h before now: the
table keeps the newest fit before a cycle next to the cycle's own) are written twice: one file
per host through ``storage.Warehouse`` (the layout the pipeline uses) and one big Parquet file
each (what a bucketed layout tends to), so the cost of the file count shows apart from the cost
of the work. Then, each phase in a fresh interpreter so that its peak RSS is its own (VmHWM of
the child):

- floor: read the url_state and order it by a precomputed score (``next_check_at``); the least
  a planner that already knew every score would have to do;
- full: the project's path, as the url_state and revisit_plan assets run it: read url_state
  and change_prior (``Warehouse.read`` / ``read_parquet``), append one new observation to
  ``--fetched`` of the URLs (``append_observations``), re-estimate every rate from its whole
  history (``estimate_rates``), refit the change prior warm-started from the stored rows
  (``refit_change_prior``, steady state: the previous fit exists), score every candidate under
  the new fit (``expected_gains``) and plan a ``--budget`` share of the URLs under per-host
  capacities (``build_plan`` with ``expected_gain_override``);
- incremental: the same with ``estimate_rates(..., only_rows=<rows observed this cycle>)``;
- incremental-scan (host files only): the incremental path reading with the floor's one scan,
  which tells the reader's cost from the work's.

The change-prior steps (read change_prior, refit, gains) are timed apart, so the run also shows
the path without them next to the floor.

The ratio of each path to the floor on the same layout, from the same run, is the figure to
read: other work on the machine moves seconds, much less ratios (and less still the CPU-second
ratios, also printed). Not a unit test.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness import (  # benchmarks/, beside this script
    idle_peak_rss_mb,
    memory_gib,
    own_cpu_seconds,
    own_peak_rss_mb,
    run_child,
    send_result,
)

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
# The next cycle plans 6 h after this one's fetches: a page fetched now is not due at once.
PLAN_AFTER = timedelta(hours=6)
BIG_FILE = "url_state_one_file.parquet"
BIG_PRIOR_FILE = "change_prior_one_file.parquet"
# What kind of site a host is, and the url_class mix of its pages: a few classes per host, as a
# real crawl has (a shop has no articles), which is what sizes the change_prior table (one row
# per host and class on it, per fit).
SITE_CLASSES = {
    "news": {"article": 0.60, "listing": 0.20, "index": 0.05, "static": 0.10, "default": 0.05},
    "shop": {"product": 0.60, "listing": 0.20, "index": 0.05, "static": 0.10, "default": 0.05},
    "docs": {"article": 0.30, "static": 0.50, "index": 0.10, "default": 0.10},
}
LAYOUTS = ("hosts", "one")
PHASES = ("floor", "full", "incremental")
# Also on the host files: the incremental path with the read done as one lazy scan over all the
# files (what the floor does) instead of Warehouse.read's file-by-file reads, to show how much of
# the gap is the reader and how much the work.
SCAN_PHASE = "incremental-scan"


# ---- the synthetic url_state ------------------------------------------------------------------


def synthetic_state(n_urls: int, n_hosts: int, n_obs: int, seed: int):
    """A url_state as the pipeline would hold it after ``n_obs`` fetches of every URL.

    Rates are log-uniform from one change in 90 days to four a day, each URL is fetched at
    its own regular-ish interval (6 h to 2 weeks, jittered) and each observation is drawn from
    the censored model, so that the estimator does the work it does in production (Newton
    steps, lower-bound rows) rather than a degenerate case.

    The times agree with the histories, as url_state's merge leaves them: ``last_seen_at`` is
    the end of the newest observation (the change prior chains every observation's time back
    from it), ``first_seen_at`` the start of the oldest, ``last_changed_at`` the end of the
    newest changed one (null if none). A gone page's last fetch (the 404/410) came one interval
    after its last success. Each host is a news, shop or docs site with its own few classes
    (``SITE_CLASSES``).
    """
    import numpy as np
    import polars as pl

    from freshness_pipeline.science.estimate import (
        PRIORS_BY_CLASS,
        estimate_rates,
        prior_columns,
    )
    from freshness_pipeline.warehouse import tables

    rng = np.random.default_rng(seed)
    per_host = -(-n_urls // n_hosts)
    idx = np.arange(n_urls)
    true_rate = np.exp(rng.uniform(np.log(1 / 90), np.log(4.0), n_urls))
    base = rng.choice([0.25, 1.0, 3.0, 7.0, 14.0], size=n_urls)
    intervals = base[:, None] * rng.uniform(0.8, 1.25, size=(n_urls, n_obs))
    changed = rng.random((n_urls, n_obs)) < -np.expm1(-true_rate[:, None] * intervals)
    age_days = rng.uniform(0.0, 1.5, n_urls) * base
    status = np.where(rng.random(n_urls) < 0.98, "active", "gone")
    gone = status == "gone"
    # days from the last success (the end of the history) to the last fetch
    lag = np.where(gone, base * rng.uniform(0.8, 1.25, n_urls), 0.0)
    seen_days = age_days + lag
    # days from the end of the newest changed observation to the end of the history
    rev = intervals[:, ::-1]
    newest_change = np.argmax(changed[:, ::-1], axis=1)
    after_change = np.where(np.arange(n_obs)[None, :] < newest_change[:, None], rev, 0.0).sum(
        axis=1
    )
    changed_days = np.where(changed.any(axis=1), seen_days + after_change, np.nan)
    sites = np.array(list(SITE_CLASSES))
    site = sites[rng.integers(0, len(sites), n_hosts)][idx // per_host]
    url_class = np.empty(n_urls, dtype=object)
    draw = rng.random(n_urls)
    for name, mix in SITE_CLASSES.items():
        names = list(mix)
        assert set(names) <= set(PRIORS_BY_CLASS), names
        edges = np.cumsum(list(mix.values()))
        on = site == name
        url_class[on] = np.array(names)[
            np.minimum(np.searchsorted(edges, draw[on]), len(names) - 1)
        ]
    day_us = 86_400 * 1_000_000
    now_lit = pl.lit(NOW).cast(tables.UTC_TIME)

    def ago(days) -> pl.Expr:
        us = pl.Series(np.round(days * day_us), nan_to_null=True).cast(pl.Int64)
        return now_lit - pl.duration(microseconds=us)

    frame = pl.DataFrame(
        {
            "host_id": idx // per_host,
            "page": idx % per_host,
            "status": status,
            "value": rng.pareto(1.2, n_urls) + 1.0,
            "url_class": url_class.astype(str),
            "last_outcome": np.where(
                gone, "gone", np.where(changed[:, -1], "changed", "not_modified")
            ),
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
        first_seen_at=ago(seen_days + intervals.sum(axis=1)),
        last_fetched_at=ago(age_days),
        last_seen_at=ago(seen_days),
        last_changed_at=ago(changed_days),
        fingerprint=pl.col("url").hash(seed).cast(pl.String),
        fingerprint_version=pl.lit(1, pl.Int64),
        etag=pl.when("has_etag").then(pl.format('"{}"', pl.col("url").hash(seed + 1) % 10**12)),
        last_modified=pl.when(~pl.col("has_etag")).then(pl.lit("Mon, 02 Mar 2026 06:00:00 GMT")),
        last_http_status=pl.when(pl.col("last_outcome") == "changed")
        .then(200)
        .when(pl.col("last_outcome") == "gone")
        .then(410)
        .otherwise(304),
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

    from freshness_pipeline.warehouse import tables

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

    from freshness_pipeline.science.estimate import append_observations
    from freshness_pipeline.warehouse import tables

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


def previous_prior(state):
    """The change_prior rows the cycles before this one left: the table holds the newest fit
    before a cycle next to the cycle's own, so two fits (12 h and 6 h before now), the second
    warm-started from the first as url_state does. Untimed: made once, in the generate phase."""
    from freshness_pipeline.science.prior.table import refit_change_prior
    from freshness_pipeline.warehouse import tables

    older = refit_change_prior(state, None, now=NOW - 2 * PLAN_AFTER)
    return tables.conform("change_prior", refit_change_prior(state, older, now=NOW - PLAN_AFTER))


def refit_prior(state, previous):
    """What url_state does after the estimate: refit the change prior on the updated state,
    warm-started from the newest stored fit before now (the steady state of a running home)."""
    from freshness_pipeline.science.prior.table import refit_change_prior

    return refit_change_prior(state, previous, now=NOW)


def synthetic_plan_inputs(state, seed: int):
    """The next cycle's candidates with the columns stages.plan.plan_inputs passes that the
    planner and the change prior read (the history lists and last_seen_at included, as the
    asset passes them through build_plan), and a per-host capacity between 5 and 30 fetches
    (binding on some hosts, not all)."""
    import polars as pl

    inputs = state.select(
        "url",
        "host",
        "value",
        "url_class",
        "status",
        "last_fetched_at",
        "last_seen_at",
        "change_rate",
        "n_obs",
        "n_changes",
        "obs_interval_days",
        "obs_changed",
        pl.lit(1.0).alias("cost"),
    )
    capacity = (
        inputs.select(pl.col("host").unique())
        .with_columns(capacity=(pl.col("host").hash(seed + 4) % 26 + 5).cast(pl.Int64))
        .sort("host")
    )
    return inputs, capacity


def with_gains(inputs, prior):
    """What revisit_plan does before build_plan: each candidate's expected gain at the next
    cycle's now under the change prior this cycle fit."""
    from freshness_pipeline.science.prior.table import expected_gains
    from freshness_pipeline.science.schedule import PlanConfig

    objective = PlanConfig().objective
    gains = expected_gains(inputs, prior, now=NOW + PLAN_AFTER, objective=objective)
    return inputs.with_columns(expected_gain_override=gains)


def plan_next(inputs, capacity, budget_share: float):
    """The next cycle's plan (``build_plan``, taking ``expected_gain_override`` when present)."""
    from freshness_pipeline.science.schedule import build_plan

    budget = int(budget_share * inputs.height)
    return build_plan(inputs, capacity, now=NOW + PLAN_AFTER, budget=budget)


# ---- phases, each in its own interpreter ------------------------------------------------------


def url_state_files(home: Path) -> list[str]:
    from freshness_pipeline.warehouse.storage import Warehouse

    root = Warehouse(home).table_dir("url_state")
    return sorted(str(p) for p in root.glob("host=*/data.parquet"))


def phase_generate(args: argparse.Namespace) -> dict:
    import polars as pl

    from freshness_pipeline.warehouse.storage import Warehouse

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
    prior = previous_prior(state)
    t4 = time.perf_counter()
    warehouse.write_partitions("change_prior", hosts, prior)
    prior.write_parquet(Path(args.home) / BIG_PRIOR_FILE, compression="zstd", statistics=True)
    per_host_bytes = sum(os.path.getsize(f) for f in url_state_files(Path(args.home)))
    counts = state.group_by("host").agg(pl.col("url_class").n_unique())["url_class"]
    return {
        "rows": state.height,
        "seconds": {
            "build": t1 - t0,
            "write_hosts": t2 - t1,
            "write_one": t3 - t2,
            "prior": t4 - t3,
        },
        "bytes": {"hosts": per_host_bytes, "one": big.stat().st_size},
        "files": len(hosts),
        "classes": state["url_class"].value_counts(sort=True, normalize=True).rows(),
        "classes_per_host": float(counts.mean()),
        "prior_rows": prior.height,
    }


def read_table(table: str, layout: str, home: Path, scan: bool = False):
    """A table as the assets read it (``Warehouse.read`` over every host file, or the one big
    file conformed to the schema), or with ``scan`` as one lazy scan conformed to the schema."""
    import polars as pl

    from freshness_pipeline.warehouse import tables
    from freshness_pipeline.warehouse.storage import Warehouse

    one = {"url_state": BIG_FILE, "change_prior": BIG_PRIOR_FILE}[table]
    if layout == "one":
        return tables.conform(table, pl.read_parquet(home / one))
    if scan:
        files = sorted(str(p) for p in Warehouse(home).table_dir(table).glob("host=*/data.parquet"))
        return tables.conform(table, pl.scan_parquet(files, hive_partitioning=False).collect())
    return Warehouse(home).read(table)


def read_state(layout: str, home: Path, bare: bool, scan: bool = False):
    """The floor reads with one lazy scan; the project's path reads as its assets do (one
    ``Warehouse.read`` over every host file, or the one big file conformed to the schema), or
    with ``scan`` as one lazy scan conformed to the schema."""
    import polars as pl

    if bare:
        files = url_state_files(home) if layout == "hosts" else [str(home / BIG_FILE)]
        return pl.scan_parquet(files, hive_partitioning=False)
    return read_table("url_state", layout, home, scan=scan)


def phase_run(args: argparse.Namespace) -> dict:
    import polars as pl

    from freshness_pipeline.science.estimate import estimate_rates, prior_columns

    home = Path(args.home)
    seconds: dict[str, float] = {}
    cpu: dict[str, float] = {}
    cpu0 = own_cpu_seconds()
    t0 = t = time.perf_counter()

    def step(name: str) -> None:
        nonlocal t
        seconds[name] = time.perf_counter() - t
        cpu[name] = own_cpu_seconds() - cpu0 - sum(cpu.values())
        t = time.perf_counter()

    if args.phase == "floor":
        ordered = read_state(args.layout, home, bare=True).sort("next_check_at").collect()
        seconds["read+sort"] = time.perf_counter() - t
        return {"rows": ordered.height, "seconds": seconds, "cpu": own_cpu_seconds() - cpu0}
    scan = args.phase == SCAN_PHASE
    state = read_state(args.layout, home, bare=False, scan=scan)
    step("read")
    # url_state reads the stored change_prior (last cycle's fit and the one before it)
    previous = read_table("change_prior", args.layout, home, scan=scan)
    step("read_prior")
    updated, fetched = cycle_update(state, args.fetched, args.seed)
    step("append")
    with_priors = prior_columns(updated)
    only = None if args.phase == "full" else fetched
    estimated = estimate_rates(with_priors, only_rows=only)
    step("estimate")
    prior = refit_prior(estimated, previous)
    step("refit")
    inputs, capacity = synthetic_plan_inputs(estimated, args.seed)
    inputs = with_gains(inputs, prior)
    step("gains")
    plan = plan_next(inputs, capacity, args.budget)
    step("plan")
    seconds["total"] = time.perf_counter() - t0
    chosen = plan.filter(pl.col("selected")).sort("url")
    fit = prior.filter(pl.col("fitted_at") == pl.col("fitted_at").max())
    return {
        "rows": plan.height,
        "seconds": seconds,
        "cpu": own_cpu_seconds() - cpu0,
        "cpu_steps": cpu,
        "selected": chosen.height,
        "observed": int(fetched.sum()),
        "prior_rows": {"read": previous.height, "written": prior.height},
        "override_used": int(inputs["expected_gain_override"].is_finite().sum()),
        # the same plan from both estimation modes is the check that incremental is exact
        "plan_digest": int(chosen.select(pl.col("url").hash(0).sum()).item()),
        "rate_digest": float(estimated["change_rate"].sum()),
        "prior_digest": float(
            fit.explode("weight", "rate_per_day")
            .select((pl.col("weight") * pl.col("rate_per_day").log()).sum())
            .item()
        ),
    }


def child(args: argparse.Namespace) -> None:
    result = phase_generate(args) if args.phase == "generate" else phase_run(args)
    result["peak_rss_mb"] = own_peak_rss_mb()
    send_result(result)


def spawn(args: argparse.Namespace, phase: str, layout: str = "") -> dict:
    child_args = [
        *("--phase", phase, "--layout", layout or "hosts", "--home", args.home),
        *("--urls", str(args.urls), "--hosts", str(args.hosts), "--obs", str(args.obs)),
        *("--fetched", str(args.fetched), "--budget", str(args.budget), "--seed", str(args.seed)),
    ]
    start = time.perf_counter()
    result = run_child(__file__, child_args, what=f"phase {phase} {layout}")
    result["wall"] = time.perf_counter() - start
    return result


# ---- the table ------------------------------------------------------------------------------


def phases(layout: str) -> tuple[str, ...]:
    return (*PHASES, SCAN_PHASE) if layout == "hosts" else PHASES


def machine_note() -> str:
    load = os.getloadavg()
    return (
        f"{os.cpu_count()} CPUs, {memory_gib():.0f} GB RAM, load average "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1 / 5 / 15 min) at the end of the run"
    )


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


PHASE_NAMES = {
    "full": "full re-estimation",
    "incremental": "incremental (only_rows)",
    SCAN_PHASE: "incremental, one-scan read",
}
# The steps the change prior added to the path (url_state's refit, revisit_plan's gains).
PRIOR_STEPS = ("read_prior", "refit", "gains")


def report(args: argparse.Namespace, gen: dict, runs: dict[tuple[str, str], list[dict]]) -> str:
    mix = ", ".join(f"{name} {share:.0%}" for name, share in gen["classes"])
    lines = [
        f"url_state: {gen['rows']:,} URLs over {args.hosts:,} hosts, {args.obs} observations "
        f"each; {args.fetched:.0%} of URLs observed this cycle, budget {args.budget:.0%}, "
        f"{args.repeat} run(s) per phase (median shown)",
        f"url_class: {mix}; {gen['classes_per_host']:.1f} classes per host",
        f"generated in {gen['seconds']['build']:.1f} s; written as {gen['files']:,} host files "
        f"({gen['bytes']['hosts'] / 1e6:.0f} MB, {gen['seconds']['write_hosts']:.1f} s through "
        f"Warehouse.write_partitions) and as one file ({gen['bytes']['one'] / 1e6:.0f} MB, "
        f"{gen['seconds']['write_one']:.1f} s)",
        f"previous change_prior: {gen['prior_rows']:,} rows (two fits), made by two untimed "
        f"refits in {gen['seconds']['prior']:.1f} s",
        "",
        "| layout | phase | read s | read prior s | append s | estimate s | refit prior s "
        "| gains s | plan s | total s | x floor | CPU s | x floor (CPU) | peak RSS MB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    without = [
        "",
        "The same runs without the change prior's steps (read prior, refit, gains; the plan "
        "still carries the history columns):",
        "",
        "| layout | phase | refit CPU s | gains CPU s | prior steps share of total "
        "| total without s | x floor | CPU without s | x floor (CPU) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for layout in LAYOUTS:
        floor = median([r["seconds"]["read+sort"] for r in runs[(layout, "floor")]])
        floor_cpu = median([r["cpu"] for r in runs[(layout, "floor")]])
        label = {"hosts": f"{gen['files']:,} host files", "one": "one file"}[layout]
        for phase in phases(layout):
            rs = runs[(layout, phase)]
            rss = max(r["peak_rss_mb"] for r in rs)
            cpu = median([r["cpu"] for r in rs])
            if phase == "floor":
                lines.append(
                    f"| {label} | floor: scan + sort by next_check_at | | | | | | | | {floor:.2f} "
                    f"| 1.0 | {cpu:.2f} | 1.0 | {rss:,.0f} |"
                )
                continue
            sec = {k: median([r["seconds"][k] for r in rs]) for k in rs[0]["seconds"]}
            steps_cpu = {k: median([r["cpu_steps"][k] for r in rs]) for k in rs[0]["cpu_steps"]}
            name = PHASE_NAMES[phase]
            cells = " | ".join(
                f"{sec[k]:.2f}"
                for k in ("read", "read_prior", "append", "estimate", "refit", "gains", "plan")
            )
            lines.append(
                f"| {label} | {name} | {cells} | {sec['total']:.2f} | {sec['total'] / floor:.1f} "
                f"| {cpu:.2f} | {cpu / floor_cpu:.1f} | {rss:,.0f} |"
            )
            prior_s = sum(sec[k] for k in PRIOR_STEPS)
            rest = sec["total"] - prior_s
            rest_cpu = cpu - sum(steps_cpu[k] for k in PRIOR_STEPS)
            without.append(
                f"| {label} | {name} | {steps_cpu['refit']:.2f} | {steps_cpu['gains']:.2f} "
                f"| {prior_s / sec['total']:.0%} | {rest:.2f} | {rest / floor:.1f} "
                f"| {rest_cpu:.2f} | {rest_cpu / floor_cpu:.1f} |"
            )
    lines += [*without, ""]
    for layout in LAYOUTS:
        full, incr = runs[(layout, "full")][0], runs[(layout, "incremental")][0]
        keys = ("plan_digest", "rate_digest", "prior_digest")
        same = all(full[k] == incr[k] for k in keys)
        lines.append(
            f"{layout}: {full['observed']:,} URLs observed, {full['selected']:,} selected; "
            f"incremental gives the same rates, prior and plan as full: {'yes' if same else 'NO'}; "
            f"change_prior {full['prior_rows']['read']:,} rows read, "
            f"{full['prior_rows']['written']:,} written; expected_gain_override finite on "
            f"{full['override_used']:,} of {full['rows']:,} candidates"
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
        runs["idle"] = idle_peak_rss_mb(
            [
                "polars",
                "numpy",
                "duckdb",
                "freshness_pipeline.warehouse.storage",
                "freshness_pipeline.science.schedule",
                "freshness_pipeline.science.prior.table",
            ]
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
