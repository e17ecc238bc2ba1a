"""Content ages (a trusted Last-Modified header): ``obs_age_days`` in url_state, read by
``estimate_rates`` (one change over exposure a) and the change prior (a density per day for the
Poisson rates and the clocks alike)."""

import math
from datetime import UTC, datetime

import numpy as np
import polars as pl
import pytest

from freshness_pipeline.science.estimate import (
    AGE_COLUMN,
    append_observations,
    estimate_rates,
)
from freshness_pipeline.science.prior.components import (
    DEFAULT_PERIODS,
    MISMATCH,
    Components,
    Period,
    rate_grid,
)
from freshness_pipeline.science.prior.histories import flatten_histories, histories_from_arrays
from freshness_pipeline.science.prior.likelihood import ChunkedLikelihood  # the likelihood itself
from freshness_pipeline.science.prior.posterior import grid_posterior, posterior_summary
from freshness_pipeline.science.prior.table import ChangeModel, expected_gains, refit_change_prior
from freshness_pipeline_tests.histories import LIST_F
from freshness_pipeline_tests.histories import history_frame as _state

GRID = rate_grid()
ON_GRID = Components(grid=GRID)
G = GRID.shape[0]
EPOCH_DAY = 20_000.0  # days since the Unix epoch (midnight UTC)


def _rates(state: pl.DataFrame) -> np.ndarray:
    return estimate_rates(state)["change_rate"].to_numpy()


# ----------------------------------------------------------------------- estimate_rates


def test_aged_changes_are_the_conjugate_update() -> None:
    # every change aged: Gamma(α + 2, β + unchanged days + Σ ages), posterior mean by hand
    state = _state([[1.0, 2.0, 1.0]], [[True, False, True]], [[0.3, None, 0.5]])
    out = estimate_rates(state)
    assert out["change_rate"][0] == pytest.approx((0.5 + 2) / (3.5 + 2.0 + 0.3 + 0.5), rel=1e-12)
    assert out["n_obs"][0] == 3 and out["n_changes"][0] == 2
    assert not out["rate_is_lower_bound"][0]
    # one change aged, one censored: the root of λ(β + S_u + a) = α + 1 + φ(λΔ)
    state = _state([[1.0, 2.0, 1.5]], [[True, False, True]], [[0.3, None, None]])
    lam = _rates(state)[0]
    x = lam * 1.5
    assert lam * (3.5 + 2.0 + 0.3) == pytest.approx(0.5 + 1 + x / math.expm1(x), rel=1e-9)


def test_ages_past_the_interval_are_ignored_and_a_hair_past_is_clipped() -> None:
    plain = _rates(_state([[1.0, 1.0, 1.0]], [[True, False, True]]))
    too_long = _rates(_state([[1.0, 1.0, 1.0]], [[True, False, True]], [[1.5, None, 2.0]]))
    negative = _rates(_state([[1.0, 1.0, 1.0]], [[True, False, True]], [[-0.1, None, None]]))
    # an age on an unchanged observation says nothing here
    unchanged = _rates(_state([[1.0, 1.0, 1.0]], [[True, False, True]], [[None, 0.5, None]]))
    assert too_long[0] == plain[0] and negative[0] == plain[0] and unchanged[0] == plain[0]
    hair = _rates(_state([[1.0, 1.0, 1.0]], [[True, False, True]], [[1.0005, None, 1.0]]))
    assert hair[0] == pytest.approx((0.5 + 2) / (3.5 + 1.0 + 1.0 + 1.0), rel=1e-12)


def test_age_list_of_the_wrong_length_raises() -> None:
    with pytest.raises(ValueError, match=AGE_COLUMN):
        estimate_rates(_state([[1.0, 1.0]], [[True, False]], [[0.5]]))
    with pytest.raises(ValueError, match=AGE_COLUMN):
        flatten_histories(_state([[1.0, 1.0]], [[True, False]], [[0.5, None, None]]))


def test_a_null_age_list_is_no_age_column() -> None:
    intervals = [[1.0, 2.0, 0.5], [0.5, 0.5], None, [1.0] * 5]
    changed = [[True, False, True], [True, True], None, [True, False, True, True, False]]
    plain = estimate_rates(_state(intervals, changed))
    nulls = estimate_rates(_state(intervals, changed, [None] * 4))
    empty_ages = estimate_rates(_state(intervals, changed, [[None] * 3, [None] * 2, None, None]))
    for other in (nulls, empty_ages):
        assert other.drop(AGE_COLUMN).equals(plain)


def test_rows_without_ages_are_unchanged_next_to_rows_with_them() -> None:
    rng = np.random.default_rng(3)
    n = 300
    d = rng.uniform(0.2, 3.0, (n, 12))
    c = rng.random((n, 12)) < 0.6
    ages = np.where(c, rng.random((n, 12)) * d, np.nan)
    with_age = np.arange(n) % 3 == 0
    age_lists = [
        [None if math.isnan(v) else float(v) for v in ages[i]] if with_age[i] else None
        for i in range(n)
    ]
    plain = estimate_rates(_state(d.tolist(), c.tolist()))
    mixed = estimate_rates(_state(d.tolist(), c.tolist(), age_lists))
    cols = ["change_rate", "n_obs", "n_changes", "rate_is_lower_bound"]
    assert (
        mixed.filter(~pl.Series(with_age))
        .select(cols)
        .equals(plain.filter(~pl.Series(with_age)).select(cols))
    )
    assert not np.array_equal(
        mixed["change_rate"].to_numpy()[with_age], plain["change_rate"].to_numpy()[with_age]
    )


def test_a_page_changed_at_every_visit_with_ages_is_no_lower_bound() -> None:
    n_obs, alpha, beta = 10, 0.5, 3.5
    ages = [0.1 + 0.01 * i for i in range(n_obs)]
    state = _state([[1.0] * n_obs], [[True] * n_obs], [ages], alpha, beta)
    out = estimate_rates(state)
    assert not out["rate_is_lower_bound"][0]
    assert out["change_rate"][0] == pytest.approx((n_obs + alpha) / (sum(ages) + beta), rel=1e-9)
    capped = estimate_rates(_state([[1.0] * n_obs], [[True] * n_obs], None, alpha, beta))
    assert capped["rate_is_lower_bound"][0]
    assert capped["change_rate"][0] == pytest.approx(math.log(2 * n_obs), rel=1e-6)
    # one aged change among censored ones is enough for a finite root
    some = _state([[1.0] * n_obs], [[True] * n_obs], [[0.05] + [None] * (n_obs - 1)])
    out = estimate_rates(some)
    assert not out["rate_is_lower_bound"][0] and math.isfinite(out["change_rate"][0])
    # incremental re-estimation reads the ages too
    again = estimate_rates(out, only_rows=np.array([True]))
    assert again["change_rate"][0] == out["change_rate"][0]


# ---------------------------------------------------------------------- append_observations


def _base(intervals, changed, ages=None) -> pl.DataFrame:
    s = _state(intervals, changed, ages)
    return s.drop("prior_alpha", "prior_beta")


def _obs(urls, intervals, changed, ages=None) -> pl.DataFrame:
    cols = {"url": urls, "interval_days": intervals, "changed": changed}
    if ages is not None:
        cols["age_days"] = pl.Series(ages, dtype=pl.Float64)
    return pl.DataFrame(cols)


def test_append_starts_the_age_column_aligned() -> None:
    state = _base([[1.0, 2.0], None, [3.0]], [[True, False], None, [True]])
    out = append_observations(
        state, _obs(["u0", "u1", "zz"], [0.5, 1.0, 1.0], [True, False, True], [0.2, None, 0.1])
    )
    assert out[AGE_COLUMN].to_list()[:2] == [[None, None, 0.2], [None]]
    # an unobserved row: unknown ages, as many as its intervals (or a null list)
    assert out[AGE_COLUMN][2] is None or out[AGE_COLUMN][2].to_list() == [None]
    assert out["obs_interval_days"].to_list()[:2] == [[1.0, 2.0, 0.5], [1.0]]
    est = estimate_rates(out.with_columns(prior_alpha=pl.lit(0.5), prior_beta=pl.lit(3.5)))
    assert est.height == 3


def test_append_keeps_the_age_column_without_new_ages() -> None:
    state = _base([[1.0, 2.0], [1.0]], [[True, False], [True]], [[0.4, None], None])
    out = append_observations(state, _obs(["u0", "u1"], [0.5, 0.7], [True, True]))
    assert out[AGE_COLUMN].to_list() == [[0.4, None, None], [None, None]]
    # invalid intervals are dropped with their ages
    out = append_observations(
        state, _obs(["u0", "u1"], [0.0, 0.7], [True, True], [0.1, 0.3]), max_obs=64
    )
    assert out[AGE_COLUMN].to_list() == [[0.4, None], [None, 0.3]]
    assert out["obs_interval_days"].to_list() == [[1.0, 2.0], [1.0, 0.7]]


def test_append_cuts_ages_to_max_obs_with_the_intervals() -> None:
    state = _base([[1.0, 2.0, 3.0]], [[True, False, True]], [[0.1, None, 0.3]])
    out = append_observations(state, _obs(["u0"], [4.0], [True], [0.4]), max_obs=3)
    assert out["obs_interval_days"].to_list() == [[2.0, 3.0, 4.0]]
    assert out[AGE_COLUMN].to_list() == [[None, 0.3, 0.4]]


def test_append_without_ages_adds_no_column_and_bad_lengths_raise() -> None:
    state = _base([[1.0]], [[True]])
    out = append_observations(state, _obs(["u0"], [1.0], [False]))
    assert AGE_COLUMN not in out.columns
    bad = _base([[1.0, 2.0]], [[True, False]], [[0.1]])
    with pytest.raises(ValueError, match=AGE_COLUMN):
        append_observations(bad, _obs(["u0"], [1.0], [True], [0.5]))


# ------------------------------------------------------------------------- change prior


def test_the_poisson_term_of_an_aged_change_is_the_density() -> None:
    h = histories_from_arrays(
        np.array([0, 0]), np.array([2.0, 1.0]), np.array([True, False]), 1, age=np.array([0.7, 0.2])
    )
    post = grid_posterior(h, None, components=ON_GRID)[0]
    want = np.log(GRID) - GRID * 0.7 - GRID * 1.0  # the unchanged day: e^{−λ}
    want = np.exp(want - want.max())
    assert np.allclose(post, want / want.sum(), rtol=1e-5, atol=1e-12)


def test_long_ages_lower_the_posterior_rate() -> None:
    d = np.full(10, 1.0)
    c = np.ones(10, dtype=bool)
    row = np.zeros(10, dtype=np.int64)
    end = EPOCH_DAY + np.arange(1, 11) + np.linspace(0, 0.9, 10)
    binary = histories_from_arrays(row, d, c, 1, end=end)
    aged = histories_from_arrays(row, d, c, 1, end=end, age=np.full(10, 0.9))
    for periods in ((), DEFAULT_PERIODS):
        rate = {
            k: posterior_summary(h, None, components=Components(grid=GRID, periods=periods))[
                "change_rate"
            ][0]
            for k, h in (("binary", binary), ("aged", aged))
        }
        assert rate["aged"] < 0.5 * rate["binary"]
        assert 0.5 < rate["aged"] < 2.0  # about one change per 0.9 days of exposure


def _six_hourly(days: int, ages_of_change) -> tuple:
    """A page fetched every 6 h (02:00, 08:00, 14:00, 20:00 UTC), changed once a day in
    (08:00, 14:00]; ``ages_of_change(k)`` gives the content age at the 14:00 fetch of day k."""
    ends = EPOCH_DAY + (2 / 24 + np.arange(4 * days) * 0.25)[1:]
    changed = np.isclose(np.mod(ends, 1.0), 14 / 24)
    ages = np.full(ends.shape[0], np.nan)
    ages[changed] = [ages_of_change(k) for k in range(int(changed.sum()))]
    n = ends.shape[0]
    return np.zeros(n, dtype=np.int64), np.full(n, 0.25), changed, ends, ages


def test_ages_at_the_same_time_of_day_point_to_the_daily_clock() -> None:
    rng = np.random.default_rng(5)
    # changes at 09:00 ± 20 min, seen at 14:00: ages 5 h ∓ 20 min
    row, d, c, end, ages = _six_hourly(14, lambda k: (5 + rng.uniform(-1, 1) / 3) / 24)
    h = histories_from_arrays(row, d, c, 1, end=end, age=ages)
    post = grid_posterior(h, None, components=Components(grid=GRID, periods=DEFAULT_PERIODS))[0]
    daily = G + list(DEFAULT_PERIODS).index(Period(1.0, 24))
    assert post[daily] > 0.9
    # the phase is pinned near 09:00 (the bins at 08:30 and 09:30): a fetch at 09:30 is worth
    # most of a day, one at 07:30 (before the change) nearly nothing
    now_late = EPOCH_DAY + 20 + 9.5 / 24
    now_early = EPOCH_DAY + 20 + 7.5 / 24
    last_fetch = EPOCH_DAY + 19 + 20 / 24
    gains = [
        posterior_summary(
            h,
            None,
            components=Components(grid=GRID, periods=DEFAULT_PERIODS),
            age_days=now - last_fetch,
            now_days=now,
        )["expected_index"][0]
        for now in (now_late, now_early)
    ]
    assert gains[0] > 0.8 and gains[1] < 0.2


def test_scattered_ages_keep_the_page_poisson() -> None:
    rng = np.random.default_rng(6)
    row, d, c, end, ages = _six_hourly(14, lambda k: rng.uniform(0, 0.25))
    h = histories_from_arrays(row, d, c, 1, end=end, age=ages)
    post = grid_posterior(h, None, components=Components(grid=GRID, periods=DEFAULT_PERIODS))[0]
    assert post[:G].sum() > 0.9


def test_clock_scores_of_an_aged_change_are_densities_per_day() -> None:
    day = Period(1.0, 24)
    # one changed observation (08:00, 14:00], last change at 09:10 (age 4 h 50 min)
    end = np.array([EPOCH_DAY + 14 / 24])
    for age, near_bins in ((4 + 50 / 60, [8, 9]), (5.0, [8, 9])):
        h = histories_from_arrays(
            np.array([0]), np.array([0.25]), np.array([True]), 1, end=end, age=np.array([age / 24])
        )
        lik = ChunkedLikelihood(h, GRID, (day,), MISMATCH, 1 << 20)
        phase = lik.chunk(0, 1).phases[0][0]
        w = 1.0 / 24
        want = np.full(24, math.log(MISMATCH / 1.0))
        want[near_bins] = math.log((1 - MISMATCH) / (2 * w))
        assert np.allclose(phase, want)
    # an age of a period or more: the clock would have ticked since, every bin is off; over
    # an interval longer than the period the mismatch is spread over the interval
    h = histories_from_arrays(
        np.array([0]), np.array([3.0]), np.array([True]), 1, end=end, age=np.array([1.5])
    )
    phase = ChunkedLikelihood(h, GRID, (day,), MISMATCH, 1 << 20).chunk(0, 1).phases[0][0]
    assert np.allclose(phase, math.log(MISMATCH / 3.0))


@pytest.mark.parametrize("period", DEFAULT_PERIODS)
@pytest.mark.parametrize("interval", [0.25, 0.5, 1.0, 5.0, 12.0])
def test_a_clock_phase_spreads_one_unit_of_probability_over_the_outcomes(period, interval):
    """P(unchanged) + ∫ density of (changed, age) over the ages in [0, Δ] is 1 for every
    phase, up to the mismatch and the bin blur at the interval's ends: a clock must not claim
    more than Poisson rates do (it would take pages from them on a web without clocks)."""
    m = 4000
    ages = (np.arange(m) + 0.5) / m * interval
    n = m + 1
    h = histories_from_arrays(
        np.arange(n),
        np.full(n, interval),
        np.r_[False, np.ones(m, dtype=bool)],
        n,
        end=np.full(n, EPOCH_DAY + 0.3137),
        age=np.r_[np.nan, ages],
    )
    phases = np.exp(ChunkedLikelihood(h, GRID, (period,), MISMATCH, 1 << 26).chunk(0, n).phases[0])
    mass = phases[0] + phases[1:].sum(axis=0) * (interval / m)
    assert mass.mean() == pytest.approx(1.0, abs=0.035)
    if interval >= period.days:
        assert mass.max() < 1.0 + 1.5 * MISMATCH


def _url_state_with_ages(n: int, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    d = rng.uniform(0.1, 1.5, (n, 16))
    c = rng.random((n, 16)) < 0.5
    ages = np.where(c & (rng.random((n, 16)) < 0.7), rng.random((n, 16)) * d, np.nan)
    with_age = np.arange(n) % 2 == 0
    last_us = np.round((EPOCH_DAY + rng.uniform(0, 1, n)) * 86_400e6).astype(np.int64)
    return pl.DataFrame(
        {
            "url": [f"http://h{i % 2}.example/{i}" for i in range(n)],
            "host": [f"h{i % 2}.example" for i in range(n)],
            "url_class": [None] * n,
            "obs_interval_days": d.tolist(),
            "obs_changed": c.tolist(),
            AGE_COLUMN: pl.Series(
                [
                    [None if math.isnan(v) else float(v) for v in ages[i]] if with_age[i] else None
                    for i in range(n)
                ],
                dtype=LIST_F,
            ),
            "last_seen_at": pl.Series(last_us.astype("datetime64[us]")).dt.replace_time_zone("UTC"),
        }
    ).with_columns(last_fetched_at=pl.col("last_seen_at"))


def test_rows_without_ages_score_as_without_the_column() -> None:
    state = _url_state_with_ages(300, 2)
    no_age = np.arange(state.height) % 2 == 1
    plain_state = state.drop(AGE_COLUMN)
    model = ChangeModel(iterations=5)
    now = datetime.fromtimestamp((EPOCH_DAY + 1.3) * 86_400, tz=UTC)
    # one fixed prior for both paths: the rows' own scores must not move
    prior = refit_change_prior(plain_state, None, now=now, model=model)
    later = datetime.fromtimestamp((EPOCH_DAY + 1.6) * 86_400, tz=UTC)
    a = posterior_summary(flatten_histories(state, anchor="last_seen_at"), None, components=model)
    b = posterior_summary(
        flatten_histories(plain_state, anchor="last_seen_at"), None, components=model
    )
    assert a.filter(pl.Series(no_age)).equals(b.filter(pl.Series(no_age)))
    assert not a.filter(~pl.Series(no_age)).equals(b.filter(~pl.Series(no_age)))
    gains = expected_gains(state, prior, now=later, model=model).to_numpy()
    plain_gains = expected_gains(plain_state, prior, now=later, model=model).to_numpy()
    assert np.array_equal(gains[no_age], plain_gains[no_age])
    # a whole-null age column is no age column, in the refit too
    nulls = state.with_columns(pl.lit(None, dtype=LIST_F).alias(AGE_COLUMN))
    assert refit_change_prior(nulls, None, now=now, model=model).equals(prior)
    # the refit reads the ages
    assert not refit_change_prior(state, None, now=now, model=model).equals(prior)
