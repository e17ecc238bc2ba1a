"""The benchmarks' yardstick (benchmarks/oracle.py): evaluation code, tested like the product's."""

import math
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from oracle import optimal_frequencies, periodic_freshness, weighted_freshness  # noqa: E402

from freshness_pipeline.science.gains import freshness_index  # noqa: E402


def _g(r: np.ndarray) -> np.ndarray:
    """g(r) = 1 − (1 + r)e^{−r}; series where the closed form cancels."""
    r = np.asarray(r, dtype=np.float64)
    series = r**2 / 2 - r**3 / 3 + r**4 / 8 - r**5 / 30 + r**6 / 144
    return np.where(r < 0.01, series, 1 - (1 + r) * np.exp(-r))


def test_periodic_freshness_values_and_limits() -> None:
    assert periodic_freshness(1.0, 1.0) == pytest.approx(1 - math.exp(-1))
    assert periodic_freshness(2.0, 4.0) == pytest.approx(2 * (1 - math.exp(-0.5)))
    assert periodic_freshness(0.0, 1.0) == 1.0  # never changes: always fresh
    assert periodic_freshness(0.0, 0.0) == 1.0
    assert periodic_freshness(1.0, 0.0) == 0.0  # changes, never refreshed
    assert periodic_freshness(1e-12, 1.0) == pytest.approx(1.0)
    assert periodic_freshness(1.0, np.inf) == pytest.approx(1.0)
    out = periodic_freshness(np.array([96.0, 1.0, 1 / 7]), 1.0)
    assert out.shape == (3,)
    assert np.all(np.diff(out) > 0)


def test_reproduces_cho_garcia_molina_five_page_example() -> None:
    """λ = 1..5/day, 5 refreshes/day: f = (1.15, 1.36, 1.35, 1.14, 0.00)."""
    f = optimal_frequencies([1, 2, 3, 4, 5], [1, 1, 1, 1, 1], 5.0)
    assert f == pytest.approx([1.15, 1.36, 1.35, 1.14, 0.00], abs=0.006)
    assert f[4] == 0.0
    assert f.sum() == pytest.approx(5.0, rel=1e-12)
    # the multiplier: g(λ/f)/λ is the same for every refreshed page, μ = 0.2164
    mu = _g(np.array([1, 2, 3, 4]) / f[:4]) / np.array([1, 2, 3, 4])
    assert mu == pytest.approx([0.2164] * 4, abs=2e-4)


def test_kkt_conditions_on_a_random_web() -> None:
    rng = np.random.default_rng(0)
    lam = np.exp(rng.uniform(np.log(1 / 3650), np.log(96), 3000))
    w = rng.permutation(np.arange(1, 3001) ** -0.9)
    total = 0.4 * lam.size
    f = optimal_frequencies(lam, w, total)
    assert f.sum() == pytest.approx(total, rel=1e-9)
    assert np.all(f >= 0)
    on = f > 0
    marginal = w[on] / lam[on] * _g(lam[on] / f[on])
    mu = np.median(marginal)
    assert marginal == pytest.approx(np.full(on.sum(), mu), rel=1e-6)
    # the pages left out are exactly those whose best possible marginal value w/λ is below μ
    assert np.all(w[~on] / lam[~on] <= mu * (1 + 1e-9))


def test_optimum_beats_perturbations_and_baselines() -> None:
    rng = np.random.default_rng(1)
    lam = np.exp(rng.uniform(np.log(1 / 365), np.log(20), 400))
    w = rng.uniform(0.1, 2.0, 400)
    total = 100.0
    f = optimal_frequencies(lam, w, total)
    best = weighted_freshness(lam, w, f)
    for _ in range(20):
        g = np.clip(f + rng.normal(0, 0.02, f.size), 0, None)
        g *= total / g.sum()
        assert weighted_freshness(lam, w, g) <= best + 1e-12
    uniform = np.full(lam.size, total / lam.size)
    proportional = lam * total / lam.sum()
    assert best > weighted_freshness(lam, w, uniform) > weighted_freshness(lam, w, proportional)


def test_max_freq_caps_and_total_is_kept() -> None:
    lam = np.array([0.5, 1.0, 2.0, 3.0])
    w = np.array([10.0, 10.0, 10.0, 0.1])
    f = optimal_frequencies(lam, w, 4.0, max_freq=1.0)
    assert np.all(f <= 1.0 + 1e-12)
    assert f.sum() == pytest.approx(3.0 + f[3])
    assert f[:3] == pytest.approx([1.0, 1.0, 1.0])
    # more budget than the caps can absorb: everything useful at its cap
    f = optimal_frequencies(lam, w, 100.0, max_freq=1.0)
    assert f == pytest.approx([1.0, 1.0, 1.0, 1.0])


def test_useless_pages_get_nothing() -> None:
    f = optimal_frequencies([0.0, 1.0, 2.0], [1.0, 0.0, 1.0], 3.0)
    assert f[0] == 0.0 and f[1] == 0.0
    assert f[2] == pytest.approx(3.0)
    assert optimal_frequencies([0.0, 0.0], [1.0, 1.0], 3.0).tolist() == [0.0, 0.0]
    assert optimal_frequencies([1.0, 2.0], [1.0, 1.0], 0.0).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError):
        optimal_frequencies([1.0], [1.0, 2.0], 1.0)


def test_weights_rescale_the_solution() -> None:
    """f(λ, w) = w f(λ/w, 1): doubling every weight and rate doubles every frequency."""
    lam = np.array([0.3, 1.0, 2.5, 6.0])
    f1 = optimal_frequencies(lam, np.ones(4), 2.0)
    f2 = optimal_frequencies(2 * lam, 2 * np.ones(4), 4.0)
    assert f2 == pytest.approx(2 * f1, rel=1e-9)


def test_the_index_fetches_at_the_optimal_interval() -> None:
    """The Lagrangian index reaches the shadow price μ when age = 1/f (the KKT condition)."""
    lam = np.array([0.2, 1.0, 2.0, 4.0])
    w = np.ones(4)
    f = optimal_frequencies(lam, w, 3.0)
    on = f > 0
    index = (
        pl.select(freshness_index(pl.Series(lam[on]), pl.Series(1.0 / f[on])))
        .to_series()
        .to_numpy()
    )
    # the index is (w/λ)g(λa), so W(1/f) = μ for every refreshed page
    assert index == pytest.approx(np.full(on.sum(), index[0]), rel=1e-6)
