"""When a page next becomes worth a fetch, from the same index the planner ranks by.

The planner selects a page once value * W(age) / cost reaches the cycle's cut-off mu, where
W(a) = g(lambda a) / lambda and g(r) = 1 - (1 + r) e^-r (the Cho and Garcia-Molina Lagrangian
index). Solving g(lambda a) = mu * cost * lambda / value for a gives the age at which the page is
due: that is what ``next_check_at`` reports. Pages with mu * cost * lambda / value >= 1 never
reach the cut-off (they change too fast to be worth chasing at this budget); they get the
staleness floor instead.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
from numpy.typing import ArrayLike

__all__ = ["due_age_days", "g", "g_expr", "g_inverse"]


# g(r) = Σ_{k>=2} (−1)^k (k − 1)/k! r^k: below r = 0.05, where 1 − (1 + r)e^{−r} cancels, these
# eight terms give g to double precision (the next is below 1e-16 of it).
_G_SERIES = tuple((-1) ** k * (k - 1) / math.factorial(k) for k in range(2, 10))
_SERIES_BELOW = 0.05
#: e^{−r} is 0 to double precision far below this; clipping keeps r = ∞ (never fetched) at g = 1
_R_MAX = 700.0
#: above this (1 + r)e^{−r} < 2e-16: g(r) = 1 to double precision (and r = ∞ gives 1, not NaN)
_SATURATED = 40.0


def g(r: ArrayLike) -> np.ndarray:
    """g(r) = 1 − (1 + r)e^{−r} for r >= 0 (∞ gives 1, NaN stays NaN), to double precision.

    The Cho and Garcia-Molina index of a page refreshed at r = λ/f (or fetched at age a, r =
    λa), so every ranking and yardstick uses this one. One exp per element, the series only
    where it is needed: the posterior runs it over whole N × G matrices.
    """
    r = np.minimum(np.asarray(r, dtype=np.float64), _R_MAX)
    out: np.ndarray = np.atleast_1d(np.exp(-r))
    flat = np.atleast_1d(r)
    out *= 1.0 + flat
    np.subtract(1.0, out, out=out)
    small = flat < _SERIES_BELOW
    if small.any():
        rs = flat[small]
        series = np.zeros_like(rs)
        for coef in reversed(_G_SERIES):
            series = (series + coef) * rs
        out[small] = series * rs
    return out.reshape(r.shape)


def g_expr(r: pl.Expr) -> pl.Expr:
    """:func:`g` as a polars expression, for the planner's whole candidate tables."""
    series = pl.lit(0.0)
    for coef in reversed(_G_SERIES):
        series = (series + coef) * r
    return (
        pl.when(r < _SERIES_BELOW)
        .then(series * r)
        .when(r > _SATURATED)
        .then(pl.lit(1.0))
        .otherwise(1.0 - (1.0 + r) * (-r).exp())
    )


def g_inverse(y: ArrayLike, *, iterations: int = 80) -> np.ndarray:
    """r with g(r) = y for y in (0, 1); 0 for y <= 0 and ∞ for y >= 1 (or NaN).

    Newton on log r kept inside a shrinking bracket (bisection whenever Newton leaves it):
    g is convex then concave, so plain Newton can overshoot, but the bracket cannot.
    """
    y = np.asarray(y, dtype=np.float64)
    out = np.where(y <= 0, 0.0, np.inf)
    inside = (y > 0) & (y < 1)
    if not inside.any():
        return out
    t = y[inside]
    lo = np.full_like(t, np.log(1e-12))
    hi = np.full_like(t, np.log(800.0))
    # small y: g ≈ r²/2; large y: 1 − g ≈ r e^{−r}
    guess = np.where(t < 0.5, 0.5 * np.log(2.0 * t), np.log(np.maximum(-np.log1p(-t), 1.0) + 1.0))
    u = np.clip(guess, lo, hi)
    for _ in range(iterations):
        r = np.exp(u)
        gv = g(r)
        above = gv > t
        hi = np.where(above, u, hi)
        lo = np.where(above, lo, u)
        # d g / d log r = r · r e^{−r}
        slope = r * r * np.exp(-np.minimum(r, _R_MAX))
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = u - (gv - t) / slope
        ok = np.isfinite(newton) & (newton > lo) & (newton < hi)
        u_next = np.where(ok, newton, 0.5 * (lo + hi))
        if np.all(np.abs(u_next - u) <= 1e-14 * np.maximum(1.0, np.abs(u))):
            u = u_next
            break
        u = u_next
    out[inside] = np.exp(u)
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
