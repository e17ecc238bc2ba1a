import math
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from freshness_pipeline.science.eb import (
    GLOBAL,
    expected_capture,
    expected_index,
    fit_grid_prior,
    flatten_histories,
    grid_posterior,
    histories_from_arrays,
    initial_weights,
    posterior_summary,
    rate_grid,
    weights_frame,
    weights_from_frame,
)
from freshness_pipeline.science.schedule import PlanConfig, build_plan

GRID = rate_grid()


def _simulate(rates: np.ndarray, n_obs: int, seed: int = 0):
    """Flat (row, interval, changed) of pages fetched every 1 day ± 50 %."""
    rng = np.random.default_rng(seed)
    n = rates.shape[0]
    d = rng.uniform(0.5, 1.5, (n, n_obs))
    changed = rng.random((n, n_obs)) < -np.expm1(-rates[:, None] * d)
    row = np.repeat(np.arange(n), n_obs)
    return row, d.ravel(), changed.ravel()


def _two_point(n: int = 4000, n_obs: int = 30, seed: int = 0):
    rng = np.random.default_rng([seed, 1])
    slow = rng.random(n) < 0.3
    rates = np.where(slow, 0.02, 1.0)
    return rates, histories_from_arrays(*_simulate(rates, n_obs, seed), n)


def _state(intervals: list[list[float] | None], changed: list[list[bool] | None]):
    return pl.DataFrame(
        {"obs_interval_days": intervals, "obs_changed": changed},
        schema={"obs_interval_days": pl.List(pl.Float64), "obs_changed": pl.List(pl.Boolean)},
    )


# ------------------------------------------------------------------------------------ prior


def test_weights_sum_to_one_and_recover_a_two_point_mixture() -> None:
    rates, hist = _two_point()
    weights = fit_grid_prior(hist, grid=GRID, iterations=300)
    assert set(weights) == {GLOBAL, "default"}
    for w in weights.values():
        assert w.shape == GRID.shape
        assert w.sum() == pytest.approx(1.0, abs=1e-12)
        assert (w >= 0).all()
    w = weights[GLOBAL]
    slow = GRID < 0.15
    # the mixture shares come back ...
    assert w[slow].sum() == pytest.approx((rates < 0.5).mean(), abs=0.03)
    # ... and each component's mass sits at its rate (log-mean within a factor 1.5)
    log_slow = (w[slow] * np.log(GRID[slow])).sum() / w[slow].sum()
    log_fast = (w[~slow] * np.log(GRID[~slow])).sum() / w[~slow].sum()
    assert abs(log_slow - math.log(0.02)) < math.log(1.5)
    assert abs(log_fast - math.log(1.0)) < math.log(1.5)


def test_warm_start_continues_where_the_last_fit_stopped() -> None:
    _, hist = _two_point(n=1500)
    once = fit_grid_prior(hist, grid=GRID, iterations=20)
    twice = fit_grid_prior(
        hist,
        grid=GRID,
        iterations=10,
        previous_weights=fit_grid_prior(hist, grid=GRID, iterations=10),
    )
    np.testing.assert_allclose(twice[GLOBAL], once[GLOBAL], rtol=1e-9, atol=1e-15)


def test_no_observations_leave_the_starting_weights() -> None:
    hist = flatten_histories(_state([[], None], [[], None]))
    assert fit_grid_prior(hist, grid=GRID)[GLOBAL] == pytest.approx(initial_weights(GRID))
    start = np.linspace(1.0, 2.0, GRID.shape[0])
    got = fit_grid_prior(hist, grid=GRID, previous_weights={GLOBAL: start})
    np.testing.assert_allclose(got[GLOBAL], start / start.sum())
    np.testing.assert_allclose(got["default"], start / start.sum())


def test_a_small_class_is_pulled_towards_the_global_weights() -> None:
    n_big, n_small = 3000, 30
    rates = np.r_[np.full(n_big, 1.0), np.full(n_small, 0.01)]
    hist = histories_from_arrays(*_simulate(rates, 20, seed=3), n_big + n_small)
    classes = ["article"] * n_big + ["static"] * n_small
    shrunk = fit_grid_prior(hist, classes, grid=GRID, iterations=100, shrinkage=500.0)
    own = fit_grid_prior(hist, classes, grid=GRID, iterations=100, shrinkage=0.0)
    slow = GRID < 0.1
    assert own["static"][slow].sum() > 0.95  # on its own data the small class is all slow
    assert shrunk["static"][slow].sum() < 0.2  # 30 pages against 500 global pseudo-pages
    assert shrunk["article"][~slow].sum() > 0.95
    assert shrunk[GLOBAL][slow].sum() == pytest.approx(n_small / (n_big + n_small), abs=0.01)


def test_classes_are_normalized_like_the_gamma_priors() -> None:
    hist = histories_from_arrays(*_simulate(np.full(4, 1.0), 3), 4)
    got = fit_grid_prior(hist, [" Article", "article", None, ""], grid=GRID, iterations=2)
    assert set(got) == {GLOBAL, "article", "default"}


def test_invalid_inputs_raise() -> None:
    hist = histories_from_arrays(*_simulate(np.full(3, 1.0), 2), 3)
    with pytest.raises(ValueError):
        fit_grid_prior(hist, grid=np.array([1.0, 0.5]))
    with pytest.raises(ValueError):
        fit_grid_prior(hist, ["a", "b"], grid=GRID)
    with pytest.raises(ValueError):
        fit_grid_prior(hist, grid=GRID, previous_weights={GLOBAL: np.ones(3)})
    with pytest.raises(ValueError):
        flatten_histories(_state([[1.0, 2.0]], [[True]]))
    with pytest.raises(ValueError):
        rate_grid(points=1)


# ------------------------------------------------------------------------------- posterior


def test_posterior_mean_is_finite_and_increases_with_observed_changes() -> None:
    n_obs = 10
    intervals = [[1.0] * n_obs for _ in range(n_obs + 1)]
    changed = [[True] * x + [False] * (n_obs - x) for x in range(n_obs + 1)]
    state = _state(intervals, changed)
    _, hist = _two_point(n=1500)
    for weights in (None, fit_grid_prior(hist, grid=GRID, iterations=50)):
        summary = posterior_summary(state, weights, grid=GRID)
        rate = summary["change_rate"].to_numpy()
        assert np.isfinite(rate).all() and (rate > 0).all()
        assert (np.diff(rate) > 0).all()
        assert (np.diff(summary["rate_log_mean"].to_numpy()) > 0).all()
        assert summary["n_changes"].to_list() == list(range(n_obs + 1))
        assert rate.max() <= GRID[-1]


def test_empty_histories_give_the_prior() -> None:
    weights = {GLOBAL: np.linspace(1.0, 3.0, GRID.shape[0])}
    weights[GLOBAL] /= weights[GLOBAL].sum()
    weights["static"] = (
        np.linspace(3.0, 1.0, GRID.shape[0]) / np.linspace(3.0, 1.0, GRID.shape[0]).sum()
    )
    state = _state([None, [], [float("nan"), -1.0]], [None, [], [True, False]])
    post = grid_posterior(state, weights, ["static", "unknown-class", None], grid=GRID)
    np.testing.assert_allclose(post[0], weights["static"], rtol=1e-12)
    np.testing.assert_allclose(post[1], weights[GLOBAL], rtol=1e-12)  # no own weights: global
    np.testing.assert_allclose(post[2], weights[GLOBAL], rtol=1e-12)  # invalid obs skipped
    summary = posterior_summary(state, weights, ["static", "x", None], grid=GRID)
    assert summary["change_rate"][0] == pytest.approx(float(weights["static"] @ GRID))
    assert summary["n_obs"].to_list() == [0, 0, 0]
    uniform = grid_posterior(state, None, grid=GRID)
    np.testing.assert_allclose(uniform, np.full((3, GRID.shape[0]), 1.0 / GRID.shape[0]))


def test_posterior_matches_the_censored_likelihood() -> None:
    """post_g ∝ π_g Π_unchanged e^{−λΔ} Π_changed (1 − e^{−λΔ}), computed the slow way."""
    intervals, changed = [0.5, 2.0, 1.25, 3.0], [True, False, True, False]
    w = np.linspace(1.0, 2.0, GRID.shape[0])
    w /= w.sum()
    lik = np.ones_like(GRID)
    for d, c in zip(intervals, changed, strict=True):
        lik *= -np.expm1(-GRID * d) if c else np.exp(-GRID * d)
    expected = w * lik / (w * lik).sum()
    got = grid_posterior(_state([intervals], [changed]), w, grid=GRID)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-5)  # float32 likelihood terms


def test_expected_index_matches_monte_carlo() -> None:
    rng = np.random.default_rng(11)
    state = _state([[2.0, 1.0, 3.0]], [[True, False, True]])
    post = grid_posterior(state, None, grid=GRID)
    draws = GRID[rng.choice(GRID.shape[0], size=400_000, p=post[0])]
    for age in (0.1, 1.0, 7.0, 60.0):
        r = draws * age
        w_mc = ((1.0 - (1.0 + r) * np.exp(-r)) / draws).mean()
        cap_mc = (-np.expm1(-r)).mean()
        assert expected_index(post, GRID, age)[0] == pytest.approx(w_mc, rel=0.01)
        assert expected_capture(post, GRID, age)[0] == pytest.approx(cap_mc, rel=0.01)
    # exact sums for the limits
    assert expected_index(post, GRID, math.inf)[0] == pytest.approx(float(post[0] @ (1 / GRID)))
    assert expected_index(post, GRID, 0.0)[0] == 0.0
    assert expected_capture(post, GRID, math.inf)[0] == pytest.approx(1.0)
    assert math.isnan(expected_index(post, GRID, math.nan)[0])


def test_expected_index_of_a_point_posterior_is_the_index() -> None:
    post = np.zeros((1, GRID.shape[0]))
    post[0, 30] = 1.0
    lam = GRID[30]
    for age in (1e-6, 1e-3, 0.3, 2.0, 50.0):
        r = lam * age
        exact = sum((-1) ** k * (k - 1) / math.factorial(k) * r**k for k in range(2, 25))
        if r > 0.05:
            exact = 1.0 - (1.0 + r) * math.exp(-r)
        assert expected_index(post, GRID, age)[0] == pytest.approx(exact / lam, rel=1e-9)


def test_chunking_and_caching_give_identical_results() -> None:
    rng = np.random.default_rng(5)
    rates = np.exp(rng.uniform(np.log(1e-3), np.log(30.0), 700))
    row, d, c = _simulate(rates, 12, seed=5)
    keep = rng.random(row.shape[0]) < 0.7  # ragged histories, some empty
    hist = histories_from_arrays(row[keep], d[keep], c[keep], 700)
    classes = rng.choice(["a", "b", "c"], 700).tolist()
    ages = rng.uniform(0.0, 20.0, 700)
    ref_w = fit_grid_prior(hist, classes, grid=GRID, iterations=7)
    ref = posterior_summary(hist, ref_w, classes, grid=GRID, age_days=ages)
    for chunk_cells, cache_cells in ((1, 0), (500, 0), (5000, 1 << 30)):
        w = fit_grid_prior(
            hist, classes, grid=GRID, iterations=7, chunk_cells=chunk_cells, cache_cells=cache_cells
        )
        for k in ref_w:
            np.testing.assert_allclose(w[k], ref_w[k], rtol=1e-12, atol=1e-300)
        got = posterior_summary(
            hist, ref_w, classes, grid=GRID, age_days=ages, chunk_cells=chunk_cells
        )
        for col in ref.columns:
            np.testing.assert_allclose(got[col].to_numpy(), ref[col].to_numpy(), rtol=1e-12)
    post = grid_posterior(hist, ref_w, classes, grid=GRID, chunk_cells=1)
    np.testing.assert_allclose(expected_index(post, GRID, ages), ref["expected_index"], rtol=1e-12)


def test_flatten_matches_arrays() -> None:
    state = _state([[1.0, 2.0], None, [0.5]], [[True, False], None, [True]])
    a = flatten_histories(state)
    b = histories_from_arrays(
        np.array([0, 0, 2]), np.array([1.0, 2.0, 0.5]), np.array([True, False, True]), 3
    )
    for field in ("n_obs", "n_changes", "s_unchanged", "changed_row", "changed_interval"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


def test_weights_frame_round_trip() -> None:
    _, hist = _two_point(n=500)
    weights = fit_grid_prior(hist, ["x"] * 500, grid=GRID, iterations=5)
    frame = weights_frame(weights, GRID)
    assert frame.columns == ["url_class", "rate_per_day", "weight"]
    assert frame.height == 2 * GRID.shape[0]
    grid, back = weights_from_frame(frame)
    np.testing.assert_allclose(grid, GRID)
    for k in weights:
        np.testing.assert_allclose(back[k], weights[k], rtol=1e-12)


# ------------------------------------------------------------------ build_plan integration

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _cands(override: list[float | None] | None) -> pl.DataFrame:
    n = 4
    data = {
        "url": [f"http://h.example/{i}" for i in range(n)],
        "host": ["h.example"] * n,
        "status": ["active"] * n,
        "last_fetched_at": [NOW - timedelta(days=d) for d in (1.0, 2.0, 3.0, 4.0)],
        "change_rate": [1.0] * n,
    }
    if override is not None:
        data["expected_gain_override"] = pl.Series(override, dtype=pl.Float64)
    return pl.DataFrame(data)


def test_plan_ranks_by_the_expected_gain_override() -> None:
    caps = pl.DataFrame({"host": ["h.example"], "capacity": [10]})
    cfg = PlanConfig(new_share=0.0, reestimate_share=0.0, verify_share=0.0)
    base = build_plan(_cands(None), caps, now=NOW, budget=2, config=cfg)
    assert base.filter("selected").sort("rank")["url"].to_list() == [
        "http://h.example/3",
        "http://h.example/2",
    ]
    plan = build_plan(_cands([5.0, 4.0, None, float("nan")]), caps, now=NOW, budget=2, config=cfg)
    assert plan.filter("selected").sort("rank")["url"].to_list() == [
        "http://h.example/0",
        "http://h.example/1",
    ]
    gains = plan["expected_gain"].to_list()
    assert gains[:2] == [5.0, 4.0]
    # null and NaN fall back to the computed gain
    assert gains[2:] == pytest.approx(base["expected_gain"].to_list()[2:])
    assert "expected_gain_override" in plan.columns  # candidate columns pass through
    # a negative override is not a gain either
    neg = build_plan(_cands([-1.0, None, None, None]), caps, now=NOW, budget=2, config=cfg)
    assert neg["expected_gain"][0] == pytest.approx(base["expected_gain"][0])


def test_eb_summary_feeds_the_plan() -> None:
    """The wiring the assets use: posterior summary at each page's age -> override column."""
    state = _state([[1.0] * 5, [1.0] * 5, [30.0]], [[True] * 5, [False] * 5, [False]])
    ages = np.array([1.0, 1.0, 1.0])
    _, hist = _two_point(n=1500)
    weights = fit_grid_prior(hist, grid=GRID, iterations=50)
    summary = posterior_summary(state, weights, grid=GRID, age_days=ages)
    cands = pl.DataFrame(
        {
            "url": ["http://h.example/fast", "http://h.example/slow", "http://h.example/quiet"],
            "host": ["h.example"] * 3,
            "status": ["active"] * 3,
            "last_fetched_at": [NOW - timedelta(days=1.0)] * 3,
            "change_rate": summary["change_rate"],
            "expected_gain_override": summary["expected_index"],
        }
    )
    caps = pl.DataFrame({"host": ["h.example"], "capacity": [10]})
    plan = build_plan(cands, caps, now=NOW, budget=1, config=PlanConfig(verify_share=0.0))
    # the page that changed at each daily fetch is the one worth a fetch after a day
    assert plan.filter("selected")["url"].to_list() == ["http://h.example/fast"]


def test_one_posterior_row_broadcasts_over_ages() -> None:
    prior = initial_weights(GRID)
    ages = np.array([0.5, 2.0, 10.0])
    many = expected_index(np.tile(prior, (3, 1)), GRID, ages)
    np.testing.assert_allclose(expected_index(prior, GRID, ages), many, rtol=1e-15)
    np.testing.assert_allclose(
        expected_capture(prior[None, :], GRID, ages),
        expected_capture(np.tile(prior, (3, 1)), GRID, ages),
        rtol=1e-15,
    )
    assert (np.diff(many) > 0).all()  # a longer wait is worth more
