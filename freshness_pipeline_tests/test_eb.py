import math
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from freshness_pipeline.science.prior.components import (
    GLOBAL,
    Components,
    Period,
    initial_weights,
    rate_grid,
)
from freshness_pipeline.science.prior.fit import fit_grid_prior
from freshness_pipeline.science.prior.histories import flatten_histories, histories_from_arrays
from freshness_pipeline.science.prior.likelihood import (
    CHUNK_CELLS,
    ChunkedLikelihood,  # the likelihood itself
)
from freshness_pipeline.science.prior.posterior import (
    expected_capture,
    expected_index,
    grid_posterior,
    posterior_summary,
)
from freshness_pipeline.science.prior.table import (
    ChangeModel,
    expected_gains,
    latest_fit_before,
    posterior_gains,
    prior_weights,
    refit_change_prior,
    weights_frame,
    weights_from_frame,
    with_dated_hint,
)
from freshness_pipeline.science.schedule import PlanConfig, build_plan
from freshness_pipeline.warehouse import tables

GRID = rate_grid()
ON_GRID = Components(grid=GRID)


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
    weights = fit_grid_prior(hist, components=ON_GRID, iterations=300)
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
    once = fit_grid_prior(hist, components=ON_GRID, iterations=20)
    twice = fit_grid_prior(
        hist,
        components=ON_GRID,
        iterations=10,
        previous_weights=fit_grid_prior(hist, components=ON_GRID, iterations=10),
    )
    np.testing.assert_allclose(twice[GLOBAL], once[GLOBAL], rtol=1e-9, atol=1e-15)


def test_no_observations_leave_the_starting_weights() -> None:
    hist = flatten_histories(_state([[], None], [[], None]))
    assert fit_grid_prior(hist, components=ON_GRID)[GLOBAL] == pytest.approx(initial_weights(GRID))
    start = np.linspace(1.0, 2.0, GRID.shape[0])
    got = fit_grid_prior(hist, components=ON_GRID, previous_weights={GLOBAL: start})
    np.testing.assert_allclose(got[GLOBAL], start / start.sum())
    np.testing.assert_allclose(got["default"], start / start.sum())


def test_a_small_class_is_pulled_towards_the_global_weights() -> None:
    n_big, n_small = 3000, 30
    rates = np.r_[np.full(n_big, 1.0), np.full(n_small, 0.01)]
    hist = histories_from_arrays(*_simulate(rates, 20, seed=3), n_big + n_small)
    classes = ["article"] * n_big + ["static"] * n_small
    shrunk = fit_grid_prior(hist, classes, components=ON_GRID, iterations=100, shrinkage=500.0)
    own = fit_grid_prior(hist, classes, components=ON_GRID, iterations=100, shrinkage=0.0)
    slow = GRID < 0.1
    assert own["static"][slow].sum() > 0.95  # on its own data the small class is all slow
    assert shrunk["static"][slow].sum() < 0.2  # 30 pages against 500 global pseudo-pages
    assert shrunk["article"][~slow].sum() > 0.95
    assert shrunk[GLOBAL][slow].sum() == pytest.approx(n_small / (n_big + n_small), abs=0.01)


def test_classes_are_normalized_like_the_gamma_priors() -> None:
    hist = histories_from_arrays(*_simulate(np.full(4, 1.0), 3), 4)
    got = fit_grid_prior(hist, [" Article", "article", None, ""], components=ON_GRID, iterations=2)
    assert set(got) == {GLOBAL, "article", "default"}


def test_invalid_inputs_raise() -> None:
    hist = histories_from_arrays(*_simulate(np.full(3, 1.0), 2), 3)
    with pytest.raises(ValueError):
        fit_grid_prior(hist, components=Components(grid=np.array([1.0, 0.5])))
    with pytest.raises(ValueError):
        fit_grid_prior(hist, ["a", "b"], components=ON_GRID)
    with pytest.raises(ValueError):
        fit_grid_prior(hist, components=ON_GRID, previous_weights={GLOBAL: np.ones(3)})
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
    for weights in (None, fit_grid_prior(hist, components=ON_GRID, iterations=50)):
        summary = posterior_summary(state, weights, components=ON_GRID)
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
    post = grid_posterior(state, weights, ["static", "unknown-class", None], components=ON_GRID)
    np.testing.assert_allclose(post[0], weights["static"], rtol=1e-12)
    np.testing.assert_allclose(post[1], weights[GLOBAL], rtol=1e-12)  # no own weights: global
    np.testing.assert_allclose(post[2], weights[GLOBAL], rtol=1e-12)  # invalid obs skipped
    summary = posterior_summary(state, weights, ["static", "x", None], components=ON_GRID)
    assert summary["change_rate"][0] == pytest.approx(float(weights["static"] @ GRID))
    assert summary["n_obs"].to_list() == [0, 0, 0]
    uniform = grid_posterior(state, None, components=ON_GRID)
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
    got = grid_posterior(_state([intervals], [changed]), w, components=ON_GRID)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-5)  # float32 likelihood terms


def test_expected_index_matches_monte_carlo() -> None:
    rng = np.random.default_rng(11)
    state = _state([[2.0, 1.0, 3.0]], [[True, False, True]])
    post = grid_posterior(state, None, components=ON_GRID)
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
    ref_w = fit_grid_prior(hist, classes, components=ON_GRID, iterations=7)
    ref = posterior_summary(hist, ref_w, classes, components=ON_GRID, age_days=ages)
    for chunk_cells, cache_cells in ((1, 0), (500, 0), (5000, 1 << 30)):
        w = fit_grid_prior(
            hist,
            classes,
            components=ON_GRID,
            iterations=7,
            chunk_cells=chunk_cells,
            cache_cells=cache_cells,
        )
        for k in ref_w:
            np.testing.assert_allclose(w[k], ref_w[k], rtol=1e-12, atol=1e-300)
        got = posterior_summary(
            hist, ref_w, classes, components=ON_GRID, age_days=ages, chunk_cells=chunk_cells
        )
        for col in ref.columns:
            np.testing.assert_allclose(got[col].to_numpy(), ref[col].to_numpy(), rtol=1e-12)
    post = grid_posterior(hist, ref_w, classes, components=ON_GRID, chunk_cells=1)
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
    weights = fit_grid_prior(hist, ["x"] * 500, components=ON_GRID, iterations=5)
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
    weights = fit_grid_prior(hist, components=ON_GRID, iterations=50)
    summary = posterior_summary(state, weights, components=ON_GRID, age_days=ages)
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


# ------------------------------------------------------------------- clocks (periodic pages)

DAY = Period(1.0, 24)
EPOCH_DAY = 20_000.0  # days since the Unix epoch: absolute times, as url_state anchors them


def _fetch_times(n: int, n_obs: int, seed: int) -> np.ndarray:
    """n x (n_obs + 1) fetch times: gaps of 1 h to 18 h, at any time of day (a page fetched
    at the same hours every day would never reveal a phase between them)."""
    rng = np.random.default_rng([seed, 2])
    gaps = rng.uniform(1 / 24, 0.75, (n, n_obs))
    return EPOCH_DAY + np.c_[np.zeros(n), np.cumsum(gaps, axis=1)]


def _clock_histories(phases: np.ndarray, rates: np.ndarray, n_obs: int, seed: int = 0):
    """Pages with a daily clock at ``phases`` (NaN: Poisson at ``rates`` instead)."""
    n = phases.shape[0]
    times = _fetch_times(n, n_obs, seed)
    s, e = times[:, :-1], times[:, 1:]
    rng = np.random.default_rng([seed, 3])
    clock = np.isfinite(phases)
    ph = np.where(clock, phases, 0.0)[:, None]
    hit = np.floor(e - ph) > np.floor(s - ph)
    poisson = rng.random(s.shape) < -np.expm1(-rates[:, None] * (e - s))
    changed = np.where(clock[:, None], hit, poisson)
    row = np.repeat(np.arange(n), n_obs)
    return histories_from_arrays(row, (e - s).ravel(), changed.ravel(), n, end=e.ravel()), times


def test_a_clock_is_told_from_poisson_and_its_share_is_learned() -> None:
    rng = np.random.default_rng(7)
    n = 2000
    clock = rng.random(n) < 0.4
    phases = np.where(clock, rng.random(n), np.nan)
    rates = np.exp(rng.uniform(np.log(0.05), np.log(5.0), n))
    hist, _ = _clock_histories(phases, rates, 24)
    weights = fit_grid_prior(hist, components=Components(grid=GRID, periods=(DAY,)), iterations=60)
    assert weights[GLOBAL].shape == (GRID.shape[0] + 1,)
    assert weights[GLOBAL][-1] == pytest.approx(clock.mean(), abs=0.03)
    summary = posterior_summary(hist, weights, components=Components(grid=GRID, periods=(DAY,)))
    share = summary["periodic_share"].to_numpy()
    assert (share[clock] > 0.9).mean() > 0.97
    assert (share[~clock] < 0.1).mean() > 0.95
    # without a clock in the model the same fit is Poisson-only, as before
    plain = fit_grid_prior(hist, components=ON_GRID, iterations=5)
    assert plain[GLOBAL].shape == GRID.shape


def test_the_phase_of_a_clock_sets_when_a_fetch_is_worth_it() -> None:
    """A page updated daily at 06:30 UTC: stale and worth a day once 06:30 has passed since
    the last fetch, worth nothing while the copy is still current."""
    phase = 6.5 / 24  # the centre of a 1-hour phase bin
    hist, times = _clock_histories(np.array([phase]), np.array([1.0]), 40, seed=4)
    weights = {GLOBAL: initial_weights(GRID, (DAY,), 0.5)}
    last = times[0, -1]
    base = math.floor(last)
    for now, worth in (
        (base + 1 + 7.5 / 24, 23 / 24),  # 07:30 the next day: changed at 06:30, next in 23 h
        (base + 2 + 5 / 24, 1.5 / 24),  # 05:00 two days on: stale, but the next change is soon
    ):
        got = posterior_summary(
            hist,
            weights,
            components=Components(grid=GRID, periods=(DAY,)),
            age_days=now - last,
            now_days=now,
        )
        assert got["periodic_share"][0] > 0.99
        assert got["expected_index"][0] == pytest.approx(worth, abs=0.03)
        assert got["expected_capture"][0] == pytest.approx(1.0, abs=0.02)
    # fetched at 07:00, asked at 23:00 the same day: nothing changed since, nothing to gain
    now = base + 1 + 23 / 24
    got = posterior_summary(
        hist,
        weights,
        components=Components(grid=GRID, periods=(DAY,)),
        age_days=now - (base + 1 + 7 / 24),
        now_days=now,
    )
    assert got["expected_index"][0] < 0.02 and got["expected_capture"][0] < 0.02
    with pytest.raises(ValueError, match="now_days"):
        posterior_summary(
            hist, weights, components=Components(grid=GRID, periods=(DAY,)), age_days=1.0
        )


def test_observations_without_times_cannot_follow_a_clock() -> None:
    hist, _ = _clock_histories(np.array([0.25, 0.25]), np.ones(2), 10)
    end = hist.obs_end.copy()
    end[hist.obs_row == 1] = np.nan  # row 1: times unknown
    row = np.repeat(np.arange(2), 10)
    d = (hist.obs_end - hist.obs_start)[np.argsort(hist.obs_row, kind="stable")]
    untimed = histories_from_arrays(row, d, hist.obs_changed, 2, end=end)
    weights = {GLOBAL: initial_weights(GRID, (DAY,), 0.5)}
    share = posterior_summary(untimed, weights, components=Components(grid=GRID, periods=(DAY,)))[
        "periodic_share"
    ]
    assert share[0] > 0.99 and share[1] == 0.0
    # histories without any times: same for every row
    flat = flatten_histories(_state([[1.0, 0.5]], [[True, False]]))
    assert not flat.has_times
    got = posterior_summary(flat, weights, components=Components(grid=GRID, periods=(DAY,)))[
        "periodic_share"
    ][0]
    assert got == 0.0


def test_flatten_chains_observation_times_back_from_the_anchor() -> None:
    anchor = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
    state = _state([[1.0, 0.5, 0.25], None, [2.0]], [[True, False, True], None, [False]])
    state = state.with_columns(
        last_seen_at=pl.Series([anchor, None, None], dtype=pl.Datetime("us", "UTC"))
    )
    h = flatten_histories(state, anchor="last_seen_at")
    a = anchor.timestamp() / 86_400.0
    np.testing.assert_allclose(h.obs_end[h.obs_row == 0], [a - 0.75, a - 0.25, a])
    np.testing.assert_allclose(h.obs_start[h.obs_row == 0], [a - 1.75, a - 0.75, a - 0.25])
    assert h.timed.tolist() == [True, True, False]  # row 2 has observations but no anchor
    assert (h.obs_row != 2).all()


def test_forgetting_tempers_the_likelihood(monkeypatch: pytest.MonkeyPatch) -> None:
    intervals, changed = [1.0, 2.0, 0.5, 1.0], [True, False, True, False]
    state = _state([intervals], [changed]).with_columns(obs_half_life_days=pl.lit(2.0))
    back = np.array([3.5, 1.5, 1.0, 0.0])  # days from each observation's end to the newest
    wt = np.exp2(-back / 2.0)
    lik = np.zeros_like(GRID)
    for d, c, w in zip(intervals, changed, wt, strict=True):
        lik += w * (np.log(-np.expm1(-GRID * d)) if c else -GRID * d)
    expected = np.exp(lik - lik.max()) / np.exp(lik - lik.max()).sum()
    got = grid_posterior(state, None, components=ON_GRID)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    # the module constant does the same for a frame without the column
    from freshness_pipeline.science import estimate

    monkeypatch.setattr(estimate, "HALF_LIFE_DAYS", 2.0)
    np.testing.assert_allclose(
        grid_posterior(_state([intervals], [changed]), None, components=ON_GRID)[0],
        expected,
        rtol=1e-5,
    )


def test_chunking_caching_and_sampling_with_clocks() -> None:
    rng = np.random.default_rng(9)
    n = 400
    phases = np.where(rng.random(n) < 0.5, rng.random(n), np.nan)
    hist, _ = _clock_histories(phases, np.exp(rng.uniform(-3, 2, n)), 8, seed=9)
    periods = (Period(0.5, 6), DAY)
    classes = rng.choice(["a", "b"], n).tolist()
    ages = rng.uniform(0.0, 3.0, n)
    clocks = Components(grid=GRID, periods=periods)
    kw = dict(components=clocks, iterations=4)
    ref_w = fit_grid_prior(hist, classes, **kw)
    ref = posterior_summary(
        hist, ref_w, classes, components=clocks, age_days=ages, now_days=EPOCH_DAY + 9
    )
    for chunk_cells, cache_cells in ((1, 0), (3000, 0), (50_000, 1 << 30)):
        w = fit_grid_prior(hist, classes, chunk_cells=chunk_cells, cache_cells=cache_cells, **kw)
        for k in ref_w:
            np.testing.assert_allclose(w[k], ref_w[k], rtol=1e-10, atol=1e-300)
        got = posterior_summary(
            hist,
            ref_w,
            classes,
            components=clocks,
            age_days=ages,
            now_days=EPOCH_DAY + 9,
            chunk_cells=chunk_cells,
        )
        for col in ref.columns:
            np.testing.assert_allclose(got[col].to_numpy(), ref[col].to_numpy(), rtol=1e-10)
    # an even sample of the pages gives nearly the same prior
    sampled = fit_grid_prior(hist, classes, max_rows=200, **kw)
    assert np.abs(sampled[GLOBAL] - ref_w[GLOBAL]).sum() < 0.15
    with pytest.raises(ValueError):
        fit_grid_prior(hist, components=ON_GRID, max_rows=0)


# ------------------------------------------------------------------ the product's functions

HOSTS = ["a.example", "b.example"]


def _url_state(n: int = 400, seed: int = 1) -> pl.DataFrame:
    """url_state-like rows: half the pages on a daily clock at 06:30, half Poisson at 1/day."""
    rng = np.random.default_rng(seed)
    phases = np.where(np.arange(n) % 2 == 0, 6.5 / 24, np.nan)
    hist, times = _clock_histories(phases, np.ones(n), 24, seed=seed)
    d = np.diff(times, axis=1)
    order = np.argsort(hist.obs_row, kind="stable")
    changed = hist.obs_changed[order].reshape(n, 24)
    last_us = np.round(times[:, -1] * 86_400e6).astype(np.int64)
    return pl.DataFrame(
        {
            "url": [f"http://{HOSTS[i % 2]}/{i}" for i in range(n)],
            "host": [HOSTS[i % 2] for i in range(n)],
            "url_class": rng.choice(["article", None], n).tolist(),
            "obs_interval_days": d.tolist(),
            "obs_changed": changed.tolist(),
            "last_seen_at": pl.Series(last_us.astype("datetime64[us]")).dt.replace_time_zone("UTC"),
        }
    ).with_columns(last_fetched_at=pl.col("last_seen_at"))


def test_refit_change_prior_stores_per_host_and_class_and_warm_starts() -> None:
    model = ChangeModel(periods=(DAY,), iterations=20)
    state = _url_state()
    prior = refit_change_prior(state, None, now=NOW, model=model)
    assert prior.columns == list(tables.CHANGE_PRIOR)
    assert prior.schema == pl.Schema(tables.CHANGE_PRIOR)
    c = GRID.shape[0] + 1
    assert prior.height == len(HOSTS) * 3  # article, default and the global fit per host
    assert (prior["weight"].list.len() == c).all()
    assert prior["component"][0].to_list() == ["poisson"] * (c - 1) + ["periodic"]
    assert prior["rate_per_day"][0].to_list() == [*GRID.tolist(), 1.0]
    assert set(prior["url_class"]) == {"article", "default", GLOBAL}
    assert prior["fitted_at"].unique().to_list() == [NOW]
    weights = prior_weights(prior, model)
    assert weights[GLOBAL][-1] > 0.3  # half the pages follow the clock
    counts = prior.sort("host", "url_class")
    assert counts["n_pages"].to_list() == [
        int(((state["host"] == h) & (state["url_class"].fill_null("default") == k)).sum())
        if k != GLOBAL
        else 200
        for h in HOSTS
        for k in ("__global__", "article", "default")
    ]
    # the next cycle continues the fit from the stored rows and keeps them next to its own
    later = NOW + timedelta(hours=6)
    again = refit_change_prior(state, prior, now=later, model=model)
    assert again["fitted_at"].unique().sort().to_list() == [NOW, later]
    direct = fit_grid_prior(
        flatten_histories(state, anchor="last_seen_at"),
        state["url_class"],
        components=Components(grid=GRID, periods=(DAY,)),
        previous_weights=weights,
        iterations=20,
    )
    newest = again.filter(pl.col("fitted_at") == later)
    np.testing.assert_allclose(prior_weights(newest, model)[GLOBAL], direct[GLOBAL], rtol=1e-9)
    # a third cycle keeps only the newest fit before it
    third = refit_change_prior(state, again, now=later + timedelta(hours=6), model=model)
    assert third["fitted_at"].unique().sort().to_list() == [later, later + timedelta(hours=6)]


def test_a_cycle_run_again_refits_and_plans_from_what_its_first_run_saw() -> None:
    """After a crash between writing the prior and finishing the cycle, the same cycle runs
    again with the prior it wrote already stored: it must come out as if it never had."""
    model = ChangeModel(periods=(DAY,), iterations=5)
    state = _url_state()
    earlier = refit_change_prior(state, None, now=NOW - timedelta(hours=6), model=model)
    first = refit_change_prior(state, earlier, now=NOW, model=model)
    rerun = refit_change_prior(state, first, now=NOW, model=model)
    assert rerun.equals(first)
    # the plan at NOW scores under the fit from before NOW, whatever NOW's run wrote
    gains = expected_gains(state, first, now=NOW, model=model)
    assert gains.equals(expected_gains(state, earlier, now=NOW, model=model))
    assert not gains.equals(
        expected_gains(state, first.filter(pl.col("fitted_at") == NOW), now=NOW, model=model)
    )
    assert latest_fit_before(first, NOW)["fitted_at"].unique().to_list() == [
        NOW - timedelta(hours=6)
    ]


def test_stored_weights_of_another_model_are_not_used() -> None:
    model = ChangeModel(periods=(DAY,), iterations=3)
    prior = refit_change_prior(_url_state(), None, now=NOW, model=model)
    assert prior_weights(prior, ChangeModel(periods=(Period(7.0, 42),))) is None
    poisson_only = prior.with_columns(
        pl.col(c).list.head(GRID.shape[0]) for c in ("component", "rate_per_day", "weight")
    )
    assert prior_weights(poisson_only, model) is None
    assert prior_weights(pl.DataFrame(schema=tables.CHANGE_PRIOR), model) is None
    moved = prior.with_columns(pl.col("rate_per_day").list.eval(pl.element() * 1.001))
    assert prior_weights(moved, model) is None
    negative = prior.with_columns(pl.col("weight").list.eval(pl.element() - 1.0))
    assert prior_weights(negative, model) is None
    # two hosts fit apart mix by their page counts
    a = prior.filter(pl.col("host") == "a.example").with_columns(
        weight=pl.lit([0.5 / 48] * 48 + [0.5]), n_pages=pl.lit(299)
    )
    b = prior.filter(pl.col("host") == "b.example").with_columns(
        weight=pl.lit([1.0 / 48] * 48 + [0.0]), n_pages=pl.lit(99)
    )
    mixed = prior_weights(pl.concat([a, b]), model)
    assert mixed[GLOBAL][-1] == pytest.approx(0.5 * 300 / 400)


def test_expected_gains_rank_a_clock_page_after_its_update() -> None:
    """The revisit_plan path: candidates with url_state's history -> expected_gain_override."""
    model = ChangeModel(periods=(DAY,), iterations=30)
    state = _url_state()
    prior = refit_change_prior(state, None, now=NOW, model=model)
    last = state["last_seen_at"].max()
    # 07:30 on the day after every page's last fetch: the clock pages changed at 06:30
    now = datetime.combine(last.date() + timedelta(days=1), datetime.min.time(), UTC)
    now += timedelta(hours=7.5)
    gains = expected_gains(state, prior, now=now, model=model).to_numpy()
    clock = np.arange(state.height) % 2 == 0
    # a clock page changed at 06:30 and stays current for 23 h
    assert np.median(gains[clock]) > 0.9
    # 05:00: the clock pages are stale too, but change again within 2 hours: wait for it
    early = now + timedelta(hours=21.5)
    gains_early = expected_gains(state, prior, now=early, model=model).to_numpy()
    assert np.median(gains_early[clock]) < 0.15
    # capture: P(changed since the last fetch)
    cap = expected_gains(state, prior, now=now, objective="capture", model=model).to_numpy()
    assert ((cap >= 0) & (cap <= 1)).all() and np.median(cap[clock]) > 0.95
    with pytest.raises(ValueError):
        expected_gains(state, prior, now=now, objective="age", model=model)
    # one pass gives both: the plan ranks by one and keeps the other as its forecast
    both = posterior_gains(state, prior, now=now, model=model)
    assert both.columns == ["expected_index", "expected_capture"]
    assert np.array_equal(both["expected_index"].to_numpy(), gains)
    assert np.array_equal(both["expected_capture"].to_numpy(), cap)


def test_expected_gains_of_new_hinted_and_historyless_candidates() -> None:
    model = ChangeModel()
    cands = pl.DataFrame(
        {
            "url": ["n", "h", "q"],
            "url_class": [None, None, None],
            "last_fetched_at": pl.Series(
                [None, NOW - timedelta(hours=1), NOW - timedelta(hours=1)],
                dtype=pl.Datetime("us", "UTC"),
            ),
            "hinted_change": [None, True, None],
        }
    )
    gains = expected_gains(cands, None, now=NOW, model=model).to_numpy()
    start = initial_weights(GRID, model.periods)
    never = expected_index(start[None, : GRID.shape[0]], GRID, math.inf)[0]
    # never fetched, or a trusted "changed" hint: the prior's gain at infinite age
    assert gains[0] == pytest.approx(gains[1]) and gains[0] > never
    assert gains[2] < gains[0]
    # capture: certain for the never fetched and the hinted, and a probability however the
    # posterior's weights round
    cap = expected_gains(cands, None, now=NOW, objective="capture", model=model).to_numpy()
    assert cap[0] == pytest.approx(1.0) and cap[1] == pytest.approx(1.0)
    assert ((cap >= 0.0) & (cap <= 1.0)).all() and cap[2] < 1.0
    # without the history columns every candidate is judged by its prior alone
    with_cols = expected_gains(
        cands.with_columns(
            obs_interval_days=pl.lit(None, dtype=pl.List(pl.Float64)),
            obs_changed=pl.lit(None, dtype=pl.List(pl.Boolean)),
            last_seen_at=pl.lit(None, dtype=pl.Datetime("us", "UTC")),
        ),
        None,
        now=NOW,
        model=model,
    )
    np.testing.assert_allclose(with_cols.to_numpy(), gains, rtol=1e-12)


def test_phase_likelihood_matches_the_direct_count() -> None:
    """The run-length computation of the phase likelihood against the definition: an
    observation over (s, e] predicts a change at φ iff floor((e − φ)/P) > floor((s − φ)/P)."""
    rng = np.random.default_rng(12)
    n, m = 30, 400
    row = np.sort(rng.integers(0, n, m))
    d = np.exp(rng.uniform(np.log(0.01), np.log(10.0), m))
    end = EPOCH_DAY + rng.uniform(0.0, 30.0, m)
    changed = rng.random(m) < 0.5
    weight = rng.uniform(0.2, 1.0, m)
    periods = (Period(0.5, 12), DAY, Period(7.0, 42), Period(1.0, 5))
    eps = 0.03
    for wt in (None, weight):
        hist = histories_from_arrays(row, d, changed, n, end=end, weight=wt)
        lik = ChunkedLikelihood(hist, GRID, periods, eps, CHUNK_CELLS)
        got = lik.chunk(0, n).phases
        w = np.ones(m) if wt is None else wt
        for period, phases in zip(periods, got, strict=True):
            phi = period.phases[None, :]
            hit = np.floor((end[:, None] - phi) / period.days) > np.floor(
                ((end - d)[:, None] - phi) / period.days
            )
            score = np.where(hit == changed[:, None], math.log1p(-eps), math.log(eps))
            expected = np.zeros((n, period.bins))
            np.add.at(expected, row, score * w[:, None])
            np.testing.assert_allclose(phases, expected, rtol=1e-9, atol=1e-9)


def test_the_refit_reads_a_sample_but_counts_every_page() -> None:
    """Beyond max_fit_rows pages with a history the fit reads an even sample of them; the page
    counts (what a host weighs in a mixed run) and the classes stored still cover every page."""
    state = _url_state()
    small = ChangeModel(periods=(DAY,), iterations=3, max_fit_rows=40)
    full = ChangeModel(periods=(DAY,), iterations=3)
    sampled = refit_change_prior(state, None, now=NOW, model=small)
    whole = refit_change_prior(state, None, now=NOW, model=full)
    assert sampled.select("host", "url_class", "n_pages").equals(
        whole.select("host", "url_class", "n_pages")
    )
    a, b = prior_weights(sampled, small), prior_weights(whole, full)
    assert set(a) == set(b)
    assert not np.allclose(a[GLOBAL], b[GLOBAL])  # fit on 40 pages, not 200
    np.testing.assert_allclose(a[GLOBAL].sum(), 1.0)


def test_classes_whose_prior_has_no_clocks_are_scored_without_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Below CLOCK_FLOOR of prior mass on the clocks a class skips the phase likelihoods (half
    the scoring cost); what it scores must not move beyond what that mass could explain."""
    import freshness_pipeline.science.prior.posterior as eb_module

    model = ChangeModel(periods=(DAY,), iterations=10)
    state = _url_state()
    weights = prior_weights(refit_change_prior(state, None, now=NOW, model=model), model)
    tiny = weights["article"].copy()
    tiny[-1] = 1e-9
    weights["article"] = tiny / tiny.sum()
    later = NOW + timedelta(hours=30)
    ages = (later - state["last_seen_at"].max()).total_seconds() / 86_400 + np.zeros(state.height)

    def summary() -> pl.DataFrame:
        return posterior_summary(
            flatten_histories(state, anchor="last_seen_at"),
            weights,
            state["url_class"],
            components=Components(grid=GRID, periods=(DAY,)),
            age_days=ages,
            now_days=later.timestamp() / 86_400,
        )

    skipped = summary()
    monkeypatch.setattr(eb_module, "CLOCK_FLOOR", 0.0)
    computed = summary()
    article = (state["url_class"] == "article").fill_null(False).to_numpy().astype(bool)
    assert 0 < article.sum() < state.height
    for column in ("expected_index", "expected_capture", "change_rate"):
        a, b = skipped[column].to_numpy(), computed[column].to_numpy()
        np.testing.assert_array_equal(a[~article], b[~article])
        # half these pages do follow the clock: 40 consistent fetches lift a 1e-9 prior to a
        # posterior share of a few thousandths, which is what skipping it may cost
        np.testing.assert_allclose(a[article], b[article], rtol=1e-2)
    assert (skipped["periodic_share"].to_numpy()[article] == 0).all()
    assert computed["periodic_share"].to_numpy()[~article].max() > 0.5


def test_flatten_handles_rows_without_any_history() -> None:
    empty = pl.DataFrame(
        {"obs_interval_days": [[], None], "obs_changed": [[], None], "last_seen_at": [None, NOW]},
        schema={
            "obs_interval_days": pl.List(pl.Float64),
            "obs_changed": pl.List(pl.Boolean),
            "last_seen_at": pl.Datetime("us", "UTC"),
        },
    )
    h = flatten_histories(empty, anchor="last_seen_at")
    assert h.n_obs.tolist() == [0, 0] and h.obs_row.size == 0 and h.timed.all()


def test_a_page_whose_trusted_lastmod_says_it_stopped_changing_is_worth_its_fetch() -> None:
    """A live blog changed at each of its busy day's fetches; the sitemap's lastmod, trusted
    to date changes, says it last changed a day and a half ago. Scored on its history alone it
    changes too fast for a fetch to buy anything; the dated quiet says it has stopped."""
    model = ChangeModel()
    last_seen = NOW - timedelta(days=2)
    cands = pl.DataFrame(
        {
            "url": ["dated", "undated", "fresh"],
            "url_class": [None, None, None],
            "last_fetched_at": [last_seen] * 3,
            "last_seen_at": [last_seen] * 3,
            "obs_interval_days": [[0.1, 0.1, 0.1]] * 3,
            "obs_changed": [[True, True, True]] * 3,
            "hinted_change": [True, True, True],
            # changed 1.5 days before NOW; no date; changed a minute ago
            "lastmod_age_days": [1.5, None, 1 / 1440],
        },
        schema_overrides={
            "last_fetched_at": pl.Datetime("us", "UTC"),
            "last_seen_at": pl.Datetime("us", "UTC"),
        },
    )
    gains = posterior_gains(cands, None, now=NOW, model=model)["expected_index"].to_numpy()
    assert gains[0] > 10 * gains[1]
    assert gains[2] < gains[1]  # changed just now, again: as fast as its history says, or more
    # the history the page is scored on is the one url_state will keep after the fetch
    scored = with_dated_hint(cands, NOW)
    assert scored["obs_interval_days"][0].to_list() == [0.1, 0.1, 0.1, 2.0]
    assert scored["obs_age_days"][0].to_list() == [None, None, None, 1.5]
    assert scored["obs_interval_days"][1].to_list() == [0.1, 0.1, 0.1]
    assert scored["last_seen_at"].to_list() == [NOW, last_seen, NOW]
