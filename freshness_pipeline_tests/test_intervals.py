from __future__ import annotations

import decimal

import numpy as np
import polars as pl
import pytest

from freshness_pipeline.science.intervals import due_age_days, g, g_expr, g_inverse


def _reference_g(r: np.ndarray) -> np.ndarray:
    """g(r) = 1 − (1 + r)e^{−r} written independently: six series terms where it cancels."""
    r = np.asarray(r, dtype=np.float64)
    series = r**2 / 2 - r**3 / 3 + r**4 / 8 - r**5 / 30 + r**6 / 144
    return np.where(r < 0.01, series, 1 - (1 + r) * np.exp(-r))


def test_g_to_double_precision_over_the_whole_range():
    r = np.geomspace(1e-12, 60.0, 20_001)
    assert np.allclose(g(r), _reference_g(r), rtol=1e-9, atol=0)  # the reference's own error
    # against 50 significant digits, where the closed form cancels and around the switch
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        for x in (1e-9, 1e-4, 0.01, 0.0499, 0.05, 0.0501, 0.3, 2.0, 20.0):
            d = decimal.Decimal(x)
            exact = float(1 - (1 + d) * (-d).exp())
            assert g(np.array([x]))[0] == pytest.approx(exact, rel=4e-16)
    assert g(np.array([0.0, np.inf]))[0] == 0.0 and g(np.array([0.0, np.inf]))[1] == 1.0
    assert np.isnan(g(np.array([np.nan]))).all()
    assert g(0.3).shape == () and g(np.ones((2, 3))).shape == (2, 3)


def test_the_planners_g_is_the_same_function() -> None:
    """g_expr (the plan's, over whole tables) and g (numpy) are one g: the planner had a copy."""
    r = np.concatenate([[0.0, 0.05, 39.9, 40.0, 40.1, np.inf], np.geomspace(1e-12, 60.0, 2_001)])
    planned = pl.select(g_expr(pl.lit(pl.Series(r)))).to_series().to_numpy()
    assert np.allclose(planned, g(r), rtol=4e-16, atol=3e-16)
    assert planned[5] == 1.0 and planned[0] == 0.0  # r = ∞ (never fetched) and r = 0


def test_g_inverse_roundtrip():
    r = np.array([1e-6, 1e-3, 0.1, 1.0, 1.79, 5.0, 15.0])
    assert np.allclose(g_inverse(g(r)), r, rtol=1e-6)
    assert np.isinf(g_inverse(np.array([1.0, 2.0]))).all()
    y = np.array([1e-18, 1e-9, 1e-4, 0.01, 0.3, 0.5, 0.9, 0.999, 1 - 1e-10])
    assert np.allclose(_reference_g(g_inverse(y)), y, rtol=1e-9, atol=0)
    assert g_inverse(0.0) == 0.0 and g_inverse(-1.0) == 0.0
    assert g_inverse(1.0) == np.inf and g_inverse(np.nan) == np.inf


def test_due_age_solves_the_index_threshold():
    rate, value, cost, mu = np.array([0.5, 2.0]), np.array([1.0, 3.0]), np.array([1.0, 1.0]), 0.2
    age = due_age_days(rate, value, cost, mu, min_days=0.0, max_days=1e9)
    priority = value * g(rate * age) / rate / cost
    assert np.allclose(priority, mu, rtol=1e-6)


def test_pages_too_fast_to_chase_get_the_cap_and_zero_threshold_the_floor():
    age = due_age_days(
        np.array([50.0]), np.array([1.0]), np.array([1.0]), 0.1, min_days=0.1, max_days=30
    )
    assert age[0] == 30
    age = due_age_days(
        np.array([1.0]), np.array([1.0]), np.array([1.0]), 0.0, min_days=0.1, max_days=30
    )
    assert age[0] == 0.1


def test_more_valuable_or_cheaper_pages_are_due_sooner():
    base = due_age_days(
        np.array([0.3]), np.array([1.0]), np.array([1.0]), 0.5, min_days=0, max_days=1e9
    )
    valuable = due_age_days(
        np.array([0.3]), np.array([4.0]), np.array([1.0]), 0.5, min_days=0, max_days=1e9
    )
    costly = due_age_days(
        np.array([0.3]), np.array([1.0]), np.array([3.0]), 0.5, min_days=0, max_days=1e9
    )
    assert valuable[0] < base[0] < costly[0]
