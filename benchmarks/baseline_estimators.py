"""The textbook change-rate estimators the product's is compared with (``scheduling.py``'s
estimator tables, and the tests that show where each is biased): polars expressions over
url_state's observation lists (``obs_interval_days``, ``obs_changed``, the class prior's
``prior_alpha`` / ``prior_beta``). Evaluation only, so they live with the benchmarks; the
product's estimates are ``science.estimate.estimate_rates`` and the change prior's posterior."""

from __future__ import annotations

import polars as pl

__all__ = ["cho_improved_rate", "exposure_rate", "naive_rate"]


def _n(changed: str) -> pl.Expr:
    return pl.col(changed).list.len()


def _x(changed: str) -> pl.Expr:
    return pl.col(changed).list.count_matches(True)


def _sum_d(intervals: str) -> pl.Expr:
    return pl.col(intervals).list.sum()


def naive_rate(intervals: str = "obs_interval_days", changed: str = "obs_changed") -> pl.Expr:
    """X / ΣΔ: changes seen per day observed. Biased low by (1 − e^{−λI})/(λI) at any n."""
    return (
        pl.when(_n(changed) > 0)
        .then(_x(changed).cast(pl.Float64) / _sum_d(intervals))
        .otherwise(None)
        .alias("naive_rate")
    )


def cho_improved_rate(
    intervals: str = "obs_interval_days", changed: str = "obs_changed"
) -> pl.Expr:
    """Cho & Garcia-Molina: −ln((n − X + 0.5)/(n + 0.5)) / I, I the mean interval.

    Nearly unbiased for regular visits while λI ≲ 2, finite at X = n (maximum ln(2n + 1)/I).
    """
    n = _n(changed).cast(pl.Float64)
    x = _x(changed).cast(pl.Float64)
    mean_interval = _sum_d(intervals) / n
    return (
        pl.when(_n(changed) > 0)
        .then(0.0 - ((n - x + 0.5) / (n + 0.5)).log() / mean_interval)
        .otherwise(None)
        .alias("cho_improved_rate")
    )


def exposure_rate(
    intervals: str = "obs_interval_days",
    changed: str = "obs_changed",
    alpha: str = "prior_alpha",
    beta: str = "prior_beta",
) -> pl.Expr:
    """(α + X)/(β + ΣΔ): the conjugate update that counts each changed interval as one change.

    The textbook exposure-count estimator; it underestimates pages changing about as fast as
    we look.
    """
    x = _x(changed).fill_null(0).cast(pl.Float64)
    s = _sum_d(intervals).fill_null(0.0)
    return ((pl.col(alpha) + x) / (pl.col(beta) + s)).alias("exposure_rate")
