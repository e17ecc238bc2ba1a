"""What one fetch of a page buys now, the gains the plan ranks by (science.schedule).

The freshness objective's Lagrangian index W(a) = g(λa)/λ (Cho & Garcia-Molina 2003), and the
capture objective's chance that a change happened since the last fetch, each at a point rate
and averaged over a Gamma belief about the rate. They are polars expressions over whole
candidate tables; ``science.intervals`` holds g itself and the age at which W reaches a cut-off.
"""

from __future__ import annotations

import polars as pl

from freshness_pipeline.science.intervals import g_expr

__all__ = [
    "Floats",
    "capture_gain",
    "freshness_index",
    "posterior_capture_gain",
    "posterior_freshness_index",
]

_CERTAIN_SHAPE = 1e6  # a posterior this sharp is a point: use the exact point formulas


#: a column name, an expression, a series or a number (None: null)
Floats = str | pl.Expr | pl.Series | float | None


def _as_expr(x: Floats) -> pl.Expr:
    if isinstance(x, pl.Expr):
        return x
    if isinstance(x, str):
        return pl.col(x)
    if isinstance(x, pl.Series):
        return pl.lit(x)
    return pl.lit(None if x is None else float(x), dtype=pl.Float64)


def _gamma_belief(
    rate: Floats, age_days: Floats, shape: Floats
) -> tuple[pl.Expr, pl.Expr, pl.Expr, pl.Expr]:
    """λ (the Gamma's mean), a and k as Float64, and where the Gamma formulas apply (each
    finite and positive); elsewhere the callers fall back to the point formulas."""
    lam, age, k = (_as_expr(x).cast(pl.Float64) for x in (rate, age_days, shape))
    usable = k.is_finite() & (k > 0) & lam.is_finite() & (lam > 0) & age.is_finite() & (age > 0)
    return lam, age, k, usable


def freshness_index(rate: Floats, age_days: Floats) -> pl.Expr:
    """W(a) = (1/λ)·g(λa), g(r) = 1 − (1 + r)e^{−r}, in days.

    Stable over the whole range: Taylor series for small λa (so λ → 0 gives λa²/2 → 0, never
    0/0), exactly 1/λ once λa is large (also for a = ∞, a never-fetched page), 0 for λ <= 0
    (a page that never changes gains nothing). Nulls propagate.
    """
    lam = _as_expr(rate).cast(pl.Float64)
    age = _as_expr(age_days).cast(pl.Float64)
    return (
        pl.when(lam.is_null() | age.is_null())
        .then(pl.lit(None, dtype=pl.Float64))
        .when((lam <= 0) | (age <= 0))
        .then(pl.lit(0.0))
        .otherwise(g_expr(lam * age) / lam)
        .alias("freshness_index")
    )


def posterior_freshness_index(rate: Floats, age_days: Floats, shape: Floats) -> pl.Expr:
    """E[W(a)] when λ ~ Gamma(shape k, mean ``rate``): the index averaged over what we believe.

    A few fetches leave the rate uncertain over decades. The index of the posterior mean
    then misleads both ways: a page seen changed once looks "moderately fast" although it may
    be a slow page worth a lot (W ~ 1/λ is large there), and an unobserved page looks like the
    prior mean. The expectation weighs those possibilities. With θ = k/rate,

        E[(1 − e^{−λa})/λ] = ∫_0^a E[e^{−λs}] ds = θ (1 − (1 + a/θ)^{1−k}) / (k − 1)
        E[a e^{−λa}]       = a (1 + a/θ)^{−k}

    and E[W(a)] is their difference; it tends to W(a) at the mean as k → ∞ (a certain rate).
    For k <= 1 it grows without bound in a (E[1/λ] = ∞): a page nobody has seen change for a
    long time, on thin evidence, eventually earns a look, which is the exploration a point
    estimate never does. Non-finite or non-positive shapes fall back to the point index.
    """
    lam, age, k, usable = _gamma_belief(rate, age_days, shape)
    point = freshness_index(lam, age)
    theta = k / lam
    big_l = (age / theta).log1p()  # log(1 + a/θ)
    x = (k - 1.0) * big_l
    # θ (1 − e^{−x}) / (k − 1) = θ L (1 − e^{−x})/x, with (1 − e^{−x})/x → 1 as x → 0
    ratio = pl.when(x.abs() < 1e-8).then(1.0 - x / 2.0).otherwise(-((-x).exp() - 1.0) / x)
    first = theta * big_l * ratio
    second = age * (-k * big_l).exp()
    expected = (first - second).clip(lower_bound=0.0)
    return (
        pl.when(usable & (k < _CERTAIN_SHAPE))
        .then(expected)
        .otherwise(point)
        .alias("freshness_index")
    )


def posterior_capture_gain(rate: Floats, age_days: Floats, shape: Floats) -> pl.Expr:
    """E[1 − e^{−λa}] = 1 − (1 + a/θ)^{−k} for λ ~ Gamma(k, mean ``rate``), θ = k/rate."""
    lam, age, k, usable = _gamma_belief(rate, age_days, shape)
    point = capture_gain(lam, age)
    expected = -((-k * (age * lam / k).log1p()).exp() - 1.0)
    return (
        pl.when(usable & (k < _CERTAIN_SHAPE)).then(expected).otherwise(point).alias("capture_gain")
    )


def capture_gain(rate: Floats, age_days: Floats) -> pl.Expr:
    """P(at least one change since the last fetch) = 1 − e^{−λa}, stable for small λa."""
    lam = _as_expr(rate).cast(pl.Float64)
    age = _as_expr(age_days).cast(pl.Float64)
    r = lam * age
    return (
        pl.when(lam.is_null() | age.is_null())
        .then(pl.lit(None, dtype=pl.Float64))
        .when((lam <= 0) | (age <= 0))
        .then(pl.lit(0.0))
        .when(r < 1e-5)
        .then(r * (1.0 - r / 2.0))
        .otherwise(1.0 - (-r).exp())
        .alias("capture_gain")
    )
