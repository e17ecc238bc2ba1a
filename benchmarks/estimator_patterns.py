"""Change-rate estimates on pages that are not Poisson at the sampling scale.

    .venv/bin/python benchmarks/estimator_patterns.py                  # ~1 min; docs/estimator_patterns.md
    .venv/bin/python benchmarks/estimator_patterns.py --out /tmp/x.md  # a trial run elsewhere

A synthetic web of 20 hosts x 150 pages. Every host mixes the same five change patterns:
Poisson over three decades of rates; once a day at a fixed time of day; every 3-12 hours at a
fixed phase; bursty (Markov-modulated: quiet spells and bursts); fast (2-24 changes a day,
changing between most visits). Half the hosts send a trusted Last-Modified, so a changed fetch
also knows how old the content is. A crawler with a budget of 10 % of the pages per 6-hour cycle
runs 40 cycles from a cold start under three schedules: the product's planner, an adaptive one
(interval halved after a change, doubled when quiet) and round robin.

Every cycle goes through the functions the assets call: url_state's ``update_state`` (the
observations, their intervals and ages, the change prior's refit and ``change_rate``) and, for
the planner, revisit_plan's ``plan_inputs``, ``with_lastmod_hints``, ``posterior_gains`` and
``build_plan``. After the last cycle each page's estimates are set against its true long-run
rate (changes per day), and the bounds the doc argues with are computed from the same web and
histories. The doc is written by this script: do not edit it by hand.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from scheduling import CYCLE, Web, _encode, fmt_table, moment  # noqa: E402

from freshness_pipeline.science.estimate import (  # noqa: E402
    aligned_ages,
    clean_ages,
    estimate_rates,
    prior_columns,
    prior_mean,
)
from freshness_pipeline.science.prior.components import GLOBAL  # noqa: E402
from freshness_pipeline.science.prior.table import (  # noqa: E402
    ChangeModel,
    latest_fit_before,
    posterior_gains,
    prior_weights,
)
from freshness_pipeline.science.schedule import PlanConfig, build_plan  # noqa: E402
from freshness_pipeline.stages.plan import plan_inputs, with_lastmod_hints  # noqa: E402
from freshness_pipeline.stages.state import update_state  # noqa: E402
from freshness_pipeline.warehouse import tables  # noqa: E402

HOSTS = 20
#: Days of change history each page has before the crawl starts (what a first fetch's
#: Last-Modified can date)
HISTORY_DAYS = 365.0
PAGES_PER_HOST = 150
CYCLES = 40
BUDGET_SHARE = 0.10
CLASSES = (None, "article", "listing")
#: (pattern, share of each host's pages)
PATTERNS = (("poisson", 0.30), ("daily", 0.15), ("hourly", 0.15), ("bursty", 0.20), ("fast", 0.20))
#: log-uniform Poisson rates (changes/day)
POISSON_RANGE = (0.01, 10.0)
FAST_RANGE = (2.0, 24.0)
#: "every few hours": one period per page, in hours
HOURLY_PERIODS = (3.0, 4.0, 6.0, 8.0, 12.0)
JITTER_DAYS = 20.0 / (24 * 60)
#: bursty pages, each log-uniform: quiet rate, burst rate (changes/day), mean quiet spell and
#: mean burst (days), both exponential
BURSTY_QUIET_RATE = (0.05, 0.5)
BURSTY_BURST_RATE = (2.0, 8.0)
BURSTY_QUIET_DAYS = (2.0, 8.0)
BURSTY_BURST_DAYS = (0.25, 1.0)
SCHEDULES = ("planner", "adaptive", "round robin")
MODEL = ChangeModel()
#: the targets: |median log bias| over pages with >= 3 observations, median |log error| over
#: pages with >= 5, |log(prior mean / population mean)|
BIAS_TARGET, ERROR_TARGET, PRIOR_TOLERANCE = 0.15, 0.40, 0.20
#: pages told apart by nothing in their histories: every observation changed, none dated,
#: every interval at least this long (a daily clock then changes in every one of them)
ALIKE_MIN_INTERVAL = 1.0
ALIKE_MIN_PAGES = 10


# ----------------------------------------------------------------------------------- the web


def _log_uniform(rng: np.random.Generator, lo_hi: tuple[float, float], n: int) -> np.ndarray:
    return np.exp(rng.uniform(np.log(lo_hi[0]), np.log(lo_hi[1]), n))


def _poisson_times(rng, pages: np.ndarray, rates: np.ndarray, t0: float, t1: float):
    counts = rng.poisson(rates * (t1 - t0))
    page = np.repeat(pages, counts)
    return page, t0 + (t1 - t0) * rng.random(page.shape[0])


def _clock_times(rng, pages: np.ndarray, period: np.ndarray, t0: float, t1: float):
    """One change per period at a fixed phase, each moved by normal jitter."""
    phase = rng.random(pages.shape[0]) * period
    first = np.floor((t0 - phase) / period) - 1
    counts = (np.ceil((t1 - t0) / period) + 3).astype(np.int64)
    idx = np.repeat(np.arange(pages.shape[0]), counts)
    k = np.repeat(first, counts) + (
        np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    )
    times = phase[idx] + k * period[idx] + rng.normal(0.0, JITTER_DAYS, idx.shape[0])
    return pages[idx], times


def _bursty_times(rng, pages: np.ndarray, t0: float, t1: float):
    """Markov-modulated Poisson from the stationary state: (page, times, long-run rate)."""
    n = pages.shape[0]
    quiet = _log_uniform(rng, BURSTY_QUIET_RATE, n)
    burst = _log_uniform(rng, BURSTY_BURST_RATE, n)
    d_quiet = _log_uniform(rng, BURSTY_QUIET_DAYS, n)
    d_burst = _log_uniform(rng, BURSTY_BURST_DAYS, n)
    p_burst = d_burst / (d_quiet + d_burst)
    in_burst = rng.random(n) < p_burst
    t = np.full(n, t0)
    out_p, out_t = [], []
    while (t < t1).any():
        live = t < t1
        dur = rng.exponential(np.where(in_burst, d_burst, d_quiet))
        end = np.minimum(t + dur, t1)
        cnt = rng.poisson(np.where(in_burst, burst, quiet) * np.maximum(end - t, 0.0) * live)
        idx = np.repeat(np.arange(n), cnt)
        out_p.append(pages[idx])
        out_t.append(t[idx] + (end - t)[idx] * rng.random(idx.shape[0]))
        t = np.where(live, t + dur, t)
        in_burst = ~in_burst
    long_run = quiet * (1.0 - p_burst) + burst * p_burst
    return np.concatenate(out_p), np.concatenate(out_t), long_run


@dataclass
class Pages:
    """The synthetic web: its pages and their truth."""

    url: list[str]
    host: list[str]
    url_class: list[str | None]
    pattern: np.ndarray
    validators: np.ndarray
    rate: np.ndarray
    web: Web

    @property
    def n(self) -> int:
        return len(self.url)


def make_pages(
    seed: int, t0: float, t1: float, patterns: tuple[tuple[str, float], ...] = PATTERNS
) -> Pages:
    rng = np.random.default_rng([seed, 11])
    n = HOSTS * PAGES_PER_HOST
    host_of = np.arange(n) // PAGES_PER_HOST
    names = np.array([p for p, _ in patterns])
    counts = np.floor(np.array([s for _, s in patterns]) * PAGES_PER_HOST).astype(int)
    counts[0] += PAGES_PER_HOST - counts.sum()
    per_host = np.repeat(np.arange(len(patterns)), counts)
    pattern = np.concatenate([rng.permutation(per_host) for _ in range(HOSTS)])
    rate = np.zeros(n)
    page_parts, time_parts = [], []
    for code, name in enumerate(names):
        sel = np.flatnonzero(pattern == code)
        if sel.size == 0:
            continue
        if name in ("poisson", "fast"):
            rate[sel] = _log_uniform(
                rng, POISSON_RANGE if name == "poisson" else FAST_RANGE, sel.size
            )
            p, t = _poisson_times(rng, sel, rate[sel], t0, t1)
        elif name == "daily":
            rate[sel] = 1.0
            p, t = _clock_times(rng, sel, np.ones(sel.size), t0, t1)
        elif name == "hourly":
            hours = rng.choice(HOURLY_PERIODS, sel.size)
            rate[sel] = 24.0 / hours
            p, t = _clock_times(rng, sel, hours / 24.0, t0, t1)
        else:
            p, t, rate[sel] = _bursty_times(rng, sel, t0, t1)
        page_parts.append(p)
        time_parts.append(t)
    keys, span = _encode(np.concatenate(page_parts), np.concatenate(time_parts), t0, t1)
    classes = rng.integers(0, len(CLASSES), n)
    return Pages(
        url=[f"http://h{h:02d}.example/p{i:05d}" for i, h in enumerate(host_of)],
        host=[f"h{h:02d}.example" for h in host_of],
        url_class=[CLASSES[c] for c in classes],
        pattern=names[pattern],
        validators=(host_of % 2) == 0,
        rate=rate,
        web=Web("patterns", rate, keys, t0, span),
    )


# ------------------------------------------------------------------------------- the crawler


class Crawl:
    """One crawler's url_state and change prior, one cycle at a time through the assets'
    functions."""

    def __init__(self, pages: Pages) -> None:
        self.pages = pages
        self.candidates = tables.conform(
            "url_candidates",
            pl.DataFrame(
                {
                    "url": pages.url,
                    "host": pages.host,
                    "value": 1.0,
                    "url_class": pl.Series(pages.url_class, dtype=pl.String),
                    "first_seen_at": moment(-1.0),
                    "allowed": True,
                }
            ),
        )
        self.state = tables.empty("url_state")
        self.prior = tables.empty("change_prior")
        self.evidence = tables.empty("lastmod_evidence")
        self.last = np.full(pages.n, np.nan)  # day of each page's last fetch
        hosts = sorted(set(pages.host))
        # no politeness limit binds: what a host can take is the whole budget, at no pace
        self.capacity = pl.DataFrame(
            {
                "host": hosts,
                "capacity": [pages.n] * len(hosts),
                "cost_multiplier": [1.0] * len(hosts),
                "crawl_delay": [None] * len(hosts),
                "gap_s": [None] * len(hosts),
                "concurrency": [None] * len(hosts),
            },
            schema_overrides={
                "crawl_delay": pl.Float64,
                "gap_s": pl.Float64,
                "concurrency": pl.Int64,
            },
        )
        self.page_of = pl.DataFrame({"url": pages.url, "_page": np.arange(pages.n)})

    def plan(self, t: float, budget: int) -> pl.DataFrame:
        """revisit_plan's path: inputs, sitemap hints (none here), posterior gains, plan."""
        now = moment(t)
        inputs = with_lastmod_hints(
            plan_inputs(self.candidates, self.state, self.capacity), self.evidence, now
        )
        gains = posterior_gains(inputs, self.prior, now=now, model=MODEL)
        inputs = inputs.with_columns(
            expected_gain_override=gains["expected_index"],
            expected_change=gains["expected_capture"],
        )
        capacity = self.capacity.select("host", "capacity")
        return build_plan(inputs, capacity, now=now, budget=budget, config=PlanConfig())

    def chosen(self, plan: pl.DataFrame) -> np.ndarray:
        picked = plan.filter("selected").select("url").join(self.page_of, on="url")
        return np.sort(picked["_page"].to_numpy())

    def fetch(self, chosen: np.ndarray, t: float, plan: pl.DataFrame | None) -> np.ndarray:
        """Fetch ``chosen`` at day ``t`` and update url_state; returns which of them changed
        (False for a first fetch)."""
        pages, web = self.pages, self.pages.web
        prev = self.last[chosen]
        first = ~np.isfinite(prev)
        changed = np.zeros(chosen.shape[0], dtype=bool)
        changed[~first] = web.next_change(chosen[~first], prev[~first]) <= t
        validators = pages.validators[chosen]
        # a trusted Last-Modified: server Date minus the last change, on a first fetch too
        # (unknown for a page with no change since the web's history began)
        age = np.where((changed | first) & validators, t - web.last_change(chosen, t), np.nan)
        age[~np.isfinite(age)] = np.nan
        version = np.searchsorted(web.events, chosen * web.span + (t - web.t0), side="right")
        outcome = np.where(
            first,
            "new",
            np.where(changed, "changed", np.where(validators, "not_modified", "unchanged")),
        )
        results = tables.conform(
            "fetch_results",
            pl.DataFrame(
                {
                    "url": [pages.url[i] for i in chosen],
                    "host": [pages.host[i] for i in chosen],
                    "fetched_at": moment(t),
                    "http_status": np.where(outcome == "not_modified", 304, 200),
                    "outcome": outcome,
                    "fingerprint": [f"v{v}" for v in version],
                    "fingerprint_version": 1,
                    "sent": True,
                    "content_age_days": pl.Series(age, dtype=pl.Float64).fill_nan(None),
                    "dates_changes": validators,
                }
            ),
        )
        if plan is None:
            plan = results.select(
                "url", "host", selected=True, reason=pl.lit("priority"), cost=1.0
            ).with_columns(priority=1.0, status=pl.lit("active"))
        self.state, _grades, self.prior = update_state(
            self.state,
            self.candidates,
            results,
            plan,
            moment(t),
            change_prior=self.prior,
            model=MODEL,
        )
        self.last[chosen] = t
        return changed


def run_schedule(pages: Pages, schedule: str, seed: int) -> Crawl:
    crawl = Crawl(pages)
    n = pages.n
    budget = round(BUDGET_SHARE * n)
    rng = np.random.default_rng([seed, 5])
    order = rng.permutation(n)
    interval = np.full(n, float(n // budget))  # adaptive: cycles between visits
    for k in range(CYCLES):
        t = k * CYCLE
        plan = None
        if schedule == "planner":
            plan = crawl.plan(t, budget)
            chosen = crawl.chosen(plan)
        elif schedule == "round robin":
            start = (k * budget) % n
            chosen = np.sort(order[start : start + budget])
        else:
            # never-fetched pages first (in a fixed random order), then the most overdue
            never = ~np.isfinite(crawl.last)
            overdue = (t - crawl.last) / CYCLE / interval
            score = np.where(never, 1e9 - order, np.where(overdue >= 1.0, overdue, -np.inf))
            ranked = np.argsort(-score)[:budget]
            chosen = np.sort(ranked[np.isfinite(score[ranked])])
        seen = np.isfinite(crawl.last[chosen])
        changed = crawl.fetch(chosen, t, plan)
        if schedule == "adaptive":
            sel = chosen[seen]
            step = np.where(changed[seen], 0.5, 2.0)
            interval[sel] = np.clip(interval[sel] * step, 1.0, 32.0)
    return crawl


# ------------------------------------------------------------------------------ measurement

#: label -> column of the page table
ESTIMATORS = {
    "url_state.change_rate (posterior mean)": "change_rate",
    "url_state.change_rate_median": "change_rate_median",
    "class Gamma prior (estimate_rates)": "gamma",
}


def page_table(pages: Pages, crawl: Crawl) -> pl.DataFrame:
    """One row per page: truth, url_state's columns (the posterior mean and median) and the
    censored estimate with the fixed class prior on the same histories, for comparison."""
    state = crawl.state
    gamma = estimate_rates(prior_columns(state))["change_rate"]
    truth = pl.DataFrame(
        {
            "url": pages.url,
            "pattern": pages.pattern,
            "validators": pages.validators,
            "true_rate": pages.rate,
        }
    )
    return (
        state.select(
            "url",
            "url_class",
            "change_rate",
            "change_rate_median",
            "n_obs",
            "n_changes",
            "rate_is_lower_bound",
            "obs_interval_days",
            "obs_changed",
            "obs_age_days",
            "last_seen_at",
        )
        .with_columns(gamma=gamma, on_daily_clock=on_one_daily_clock(state))
        .join(truth, on="url")
    )


def log_error(estimate: pl.Expr) -> pl.Expr:
    return (estimate.clip(lower_bound=1e-6) / pl.col("true_rate")).log()


def error_stats(frame: pl.DataFrame, column: str) -> dict[str, float | int | None]:
    """n, median log bias and median |log error| over pages with >= 3 and >= 5 observations."""
    out: dict[str, float | int | None] = {}
    for k in (3, 5):
        err = frame.filter(pl.col("n_obs") >= k).select(log_error(pl.col(column)))[:, 0]
        out[f"n{k}"] = err.len()
        out[f"bias{k}"] = err.median() if err.len() else None
        out[f"err{k}"] = err.abs().median() if err.len() else None
    return out


def groups(table: pl.DataFrame):
    """(pattern, validators label, rows) per pattern and validator state, then every page."""
    names = [p for p, _ in PATTERNS]
    for name in names:
        for validators in (False, True):
            part = table.filter((pl.col("pattern") == name) & (pl.col("validators") == validators))
            yield name, "yes" if validators else "no", part
    for validators in (False, True):
        yield "all", "yes" if validators else "no", table.filter(pl.col("validators") == validators)
    yield "all", "either", table


def weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    order = np.argsort(values)
    cum = np.cumsum(weights[order]) / weights.sum()
    return float(values[order][np.searchsorted(cum, 0.5)])


def prior_vs_population(crawl: Crawl, table: pl.DataFrame) -> dict[str, float]:
    """The change prior the last cycle fit (every class pooled) against the pages it is fit
    on (those with a history)."""
    rates = np.r_[MODEL.grid_array, [1.0 / p.days for p in MODEL.periods]]
    weights = prior_weights(latest_fit_before(crawl.prior, moment(CYCLES * CYCLE)), MODEL)
    assert weights is not None
    glob = weights[GLOBAL]
    fitted_on = table.filter(pl.col("n_obs") > 0)["true_rate"].to_numpy()
    return {
        "prior mean": float(glob @ rates),
        "population mean": float(fitted_on.mean()),
        "prior median": weighted_median(rates, glob),
        "population median": float(np.median(fitted_on)),
        "clock share": float(glob[len(MODEL.grid) :].sum()),
        "pages": int(fitted_on.shape[0]),
    }


# ----------------------------------------------------------------------------------- bounds


def bursty_window_bound(pages: Pages) -> pl.DataFrame:
    """What the crawl's 10 days hold about a bursty page's long-run rate: told every change in
    the window (count / days), and told for every 6-hour cycle whether it saw a change (the
    censored Poisson rate of those bits: a crawler fetching the page at every cycle)."""
    web = pages.web
    idx = np.flatnonzero(pages.pattern == "bursty")
    days = CYCLES * CYCLE
    base = idx * web.span - web.t0

    def count(a: float, b: float) -> np.ndarray:
        return np.searchsorted(web.events, base + b) - np.searchsorted(web.events, base + a)

    hit = np.stack([count(k * CYCLE, (k + 1) * CYCLE) > 0 for k in range(CYCLES)]).mean(axis=0)
    return pl.DataFrame(
        {
            "true_rate": pages.rate[idx],
            "every change": np.maximum(count(0.0, days) / days, 1e-3),
            "every cycle": -np.log(np.maximum(1.0 - hit, 0.5 / CYCLES)) / CYCLE,
        }
    )


def on_one_daily_clock(table: pl.DataFrame) -> pl.Series:
    """Per page: every observation changed and is dated, and every dated change fell within
    an hour of one time of day (each change at its fetch's end minus its content age, the ends
    chained back from last_seen_at): a daily clock explains the history exactly."""
    flat = (
        table.select(
            pl.int_range(pl.len()).alias("row"),
            pl.col("obs_interval_days").alias("d"),
            aligned_ages(table).alias("a"),
            (pl.col("last_seen_at").dt.epoch("us").cast(pl.Float64) / 86_400e6).alias("last"),
        )
        .explode("d", "a")
        .drop_nulls("d")
        # each observation ends where the row's last one does, less the intervals after it
        .with_columns(
            end=pl.col("last") - pl.col("d").reverse().cum_sum().reverse().over("row") + pl.col("d")
        )
        .with_columns(phase=((pl.col("end") - pl.col("a")) * 24.0) % 24.0)
    )
    # the times of day lie within an hour iff the widest circular gap between them is >= 23 h
    gaps = (
        flat.sort("row", "phase")
        .group_by("row")
        .agg(
            pl.col("a").null_count().alias("undated"),
            pl.col("phase").diff().max().fill_null(0.0).alias("inner"),
            (pl.col("phase").first() + 24.0 - pl.col("phase").last()).alias("wrap"),
        )
        .with_columns(alike=(pl.col("undated") == 0) & (pl.max_horizontal("inner", "wrap") >= 23.0))
    )
    ok = np.zeros(table.height, dtype=bool)
    ok[gaps["row"].to_numpy()] = gaps["alike"].fill_null(False).to_numpy()
    return pl.Series(ok) & (table["n_changes"] == table["n_obs"])


#: history-only groups whose pages no estimator can tell apart (see ALIKE_TEXT)
ALIKE = {
    "undated": (
        pl.col("rate_is_lower_bound")
        & (pl.col("obs_interval_days").list.min() >= ALIKE_MIN_INTERVAL)
    ),
    "dated, on one daily clock": pl.col("on_daily_clock"),
}


def alike_bound(table: pl.DataFrame) -> pl.DataFrame:
    """Per history-only group and pattern (pages with >= 3 observations): how many, their true
    median rate, url_state's bias on them, and the bias of the one estimate they must all share
    that is least wrong on the worst pattern (the geometric midpoint of the extreme patterns'
    medians)."""
    parts = []
    for name, rule in ALIKE.items():
        alike = table.filter((pl.col("n_obs") >= 3) & rule)
        per = (
            alike.group_by("pattern")
            .agg(
                pl.len().alias("pages"),
                pl.col("true_rate").median().alias("true median"),
                log_error(pl.col("change_rate")).median().alias("ours"),
            )
            .filter(pl.col("pages") >= ALIKE_MIN_PAGES)
        )
        if per.height < 2:
            continue
        shared = float(np.sqrt(per["true median"].min() * per["true median"].max()))
        parts.append(
            per.with_columns(
                group=pl.lit(name),
                shared=pl.lit(shared),
                bias=(pl.lit(shared) / pl.col("true median")).log(),
            ).sort("true median")
        )
    return pl.concat(parts) if parts else pl.DataFrame()


def told_the_pattern(table: pl.DataFrame, pattern: str, lo_hi: tuple[float, float]) -> pl.DataFrame:
    """The pages of a Poisson pattern with ``told``: their posterior median under that
    pattern's own rates (log-uniform over ``lo_hi``), on the same histories and ages. No
    estimator is told which pattern a page follows; this one is, and what it still misses is
    not in the observations."""
    part = table.filter(pl.col("pattern") == pattern)
    grid = np.geomspace(lo_hi[0], lo_hi[1], 801)
    flat = (
        part.select(
            pl.int_range(pl.len()).alias("row"),
            pl.col("obs_interval_days").alias("d"),
            pl.col("obs_changed").alias("c"),
            aligned_ages(part).alias("a"),
        )
        .explode("d", "c", "a")
        .drop_nulls(["d", "c"])
    )
    row, d, c = flat["row"].to_numpy(), flat["d"].to_numpy(), flat["c"].to_numpy()
    a = np.where(c, clean_ages(flat["a"].fill_null(np.nan).to_numpy(), d), np.nan)
    aged = np.isfinite(a)
    loglik = np.zeros((part.height, grid.shape[0]))
    np.add.at(loglik, row[~c], -np.outer(d[~c], grid))
    np.add.at(loglik, row[c & ~aged], np.log(-np.expm1(-np.outer(d[c & ~aged], grid))))
    np.add.at(loglik, row[aged], np.log(grid)[None, :] - np.outer(a[aged], grid))
    post = np.exp(loglik - loglik.max(axis=1, keepdims=True))
    cum = np.cumsum(post, axis=1)
    return part.with_columns(told=pl.Series(grid[np.argmax(cum >= 0.5 * cum[:, -1:], axis=1)]))


# ----------------------------------------------------------------------------------- report


def signed(x: float | None) -> str:
    return "–" if x is None else f"{x:+.2f}".replace("+0.00", "0.00").replace("-0.00", "0.00")


def plain(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "estimator_patterns.md")
    args = ap.parse_args()
    started = time.perf_counter()
    tables_of: dict[str, list[pl.DataFrame]] = {s: [] for s in SCHEDULES}
    priors, bursty = [], []
    for seed in args.seeds:
        pages = make_pages(seed, -HISTORY_DAYS, CYCLES * CYCLE + 2.0)
        bursty.append(bursty_window_bound(pages))
        for schedule in SCHEDULES:
            crawl = run_schedule(pages, schedule, seed)
            table = page_table(pages, crawl).with_columns(seed=pl.lit(seed))
            tables_of[schedule].append(table)
            priors.append({"schedule": schedule, "seed": seed, **prior_vs_population(crawl, table)})
            print(f"seed {seed}, {schedule}: {time.perf_counter() - started:.0f} s", flush=True)
    runs = {s: pl.concat(parts) for s, parts in tables_of.items()}
    seeds = ", ".join(str(s) for s in args.seeds)
    doc = [
        "# Change-rate estimates on pages that are not Poisson at the sampling scale",
        "",
        "Generated by `.venv/bin/python benchmarks/estimator_patterns.py` "
        f"(seeds {seeds}, {time.perf_counter() - started:.0f} s on 2 shared cores). Do not "
        "edit by hand: rerun the command.",
        "",
        SETUP.format(seeds=len(args.seeds)),
        "",
    ]

    # per miss, what the bounds say about it
    alike = {s: alike_bound(t) for s, t in runs.items()}
    told = {
        (s, pattern): told_the_pattern(t, pattern, lo_hi)
        for s, t in runs.items()
        for pattern, lo_hi in (("poisson", POISSON_RANGE), ("fast", FAST_RANGE))
    }
    misses: list[str] = []
    rows_of: dict[str, list[list[str]]] = {}
    for schedule, table in runs.items():
        rows = rows_of.setdefault(schedule, [])
        for name, validators, part in groups(table):
            s = error_stats(part, "change_rate")
            rows.append(
                [name, validators, f"{s['n3']:,}", signed(s["bias3"]), plain(s["err3"])]
                + [f"{s['n5']:,}", signed(s["bias5"]), plain(s["err5"])]
            )
            if name == "all":
                continue
            found = []
            if s["bias3"] is not None and abs(s["bias3"]) > BIAS_TARGET:
                found.append(f"bias {s['bias3']:+.2f} over {s['n3']:,} pages")
            if s["err5"] is not None and s["err5"] > ERROR_TARGET and s["n5"] >= ALIKE_MIN_PAGES:
                found.append(f"abs error {s['err5']:.2f} over {s['n5']:,} pages with >= 5")
            if found:
                misses.append(
                    f"{schedule}, {name}, validators {validators}: {'; '.join(found)}. "
                    + explain(name, validators == "yes", part, alike[schedule], told, schedule)
                )
    doc += ["## url_state.change_rate against the true rate", "", MAIN_TEXT, ""]
    headers = ["pattern", "validators", "pages >= 3 obs", "bias (>= 3)", "abs error (>= 3)"]
    headers += ["pages >= 5 obs", "bias (>= 5)", "abs error (>= 5)"]
    for schedule, rows in rows_of.items():
        doc += [f"**{schedule}**", "", fmt_table(headers, rows), ""]
    doc += [
        f"Misses of the targets (|bias| <= {BIAS_TARGET} over the pages with >= 3 "
        f"observations, median |log error| <= {ERROR_TARGET} over those with >= 5, where at "
        f"least {ALIKE_MIN_PAGES} pages have 5), each with what the bounds below say of it:",
        "",
        *(f"* {m}" for m in misses),
        "",
    ]

    doc += ["## The estimators side by side", "", SIDE_TEXT, ""]
    headers = ["schedule", "pattern", "validators"]
    headers += [
        f"{label}: {what}" for label in ESTIMATORS for what in ("bias (>= 3)", "abs (>= 5)")
    ]
    rows = []
    for schedule, table in runs.items():
        for name, validators, part in groups(table):
            row = [schedule, name, validators]
            for column in ESTIMATORS.values():
                s = error_stats(part, column)
                row += [signed(s["bias3"]), plain(s["err5"])]
            rows.append(row)
    doc += [fmt_table(headers, rows), ""]

    doc += ["## The change prior against the population it is fit on", "", PRIOR_TEXT, ""]
    rows = []
    for p in priors:
        ratio = p["prior mean"] / p["population mean"]
        verdict = "within" if abs(np.log(ratio)) <= PRIOR_TOLERANCE else "OUTSIDE"
        rows.append(
            [p["schedule"], str(p["seed"]), f"{p['pages']:,}", f"{p['prior mean']:.2f}"]
            + [f"{p['population mean']:.2f}", f"{ratio:.2f} ({verdict})"]
            + [f"{p['prior median']:.2f}", f"{p['population median']:.2f}"]
            + [f"{p['clock share']:.3f}"]
        )
    headers = ["schedule", "seed", "pages fit on", "prior mean /day", "population mean /day"]
    headers += ["ratio", "prior median /day", "population median /day", "prior's clock share"]
    classes = ", ".join(f"{c or 'no class'} {prior_mean(c):.2f}" for c in CLASSES)
    doc += [
        fmt_table(headers, rows),
        "",
        f"For comparison, the fixed class priors url_state's rates leaned on before (mean α/β, "
        f"changes/day): {classes}.",
        "",
    ]

    burst = pl.concat(bursty)
    told_all, per_cycle = (
        burst.select(log_error(pl.col(c)).median()).item() for c in ("every change", "every cycle")
    )
    told_abs = burst.select(log_error(pl.col("every change")).abs().median()).item()
    doc += [
        "## Bounds: what the observations cannot tell",
        "",
        BOUNDS_TEXT,
        "",
        "**Bursty pages.** Against the long-run rate, an estimate told every change in the 10 "
        f"days has a median log bias of {told_all:+.2f} and a median |log error| of "
        f"{told_abs:.2f} (a window of 10 days holds one or two bursts); the censored Poisson "
        "rate of a crawler that fetched the page at every 6-hour cycle has a bias of "
        f"{per_cycle:+.2f}: a fetch sees one change of a burst, and a crawler fetching less "
        "often sees fewer. What is left below that is the Poisson reading of clustered "
        "changes, which a model of bursts (not in the change prior) could recover in part.",
        "",
        "**Histories alike.** " + ALIKE_TEXT,
        "",
    ]
    rows = []
    for schedule, frame in alike.items():
        for r in frame.iter_rows(named=True):
            rows.append(
                [schedule, r["group"], r["pattern"], f"{r['pages']:,}", f"{r['true median']:.2f}"]
                + [signed(r["ours"]), f"{r['shared']:.2f}", signed(r["bias"])]
            )
    headers = ["schedule", "histories", "pattern", "pages", "true median /day", "ours: bias"]
    headers += ["least-worst shared estimate", "its bias"]
    doc += [fmt_table(headers, rows), "", "**Told the pattern.** " + TOLD_TEXT, ""]
    rows = []
    for (schedule, pattern), frame in told.items():
        for validators in (False, True):
            part = frame.filter(pl.col("validators") == validators)
            ours, oracle = error_stats(part, "change_rate"), error_stats(part, "told")
            rows.append(
                [schedule, pattern, "yes" if validators else "no"]
                + [signed(ours["bias3"]), signed(oracle["bias3"])]
                + [plain(ours["err5"]), plain(oracle["err5"])]
            )
    headers = ["schedule", "pattern", "validators", "bias (>= 3): ours", "told the pattern"]
    headers += ["abs error (>= 5): ours", "told the pattern"]
    doc += [fmt_table(headers, rows), "", "**Pooled with bursty pages.** " + POOLED_TEXT, ""]
    rows = []
    for label, frame in pooling_check(args.seeds).items():
        for validators in (False, True):
            part = frame.filter(
                (pl.col("pattern") == "poisson") & (pl.col("validators") == validators)
            )
            s = error_stats(part, "change_rate")
            rows.append([label, "yes" if validators else "no", f"{s['n3']:,}", signed(s["bias3"])])
    headers = ["web (round robin)", "validators", "poisson pages >= 3 obs", "bias (>= 3)"]
    doc += [fmt_table(headers, rows), "", reading(runs, priors)]
    text = "\n".join(doc)
    print(text)
    args.out.write_text(text + "\n")


#: the web of the pooling check: its bursty pages are Poisson pages instead
WITHOUT_BURSTY = tuple(
    (name, share + dict(PATTERNS)["bursty"] if name == "poisson" else share)
    for name, share in PATTERNS
    if name != "bursty"
)


def pooling_check(seeds: list[int]) -> dict[str, pl.DataFrame]:
    """Round robin on the benchmark's webs and on the same webs without bursty pages: how much
    of the Poisson pages' bias is their histories shared with bursty pages'."""
    out = {}
    for label, patterns in (("as above", PATTERNS), ("bursty pages made Poisson", WITHOUT_BURSTY)):
        parts = []
        for seed in seeds:
            pages = make_pages(seed, -HISTORY_DAYS, CYCLES * CYCLE + 2.0, patterns)
            parts.append(page_table(pages, run_schedule(pages, "round robin", seed)))
        out[label] = pl.concat(parts)
    return out


def explain(
    pattern: str,
    validators: bool,
    part: pl.DataFrame,
    alike: pl.DataFrame,
    told: dict,
    schedule: str,
) -> str:
    """What the bounds say about one miss: the share of its pages whose histories are alike
    other patterns', and the estimator told the pattern, where there is one."""
    said = []
    with3 = part.filter(pl.col("n_obs") >= 3)
    for name, rule in ALIKE.items():
        share = with3.select(rule.fill_null(False).mean()).item() or 0.0
        if share >= 0.1:
            said.append(f"{share:.0%} of them have histories alike other patterns' ({name})")
    if (schedule, pattern) in told:
        frame = told[(schedule, pattern)].filter(pl.col("validators") == validators)
        s = error_stats(frame, "told")
        said.append(f"told the pattern: bias {signed(s['bias3'])}, abs error {plain(s['err5'])}")
    if pattern == "bursty":
        said.append("see the bursty bound")
    return ("Bounds: " + "; ".join(said) + ".") if said else "No bound explains it."


def reading(runs: dict[str, pl.DataFrame], priors: list[dict]) -> str:
    overall = max(
        abs(error_stats(part, "change_rate")["bias3"] or 0.0)
        for table in runs.values()
        for name, _v, part in groups(table)
        if name == "all"
    )
    median_truth = float(np.median([p["population median"] for p in priors]))
    mean_truth = float(np.median([p["population mean"] for p in priors]))
    gap = float(np.median([p["prior mean"] / p["population mean"] for p in priors]))
    capped = estimate_rates(
        prior_columns(
            pl.DataFrame({"obs_interval_days": [[2.5, 2.5, 2.5]], "obs_changed": [[True] * 3]})
        )
    )["change_rate"][0]
    return READING.format(
        overall=overall,
        default=prior_mean(None),
        median_truth=median_truth,
        mean_truth=mean_truth,
        capped=capped,
        gap=gap,
    )


SETUP = """## Setup

A synthetic web of 20 hosts x 150 pages (3,000), one web per seed ({seeds} seeds; the tables
pool their pages). Every host mixes the same patterns (share of its pages):

* **poisson** (30 %): Poisson, log-uniform rates over 0.01-10 changes/day;
* **daily** (15 %): once a day at a fixed time of day;
* **hourly** (15 %): every 3, 4, 6, 8 or 12 hours at a fixed phase (both clocks with 20 minutes
  of normal jitter);
* **bursty** (20 %): Markov-modulated Poisson, quiet at 0.05-0.5/day for spells of 2-8 days on
  average, bursts at 2-8/day for 6-24 hours on average (each parameter log-uniform per page);
* **fast** (20 %): Poisson at 2-24/day, changed between most visits.

A page's true rate is its long-run number of changes per day (1/P for a clock). URL classes
(none, article, listing) are drawn at random, so each (host, class) holds about 50 pages of
the five patterns. The even hosts send a trusted Last-Modified: a changed fetch carries the
content's age (`fetch_results.content_age_days` with `dates_changes`), which url_state keeps in
`obs_age_days`; on the odd hosts a fetch says only changed or not. Each page's changes
begin a year before the crawl, so a first fetch on an even host says how long ago its content
last changed: url_state's first look (last changed then, not since); elsewhere a page's first
fetch is not an observation.

A crawler fetches 10 % of the pages per 6-hour cycle for 40 cycles (10 days) from a cold start
(nothing fetched yet). Three schedules:

* **planner**: the product's, as revisit_plan calls it (`plan_inputs`, `with_lastmod_hints`,
  `posterior_gains` under the stored change prior, `build_plan` with the default `PlanConfig`);
* **adaptive**: pages never fetched first, then the most overdue; a page's interval is halved
  after a change and doubled when quiet, within 1-32 cycles;
* **round robin**: every page every 10 cycles (3 observations each by the end).

Every cycle goes through url_state's `update_state` as the asset calls it: the observations and
their ages, the refit of the change prior (`refit_change_prior`, warm-started from the last
cycle's fit) and `change_rate` under it.

Figures: the median over pages of log(estimate / true rate) (**bias**: -0.47 is 0.63x the
truth) and of its absolute value (**abs error**), over the pages with at least 3 and at least
5 observations."""

MAIN_TEXT = """`change_rate` is the posterior mean of the page's rate under the change prior url_state
refits each cycle (`science.prior.table.posterior_rates`): the population the page belongs to (48
Poisson rates and the clocks of 3, 4, 6, 8 and 12 hours, a day and a week, their weights
fit on every page's history) is what a thinly observed page is judged against. The mean is what
the column promises (an expected number of changes over a span is the rate times the span);
`change_rate_median`, beside it, is the typical rate (next section)."""

SIDE_TEXT = """The same histories, three estimates: url_state's posterior mean (`change_rate`) and median
(`change_rate_median`) under the same prior, and `estimate_rates` with the fixed Gamma prior per
URL class, what url_state reported before. A wide posterior's mean is pulled up by its fast
tail; on the log scale the median is the estimate with the least expected error."""

PRIOR_TEXT = f"""The prior the last cycle fit, every class pooled (`__global__`), against the true rates of the
pages it is fit on (those with at least one observation). Tolerance on the mean: e^±{PRIOR_TOLERANCE}
(x{np.exp(-PRIOR_TOLERANCE):.2f}-{np.exp(PRIOR_TOLERANCE):.2f}). The median of a prior with clocks
sits on a clock when a clock holds the middle of the population (here the daily pages)."""

BOUNDS_TEXT = """An estimator sees only the histories: two pages with the same history get the same estimate,
whatever their patterns. Over all pages (the `all` rows) url_state's rate is close to unbiased;
what is left per pattern is pages of different patterns whose histories look alike and share
one estimate, above the truth of some and below that of others. The bounds below say how much of
each miss no estimator could avoid."""

ALIKE_TEXT = f"""Two groups of pages with >= 3 observations, defined by their histories only.
*undated*: every observation changed, none dated, every interval at least {ALIKE_MIN_INTERVAL:g}
day. A daily clock changes in every such interval and a Poisson page at 2/day in 86 % of them,
so these histories differ at most by a factor 1/0.86^n in how likely they are. *dated, on one
daily clock*: every observation changed and dated, every dated change within an hour of one
time of day. A daily clock explains such a history exactly, and so does a clock of 12 hours
(or of a few) whose fetches always found the same tick the last one: the planner fetches a
page it believes daily just after that tick, every day or every few days. Whatever one estimate
a group's pages share, its biases on the patterns with the lowest and the highest true median
differ by the log ratio of the two; the least-worst shared estimate (their geometric midpoint)
still misses both by half of it. Patterns with at least {ALIKE_MIN_PAGES} pages in a group:"""

TOLD_TEXT = """For the Poisson patterns, the posterior median under the pattern's own log-uniform rates, on
the same histories and ages: an estimator told which pattern each page follows, which ours is
not. Where it misses a target too, the observations do not hold the answer; where it meets it
and ours does not, the gap is pages of other patterns with the same histories (Poisson pages
unchanged for a week share them with bursty pages in a quiet spell; fast pages seen a day
apart with daily ones)."""

POOLED_TEXT = """The Poisson pages' bias on round robin, on the benchmark's webs and on the
same webs with their bursty pages made Poisson pages (log-uniform over the same rates): a Poisson
page unchanged for a week has a history a bursty page in a quiet spell could have, and the
bursty pages' long-run rates are higher, so the shared estimate is above the Poisson pages'."""

READING = """## Reading

* **Why url_state's rates were biased low.** `change_rate` came from `estimate_rates`, the
  censored estimate with a fixed Gamma prior per URL class, not from the change prior url_state
  refits each cycle. The class prior expects {default:.2f} changes a day on a page without a
  class, on a web whose pages change {median_truth:.1f} times a day (median) and {mean_truth:.1f}
  (mean), and the pages with few observations leaned on it. A page changed at every visit was
  capped at the sampling rate ({capped:.2f}/day after three changed visits 2.5 days apart),
  which turned every daily, few-hourly or fast page fetched a few days apart into a slow one.
  On the hosts with a trusted Last-Modified the same estimate read a clock page's content ages
  as Poisson ages, and a clock's ages are uniform over its period where a Poisson page's have
  mean 1/λ: about twice the rate. The change prior itself was close to the population (its mean
  {gap:.2f}x the population's, median over runs): it was not what the rates were scored under.
* **The fix**: url_state's `change_rate` is the posterior mean under the change prior refit
  this cycle (`change_rate_median` the median), and the prior has clocks of 3, 4, 6 and 8 hours
  besides 12 hours, a day and a week. The mean sits above the median where the posterior is
  wide (its fast tail pulls it up; the side-by-side table), so on thin evidence the median is
  the closer guess in log terms. Without the clocks of a few hours their pages with trusted
  dates were read as Poisson at twice their rate, or taken by the daily clock.
* **Over all pages** the bias is at most {overall:.2f} on every schedule. **What is left per
  pattern** is in the bounds: pages whose histories are alike another pattern's (undated pages
  changed at every visit a day or more apart: daily, few-hourly and fast alike; clock pages
  fetched at one time of day: any clock dividing a day alike), Poisson pages with a few
  observations that share their histories with bursty pages (the estimator told the pattern
  meets the target, and without the bursty pages ours comes close), and bursty pages, whose
  long-run rate is not in ten days of fetches 6 hours or more apart.
"""


if __name__ == "__main__":
    main()
