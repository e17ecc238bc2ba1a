"""url_state's change_rate on pages that are not Poisson at the sampling scale, through
update_state cycle after cycle as the asset runs it: the population's prior, not a fixed class
prior, is what thin histories lean on, and clock pages with trusted dates are not read as
Poisson (docs/estimator_patterns.md measures the same on a larger web)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from freshness_pipeline.science.prior.components import (
    DEFAULT_PERIODS,
    GLOBAL,
    Components,
    rate_grid,
)
from freshness_pipeline.science.prior.histories import histories_from_arrays
from freshness_pipeline.science.prior.posterior import PosteriorMedianRate, posterior_summary
from freshness_pipeline.science.prior.table import (
    ChangeModel,
    latest_fit_before,
    posterior_rates,
    prior_weights,
)
from freshness_pipeline.stages.state import update_state
from freshness_pipeline.warehouse import tables

T0 = datetime(2026, 11, 2, tzinfo=UTC)
CYCLE_DAYS = 0.25
#: the targets of docs/estimator_patterns.md: |median log bias|, |log(prior mean / truth)|
BIAS_TARGET = 0.15
PRIOR_TOLERANCE = 0.2


def at(days: float) -> datetime:
    return T0 + timedelta(days=float(days))


class Crawl:
    """Pages with known change times, fetched on a random share of the 6-hour cycles; every
    cycle goes through update_state with the stored change prior, as the url_state asset."""

    def __init__(self, changes: list[np.ndarray], *, dated: bool, url_class: str | None = None):
        self.changes = [np.sort(c) for c in changes]
        n = len(changes)
        self.urls = [f"http://a.example/p{i}" for i in range(n)]
        self.dated = dated
        self.candidates = tables.conform(
            "url_candidates",
            pl.DataFrame(
                {
                    "url": self.urls,
                    "host": "a.example",
                    "value": 1.0,
                    "url_class": pl.Series([url_class] * n, dtype=pl.String),
                    "first_seen_at": T0,
                    "allowed": True,
                }
            ),
        )
        self.state = tables.empty("url_state")
        self.prior = tables.empty("change_prior")
        self.last = np.full(n, np.nan)

    def cycle(self, t: float, chosen: np.ndarray) -> None:
        rows = []
        for i in chosen:
            c = self.changes[i]
            last_change = c[np.searchsorted(c, t, side="right") - 1] if (c <= t).any() else None
            if np.isnan(self.last[i]):
                outcome, age = "new", None
            else:
                changed = bool(((c > self.last[i]) & (c <= t)).any())
                outcome = "changed" if changed else "unchanged"
                age = t - last_change if changed and self.dated else None
            rows.append(
                {
                    "url": self.urls[i],
                    "host": "a.example",
                    "fetched_at": at(t),
                    "outcome": outcome,
                    "http_status": 200,
                    "fingerprint": f"v{int((c <= t).sum())}",
                    "fingerprint_version": 1,
                    "sent": True,
                    "content_age_days": age,
                    "dates_changes": self.dated,
                }
            )
            self.last[i] = t
        results = tables.conform("fetch_results", pl.DataFrame(rows))
        plan = tables.conform(
            "revisit_plan",
            results.select("url", "host", selected=True, cost=1.0, status=pl.lit("active")),
        )
        self.state, _grades, self.prior = update_state(
            self.state, self.candidates, results, plan, at(t), change_prior=self.prior
        )

    def run(self, cycles: int, share: float, seed: int) -> pl.DataFrame:
        """Every page at cycle 0, then each page on a random ``share`` of the cycles (intervals
        of 6 hours to days, as a planner leaves them)."""
        rng = np.random.default_rng(seed)
        n = len(self.urls)
        self.cycle(0.0, np.arange(n))
        for k in range(1, cycles):
            self.cycle(k * CYCLE_DAYS, np.flatnonzero(rng.random(n) < share))
        return self.state.sort("url", descending=False)


def poisson_changes(rate: float, n: int, days: float, rng: np.random.Generator) -> list:
    return [np.sort(rng.uniform(-1.0, days, rng.poisson(rate * (days + 1.0)))) for _ in range(n)]


def clock_changes(period: float, n: int, days: float, rng: np.random.Generator) -> list:
    out = []
    for _ in range(n):
        ticks = rng.uniform(0, period) + np.arange(-1.0, days + period, period)
        out.append(ticks + rng.normal(0.0, 10 / 1440, ticks.shape[0]))
    return out


def median_log_bias(state: pl.DataFrame, truth: np.ndarray, min_obs: int = 3) -> float:
    ordered = state.with_columns(
        pl.col("url").str.extract(r"p(\d+)$").cast(pl.Int64).alias("_i")
    ).sort("_i")
    rate = ordered["change_rate"].to_numpy()
    keep = ordered["n_obs"].to_numpy() >= min_obs
    assert keep.sum() >= 10
    return float(np.median(np.log(rate[keep] / truth[keep])))


# ------------------------------------------------------------------ through update_state


def test_fast_pages_with_trusted_dates_are_not_pulled_to_the_class_prior():
    """Pages changing 8 times a day, a few dated changes each: a Gamma prior of one day's
    pseudo-exposure (the default class, a change a week) held them near 2/day; the population
    they belong to says otherwise."""
    rng = np.random.default_rng(1)
    crawl = Crawl(poisson_changes(8.0, 60, 6.0, rng), dated=True)
    state = crawl.run(cycles=24, share=0.3, seed=2)
    assert abs(median_log_bias(state, np.full(60, 8.0))) <= BIAS_TARGET


def test_a_clock_of_a_few_hours_with_trusted_dates_is_not_read_as_poisson():
    """Pages updated every 4 hours: their content ages are uniform over the 4 hours, which a
    Poisson reading takes for twice the rate, and a class prior for a fraction of it."""
    rng = np.random.default_rng(3)
    crawl = Crawl(clock_changes(4 / 24, 60, 6.0, rng), dated=True)
    state = crawl.run(cycles=24, share=0.3, seed=4)
    assert abs(median_log_bias(state, np.full(60, 6.0))) <= BIAS_TARGET


def test_a_daily_page_seen_within_the_day_is_not_biased_by_its_regularity():
    """Undated daily pages fetched at 6-hour multiples: a Poisson rate reads "changed in a
    quarter of the 6-hour intervals" as 1.15/day and caps the ones changed at every visit at
    the sampling rate; the daily clock says 1."""
    rng = np.random.default_rng(5)
    crawl = Crawl(clock_changes(1.0, 60, 8.0, rng), dated=False)
    state = crawl.run(cycles=32, share=0.3, seed=6)
    assert abs(median_log_bias(state, np.full(60, 1.0), min_obs=5)) <= BIAS_TARGET


def fitted_prior(prior: pl.DataFrame, now: datetime) -> dict[str, np.ndarray]:
    """The weights of the newest fit stamped at or before ``now``."""
    weights = prior_weights(latest_fit_before(prior, now + timedelta(seconds=1)), ChangeModel())
    assert weights is not None
    return weights


def prior_mean(weights: dict[str, np.ndarray]) -> float:
    rates = np.r_[rate_grid(), [1.0 / p.days for p in DEFAULT_PERIODS]]
    return float(weights[GLOBAL] @ rates)


def test_pages_without_a_history_get_the_prior_of_their_population():
    """A page not observed yet is rated by the prior fit on its population (its median), not
    by a fixed class prior's mean (the default class expects a change a week)."""
    rng = np.random.default_rng(7)
    crawl = Crawl(poisson_changes(4.0, 60, 6.0, rng), dated=True)
    crawl.run(cycles=20, share=0.4, seed=8)
    now = at(20 * CYCLE_DAYS)
    fresh = crawl.candidates.head(1).with_columns(url=pl.lit("http://a.example/fresh"))
    nothing = tables.empty("fetch_results")
    update = update_state(
        crawl.state,
        pl.concat([crawl.candidates, fresh]),
        nothing,
        tables.empty("revisit_plan"),
        now,
        change_prior=crawl.prior,
    )
    weights = fitted_prior(update.change_prior, now)
    assert abs(np.log(prior_mean(weights) / 4.0)) <= PRIOR_TOLERANCE
    row = update.state.filter(pl.col("url") == "http://a.example/fresh").row(0, named=True)
    expected = posterior_rates(
        pl.DataFrame(
            {"url_class": [None], "obs_interval_days": [[]], "obs_changed": [[]]},
            schema={
                "url_class": pl.String,
                "obs_interval_days": pl.List(pl.Float64),
                "obs_changed": pl.List(pl.Boolean),
            },
        ),
        weights,
    )["change_rate"][0]
    assert row["change_rate"] == pytest.approx(expected)
    assert abs(np.log(row["change_rate"] / 4.0)) <= 2 * PRIOR_TOLERANCE
    assert row["n_obs"] == 0 and not row["rate_is_lower_bound"]


def test_the_prior_of_dated_clock_pages_has_their_mean():
    """Fit on pages updated every 4 hours with trusted dates, the change prior's mean is the
    population's: without a 4-hour clock their ages made it twice as fast."""
    rng = np.random.default_rng(9)
    crawl = Crawl(clock_changes(4 / 24, 80, 6.0, rng), dated=True)
    crawl.run(cycles=24, share=0.3, seed=10)
    assert abs(np.log(prior_mean(fitted_prior(crawl.prior, at(30.0))) / 6.0)) <= PRIOR_TOLERANCE


def test_unobserved_rows_keep_their_rate_and_observed_ones_are_rescored():
    rng = np.random.default_rng(11)
    crawl = Crawl(poisson_changes(2.0, 30, 4.0, rng), dated=False)
    crawl.run(cycles=8, share=0.5, seed=12)
    before = crawl.state
    crawl.cycle(8 * CYCLE_DAYS, np.array([0, 1, 2]))
    after = crawl.state
    moved = set(
        after.join(before, on="url").filter(
            pl.col("obs_interval_days").list.len() != pl.col("obs_interval_days_right").list.len()
        )["url"]
    )
    assert moved == {crawl.urls[i] for i in (0, 1, 2)}
    kept = after.join(before, on="url").filter(~pl.col("url").is_in(list(moved)))
    assert (kept["change_rate"] == kept["change_rate_right"]).all()


# ------------------------------------------------------------------------- posterior_rates


def test_the_median_of_a_point_mass_and_of_an_even_split():
    grid = rate_grid()
    rule = PosteriorMedianRate(grid, grid)
    k = 20
    post = np.zeros((1, grid.shape[0]))
    post[0, k] = 1.0
    assert rule(post)[0] == pytest.approx(grid[k], rel=1e-12)  # the middle of its cell
    post = np.zeros((1, grid.shape[0]))
    post[0, [10, 30]] = 0.5
    step = np.log(grid[1] / grid[0])
    # half the mass at or below the top of cell 10: the median is that cell's upper edge
    assert np.log(rule(post)[0]) == pytest.approx(np.log(grid[10]) + step / 2, abs=1e-9)
    # a clock is a point mass: it is the median when it holds the middle
    rates = np.r_[grid, [1.0]]
    post = np.zeros((1, rates.shape[0]))
    post[0, -1], post[0, 5], post[0, 40] = 0.6, 0.2, 0.2
    assert PosteriorMedianRate(grid, rates)(post)[0] == pytest.approx(1.0)


def test_the_median_moves_smoothly_with_the_evidence():
    grid = rate_grid()
    rule = PosteriorMedianRate(grid, grid)
    lam = grid[None, :]
    meds = []
    for s in np.linspace(1.0, 3.0, 41):  # one change, s days unchanged: ever slower
        post = lam * np.exp(-lam * s)
        meds.append(rule(post / post.sum())[0])
    steps = np.diff(np.log(meds))
    assert (steps < 0).all() and steps.min() > -0.1  # no jumps of a grid cell (0.29)


def test_posterior_rates_of_rows_with_and_without_a_history():
    state = pl.DataFrame(
        {
            "url_class": ["article", "article", "listing"],
            "obs_interval_days": [[0.25] * 6, [], [1.0, 1.0]],
            "obs_changed": [[True] * 6, [], [False, True]],
            "last_seen_at": [T0] * 3,
        },
        schema_overrides={"obs_interval_days": pl.List(pl.Float64)},
    )
    out = posterior_rates(state, None, model=ChangeModel())
    assert out.columns == [
        "change_rate",
        "change_rate_median",
        "n_obs",
        "n_changes",
        "rate_is_lower_bound",
    ]
    assert out["n_obs"].to_list() == [6, 0, 2]
    assert out["rate_is_lower_bound"].to_list() == [True, False, False]
    # without a history: the class prior's mean and median (here the starting weights')
    start = posterior_summary(
        histories_from_arrays(
            np.empty(0, np.int64), np.empty(0), np.empty(0, bool), 1, end=np.empty(0)
        ),
        None,
        components=Components(grid=rate_grid(), periods=DEFAULT_PERIODS),
    )
    assert out["change_rate"][1] == pytest.approx(start["change_rate"][0])
    assert out["change_rate_median"][1] == pytest.approx(start["rate_median"][0])
    # a wide posterior's mean sits above its median
    assert (out["change_rate"] >= out["change_rate_median"]).all()
    # six changes in six quarter-days is faster than one in two days
    for column in ("change_rate", "change_rate_median"):
        assert out[column][0] > 4 * out[column][2]


def test_dated_changes_tell_a_clock_of_a_few_hours_from_a_fast_poisson_page():
    """Changes dated at fetches a day apart at varying times of day: a page updated every 4
    hours goes to the 4-hour clock at 6/day (read as Poisson its ages say about 12/day), a
    page changing at random 15 times a day stays Poisson at its rate."""
    rng = np.random.default_rng(13)
    n, k = 40, 8
    row = np.repeat(np.arange(n), k)
    end = 20_000.0 + np.tile(np.arange(1, k + 1), n) + rng.choice([0, 0.25, 0.5, 0.75], n * k)
    phase = np.repeat(rng.uniform(0, 4 / 24, n), k)
    for ages, rate, clock in (
        (np.mod(end - phase, 4 / 24), 6.0, True),
        (rng.exponential(1 / 15.0, n * k), 15.0, False),
    ):
        h = histories_from_arrays(
            row, np.full(n * k, 1.0), np.ones(n * k, bool), n, end=end, age=ages
        )
        out = posterior_summary(
            h, None, components=Components(grid=rate_grid(), periods=DEFAULT_PERIODS)
        )
        share = out["periodic_share"].median()
        assert share > 0.5 if clock else share < 0.05
        assert abs(np.log(out["rate_median"].median() / rate)) <= BIAS_TARGET
