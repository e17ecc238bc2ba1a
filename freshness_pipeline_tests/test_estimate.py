import math
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from freshness_pipeline.science.estimate import (
    DEFAULT_CLASS,
    PRIORS_BY_CLASS,
    append_observations,
    by_class,
    class_key,
    estimate_rates,
    prior_columns,
    prior_mean,
)
from freshness_pipeline_tests.histories import LIST_B, LIST_F
from freshness_pipeline_tests.histories import history_frame as _state

# the textbook estimators the product's is compared with are evaluation code (benchmarks/)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from baseline_estimators import cho_improved_rate, exposure_rate, naive_rate  # noqa: E402


def _simulate(lam: float, intervals: np.ndarray, alpha: float, beta: float, seed: int):
    rng = np.random.default_rng(seed)
    changed = rng.random(intervals.shape) < -np.expm1(-lam * intervals)
    return _state(intervals.tolist(), changed.tolist(), alpha=alpha, beta=beta)


# ------------------------------------------------------------------------------------ priors


def test_priors_by_class_are_sensible() -> None:
    assert {"listing", "article", "static", "default"} <= PRIORS_BY_CLASS.keys()
    assert prior_mean("listing") == pytest.approx(1.0)
    assert prior_mean("article") == pytest.approx(1 / 7)
    assert prior_mean("static") == pytest.approx(1 / 90)
    assert prior_mean("default") == pytest.approx(1 / 7)
    assert prior_mean(None) == prior_mean("no-such-class") == prior_mean("default")
    assert prior_mean("listing") > prior_mean("article") > prior_mean("static")
    for alpha, beta in PRIORS_BY_CLASS.values():
        assert 0 < alpha <= 1 and beta > 0  # weak priors


def test_prior_columns() -> None:
    df = pl.DataFrame({"url_class": ["listing", None, "weird", "Static "]})
    out = prior_columns(df)
    alpha_d, beta_d = PRIORS_BY_CLASS["default"]
    assert out["prior_alpha"].to_list() == [
        PRIORS_BY_CLASS["listing"][0],
        alpha_d,
        alpha_d,
        PRIORS_BY_CLASS["static"][0],
    ]
    assert out["prior_beta"].to_list() == [
        PRIORS_BY_CLASS["listing"][1],
        beta_d,
        beta_d,
        PRIORS_BY_CLASS["static"][1],
    ]
    no_class = prior_columns(pl.DataFrame({"url": ["a"]}))
    assert no_class.row(0) == ("a", alpha_d, beta_d)
    assert prior_columns(pl.DataFrame({"kind": ["listing"]}), class_col="kind")[
        "prior_beta"
    ].item() == pytest.approx(PRIORS_BY_CLASS["listing"][1])


# ------------------------------------------------------------------------ append_observations


def test_append_observations() -> None:
    state = pl.DataFrame(
        {
            "url": ["new", "old", "quiet", "full"],
            "extra": [1, 2, 3, 4],
            "obs_interval_days": [None, [1.0, 2.0], [5.0], [1.0, 2.0, 3.0]],
            "obs_changed": [None, [True, False], [False], [True, True, False]],
        },
        schema_overrides={"obs_interval_days": LIST_F, "obs_changed": LIST_B},
    )
    obs = pl.DataFrame(
        {
            "url": ["full", "new", "old", "stranger"],
            "interval_days": [4.0, 0.5, 3.0, 1.0],
            "changed": [True, False, True, True],
        }
    )
    out = append_observations(state, obs, max_obs=3)
    assert out.columns == state.columns
    assert out["url"].to_list() == ["new", "old", "quiet", "full"]
    assert out["extra"].to_list() == [1, 2, 3, 4]
    assert out["obs_interval_days"].to_list() == [[0.5], [1.0, 2.0, 3.0], [5.0], [2.0, 3.0, 4.0]]
    assert out["obs_changed"].to_list() == [
        [False],
        [True, False, True],
        [False],
        [True, False, True],
    ]
    assert out.schema["obs_interval_days"] == LIST_F
    assert out.schema["obs_changed"] == LIST_B


def test_append_ignores_zero_and_invalid_intervals() -> None:
    state = _state([[1.0]], [[True]])
    for bad in (0.0, -1.0, float("nan"), float("inf"), None):
        obs = pl.DataFrame(
            {"url": ["u0"], "interval_days": [bad], "changed": [True]},
            schema={"url": pl.String, "interval_days": pl.Float64, "changed": pl.Boolean},
        )
        out = append_observations(state, obs)
        assert out["obs_interval_days"].to_list() == [[1.0]]


def test_append_rejects_duplicate_observations() -> None:
    obs = pl.DataFrame({"url": ["u0", "u0"], "interval_days": [1.0, 2.0], "changed": [True, False]})
    with pytest.raises(ValueError, match="one row per url"):
        append_observations(_state([[1.0]], [[True]]), obs)


def test_append_handles_all_null_state() -> None:
    state = pl.DataFrame({"url": ["a"], "obs_interval_days": [None], "obs_changed": [None]})
    obs = pl.DataFrame({"url": ["a"], "interval_days": [2.0], "changed": [True]})
    out = append_observations(state, obs)
    assert out.row(0) == ("a", [2.0], [True])


# ----------------------------------------------------------------------------- estimate_rates


def test_empty_history_gives_prior_mean() -> None:
    state = _state([None, []], [None, []], alpha=0.5, beta=3.5)
    out = estimate_rates(state)
    assert out["change_rate"].to_list() == pytest.approx([0.5 / 3.5, 0.5 / 3.5])
    assert out["n_obs"].to_list() == [0, 0]
    assert out["n_changes"].to_list() == [0, 0]
    assert out["rate_is_lower_bound"].to_list() == [False, False]


def test_null_priors_use_default() -> None:
    state = _state([None], [None]).with_columns(
        pl.lit(None, dtype=pl.Float64).alias("prior_alpha"),
        pl.lit(None, dtype=pl.Float64).alias("prior_beta"),
    )
    assert estimate_rates(state)["change_rate"].item() == pytest.approx(prior_mean("default"))


def test_nearly_unbiased_daily_sampling() -> None:
    """λ = 1/day sampled daily 50 times: the censored estimate is right on average."""
    intervals = np.ones((2000, 50))
    weak = estimate_rates(_simulate(1.0, intervals, 0.5, 0.5, seed=1))["change_rate"]
    assert weak.mean() == pytest.approx(1.0, rel=0.05)
    alpha, beta = PRIORS_BY_CLASS["default"]
    default = estimate_rates(_simulate(1.0, intervals, alpha, beta, seed=2))["change_rate"]
    assert default.mean() == pytest.approx(1.0, rel=0.10)


def test_higher_than_exposure_estimate_for_fast_pages() -> None:
    state = _simulate(2.0, np.ones((500, 30)), 0.5, 3.5, seed=3)
    out = estimate_rates(state).with_columns(exposure_rate(), naive_rate())
    assert (out["change_rate"] >= out["exposure_rate"]).all()
    assert out["change_rate"].mean() > 1.5 * out["exposure_rate"].mean()
    assert out["exposure_rate"].mean() < 0.6 * 2.0  # the exposure count's known bias


def test_all_changed_is_finite_lower_bound() -> None:
    n = 10
    state = _state([[1.0] * n, [0.25] * n], [[True] * n, [True] * n], alpha=0.5, beta=1e-9)
    out = estimate_rates(state)
    rates = out["change_rate"].to_list()
    assert all(math.isfinite(r) for r in rates)
    assert out["rate_is_lower_bound"].to_list() == [True, True]
    # the sampling rate ln(2n)/interval (half an unchanged interval expected)
    assert rates[0] == pytest.approx(math.log(2 * n) / 1.0)
    assert rates[1] == pytest.approx(math.log(2 * n) / 0.25)
    capped = estimate_rates(state, max_rate_per_day=5.0)["change_rate"].to_list()
    assert capped == pytest.approx([math.log(2 * n), 5.0])


def test_all_changed_takes_the_sampling_cap_whatever_the_prior() -> None:
    """A prior's pseudo-days of "no change" must not pull a page seen changed at every visit
    below "as fast as we sample": with Gamma(0.5, 3.5) its root would sit near 0.9/day."""
    d = [[1.0] * 3, [2.0, 0.5, 1.0] * 7, [7.0] * 20 + [1 / 24]]
    out = estimate_rates(_state(d, [[True] * len(x) for x in d], alpha=0.5, beta=3.5))
    assert out["rate_is_lower_bound"].to_list() == [True, True, True]
    rates = out["change_rate"].to_list()
    assert rates[0] == pytest.approx(math.log(6))  # ln(2n)/interval
    for lam, ds in zip(rates[1:], d[1:], strict=True):
        # unequal intervals: the rate at which half an unchanged interval was expected
        assert np.exp(-lam * np.array(ds)).sum() == pytest.approx(0.5, rel=1e-9)
    # one changed hour among weekly visits: fast, but not ln(43) per hour (~90/day)
    assert 10 < rates[2] < 20
    # one unchanged interval: a finite root, below the cap the all-changed page gets
    one_quiet = estimate_rates(_state([[1.0] * 3], [[True, False, True]], alpha=0.5, beta=3.5))
    assert one_quiet["rate_is_lower_bound"].item() is False
    assert 0 < one_quiet["change_rate"].item() < math.log(7)


def test_all_changed_rate_never_drops_with_one_more_change() -> None:
    """Unequal intervals: appending a changed interval to an all-changed history, or seeing
    the one unchanged interval of a history changed instead, never lowers the estimate."""
    rng = np.random.default_rng(11)
    rows = [
        rng.choice([1 / 24, 0.25, 1.0, 3.0, 7.0, 30.0], int(k)).tolist()
        for k in rng.integers(1, 25, 300)
    ]
    extra = rng.choice([1 / 24, 1.0, 30.0], len(rows)).tolist()
    before = estimate_rates(_state(rows, [[True] * len(d) for d in rows]))["change_rate"]
    longer = [d + [x] for d, x in zip(rows, extra, strict=True)]
    after = estimate_rates(_state(longer, [[True] * len(d) for d in longer]))["change_rate"]
    assert (after.to_numpy() >= before.to_numpy() * (1 - 1e-9)).all()
    one_quiet = [[True] * len(d) + [False] for d in rows]
    quiet = estimate_rates(_state(longer, one_quiet))["change_rate"]
    assert (after.to_numpy() >= quiet.to_numpy() * (1 - 1e-9)).all()


def test_monotone_in_number_of_changes() -> None:
    n = 12
    changed = [[True] * x + [False] * (n - x) for x in range(n + 1)]
    out = estimate_rates(_state([[1.0] * n] * (n + 1), changed))
    rates = out["change_rate"].to_numpy()
    assert np.all(np.diff(rates) > 0)
    assert out["n_changes"].to_list() == list(range(n + 1))
    assert out["rate_is_lower_bound"].to_list() == [False] * n + [True]


def test_unequal_intervals_solve_the_censored_score_equation() -> None:
    """With a vanishing prior the fixed point is the MLE: Σ_c t/(e^{λt}−1) = Σ_u t."""
    d = [0.5, 3.0, 10.0, 0.2, 7.0, 1.5]
    c = [True, False, True, False, True, False]
    lam = estimate_rates(_state([d], [c], alpha=1e-12, beta=1e-12))["change_rate"].item()
    dc = np.array([x for x, ch in zip(d, c, strict=True) if ch])
    du = np.array([x for x, ch in zip(d, c, strict=True) if not ch])
    assert np.sum(dc / np.expm1(lam * dc)) == pytest.approx(du.sum(), rel=1e-9)


def test_result_is_a_fixed_point_of_the_em_map() -> None:
    rng = np.random.default_rng(4)
    rows_d, rows_c = [], []
    for _ in range(200):
        n = int(rng.integers(1, 40))
        d = rng.choice([0.25, 1.0, 3.0, 7.0], n)
        rows_d.append(d.tolist())
        rows_c.append((rng.random(n) < -np.expm1(-rng.uniform(0.01, 3) * d)).tolist())
    out = estimate_rates(_state(rows_d, rows_c, alpha=0.5, beta=3.5))
    for d, c, lam, lb in zip(
        rows_d, rows_c, out["change_rate"], out["rate_is_lower_bound"], strict=True
    ):
        if lb:
            continue
        d, c = np.array(d), np.array(c, dtype=bool)
        first_change = 1 / lam - d[c] / np.expm1(lam * d[c])
        em = (0.5 + c.sum()) / (3.5 + d[~c].sum() + first_change.sum())
        assert em == pytest.approx(lam, rel=1e-9)


def test_unequal_intervals_nearly_unbiased() -> None:
    rng = np.random.default_rng(5)
    intervals = rng.choice([0.25, 0.5, 1.0, 2.0, 4.0], size=(2000, 50))
    rates = estimate_rates(_simulate(0.5, intervals, 0.5, 0.5, seed=6))["change_rate"]
    assert rates.mean() == pytest.approx(0.5, rel=0.05)


def test_invalid_observations_are_skipped() -> None:
    state = _state([[1.0, 0.0, -2.0, float("nan")]], [[False, True, True, True]])
    out = estimate_rates(state)
    assert out["n_obs"].item() == 1
    assert out["change_rate"].item() == pytest.approx(0.5 / 4.5)


def test_mismatched_lists_raise() -> None:
    with pytest.raises(ValueError, match="equal lengths"):
        estimate_rates(_state([[1.0, 2.0]], [[True]]))


def test_estimate_keeps_columns_and_rows() -> None:
    state = _state([[1.0], None, [2.0, 2.0]], [[True], None, [False, True]])
    out = estimate_rates(state)
    assert out.columns[: len(state.columns)] == state.columns
    assert out.columns[len(state.columns) :] == [
        "change_rate",
        "n_obs",
        "n_changes",
        "rate_is_lower_bound",
    ]
    assert out["url"].to_list() == ["u0", "u1", "u2"]
    assert estimate_rates(state.head(0)).height == 0


def test_fast_on_many_urls() -> None:
    rng = np.random.default_rng(7)
    intervals = rng.choice([0.25, 1.0, 3.0], size=(20_000, 64))
    out = estimate_rates(_simulate(1.0, intervals, 0.5, 3.5, seed=8))
    assert out["change_rate"].is_finite().all()


# ---------------------------------------------------------------------- comparison estimators


def test_comparison_estimators() -> None:
    state = _state([[1.0] * 10, [2.0] * 4, None], [[True] * 3 + [False] * 7, [True] * 4, None])
    out = state.select(naive_rate(), cho_improved_rate(), exposure_rate())
    assert out["naive_rate"].to_list()[:2] == pytest.approx([0.3, 0.5])
    assert out["naive_rate"][2] is None
    assert out["cho_improved_rate"][0] == pytest.approx(-math.log(7.5 / 10.5))
    assert out["cho_improved_rate"][1] == pytest.approx(math.log(9) / 2.0)  # X = n: ln(2n+1)/I
    assert out["cho_improved_rate"][2] is None
    assert out["exposure_rate"].to_list() == pytest.approx([3.5 / 13.5, 4.5 / 11.5, 0.5 / 3.5])


# ------------------------------------------------------------------------------- forgetting


def test_forgetting_follows_a_change_of_regime() -> None:
    """30 daily fetches that always saw a change, then 30 that never did: with forgetting
    the estimate follows the recent quiet; without it the busy past still dominates."""
    intervals = [[1.0] * 60]
    changed = [[True] * 30 + [False] * 30]
    state = _state(intervals, changed)
    plain = estimate_rates(state)["change_rate"].item()
    forget = estimate_rates(state.with_columns(obs_half_life_days=pl.lit(5.0)))
    assert forget["change_rate"].item() < plain / 5
    # counts stay raw: they describe the history, not the weights
    assert forget["n_obs"].item() == 60 and forget["n_changes"].item() == 30


def test_forgetting_off_or_huge_half_life_changes_nothing() -> None:
    st = _simulate(0.7, np.random.default_rng(3).uniform(0.5, 2.0, (20, 30)), 0.5, 3.5, 1)
    base = estimate_rates(st)["change_rate"].to_numpy()
    for h in (None, 0.0, -1.0, 1e12):
        col = pl.lit(h, dtype=pl.Float64)
        got = estimate_rates(st.with_columns(obs_half_life_days=col))["change_rate"].to_numpy()
        np.testing.assert_allclose(got, base, rtol=1e-9)


def test_forgetting_weights_by_age_within_each_row() -> None:
    """Rows are independent: a row's weights depend only on its own intervals."""
    a = _state([[1.0, 2.0, 3.0]], [[True, False, True]])
    b = _state([[5.0], [1.0, 2.0, 3.0]], [[False], [True, False, True]])
    h = pl.lit(2.0)
    ra = estimate_rates(a.with_columns(obs_half_life_days=h))["change_rate"].item()
    rb = estimate_rates(b.with_columns(obs_half_life_days=h))["change_rate"][1]
    assert ra == pytest.approx(rb, rel=1e-12)


# ------------------------------------------------------------------------------ incremental


def _cycle(seed: int = 5, n: int = 300, fetched: float = 0.2):
    """A state estimated in full, then one cycle's observations for a share of its rows."""
    rng = np.random.default_rng(seed)
    intervals = rng.choice([0.25, 1.0, 3.0], size=(n, 12))
    before = estimate_rates(_simulate(0.5, intervals, 0.5, 3.5, seed=seed))
    picked = rng.random(n) < fetched
    obs = pl.DataFrame(
        {
            "url": before["url"].filter(pl.Series(picked)),
            "interval_days": rng.uniform(0.1, 5.0, int(picked.sum())),
            "changed": rng.random(int(picked.sum())) < 0.5,
        }
    )
    return append_observations(before, obs), picked


def test_incremental_matches_full_reestimation_exactly() -> None:
    after, picked = _cycle()
    full = estimate_rates(after)
    for mask in (pl.Series(picked), picked):
        incremental = estimate_rates(after, only_rows=mask)
        assert incremental.columns == full.columns
        assert incremental.equals(full)


def test_incremental_keeps_rows_outside_the_mask() -> None:
    after, picked = _cycle()
    planted = after.with_columns(
        change_rate=pl.when(pl.Series(picked)).then(pl.col("change_rate")).otherwise(123.0)
    )
    out = estimate_rates(planted, only_rows=pl.Series(picked))
    assert (out["change_rate"].filter(pl.Series(~picked)) == 123.0).all()
    assert (
        out["change_rate"]
        .filter(pl.Series(picked))
        .equals(estimate_rates(after)["change_rate"].filter(pl.Series(picked)))
    )
    nothing = estimate_rates(planted, only_rows=np.zeros(planted.height, dtype=bool))
    assert nothing["change_rate"].equals(planted["change_rate"])


def test_incremental_estimates_rows_without_a_stored_estimate() -> None:
    after, _ = _cycle()
    full = estimate_rates(after)
    holes = full.with_columns(
        change_rate=pl.when(pl.int_range(pl.len()) % 7 == 0).then(None).otherwise("change_rate"),
        n_obs=pl.when(pl.int_range(pl.len()) % 11 == 0).then(None).otherwise("n_obs"),
    )
    out = estimate_rates(holes, only_rows=pl.Series([None] * holes.height, dtype=pl.Boolean))
    assert out.equals(full)
    # without the estimate columns at all there is nothing to keep: every row is estimated
    bare = after.drop("change_rate", "n_obs", "n_changes", "rate_is_lower_bound")
    only_first = np.zeros(bare.height, dtype=bool)
    only_first[0] = True
    assert estimate_rates(bare, only_rows=only_first).equals(estimate_rates(bare))


def test_incremental_rejects_a_bad_mask() -> None:
    after, _ = _cycle(n=10)
    with pytest.raises(ValueError, match="boolean"):
        estimate_rates(after, only_rows=pl.Series(range(10)))
    with pytest.raises(ValueError, match="boolean"):
        estimate_rates(after, only_rows=np.arange(10))
    with pytest.raises(ValueError, match="9 entries for 10 rows"):
        estimate_rates(after, only_rows=np.ones(9, dtype=bool))


def test_one_class_rule_for_every_table_keyed_by_class() -> None:
    classes = pl.DataFrame({"c": [" Article ", "LISTING", "", None, "unknown"]})
    keys = classes.select(class_key(pl.col("c"))).to_series().to_list()
    assert keys == ["article", "listing", DEFAULT_CLASS, DEFAULT_CLASS, "unknown"]
    table = {"article": 2.0, "listing": 3.0}
    got = classes.select(by_class(pl.col("c"), table, 9.0)).to_series().to_list()
    assert got == [2.0, 3.0, 9.0, 9.0, 9.0]
