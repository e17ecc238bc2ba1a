"""When a page next becomes worth a fetch, from the same index the planner ranks by.

The planner selects a page once value * W(age) / cost reaches the cycle's cut-off mu, where
W(a) = g(lambda a) / lambda and g(r) = 1 - (1 + r) e^-r (the Cho and Garcia-Molina Lagrangian
index). Solving g(lambda a) = mu * cost * lambda / value for a gives the age at which the page is
due: that is what ``next_check_at`` reports. Pages with mu * cost * lambda / value >= 1 never
reach the cut-off (they change too fast to be worth chasing at this budget); they get the
staleness floor instead.
"""

from __future__ import annotations

import numpy as np


def g(r: np.ndarray) -> np.ndarray:
    r = np.asarray(r, dtype=float)
    small = r < 1e-4
    out = np.empty_like(r)
    out[small] = r[small] ** 2 / 2 - r[small] ** 3 / 3
    big = ~small
    out[big] = 1.0 - (1.0 + r[big]) * np.exp(-r[big])
    return out


def g_inverse(y: np.ndarray, iterations: int = 60) -> np.ndarray:
    """r with g(r) = y for y in [0, 1); inf for y >= 1. Bisection on log r, vectorized."""
    y = np.asarray(y, dtype=float)
    out = np.full_like(y, np.inf)
    ok = (y < 1.0) & np.isfinite(y)
    target = np.clip(y[ok], 0.0, None)
    lo = np.full_like(target, 1e-12)
    hi = np.full_like(target, 1e3)
    for _ in range(iterations):
        mid = np.sqrt(lo * hi)
        below = g(mid) < target
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    solved = np.sqrt(lo * hi)
    solved[target <= 0] = 0.0
    out[ok] = solved
    return out


def due_age_days(
    rate: np.ndarray,
    value: np.ndarray,
    cost: np.ndarray,
    threshold: float,
    *,
    min_days: float,
    max_days: float,
) -> np.ndarray:
    """Age (days since the last fetch) at which each page's priority reaches ``threshold``,
    clamped to [min_days, max_days]; max_days where it never does."""
    rate = np.maximum(np.asarray(rate, dtype=float), 1e-9)
    value = np.maximum(np.asarray(value, dtype=float), 1e-12)
    cost = np.maximum(np.asarray(cost, dtype=float), 1e-12)
    y = threshold * cost * rate / value
    age = g_inverse(y) / rate
    return np.clip(np.where(np.isfinite(age), age, max_days), min_days, max_days)
