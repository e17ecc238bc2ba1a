"""Does the change model foresee what a random sample of fetches finds?

The planner's ``verify`` share fetches pages drawn uniformly at random from those it knows,
whatever their priority. Only on them is the share found changed a fair test of the model:
the pages the planner chose itself were chosen for high forecasts, so their outcomes say as
much about the choice as about the model. Each verified page carries the plan's forecast,
``expected_change``: the probability that it changed since its last fetch, averaged over its
posterior. If the model is right, the number of changes found is a sum of independent
Bernoulli draws with those probabilities, so

    z = (changes − Σ p) / sqrt(Σ p (1 − p))

is about standard normal; a |z| of 3 or more says the forecasts are off (rates too low when
positive: pages change more than the model thinks). Pages a trusted sitemap said "changed" are
left out (the hint, not the model, set their forecast: the fetch stage leaves it null), as are
first fetches (nothing to compare) and fetches that saw no content (gone, error, deferred).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

__all__ = ["Calibration", "calibration", "is_verified", "verify_calibration"]

#: outcomes that compare content with the previous copy (verify fetches are unconditional,
#: but a 304 answered anyway still says "unchanged")
COMPARED = {"changed": True, "unchanged": False, "not_modified": False}


def is_verified() -> pl.Expr:
    """Rows (fetch_results or fetch_log) that test the model: a verification fetch whose
    outcome compared content and whose forecast, ``expected_change``, is a probability."""
    return (
        (pl.col("plan_reason") == "verify")
        & pl.col("outcome").is_in(list(COMPARED))
        & pl.col("expected_change").cast(pl.Float64).is_between(0.0, 1.0)
    ).fill_null(False)


@dataclass(frozen=True)
class Calibration:
    """Forecast against outcome over a sample of fetches."""

    n: int
    #: mean forecast probability of a change
    predicted: float
    #: share of the fetches that found a change
    observed: float
    #: standardized difference of the counts (0 when the forecasts leave no variance)
    z: float
    #: mean squared difference between forecast and outcome
    brier: float


def calibration(forecast: pl.Series, changed: pl.Series) -> Calibration:
    """Compare forecasts (probabilities in [0, 1]) with outcomes (booleans), row by row; rows
    where either is null or the forecast is not a probability are skipped."""
    frame = pl.DataFrame({"p": forecast.cast(pl.Float64), "x": changed.cast(pl.Boolean)}).filter(
        pl.col("p").is_between(0.0, 1.0) & pl.col("x").is_not_null()
    )
    n = frame.height
    if n == 0:
        return Calibration(0, math.nan, math.nan, 0.0, math.nan)
    x = pl.col("x").cast(pl.Float64)
    expected, variance, hits, brier = frame.select(
        pl.col("p").sum().alias("expected"),
        (pl.col("p") * (1.0 - pl.col("p"))).sum().alias("variance"),
        x.sum().alias("hits"),
        ((pl.col("p") - x) ** 2).mean().alias("brier"),
    ).row(0)
    z = (hits - expected) / math.sqrt(variance) if variance > 0 else 0.0
    return Calibration(n, expected / n, hits / n, z, brier)


def verify_calibration(results: pl.DataFrame) -> Calibration:
    """:func:`calibration` over a cycle's verification fetches: ``results`` (fetch_results or
    fetch_log) rows that :func:`is_verified`, against the ``expected_change`` the fetch stage
    copied from the plan (null where a sitemap said "changed" and set the plan's number)."""
    if results.height == 0 or not {"plan_reason", "expected_change"} <= set(results.columns):
        return calibration(pl.Series([], dtype=pl.Float64), pl.Series([], dtype=pl.Boolean))
    checked = results.filter(is_verified()).select(
        "expected_change", pl.col("outcome").replace_strict(COMPARED, return_dtype=pl.Boolean)
    )
    return calibration(checked["expected_change"], checked["outcome"])
