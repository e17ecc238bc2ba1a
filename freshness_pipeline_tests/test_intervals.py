from __future__ import annotations

import numpy as np

from freshness_pipeline.science.intervals import due_age_days, g, g_inverse


def test_g_inverse_roundtrip():
    r = np.array([1e-6, 1e-3, 0.1, 1.0, 1.79, 5.0, 15.0])
    assert np.allclose(g_inverse(g(r)), r, rtol=1e-6)
    assert np.isinf(g_inverse(np.array([1.0, 2.0]))).all()


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
