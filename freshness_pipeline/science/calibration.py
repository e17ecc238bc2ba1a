"""Does the change model foresee what a random sample of fetches finds?

The planner's ``verify`` share fetches pages drawn at random from those it knows, whatever
their priority (one page of each host with unproven validators first, drawn uniformly within
the host: the host is chosen on what its validators did, not on any forecast). Only on them is
the share found changed a fair test of the model: the pages the planner chose itself were
chosen for high forecasts, so their outcomes say as much about the choice as about the model.
Each verified page carries the plan's forecast, ``expected_change``: the probability that it
changed since its last fetch, averaged over its posterior. If the model is right, the number
of changes found is a sum of independent Bernoulli draws with those probabilities, so

    z = (changes − Σ p) / sqrt(Σ p (1 − p))

is about standard normal once the sum's variance is large enough; a |z| of 3 or more says the
forecasts are off (rates too low when positive: pages change more than the model thinks). With
a handful of verified pages the normal reading misleads (7 pages forecast at 0.3 each cannot
even reach z = +3, and one surprise makes z = -3), so the verdict rests on the exact tail of the
count under those forecasts (a Poisson-binomial distribution, computed exactly), ``p_value``:
below :data:`SURPRISE_P` (the two-sided probability of |z| > 3 for a normal variable) the
forecasts are off. The metric views, which keep only sums, show z only where the variance is at
least :data:`MIN_VERIFY_VARIANCE` and say "too few to judge" elsewhere. Pages a trusted sitemap said "changed" are
left out (the hint, not the model, set their forecast: the fetch stage leaves it null), as are
first fetches (nothing to compare) and fetches that saw no content (gone, error, deferred).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

__all__ = [
    "MIN_VERIFY_VARIANCE",
    "SURPRISE_P",
    "Calibration",
    "calibration",
    "count_p_value",
    "is_verified",
    "verify_calibration",
]

#: Two-sided tail probability beyond which the verified outcomes contradict the forecasts: that
#: of |z| > 3 for a normal variable.
SURPRISE_P = 0.0027
#: Below this variance of the forecast count (Σ p(1 − p)) z is not read as normal: the usual
#: rule for a binomial's normal approximation (n p (1 − p) of about 9 or more).
MIN_VERIFY_VARIANCE = 9.0
#: Beyond this many verified pages the normal approximation is exact enough and the exact
#: distribution (quadratic in the count) is not computed.
_EXACT_MAX_N = 5_000

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
    #: two-sided probability, under the forecasts, of a count of changes as far from the
    #: forecast as the one found (exact; 1.0 without a sample)
    p_value: float = 1.0

    @property
    def surprising(self) -> bool:
        """Whether the outcomes contradict the forecasts (see :data:`SURPRISE_P`)."""
        return self.p_value < SURPRISE_P

    def verdict(self) -> str:
        """One line a person can read."""
        if self.n == 0:
            return "no verification fetches yet"
        found = f"{self.n} random fetches found {self.observed * self.n:.0f} changes"
        foreseen = f"the model foresaw {self.predicted * self.n:.1f}"
        if not self.surprising:
            return f"{found}, {foreseen}: consistent with the change model (p = {self.p_value:.2g})"
        side = "more" if self.z > 0 else "fewer"
        return (
            f"{found}, {foreseen}: pages change {side} often than the model thinks "
            f"(p = {self.p_value:.2g}); its rates deserve a look"
        )


def count_p_value(forecasts: np.ndarray, hits: int) -> float:
    """Two-sided exact tail probability of ``hits`` changes among independent pages changed
    with the ``forecasts`` probabilities: twice the smaller tail, at most 1. The distribution
    is built one page at a time (quadratic in the count); past a few thousand pages, the
    normal approximation with a continuity correction, which is then exact enough."""
    p = np.clip(np.asarray(forecasts, dtype=np.float64), 0.0, 1.0)
    n = p.shape[0]
    if n == 0:
        return 1.0
    if n > _EXACT_MAX_N:
        mean, sd = float(p.sum()), float(np.sqrt((p * (1.0 - p)).sum()))
        if sd == 0:
            return 1.0 if abs(hits - mean) < 0.5 else 0.0
        lower = 0.5 * math.erfc(-((hits + 0.5 - mean) / sd) / math.sqrt(2.0))
        upper = 0.5 * math.erfc(((hits - 0.5 - mean) / sd) / math.sqrt(2.0))
        return min(1.0, 2.0 * min(lower, upper))
    pmf = np.zeros(n + 1)
    pmf[0] = 1.0
    for k, q in enumerate(p, start=1):
        pmf[1 : k + 1] = pmf[1 : k + 1] * (1.0 - q) + pmf[:k] * q
        pmf[0] *= 1.0 - q
    lower = float(pmf[: hits + 1].sum())
    upper = float(pmf[hits:].sum())
    return min(1.0, 2.0 * min(lower, upper))


def calibration(forecast: pl.Series, changed: pl.Series) -> Calibration:
    """Compare forecasts (probabilities in [0, 1]) with outcomes (booleans), row by row; rows
    where either is null or the forecast is not a probability are skipped."""
    frame = pl.DataFrame({"p": forecast.cast(pl.Float64), "x": changed.cast(pl.Boolean)}).filter(
        pl.col("p").is_between(0.0, 1.0) & pl.col("x").is_not_null()
    )
    n = frame.height
    if n == 0:
        return Calibration(0, math.nan, math.nan, 0.0, math.nan, 1.0)
    x = pl.col("x").cast(pl.Float64)
    expected, variance, hits, brier = frame.select(
        pl.col("p").sum().alias("expected"),
        (pl.col("p") * (1.0 - pl.col("p"))).sum().alias("variance"),
        x.sum().alias("hits"),
        ((pl.col("p") - x) ** 2).mean().alias("brier"),
    ).row(0)
    z = (hits - expected) / math.sqrt(variance) if variance > 0 else 0.0
    p_value = count_p_value(frame["p"].to_numpy(), int(hits))
    return Calibration(n, expected / n, hits / n, z, brier, p_value)


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
