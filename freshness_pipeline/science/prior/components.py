"""The components a page may follow (Poisson rates on a grid, clocks) and the per-class
weight vectors over them: the vocabulary every other module of the prior shares, kept
apart so that they can all import it without importing each other."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeAlias

import numpy as np
import polars as pl

from freshness_pipeline.science import estimate as _estimate
from freshness_pipeline.science.estimate import DEFAULT_CLASS

__all__ = [
    "DEFAULT_PERIODS",
    "Classes",
    "Components",
    "GLOBAL",
    "MISMATCH",
    "PERIODIC_START",
    "Period",
    "checked_grid",
    "class_codes",
    "class_keys",
    "class_weight_matrix",
    "initial_weights",
    "mismatch_logs",
    "normalized_weights",
    "rate_grid",
    "row_classes",
]

#: Key of the weights fit on every page, used for classes without their own weights.
GLOBAL = "__global__"

#: One URL class per row (url_class: null or empty is DEFAULT_CLASS), or None for all default.
Classes: TypeAlias = Sequence[str | None] | np.ndarray | pl.Series | None


@dataclass(frozen=True)
class Period:
    """A clock a page may change by: once every ``days``, at a phase resolved to ``bins`` bins.

    The bins only need to be finer than the fetch times can tell apart (a 6-hour cycle resolves
    a daily phase to 6 hours; 1-hour bins also serve shorter cycles).
    """

    days: float
    bins: int

    def __post_init__(self) -> None:
        if not (math.isfinite(self.days) and self.days > 0) or self.bins < 1:
            raise ValueError("a period needs days > 0 and bins >= 1")

    @property
    def phases(self) -> np.ndarray:
        """Bin centres, days after the Unix epoch modulo the period (UTC)."""
        return (np.arange(self.bins) + 0.5) * self.days / self.bins


#: Every 3, 4, 6, 8 and 12 hours and every day at 1-hour phases, every week at 4-hour phases:
#: the periods cron-driven pages keep (the divisors of a day, and the week). Without the clocks
#: of a few hours such pages are read as Poisson, and a trusted Last-Modified then makes them
#: about twice as fast as they are: the content age at a fetch is uniform over the period,
#: while a Poisson rate λ gives ages of mean 1/λ. No 2-hour clock: a dated change scores a
#: clock by the two phase bins nearest to it, and at 1-hour bins those would be the whole
#: period, a clock that calls every time of change on time.
DEFAULT_PERIODS: tuple[Period, ...] = (
    *(Period(hours / 24, hours) for hours in (3, 4, 6, 8, 12)),
    Period(1.0, 24),
    Period(7.0, 42),
)
#: Probability that one observation disagrees with a periodic page's clock.
MISMATCH = 0.02
#: Total prior weight of the periodic components before any data.
PERIODIC_START = 1e-3


def rate_grid(points: int = 48, low: float = 1e-4, high: float = 100.0) -> np.ndarray:
    """``points`` log-spaced rates (changes/day) from ``low`` to ``high`` inclusive.

    The ends bound what can be said: a page unchanged for years sits at ``low``, one changed at
    every fetch at or near ``high`` (pages faster than the fetch rate are indistinguishable).
    """
    if points < 2 or not 0 < low < high or not np.isfinite(high):
        raise ValueError("need points >= 2 and 0 < low < high < inf")
    return np.geomspace(low, high, points)


def initial_weights(
    grid: np.ndarray,
    periods: Sequence[Period] = (),
    periodic_start: float = PERIODIC_START,
) -> np.ndarray:
    """The starting prior before any data: uniform over the (log-spaced) grid, and
    ``periodic_start`` shared equally by the periodic components (if any)."""
    g = np.asarray(grid).shape[0]
    if not periods:
        return np.full(g, 1.0 / g)
    if not 0.0 < periodic_start < 1.0:
        raise ValueError("periodic_start must be in (0, 1)")
    j = len(periods)
    start: np.ndarray = np.r_[
        np.full(g, (1.0 - periodic_start) / g), np.full(j, periodic_start / j)
    ]
    return start


@dataclass(frozen=True)
class Components:
    """What a page may follow under the prior: a Poisson rate on ``grid`` (changes/day,
    log-spaced) or one of the clocks ``periods``, which an observation disagrees with with
    probability ``mismatch``, and which share ``periodic_start`` of the starting weights. The
    fit, the posterior and the stored table read the same four, so they travel as one value
    (checked once, when made)."""

    grid: Sequence[float] = tuple(rate_grid().tolist())
    periods: tuple[Period, ...] = ()
    mismatch: float = MISMATCH
    periodic_start: float = PERIODIC_START

    def __post_init__(self) -> None:
        object.__setattr__(self, "grid", tuple(checked_grid(np.asarray(self.grid)).tolist()))
        object.__setattr__(self, "periods", tuple(self.periods))
        mismatch_logs(self.mismatch)
        initial_weights(self.grid_array, self.periods, self.periodic_start)

    @property
    def grid_array(self) -> np.ndarray:
        return np.asarray(self.grid, dtype=np.float64)

    def start(self) -> np.ndarray:
        """The starting weights (:func:`initial_weights`)."""
        return initial_weights(self.grid_array, self.periods, self.periodic_start)

    def weight_matrix(
        self, weights: Mapping[str, np.ndarray] | np.ndarray | None, names: list[str]
    ) -> np.ndarray:
        """K x C weights for the class ``names`` (:func:`class_weight_matrix`, from the
        starting weights where ``weights`` has none)."""
        return class_weight_matrix(weights, names, self.start())

    def without_clocks(self) -> Components:
        """The same components but the clocks: what histories without times can be scored on."""
        return replace(self, periods=()) if self.periods else self


def class_keys(classes: Classes, n: int) -> pl.Series:
    """Normalized class key per row: stripped, lower-case; null or empty -> DEFAULT_CLASS."""
    if classes is None:
        return pl.repeat(DEFAULT_CLASS, n, eager=True, dtype=pl.String).alias("c")
    s = classes if isinstance(classes, pl.Series) else pl.Series("c", classes, dtype=pl.String)
    if s.len() != n:
        raise ValueError(f"classes has {s.len()} entries for {n} rows")
    return s.cast(pl.String).to_frame("c").select(_estimate.class_key(pl.col("c"))).to_series()


def class_codes(keys: pl.Series) -> tuple[list[str], np.ndarray]:
    """(sorted distinct keys, each row's index among them): hashed, not sorted per row, since
    this runs over every candidate of a cycle (np.unique on a million strings took 1 s)."""
    names = keys.unique().sort()
    codes = keys.cast(pl.Enum(names.to_list())).to_physical().to_numpy().astype(np.int64)
    return names.to_list(), codes


def row_classes(classes: Classes, n: int) -> tuple[list[str], np.ndarray]:
    """(sorted distinct class keys, each of the ``n`` rows' index among them)."""
    return class_codes(class_keys(classes, n))


def checked_grid(grid: np.ndarray) -> np.ndarray:
    """``grid`` as float64 rates, refused unless 1-d, positive, finite and increasing."""
    grid = np.asarray(grid, dtype=np.float64)
    if grid.ndim != 1 or grid.shape[0] < 2 or not np.all(np.isfinite(grid)) or grid.min() <= 0:
        raise ValueError("grid must be a 1-d array of at least 2 positive finite rates")
    if np.any(np.diff(grid) <= 0):
        raise ValueError("grid must be strictly increasing")
    return grid


def normalized_weights(w: np.ndarray, c: int, name: str) -> np.ndarray:
    """Class ``name``'s weights over ``c`` components scaled to sum 1, refused if not valid."""
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (c,) or not np.all(np.isfinite(w)) or w.min() < 0 or w.sum() <= 0:
        raise ValueError(f"weights for {name!r} must be {c} finite non-negative numbers")
    normalized: np.ndarray = w / w.sum()
    return normalized


def mismatch_logs(mismatch: float) -> tuple[float, float]:
    """(log of agreeing, log of disagreeing) for the periodic likelihood."""
    if not 0.0 < mismatch < 0.5:
        raise ValueError("mismatch must be in (0, 0.5)")
    return math.log1p(-mismatch), math.log(mismatch)


def class_weight_matrix(
    weights: Mapping[str, np.ndarray] | np.ndarray | None, names: list[str], start: np.ndarray
) -> np.ndarray:
    """K × C weights for the class names: own weights, else GLOBAL, else ``start``."""
    c = start.shape[0]
    if weights is None:
        return np.tile(start, (len(names), 1))
    if isinstance(weights, np.ndarray):
        w = normalized_weights(weights, c, GLOBAL)
        return np.tile(w, (len(names), 1))
    fallback = normalized_weights(weights[GLOBAL], c, GLOBAL) if GLOBAL in weights else start
    return (
        np.stack(
            [normalized_weights(weights[k], c, k) if k in weights else fallback for k in names]
        )
        if names
        else np.empty((0, c))
    )
