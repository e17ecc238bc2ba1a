"""Nonparametric empirical-Bayes change model: a prior learned from every page's
interval-censored history, over Poisson rates and over clock-driven (periodic) change (issue 3).

Why: a single Gamma prior per class scores a page with one or two fetches close to the prior
mean, while the real population is extremely heavy-tailed (cho2000: 30 % of pages change less
than once in four months, 5 % faster than 4/day). The population itself says
what a thin history most likely means: "unchanged after 3 days" on a web where a third of the
pages are nearly static is strong evidence of a static page, and "changed after 2 days" spreads
over the fast and the medium bands in the proportions those bands really have.

And many pages do not change at random times at all: a daily digest rebuilt at 06:00, a
listing refreshed every 12 hours, a weekly column. For such a page *when* we fetch matters
more than how often: fetched just after its update it stays fresh for a whole period, fetched
just before it for minutes, at the same cost. A Poisson model cannot say this (it is
memoryless); the periodic components below can.

Model. A page follows one of C components:

* Poisson at a rate λ_g on a fixed grid λ_1 < … < λ_G (default 48 log-spaced points from 1e-4
  to 100 changes/day). A history of (interval Δ, changed?) pairs has the censored likelihood
  L(λ) = Π_unchanged e^{−λΔ} · Π_changed (1 − e^{−λΔ}) (Cho & Garcia-Molina, ACM TOIT 2003);
* periodic with period P (:class:`Period`, default every 3, 4, 6, 8 or 12 h, day or week):
  one change at a fixed phase φ of every period (a time of day, or of the week). The phase is
  resolved to bins and is uniform a priori. An observation over (s, e] "should" show a change
  iff some φ + kP lies in (s, e]; it agrees with that with probability 1 − ε (``mismatch`` ε:
  jitter, an unscheduled edit, a skipped run). Each observation that contradicts a phase costs
  it a factor ε/(1 − ε), so a few fetches pin the phase of a clock-driven page and rule the
  clock out for others.

Per URL class the prior is a weight vector π over the C components (G + number of periods
numbers summing to 1; small enough to store per class and host, see :func:`refit_change_prior`).
A page's posterior is post_c ∝ π_c L_c, with L_c for a periodic component the likelihood
averaged over its phase bins. The weights are the nonparametric maximum-likelihood mixing
distribution (Laird 1978), fit by EM over all pages' histories: π_c ← mean over pages of
post_c. EM runs a few iterations per cycle, warm-started from the previous cycle's weights
(the data change little between cycles). Periodic components start at a total weight of
``periodic_start`` (1e-3): on a web without clocks they would otherwise explain the thin
histories of the first cycles as well as the Poisson rates do and distort the first weeks,
while on a web with clocks the evidence of a few consistent fetches grows them within days.
A class with little data is pulled towards the global weights: its M-step adds ``shrinkage``
pseudo-pages distributed as the global π (a Dirichlet prior centred on the global fit), so a
class of 50 pages is mostly global and a class of 50,000 mostly its own.

From the posterior, per page (:func:`posterior_summary`):

* ``change_rate`` = posterior mean rate (a periodic component counts 1/P), ``rate_median`` =
  its posterior median; url_state reports both (:func:`posterior_rates`);
* ``expected_index``: the freshness a fetch now is worth, averaged over the posterior. For a
  Poisson component it is the Lagrangian index W(λ, a) = (1/λ) g(λa), g(r) = 1 − (1 + r)e^{−r}
  of :mod:`freshness_pipeline.science.schedule`, at the page's age a; for a periodic component
  with phase φ it is [a change point φ + kP fell since the last fetch] × (time until the next
  one): the days of freshness the fetch buys, zero if the copy is still current;
* ``expected_capture`` = P(the page changed since its last fetch), the same for the "capture"
  objective.

The assets use the table-level functions: url_state refits the prior each cycle with
:func:`refit_change_prior` (stored per host and class in the ``change_prior`` table, so the next
cycle warm-starts) and reports each page's rate under it with :func:`posterior_rates`,
revisit_plan turns it into each candidate's ``expected_gain_override`` for ``build_plan`` with
:func:`expected_gains`. Phases need the absolute time of each observation:
the histories store only intervals, chained back from ``last_seen_at`` (the end of the newest
observation). A successful fetch that records no observation (a re-extraction after an
extractor upgrade) breaks that chain once; the older observations then sit one interval off,
which the mismatch probability absorbs until newer ones outweigh them.

Old observations can be discounted as in :mod:`freshness_pipeline.science.estimate` (column
``obs_half_life_days`` or ``HALF_LIFE_DAYS``): each log-likelihood term then counts
2^(−age/h), age measured back from the page's newest observation. Off by default (see
docs/scheduling.md for what it buys and costs).

Content ages (``AGE_COLUMN``, from a trusted Last-Modified header): a changed observation over
(s, e] whose content is known to be a days old at e says the last change was at x = e − a and
none followed. It is scored as a density per day by every component, so that they stay
comparable: a Poisson rate by λ e^{−λa} (instead of 1 − e^{−λΔ}); a clock phase by
(1 − ε)/(2w) when x lies within one bin width w of one of its change points (the two nearest
bins), ε/max(P, Δ) otherwise or when a >= P (the clock would have ticked again since).
Scoring the Poisson rates by the density and the clocks by a probability mixes units and hands
pages to the wrong kind of component (the benchmark fell from 0.97 to 0.88 of the oracle that
way). The mismatch is spread over the interval, not over one period: at ε/P an interval of Δ
> P would give a clock phase 1 + εΔ/P of probability in all (1.46 for a 12-hour clock and
12-day intervals), and on cho2000 with ages the prior's 12-hour clock took 15-23 % of the
weight on a web without clocks. Rows without ages score exactly as before.

Everything is vectorized numpy in log space, computed in chunks of rows whose matrices stay
under ``chunk_cells`` numbers, so memory is bounded whatever the number of URLs; the prior is
fit on at most ``max_fit_rows`` pages (an even sample beyond that: 48-odd weights do not need a
million pages). Pure functions: no I/O, no clock, no randomness.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import polars as pl

from freshness_pipeline.science import estimate as _estimate
from freshness_pipeline.science.estimate import AGE_COLUMN, DEFAULT_CLASS, aligned_ages, clean_ages
from freshness_pipeline.science.timecols import as_utc, utc_column

__all__ = [
    "AGE_COLUMN",
    "RATE_COLUMNS",
    "DEFAULT_PERIODS",
    "GAIN_COLUMN",
    "GLOBAL",
    "ChangeModel",
    "Histories",
    "Period",
    "component_table",
    "expected_capture",
    "expected_gains",
    "expected_index",
    "fit_grid_prior",
    "flatten_histories",
    "grid_posterior",
    "histories_from_arrays",
    "initial_weights",
    "latest_fit_before",
    "posterior_gains",
    "posterior_rates",
    "posterior_summary",
    "prior_weights",
    "rate_grid",
    "refit_change_prior",
    "weights_frame",
    "weights_from_frame",
]

#: Key of the weights fit on every page, used for classes without their own weights.
GLOBAL = "__global__"

#: Default chunk size: rows are grouped so that no temporary matrix exceeds this many numbers
#: (2**22 float64 = 32 MB; a chunk holds a few of them).
CHUNK_CELLS = 1 << 22
#: :func:`fit_grid_prior` keeps the pages' log-likelihoods between EM iterations when they fit
#: in this many numbers (2**24 float64 = 128 MB: 300,000 pages at 51 components); beyond it
#: each iteration recomputes them chunk by chunk (the slow part of a pass).
CACHE_CELLS = 1 << 24

_DAY_US = 86_400_000_000.0


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
    return np.r_[np.full(g, (1.0 - periodic_start) / g), np.full(j, periodic_start / j)]


# ----------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Histories:
    """Interval-censored histories reduced to what the likelihoods need.

    Per row: ``n_obs``, ``n_changes`` and ``s_unchanged`` (total, possibly discounted, days of
    unchanged intervals: they enter the Poisson likelihood only as e^{−λ·S}); for every changed
    interval its row (non-decreasing), length in days and weight (None: all 1). For periodic
    components also every observation's start and end in days since the Unix epoch, sorted by
    row (None when the times are unknown), and ``timed`` per row: False for a row whose
    observations have no known time (periodic components cannot explain it). Content ages, when
    some are known: ``changed_age`` and ``obs_age`` (see :data:`AGE_COLUMN`). Build with
    :func:`flatten_histories` or :func:`histories_from_arrays`.
    """

    n_obs: np.ndarray
    n_changes: np.ndarray
    s_unchanged: np.ndarray
    changed_row: np.ndarray
    changed_interval: np.ndarray
    changed_weight: np.ndarray | None = None
    obs_row: np.ndarray | None = None
    obs_start: np.ndarray | None = None
    obs_end: np.ndarray | None = None
    obs_changed: np.ndarray | None = None
    obs_weight: np.ndarray | None = None
    timed: np.ndarray | None = None
    #: per changed interval (aligned with ``changed_row``), the content's age at the fetch in
    #: days (the last change was that long before the interval's end, none since; from a
    #: trusted Last-Modified), NaN = unknown; None: no age known at all
    changed_age: np.ndarray | None = None
    #: the same per timed observation (aligned with ``obs_row``; NaN for unchanged ones)
    obs_age: np.ndarray | None = None

    @property
    def n_rows(self) -> int:
        return int(self.n_obs.shape[0])

    @property
    def has_times(self) -> bool:
        return self.obs_row is not None


def histories_from_arrays(
    row: np.ndarray,
    interval: np.ndarray,
    changed: np.ndarray,
    n_rows: int,
    *,
    end: np.ndarray | None = None,
    weight: np.ndarray | None = None,
    age: np.ndarray | None = None,
) -> Histories:
    """Histories from flat observations: row index, interval in days, changed flag; optionally
    each observation's end (days since the Unix epoch; NaN = unknown, which makes its row
    untimed), weight (the forgetting discount, default 1) and content age (days since the
    last change at the fetch, NaN = unknown; used for changed observations only, see
    :func:`freshness_pipeline.science.estimate.clean_ages`).

    Observations with a non-finite or non-positive interval carry no information and are
    skipped (as in :func:`freshness_pipeline.science.estimate.estimate_rates`).
    """
    row = np.asarray(row, dtype=np.int64)
    d = np.asarray(interval, dtype=np.float64)
    c = np.asarray(changed, dtype=bool)
    if not row.shape == d.shape == c.shape:
        raise ValueError("row, interval and changed must have the same length")
    if row.size and (row.min() < 0 or row.max() >= n_rows):
        raise ValueError("row index out of range")
    wt = None if weight is None else np.asarray(weight, dtype=np.float64)
    en = None if end is None else np.asarray(end, dtype=np.float64)
    ag = None if age is None else np.asarray(age, dtype=np.float64)
    for arr, name in ((wt, "weight"), (en, "end"), (ag, "age")):
        if arr is not None and arr.shape != d.shape:
            raise ValueError(f"{name} must have one entry per observation")
    ok = np.isfinite(d) & (d > 0)
    row, d, c = row[ok], d[ok], c[ok]
    wt = None if wt is None else np.clip(np.nan_to_num(wt[ok], nan=0.0), 0.0, None)
    en = None if en is None else en[ok]
    ag = None if ag is None else ag[ok]
    if row.size and np.any(row[1:] < row[:-1]):
        o = np.argsort(row, kind="stable")
        row, d, c = row[o], d[o], c[o]
        wt = None if wt is None else wt[o]
        en = None if en is None else en[o]
        ag = None if ag is None else ag[o]
    return _sorted_histories(row, d, c, n_rows, en, wt, ag)


def _sorted_histories(
    row: np.ndarray,
    d: np.ndarray,
    c: np.ndarray,
    n_rows: int,
    end: np.ndarray | None,
    weight: np.ndarray | None,
    age: np.ndarray | None = None,
) -> Histories:
    """Histories from valid observations already in row order (no copies where none is needed:
    this runs over every observation of every candidate each cycle)."""
    if age is not None:
        # usable ages of changed observations only; None when there is none
        age = np.where(c, clean_ages(age, d), np.nan)
        if not np.isfinite(age).any():
            age = None
    n_obs = np.bincount(row, minlength=n_rows).astype(np.int64)
    changed_row = row[c]
    n_changes = np.bincount(changed_row, minlength=n_rows).astype(np.int64)
    unchanged = ~c
    unchanged_w = d[unchanged] if weight is None else d[unchanged] * weight[unchanged]
    s_unchanged = np.bincount(row[unchanged], weights=unchanged_w, minlength=n_rows)
    timing: dict[str, np.ndarray | None] = {}
    if end is not None:
        timed = np.ones(n_rows, dtype=bool)
        unknown = ~np.isfinite(end)
        if unknown.any():
            timed[row[unknown]] = False
            keep = timed[row]
            row_t, d_t, c_t, end_t = row[keep], d[keep], c[keep], end[keep]
            weight_t = None if weight is None else weight[keep]
            age_t = None if age is None else age[keep]
        else:
            row_t, d_t, c_t, end_t, weight_t, age_t = row, d, c, end, weight, age
        timing = {
            "obs_row": row_t,
            "obs_start": end_t - d_t,
            "obs_end": end_t,
            "obs_changed": c_t,
            "obs_weight": weight_t,
            "timed": timed,
        }
        if age_t is not None and np.isfinite(age_t).any():
            timing["obs_age"] = age_t
    return Histories(
        n_obs,
        n_changes,
        s_unchanged.astype(np.float64),
        changed_row,
        d[c],
        None if weight is None else weight[c],
        **timing,
        changed_age=None if age is None else age[c],
    )


def _half_lives(state: pl.DataFrame) -> np.ndarray | None:
    """Per-row forgetting half-life, by the rule of ``estimate_rates``; None: no forgetting."""
    if "obs_half_life_days" in state.columns:
        h = state["obs_half_life_days"].cast(pl.Float64).fill_null(np.inf).to_numpy()
        return np.where(np.isfinite(h) & (h > 0), h, np.inf)
    if _estimate.HALF_LIFE_DAYS is not None and _estimate.HALF_LIFE_DAYS > 0:
        return np.full(state.height, float(_estimate.HALF_LIFE_DAYS))
    return None


def flatten_histories(
    state: pl.DataFrame,
    intervals: str = "obs_interval_days",
    changed: str = "obs_changed",
    *,
    anchor: str | None = None,
) -> Histories:
    """Histories of every row of ``state`` from its list columns (as url_state stores them).

    Null lists are empty histories; null or invalid entries are skipped; lists of different
    lengths in one row raise (the two columns must describe the same fetches). ``anchor``: a
    time column holding the end of each row's newest observation (url_state's
    ``last_seen_at``); each observation's time is then chained back from it, which the
    periodic components need (a null anchor leaves that row untimed). Forgetting follows
    ``estimate_rates``: an ``obs_half_life_days`` column, else ``estimate.HALF_LIFE_DAYS``.
    Content ages come from ``AGE_COLUMN`` when the state has it (null list: none known; a list
    of another length than the intervals raises).
    """
    lists = state.select(
        pl.col(intervals).cast(pl.List(pl.Float64)).alias("d"),
        pl.col(changed).cast(pl.List(pl.Boolean)).alias("c"),
    )
    lengths = lists["d"].list.len().fill_null(0).to_numpy()
    if not np.array_equal(lengths, lists["c"].list.len().fill_null(0).to_numpy()):
        raise ValueError(f"{intervals} and {changed} must have equal lengths per row")
    # Arrow's flatten skips null and empty lists, so each value's row is a plain repeat.
    flat_d = lists["d"].to_arrow().flatten()
    flat_c = lists["c"].to_arrow().flatten()
    row = np.repeat(np.arange(state.height, dtype=np.int64), lengths)
    d = flat_d.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    known = flat_c.is_valid().to_numpy(zero_copy_only=False)
    c = flat_c.fill_null(False).to_numpy(zero_copy_only=False).astype(bool, copy=False)
    age = None
    if AGE_COLUMN in state.columns and state[AGE_COLUMN].null_count() < state.height:
        # null lists become that many nulls, so the flattened ages line up with the intervals
        flat_a = aligned_ages(state, intervals).to_arrow().flatten()
        age = flat_a.to_numpy(zero_copy_only=False).astype(np.float64)
    # every valid interval is a link of the chain back from the anchor, even one whose changed
    # flag is missing (it still took time)
    with np.errstate(invalid="ignore"):
        valid = np.isfinite(d) & (d > 0)
    if not valid.all():
        row, d, c, known = row[valid], d[valid], c[valid], known[valid]
        age = None if age is None else age[valid]
    half = _half_lives(state)
    back = None
    if anchor is not None or half is not None:
        # days from each observation's end to the end of its row's newest one: the row's
        # running total at its last observation minus the running total at this one
        back = np.cumsum(np.bincount(row, weights=d, minlength=state.height), dtype=float)[row]
        back -= np.cumsum(d)
    end = None
    if anchor is not None:
        epoch_days = (
            state.select(utc_column(state, anchor).dt.epoch("us").cast(pl.Float64) / _DAY_US)
            .to_series()
            .fill_null(np.nan)
            .to_numpy()
        )
        end = epoch_days[row]
        end -= back
    weight = None if half is None else np.exp2(-back / half[row])
    del back
    if not known.all():
        row, d, c = row[known], d[known], c[known]
        end = None if end is None else end[known]
        weight = None if weight is None else weight[known]
        age = None if age is None else age[known]
    return _sorted_histories(row, d, c, state.height, end, weight, age)


def _as_histories(histories: Histories | pl.DataFrame) -> Histories:
    return histories if isinstance(histories, Histories) else flatten_histories(histories)


def _take(h: Histories, rows: np.ndarray) -> Histories:
    """The histories of ``rows`` (sorted row indices), renumbered 0..len(rows)-1."""
    new = np.full(h.n_rows, -1, dtype=np.int64)
    new[rows] = np.arange(rows.shape[0])
    keep_c = new[h.changed_row] >= 0
    parts: dict[str, np.ndarray | None] = {
        "changed_weight": None if h.changed_weight is None else h.changed_weight[keep_c],
        "changed_age": None if h.changed_age is None else h.changed_age[keep_c],
    }
    if h.has_times:
        keep_o = new[h.obs_row] >= 0
        parts.update(
            obs_row=new[h.obs_row][keep_o],
            obs_start=h.obs_start[keep_o],
            obs_end=h.obs_end[keep_o],
            obs_changed=h.obs_changed[keep_o],
            obs_weight=None if h.obs_weight is None else h.obs_weight[keep_o],
            obs_age=None if h.obs_age is None else h.obs_age[keep_o],
            timed=h.timed[rows],
        )
    return Histories(
        h.n_obs[rows],
        h.n_changes[rows],
        h.s_unchanged[rows],
        new[h.changed_row][keep_c],
        h.changed_interval[keep_c],
        **parts,
    )


def _class_keys(classes: Sequence | np.ndarray | pl.Series | None, n: int) -> pl.Series:
    """Normalized class key per row: stripped, lower-case; null or empty -> DEFAULT_CLASS."""
    if classes is None:
        return pl.repeat(DEFAULT_CLASS, n, eager=True, dtype=pl.String).alias("c")
    s = classes if isinstance(classes, pl.Series) else pl.Series("c", classes, dtype=pl.String)
    if s.len() != n:
        raise ValueError(f"classes has {s.len()} entries for {n} rows")
    return s.cast(pl.String).to_frame("c").select(_estimate.class_key(pl.col("c"))).to_series()


def _codes(keys: pl.Series) -> tuple[list[str], np.ndarray]:
    """(sorted distinct keys, each row's index among them): hashed, not sorted per row, since
    this runs over every candidate of a cycle (np.unique on a million strings took 1 s)."""
    names = keys.unique().sort()
    codes = keys.cast(pl.Enum(names.to_list())).to_physical().to_numpy().astype(np.int64)
    return names.to_list(), codes


def _check_grid(grid: np.ndarray) -> np.ndarray:
    grid = np.asarray(grid, dtype=np.float64)
    if grid.ndim != 1 or grid.shape[0] < 2 or not np.all(np.isfinite(grid)) or grid.min() <= 0:
        raise ValueError("grid must be a 1-d array of at least 2 positive finite rates")
    if np.any(np.diff(grid) <= 0):
        raise ValueError("grid must be strictly increasing")
    return grid


def _check_weights(w: np.ndarray, c: int, name: str) -> np.ndarray:
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (c,) or not np.all(np.isfinite(w)) or w.min() < 0 or w.sum() <= 0:
        raise ValueError(f"weights for {name!r} must be {c} finite non-negative numbers")
    return w / w.sum()


def _check_mismatch(mismatch: float) -> tuple[float, float]:
    """(log of agreeing, log of disagreeing) for the periodic likelihood."""
    if not 0.0 < mismatch < 0.5:
        raise ValueError("mismatch must be in (0, 0.5)")
    return math.log1p(-mismatch), math.log(mismatch)


# ----------------------------------------------------------------------------- likelihood


def _row_cells(h: Histories, g: int, periods: Sequence[Period]) -> np.ndarray:
    """Temporary matrix cells one row costs: its Poisson terms, phase bins and observations."""
    cells = g * (1 + h.n_changes)
    if periods and h.has_times:
        cells = cells + sum(3 * p.bins + 1 for p in periods) + h.n_obs * len(periods)
    return cells


def _chunks(h: Histories, cells: np.ndarray, chunk_cells: int) -> Iterator[tuple[int, int]]:
    """Row ranges [r0, r1) whose rows together cost at most ``chunk_cells`` (one row at least)."""
    n = h.n_rows
    if n == 0:
        return
    cost = np.cumsum(cells)
    r0 = 0
    while r0 < n:
        before = cost[r0 - 1] if r0 else 0
        r1 = int(np.searchsorted(cost, before + max(int(chunk_cells), 1), side="right"))
        r1 = min(max(r1, r0 + 1), n)
        yield r0, r1
        r0 = r1


def _log_likelihood(h: Histories, grid: np.ndarray, r0: int, r1: int, c_start: np.ndarray):
    """Poisson log L(λ_g) for rows r0..r1-1: −λ S_unchanged + Σ_changed log(1 − e^{−λΔ}), where
    a changed interval of known content age a scores the density log λ − λa (per day)."""
    ll = -np.outer(h.s_unchanged[r0:r1], grid)
    a, b = int(c_start[r0]), int(c_start[r1])
    if b > a:
        # G × M layout, so the per-row sums run along contiguous memory; float32 because it is
        # 3x faster here (SIMD exp/log) and a relative error of 1e-7 per term is far below
        # anything a posterior can resolve
        x = grid[:, None].astype(np.float32) * h.changed_interval[None, a:b].astype(np.float32)
        np.negative(x, out=x)
        np.expm1(x, out=x)
        np.negative(x, out=x)
        np.maximum(x, 1e-30, out=x)  # an interval of ~0 days would underflow to log(0)
        term = np.log(x, out=x)  # log(1 − e^{−λΔ}): ≈ log(λΔ) for tiny λΔ, 0 for huge
        if h.changed_age is not None:
            # the last change a days before the fetch and none since: λ e^{−λa}
            aged = np.flatnonzero(np.isfinite(h.changed_age[a:b]))
            if aged.size:
                age = h.changed_age[a:b][aged]
                dens = np.log(grid)[:, None] - grid[:, None] * age[None, :]
                term[:, aged] = dens.astype(np.float32)
        if h.changed_weight is not None:
            term *= h.changed_weight[None, a:b].astype(np.float32)
        rows = h.changed_row[a:b] - r0
        # one bincount per grid point: much faster than reduceat over many short segments
        for k in range(grid.shape[0]):
            ll[:, k] += np.bincount(rows, weights=term[k], minlength=r1 - r0)
    return ll


def _phase_log_likelihood(
    h: Histories,
    periods: Sequence[Period],
    logs: tuple[float, float],
    r0: int,
    r1: int,
    o_start: np.ndarray,
) -> list[np.ndarray]:
    """Per period, the (r1−r0) × bins log-likelihood of each phase bin.

    An observation over (s, e] predicts a change at phase φ iff some φ + kP lies in (s, e]; it
    scores log(1 − ε) when it agrees and log ε when not. Observations at least one period long
    contain a change point whatever the phase: one constant per row. A shorter one predicts a
    change for the bins whose centres lie in (s, e] modulo P, a contiguous (circular) run of
    bins, so it adds one value to every bin and a difference inside that run: with a
    difference array per row the cost is one pass over the observations plus one cumulative
    sum per row, not observations × bins.

    A changed observation whose content age a is known (``obs_age``) says more: the change was
    at x = e − a and none followed. It is scored as a density per day, in the units of the
    Poisson components' λ e^{−λa}: the two bins whose centres lie within one bin width w =
    P/bins of x (mod P) score log((1 − ε)/(2w)), every other bin log(ε/max(P, Δ)) (the
    mismatch spread over the interval, so that a phase's outcomes add up to about 1), and all
    bins that when a >= P (the clock would have ticked again since x).
    """
    agree, disagree = logs
    n = r1 - r0
    a, b = int(o_start[r0]), int(o_start[r1])
    rows = h.obs_row[a:b] - r0
    s, e, c = h.obs_start[a:b], h.obs_end[a:b], h.obs_changed[a:b]
    w = np.ones(b - a) if h.obs_weight is None else h.obs_weight[a:b]
    inside = np.where(c, agree, disagree) * w  # the score where the run predicts a change
    outside = np.where(c, disagree, agree) * w
    aged = None
    if h.obs_age is not None:
        aged = np.flatnonzero(np.isfinite(h.obs_age[a:b]))
        if aged.size:
            # scored by their change point below, not by the run of their interval
            inside[aged] = 0.0
            outside[aged] = 0.0
            aged_rows, aged_w, aged_age = rows[aged], w[aged], h.obs_age[a:b][aged]
            aged_x = e[aged] - aged_age
            aged_len = (e - s)[aged]
        else:
            aged = None
    p_agree, p_disagree = math.exp(agree), math.exp(disagree)
    out = []
    for period in periods:
        k = period.bins
        long = (e - s) >= period.days
        base = np.bincount(rows, weights=np.where(long, inside, outside), minlength=n)
        ll = np.repeat(base[:, None], k, axis=1)
        short = ~long
        if short.any():
            scale = k / period.days
            # in bin units: bin j's centre is j + 1/2; the run is the centres in (v, v + D]
            v = np.mod(s[short] * scale, k)
            span = (e[short] - s[short]) * scale
            first = np.floor(v + 0.5).astype(np.int64)
            stop = np.floor(v + span - 0.5).astype(np.int64) + 1  # one past the last
            stop = np.maximum(stop, first)
            delta = (inside - outside)[short]
            width = 2 * k + 1  # a run starts in [0, k] and ends at most at 2k
            rs = rows[short] * width
            diff = np.bincount(rs + first, weights=delta, minlength=n * width)
            diff -= np.bincount(rs + stop, weights=delta, minlength=n * width)
            runs = np.cumsum(diff.reshape(n, width), axis=1)
            ll += runs[:, :k] + runs[:, k : 2 * k]  # a run past the last bin wraps to the first
        if aged is not None:
            # density of a change off the clock: the mismatch probability spread over the
            # interval (at least a period)
            off = np.log(p_disagree / np.maximum(aged_len, period.days))
            near = math.log(p_agree / (2.0 * period.days / k))  # within a bin width of a tick
            ll += np.bincount(aged_rows, weights=off * aged_w, minlength=n)[:, None]
            # bin j's centre is j + 1/2 in bin units: x's two nearest centres are j0, j0 + 1
            u = np.mod(aged_x * (k / period.days), k)
            j0 = np.mod(np.floor(u - 0.5).astype(np.int64), k)
            delta = np.where(aged_age < period.days, (near - off) * aged_w, 0.0)
            bump = np.bincount(aged_rows * k + j0, weights=delta, minlength=n * k)
            if k > 1:
                j1 = np.mod(j0 + 1, k)
                bump += np.bincount(aged_rows * k + j1, weights=delta, minlength=n * k)
            ll += bump.reshape(n, k)
        out.append(ll)
    return out


def _logmeanexp(x: np.ndarray) -> np.ndarray:
    m = x.max(axis=1, keepdims=True)
    return (m + np.log(np.exp(x - m).mean(axis=1, keepdims=True)))[:, 0]


@dataclass
class _Chunk:
    """Likelihoods of one chunk of rows: per component (R × C) and the phase bins behind the
    periodic components (one R × bins matrix per period)."""

    components: np.ndarray
    phases: list[np.ndarray]


class _Likelihood:
    """Computes chunk likelihoods for one set of histories and components."""

    def __init__(
        self,
        h: Histories,
        grid: np.ndarray,
        periods: Sequence[Period],
        mismatch: float,
        chunk_cells: int,
    ) -> None:
        self.h, self.grid, self.periods = h, grid, tuple(periods)
        self.logs = _check_mismatch(mismatch)
        self.c_start = np.searchsorted(h.changed_row, np.arange(h.n_rows + 1), side="left")
        self.o_start = (
            np.searchsorted(h.obs_row, np.arange(h.n_rows + 1), side="left")
            if h.has_times
            else None
        )
        self.cells = _row_cells(h, grid.shape[0], self.periods)
        self.chunk_cells = chunk_cells

    def ranges(self) -> Iterator[tuple[int, int]]:
        return _chunks(self.h, self.cells, self.chunk_cells)

    def chunk(self, r0: int, r1: int) -> _Chunk:
        poisson = _log_likelihood(self.h, self.grid, r0, r1, self.c_start)
        if not self.periods:
            return _Chunk(poisson, [])
        n = r1 - r0
        if self.h.has_times:
            phases = _phase_log_likelihood(self.h, self.periods, self.logs, r0, r1, self.o_start)
            # a row with observations of unknown time cannot be judged by a clock
            ruled_out = ~self.h.timed[r0:r1] & (self.h.n_obs[r0:r1] > 0)
        else:
            phases = [np.zeros((n, p.bins)) for p in self.periods]
            ruled_out = self.h.n_obs[r0:r1] > 0
        periodic = np.stack([_logmeanexp(ph) for ph in phases], axis=1)
        periodic[ruled_out] = -np.inf
        return _Chunk(np.concatenate([poisson, periodic], axis=1), phases)


def _posterior(ll: np.ndarray, log_prior: np.ndarray) -> np.ndarray:
    """Row-normalized exp(ll + log_prior), stable in log space."""
    z = ll + log_prior
    z -= z.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    return z


def _log(w: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(w)


def _weights_table(
    weights: Mapping[str, np.ndarray] | np.ndarray | None, names: list[str], start: np.ndarray
) -> np.ndarray:
    """K × C weights for the class names: own weights, else GLOBAL, else ``start``."""
    c = start.shape[0]
    if weights is None:
        return np.tile(start, (len(names), 1))
    if isinstance(weights, np.ndarray):
        w = _check_weights(weights, c, GLOBAL)
        return np.tile(w, (len(names), 1))
    fallback = _check_weights(weights[GLOBAL], c, GLOBAL) if GLOBAL in weights else start
    return (
        np.stack([_check_weights(weights[k], c, k) if k in weights else fallback for k in names])
        if names
        else np.empty((0, c))
    )


# ------------------------------------------------------------------------------------ fit


def fit_grid_prior(
    histories: Histories | pl.DataFrame,
    classes: Sequence | np.ndarray | pl.Series | None = None,
    *,
    grid: np.ndarray | None = None,
    periods: Sequence[Period] = (),
    mismatch: float = MISMATCH,
    periodic_start: float = PERIODIC_START,
    previous_weights: Mapping[str, np.ndarray] | None = None,
    iterations: int = 5,
    shrinkage: float = 500.0,
    support_floor: float = 1e-6,
    max_rows: int | None = None,
    chunk_cells: int = CHUNK_CELLS,
    cache_cells: int = CACHE_CELLS,
) -> dict[str, np.ndarray]:
    """Prior weights on the components (``grid`` rates, then ``periods``) per URL class, by EM
    on the pages' censored histories.

    ``histories``: a :class:`Histories` or a frame with ``obs_interval_days`` /
    ``obs_changed`` list columns. ``classes``: one class per row (url_class; null, empty or
    None -> ``DEFAULT_CLASS``; case and surrounding spaces ignored). ``previous_weights``: the
    last cycle's result (warm start; classes missing from it start from its ``GLOBAL`` entry,
    else from :func:`initial_weights`). Each iteration is one pass over the data: E-step
    (posterior of every page with observations under its class's weights and under the global
    weights) and M-step (the global weights are the mean global posterior; a class's weights
    the mean of its pages' posteriors plus ``shrinkage`` pseudo-pages distributed as the global
    weights). When every page is in one class, that class's weights are the global weights.
    Pages without observations carry no information and are skipped; beyond ``max_rows``
    pages with observations an even sample of them is used. ``support_floor`` mixes that share
    of the starting weights back in after each step, so that no component is lost for good (EM
    can never revive a weight that reached 0). ``chunk_cells`` bounds the temporary matrices,
    ``cache_cells`` the likelihoods kept between iterations (see the module constants).

    Returns {class: weights (C floats, sum 1)} for every class in ``classes`` plus ``GLOBAL``.
    With no observations at all the (normalized) starting weights come back unchanged.
    """
    h = _as_histories(histories)
    grid = _check_grid(rate_grid() if grid is None else grid)
    periods = tuple(periods)
    start = initial_weights(grid, periods, periodic_start)
    c = start.shape[0]
    if iterations < 0 or shrinkage < 0 or not 0 <= support_floor < 1:
        raise ValueError("need iterations >= 0, shrinkage >= 0, 0 <= support_floor < 1")
    if max_rows is not None and max_rows < 1:
        raise ValueError("max_rows must be >= 1")
    names, codes = _codes(_class_keys(classes, h.n_rows))
    prev = dict(previous_weights or {})
    glob = _weights_table(prev, [GLOBAL], start)[0]
    table = _weights_table(prev, names, start)

    with_data = np.flatnonzero(h.n_obs > 0)
    if max_rows is not None and with_data.shape[0] > max_rows:
        with_data = with_data[np.linspace(0, with_data.shape[0] - 1, max_rows).astype(np.int64)]
    sub = _take(h, with_data)
    sub_codes = codes[with_data]
    # one class holding every page is the global fit (and needs one E-step, not two)
    single = len(names) == 1
    if single:
        table = glob[None, :].copy()
    lik = _Likelihood(sub, grid, periods, mismatch, chunk_cells)
    # The likelihood matrix does not change between iterations: keep it when it is small.
    cache: list[tuple[np.ndarray, np.ndarray]] | None = (
        [] if sub.n_rows * c <= cache_cells else None
    )

    def chunks() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        if cache:
            yield from cache
            return
        for r0, r1 in lik.ranges():
            item = (lik.chunk(r0, r1).components, sub_codes[r0:r1])
            if cache is not None:
                cache.append(item)
            yield item

    for _ in range(iterations):
        if sub.n_rows == 0:
            break
        acc_glob = np.zeros(c)
        acc_cls = np.zeros((len(names), c))
        n_cls = np.zeros(len(names))
        log_glob, log_table = _log(glob), _log(table)
        for ll, cc in chunks():
            post = _posterior(ll, log_glob[None, :])
            acc_glob += post.sum(axis=0)
            if not single:
                post = _posterior(ll, log_table[cc])
            for k in np.unique(cc):
                sel = cc == k
                acc_cls[k] += post[sel].sum(axis=0)
                n_cls[k] += sel.sum()
        glob = acc_glob / acc_glob.sum()
        glob = (1.0 - support_floor) * glob + support_floor * start
        denom = n_cls + shrinkage
        with np.errstate(invalid="ignore", divide="ignore"):
            own = (acc_cls + shrinkage * glob[None, :]) / denom[:, None]
        table = np.where(denom[:, None] > 0, own, glob[None, :])
        table = table / table.sum(axis=1, keepdims=True)
        table = (1.0 - support_floor) * table + support_floor * start[None, :]
        if single:
            table = glob[None, :].copy()
    out = {GLOBAL: glob / glob.sum()}
    for k, name in enumerate(names):
        if name != GLOBAL:
            out[name] = table[k] / table[k].sum()
    return out


# ------------------------------------------------------------------------------ posterior


def grid_posterior(
    histories: Histories | pl.DataFrame,
    weights: Mapping[str, np.ndarray] | np.ndarray | None,
    classes: Sequence | np.ndarray | pl.Series | None = None,
    *,
    grid: np.ndarray | None = None,
    periods: Sequence[Period] = (),
    mismatch: float = MISMATCH,
    periodic_start: float = PERIODIC_START,
    chunk_cells: int = CHUNK_CELLS,
) -> np.ndarray:
    """N × C posterior over the components for every row (rows sum to 1).

    ``weights``: the result of :func:`fit_grid_prior` (a class without its own entry uses
    ``GLOBAL``, else the starting weights), one weight vector for all rows, or None (starting
    weights). A row without observations gets its class prior. Materializes N × C numbers: for
    many rows use :func:`posterior_summary`, which keeps only per-row summaries.
    """
    h = _as_histories(histories)
    grid = _check_grid(rate_grid() if grid is None else grid)
    start = initial_weights(grid, periods, periodic_start)
    names, codes = _codes(_class_keys(classes, h.n_rows))
    log_table = _log(_weights_table(weights, names, start))
    lik = _Likelihood(h, grid, periods, mismatch, chunk_cells)
    out = np.empty((h.n_rows, start.shape[0]))
    for r0, r1 in lik.ranges():
        out[r0:r1] = _posterior(lik.chunk(r0, r1).components, log_table[codes[r0:r1]])
    return out


def _g(r: np.ndarray) -> np.ndarray:
    """g(r) = 1 − (1 + r)e^{−r} for r >= 0 (r = ∞ gives 1), to ~1e-10 relative everywhere.

    Below r = 1e-3 the direct form cancels; there g = r²(1/2 − r/3 + r²/8) (next term r⁵/30).
    One exp per cell: this runs on whole N × G matrices.
    """
    r = np.minimum(r, 700.0)
    out = np.exp(-r)
    out *= 1.0 + r
    np.subtract(1.0, out, out=out)
    small = r < 1e-3
    if small.any():
        rs = r[small]
        out[small] = rs * rs * (0.5 - rs / 3.0 + rs * rs / 8.0)
    return out


def _broadcast(posterior: np.ndarray, age_days: np.ndarray | float):
    """(posterior R × G, ages): one posterior row with many ages, or one per age."""
    post = np.atleast_2d(np.asarray(posterior, dtype=np.float64))
    a = np.asarray(age_days, dtype=np.float64)
    if a.ndim > 1:
        raise ValueError("age_days must be a number or a 1-d array")
    n = np.broadcast_shapes((post.shape[0],), a.shape)[0] if a.ndim else post.shape[0]
    return post, np.broadcast_to(a, (n,))


def expected_index(
    posterior: np.ndarray, grid: np.ndarray, age_days: np.ndarray | float
) -> np.ndarray:
    """E[W(λ, a)] = Σ_g post_g (1/λ_g) g(λ_g a) per row, in days (the Poisson components).

    ``posterior``: N × G (rows sum to 1), or one row shared by every age; ``age_days``: per
    row or one number. Age ∞ (never fetched) gives E[1/λ]; age <= 0 gives 0; NaN gives NaN.
    """
    post, a = _broadcast(posterior, age_days)
    grid = _check_grid(grid)
    pos = np.where(a > 0, a, 0.0)
    with np.errstate(invalid="ignore"):
        w = _g(pos[:, None] * grid[None, :]) / grid[None, :]
    out = (post * w).sum(axis=1)
    return np.where(np.isnan(a), np.nan, np.where(a > 0, out, 0.0))


def expected_capture(
    posterior: np.ndarray, grid: np.ndarray, age_days: np.ndarray | float
) -> np.ndarray:
    """E[1 − e^{−λa}] = Σ_g post_g (1 − e^{−λ_g a}): P(the page changed since its last fetch)."""
    post, a = _broadcast(posterior, age_days)
    grid = _check_grid(grid)
    pos = np.where(a > 0, a, 0.0)
    with np.errstate(invalid="ignore"):
        p = -np.expm1(-pos[:, None] * grid[None, :])
    out = (post * p).sum(axis=1)
    return np.where(np.isnan(a), np.nan, np.where(a > 0, out, 0.0))


def _periodic_gains(
    phase_ll: np.ndarray, period: Period, now_days: float, age: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(freshness days, P(stale)) a fetch now buys under one periodic component, averaged over
    each row's phase posterior. Stale: a change point fell in (now − age, now]; the fetch then
    keeps the copy fresh until the next change point."""
    q = _posterior(phase_ll, np.zeros(period.bins))
    p, phi = period.days, period.phases
    last = now_days - age
    with np.errstate(invalid="ignore"):
        stale = np.floor((now_days - phi) / p)[None, :] > np.floor((last[:, None] - phi) / p)
    until_next = np.mod(phi - now_days, p)
    until_next = np.where(until_next > 0, until_next, p)
    return (q * stale * until_next[None, :]).sum(axis=1), (q * stale).sum(axis=1)


#: A class whose prior gives the clocks less than this in total is scored without them: their
#: posterior share could only matter after a run of evidence that such a prior says almost no
#: page has, and the phase likelihoods are half the scoring cost on a web without clocks.
CLOCK_FLOOR = 1e-6


class _MedianRule:
    """The posterior median of the rate, from the component weights of each row.

    Each Poisson grid rate stands for its cell of the log-spaced grid (mass spread evenly over
    ln λ_g ± h/2), so the median moves smoothly with the evidence instead of jumping from one
    grid point to the next; a clock is a point mass at 1/P. Why a median beside the mean: a
    rate is often judged on the log scale (a page off by 2x either way is as wrong), where the
    posterior median is the estimate with the least expected |log error| and is as likely to
    be above the page's rate as below it. The posterior mean is pulled up by the fast tail of a
    wide posterior (a page unchanged after a few fetches keeps some mass on fast rates), the
    geometric mean lands between two modes (clock or fast Poisson) where neither is.
    """

    def __init__(self, grid: np.ndarray, rates: np.ndarray) -> None:
        self.order = np.argsort(rates, kind="stable")
        self.log_rates = np.log(rates)[self.order]
        g = grid.shape[0]
        step = float(np.log(grid[1] / grid[0])) if g > 1 else 0.0
        # a cell's half width: Poisson rates spread over their cell, clocks are points
        self.half = np.where(self.order < g, step / 2.0, 0.0)

    def __call__(self, post: np.ndarray) -> np.ndarray:
        p = post[:, self.order]
        cum = np.cumsum(p, axis=1)
        k = np.minimum((cum < 0.5).sum(axis=1), p.shape[1] - 1)
        rows = np.arange(p.shape[0])
        below = cum[rows, k] - p[rows, k]
        with np.errstate(invalid="ignore", divide="ignore"):
            within = np.where(p[rows, k] > 0, (0.5 - below) / p[rows, k], 0.5)
        half = self.half[k]
        return np.exp(self.log_rates[k] - half + 2.0 * half * np.clip(within, 0.0, 1.0))


def _only_bounded_below(h: Histories) -> np.ndarray:
    """Rows whose every observation saw a change and none carries a content age: the history
    says only "at least as fast as we sample" (the rate is the prior's fast tail)."""
    aged = np.zeros(h.n_rows, dtype=np.int64)
    if h.changed_age is not None:
        aged = np.bincount(h.changed_row[np.isfinite(h.changed_age)], minlength=h.n_rows).astype(
            np.int64
        )
    return (h.n_obs > 0) & (h.n_changes == h.n_obs) & (aged == 0)


def _summary_arrays(
    h: Histories,
    grid: np.ndarray,
    periods: Sequence[Period],
    mismatch: float,
    chunk_cells: int,
    log_table: np.ndarray,
    codes: np.ndarray,
    ages: np.ndarray | None,
    now_days: float | None,
) -> dict[str, np.ndarray]:
    """posterior_summary's per-row numbers, one chunk of rows at a time."""
    g, n = grid.shape[0], h.n_rows
    rates = np.r_[grid, [1.0 / p.days for p in periods]]
    log_rates = np.log(rates)
    median = _MedianRule(grid, rates)
    out = {k: np.empty(n) for k in ("mean", "log_mean", "log_sd", "share", "median")}
    if ages is not None:
        out |= {"idx": np.empty(n), "cap": np.empty(n)}
    lik = _Likelihood(h, grid, periods, mismatch, chunk_cells)
    for r0, r1 in lik.ranges():
        chunk = lik.chunk(r0, r1)
        post = _posterior(chunk.components, log_table[codes[r0:r1]])
        out["mean"][r0:r1] = post @ rates
        m = post @ log_rates
        out["log_mean"][r0:r1] = m
        out["log_sd"][r0:r1] = np.sqrt(np.maximum(post @ (log_rates * log_rates) - m * m, 0.0))
        out["share"][r0:r1] = post[:, g:].sum(axis=1)
        out["median"][r0:r1] = median(post)
        if ages is not None:
            a = ages[r0:r1]
            w_idx = expected_index(post[:, :g], grid, a)
            w_cap = expected_capture(post[:, :g], grid, a)
            for j, (period, phase_ll) in enumerate(zip(periods, chunk.phases, strict=True)):
                days, stale = _periodic_gains(phase_ll, period, float(now_days), a)
                w_idx = w_idx + post[:, g + j] * np.where(a > 0, days, 0.0)
                w_cap = w_cap + post[:, g + j] * np.where(a > 0, stale, 0.0)
            out["idx"][r0:r1] = w_idx
            out["cap"][r0:r1] = np.clip(w_cap, 0.0, 1.0)  # a probability: weights sum to 1 ± ulps
    return out


def posterior_summary(
    histories: Histories | pl.DataFrame,
    weights: Mapping[str, np.ndarray] | np.ndarray | None,
    classes: Sequence | np.ndarray | pl.Series | None = None,
    *,
    grid: np.ndarray | None = None,
    periods: Sequence[Period] = (),
    mismatch: float = MISMATCH,
    periodic_start: float = PERIODIC_START,
    age_days: np.ndarray | float | None = None,
    now_days: float | None = None,
    chunk_cells: int = CHUNK_CELLS,
) -> pl.DataFrame:
    """Per-row summaries of the posterior, one chunk of rows at a time (bounded memory).

    Columns, one row per input row in order: ``change_rate`` (posterior mean, changes/day; a
    periodic component counts 1/P), ``rate_log_mean`` and ``rate_log_sd`` (mean and sd of ln λ:
    exp(rate_log_mean) is the posterior geometric mean, rate_log_sd how sure it is),
    ``rate_median`` (the posterior median, what url_state reports: :class:`_MedianRule`),
    ``periodic_share`` (posterior probability that the page follows a clock), ``n_obs``,
    ``n_changes``; and with ``age_days`` (days since the last fetch per row, or one number;
    ∞ = never fetched) ``expected_index`` and ``expected_capture`` (see the module docstring).
    With ``periods`` and ``age_days``, ``now_days`` (now in days since the Unix epoch) places
    the phases.
    """
    h = _as_histories(histories)
    grid = _check_grid(rate_grid() if grid is None else grid)
    periods = tuple(periods)
    start = initial_weights(grid, periods, periodic_start)
    g = grid.shape[0]
    names, codes = _codes(_class_keys(classes, h.n_rows))
    log_table = _log(_weights_table(weights, names, start))
    n = h.n_rows
    ages = None if age_days is None else np.broadcast_to(np.asarray(age_days, np.float64), (n,))
    if ages is not None and periods and now_days is None:
        raise ValueError("periodic gains need now_days")
    clockless = np.zeros(n, dtype=bool)
    if periods:
        clockless = (np.exp(log_table[:, g:]).sum(axis=1) < CLOCK_FLOOR)[codes]
    out: dict[str, np.ndarray] = {}
    for rows, use in ((np.flatnonzero(~clockless), periods), (np.flatnonzero(clockless), ())):
        if rows.shape[0] == 0:
            continue
        whole = rows.shape[0] == n
        part = _summary_arrays(
            h if whole else _take(h, rows),
            grid,
            use,
            mismatch,
            chunk_cells,
            log_table if use else log_table[:, :g],
            codes if whole else codes[rows],
            None if ages is None else (ages if whole else ages[rows]),
            now_days,
        )
        for key, values in part.items():
            out.setdefault(key, np.zeros(n))[rows] = values
    mean, log_mean, log_sd, share, median = (
        out.get(k, np.zeros(n)) for k in ("mean", "log_mean", "log_sd", "share", "median")
    )
    idx, cap = out.get("idx", np.zeros(n)), out.get("cap", np.zeros(n))
    cols = [
        pl.Series("change_rate", mean, dtype=pl.Float64),
        pl.Series("rate_log_mean", log_mean, dtype=pl.Float64),
        pl.Series("rate_log_sd", log_sd, dtype=pl.Float64),
        pl.Series("rate_median", median, dtype=pl.Float64),
        pl.Series("periodic_share", share, dtype=pl.Float64),
        pl.Series("n_obs", h.n_obs, dtype=pl.Int64),
        pl.Series("n_changes", h.n_changes, dtype=pl.Int64),
        pl.Series("rate_is_lower_bound", _only_bounded_below(h), dtype=pl.Boolean),
    ]
    if ages is not None:
        cols += [
            pl.Series("expected_index", idx, dtype=pl.Float64),
            pl.Series("expected_capture", cap, dtype=pl.Float64),
        ]
    return pl.DataFrame(cols)


# -------------------------------------------------------------------------- the product's API


@dataclass(frozen=True)
class ChangeModel:
    """The components and fitting knobs the assets use (see the module docstring)."""

    grid: tuple[float, ...] = tuple(rate_grid().tolist())
    periods: tuple[Period, ...] = DEFAULT_PERIODS
    mismatch: float = MISMATCH
    periodic_start: float = PERIODIC_START
    #: EM iterations per cycle, warm-started from the stored weights
    iterations: int = 3
    shrinkage: float = 500.0
    #: the prior is fit on at most this many pages with observations (an even sample)
    max_fit_rows: int = 100_000

    def __post_init__(self) -> None:
        _check_grid(np.asarray(self.grid))
        _check_mismatch(self.mismatch)
        initial_weights(np.asarray(self.grid), self.periods, self.periodic_start)
        if self.iterations < 0 or self.shrinkage < 0 or self.max_fit_rows < 1:
            raise ValueError("need iterations >= 0, shrinkage >= 0, max_fit_rows >= 1")

    @property
    def grid_array(self) -> np.ndarray:
        return np.asarray(self.grid, dtype=np.float64)


def component_table(model: ChangeModel) -> pl.DataFrame:
    """One row per component in weight order: ``component`` ('poisson' | 'periodic') and
    ``rate_per_day`` (λ, or 1/period), the key the stored weights are matched on."""
    periodic = [1.0 / p.days for p in model.periods]
    return pl.DataFrame(
        {
            "component": ["poisson"] * len(model.grid) + ["periodic"] * len(periodic),
            "rate_per_day": [*model.grid, *periodic],
        },
        schema={"component": pl.String, "rate_per_day": pl.Float64},
    ).with_row_index("_pos")


def prior_weights(table: pl.DataFrame | None, model: ChangeModel) -> dict[str, np.ndarray] | None:
    """The weights stored by :func:`refit_change_prior`, one vector per class, as
    :func:`fit_grid_prior` takes them.

    Rows of several hosts (one run's hosts) are averaged per class, each host weighing by its
    pages with observations (+1, so hosts without any still count a little). A row whose
    components are not exactly the model's (a release changed the grid; rates are matched to
    1e-9 relative, so rates read back from Parquet find theirs) or whose weights are not finite
    and non-negative is dropped: its class starts over from the global or the starting weights.
    None when nothing is usable.
    """
    if table is None or table.height == 0:
        return None
    comps = component_table(model)
    c = comps.height
    rows = table.select(
        pl.col("url_class").cast(pl.String),
        pl.col("component").cast(pl.List(pl.String)),
        pl.col("rate_per_day").cast(pl.List(pl.Float64)),
        pl.col("weight").cast(pl.List(pl.Float64)),
        (pl.col("n_pages").cast(pl.Float64).fill_null(0.0).clip(lower_bound=0.0) + 1.0).alias("_n"),
    ).filter(
        pl.col("url_class").is_not_null()
        & (pl.col("component").list.len() == c)
        & (pl.col("rate_per_day").list.len() == c)
        & (pl.col("weight").list.len() == c)
        & (pl.col("component").list.join("|") == "|".join(comps["component"]))
    )
    if rows.height == 0:
        return None
    rates = rows["rate_per_day"].list.to_array(c).to_numpy()
    weights = rows["weight"].list.to_array(c).to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        same_rates = np.all(
            np.abs(np.log(rates) - np.log(comps["rate_per_day"].to_numpy())) <= 1e-9, axis=1
        )
        usable = (
            same_rates
            & np.all(np.isfinite(weights) & (weights >= 0), axis=1)
            & (weights.sum(axis=1) > 0)
        )
    if not usable.any():
        return None
    names, codes = _codes(rows["url_class"].filter(pl.Series(usable)))
    n = rows["_n"].to_numpy()[usable]
    mixed = np.zeros((len(names), c))
    np.add.at(mixed, codes, weights[usable] * n[:, None])
    return {name: mixed[k] / mixed[k].sum() for k, name in enumerate(names)}


def latest_fit_before(table: pl.DataFrame | None, now: datetime) -> pl.DataFrame:
    """Per host, the rows of its newest fit stamped before ``now``.

    Why before: the table keeps the last fit before a cycle next to the cycle's own, so a
    cycle run again with the same ``now`` (after a crash, or by hand) plans and refits from
    exactly what its first run saw, not from what that run wrote.
    """
    if table is None or table.height == 0 or "fitted_at" not in table.columns:
        return pl.DataFrame()
    stamp = utc_column(table, "fitted_at")
    older = table.with_columns(fitted_at=stamp).filter(
        pl.col("fitted_at") < pl.lit(as_utc(now)).dt.cast_time_unit("us")
    )
    return older.filter(pl.col("fitted_at") == pl.col("fitted_at").max().over("host"))


def _usable_periods(h: Histories, model: ChangeModel) -> tuple[Period, ...]:
    """The model's clocks, or none when the observations' times are unknown."""
    return model.periods if h.has_times else ()


def refit_change_prior(
    state: pl.DataFrame,
    previous: pl.DataFrame | None,
    *,
    now: datetime,
    model: ChangeModel = ChangeModel(),  # noqa: B008 - frozen dataclass, safe as a default
) -> pl.DataFrame:
    """The ``change_prior`` table's rows for the hosts of ``state`` after this cycle: this
    cycle's fit, stamped ``fitted_at`` = ``now``, next to the newest fit before it (which a
    re-run of the cycle starts from again, see :func:`latest_fit_before`). A fit is, per host
    and per class on it (plus ``GLOBAL``), one row: the model's components in weight order
    (lists ``component`` and ``rate_per_day``), their ``weight`` list and the host's
    ``n_pages`` with a history in that class.

    ``state``: url_state rows (host, url_class, obs_interval_days, obs_changed, last_seen_at;
    optionally ``AGE_COLUMN``).
    ``previous``: what the table holds for these hosts (warm start from the newest fit before
    ``now``; empty or None: start from :func:`initial_weights`). The prior is fit on all of
    ``state`` (the run's hosts; at most ``model.max_fit_rows`` of its pages with a history, an
    even sample) with ``model.iterations`` EM iterations; every host stores the
    same weights, and its page counts say how much it weighs when a later run mixes hosts fit
    apart.
    """
    before = latest_fit_before(previous, now)
    anchor = "last_seen_at" if "last_seen_at" in state.columns else None
    classes = _class_keys(
        state["url_class"] if "url_class" in state.columns else None, state.height
    )
    # a page with a history counts; the fit itself reads an even sample of them (flattening
    # every history of a million pages to fit 50-odd weights would be most of the cost)
    has_history = (state["obs_interval_days"].list.len().fill_null(0) > 0).to_numpy()
    fit_rows = np.flatnonzero(has_history)
    if fit_rows.shape[0] > model.max_fit_rows:
        fit_rows = fit_rows[np.linspace(0, fit_rows.shape[0] - 1, model.max_fit_rows).astype(int)]
    sample = state[fit_rows] if fit_rows.shape[0] < state.height else state
    hist = flatten_histories(sample, anchor=anchor)
    weights = fit_grid_prior(
        hist,
        classes.gather(fit_rows) if fit_rows.shape[0] < state.height else classes,
        grid=model.grid_array,
        periods=_usable_periods(hist, model),
        mismatch=model.mismatch,
        periodic_start=model.periodic_start,
        previous_weights=_matching(prior_weights(before, model), model, hist),
        iterations=model.iterations,
        shrinkage=model.shrinkage,
        max_rows=model.max_fit_rows,
    )
    if not hist.has_times and model.periods:
        # no times, no clocks: store the periodic components at their floor weight
        weights = {k: _with_periodic_floor(w, model) for k, w in weights.items()}
    for name in classes.unique().to_list():
        # a class whose pages have no history yet is stored at the global weights
        weights.setdefault(name, weights[GLOBAL])
    comps = component_table(model)
    fits = pl.DataFrame(
        {
            "url_class": list(weights),
            "weight": [w.tolist() for w in weights.values()],
        },
        schema={"url_class": pl.String, "weight": pl.List(pl.Float64)},
    )
    pages = pl.DataFrame(
        {"host": state["host"].cast(pl.String), "url_class": classes, "_has": has_history}
    ).drop_nulls("host")
    counts = pl.concat(
        [
            pages.group_by("host", "url_class").agg(pl.col("_has").sum().alias("n_pages")),
            pages.group_by("host").agg(
                pl.lit(GLOBAL).alias("url_class"), pl.col("_has").sum().alias("n_pages")
            ),
        ]
    )
    fitted = counts.join(fits, on="url_class", how="inner").select(
        "host",
        "url_class",
        pl.lit(as_utc(now)).dt.cast_time_unit("us").alias("fitted_at"),
        pl.col("n_pages").cast(pl.Int64),
        pl.lit(comps["component"].to_list(), dtype=pl.List(pl.String)).alias("component"),
        pl.lit(comps["rate_per_day"].to_list(), dtype=pl.List(pl.Float64)).alias("rate_per_day"),
        "weight",
    )
    if before.height:
        kept = before.select(
            pl.col(name).cast(dtype) for name, dtype in fitted.schema.items()
        ).filter(pl.col("host").is_in(fitted["host"].unique().implode()))
        fitted = pl.concat([kept, fitted])
    return fitted.sort("host", "fitted_at", "url_class")


def _matching(
    weights: Mapping[str, np.ndarray] | None, model: ChangeModel, h: Histories
) -> dict[str, np.ndarray] | None:
    """Stored weights cut to the components this fit uses (no periodic ones without times)."""
    if weights is None or h.has_times or not model.periods:
        return None if weights is None else dict(weights)
    g = len(model.grid)
    return {k: w[:g] / w[:g].sum() for k, w in weights.items() if w[:g].sum() > 0}


def _with_periodic_floor(w: np.ndarray, model: ChangeModel) -> np.ndarray:
    start = initial_weights(model.grid_array, model.periods, model.periodic_start)
    g = len(model.grid)
    return np.r_[w * (1.0 - start[g:].sum()), start[g:]]


#: the column of :func:`posterior_gains` each planning objective ranks by
GAIN_COLUMN = {"freshness": "expected_index", "capture": "expected_capture"}


def expected_gains(
    candidates: pl.DataFrame,
    prior: pl.DataFrame | None,
    *,
    now: datetime,
    objective: str = "freshness",
    model: ChangeModel = ChangeModel(),  # noqa: B008 - frozen dataclass, safe as a default
) -> pl.Series:
    """``expected_gain_override`` for :func:`freshness_pipeline.science.schedule.build_plan`:
    what a fetch at ``now`` is worth for each candidate under the stored prior, for the
    planning ``objective``: "freshness" (the expected index) or "capture" (P(changed since the
    last fetch)). Arguments as for :func:`posterior_gains`.
    """
    if objective not in GAIN_COLUMN:
        raise ValueError(f"objective must be 'freshness' or 'capture', not {objective!r}")
    gains = posterior_gains(candidates, prior, now=now, model=model)
    return gains[GAIN_COLUMN[objective]].alias("expected_gain_override")


def posterior_gains(
    candidates: pl.DataFrame,
    prior: pl.DataFrame | None,
    *,
    now: datetime,
    model: ChangeModel = ChangeModel(),  # noqa: B008 - frozen dataclass, safe as a default
) -> pl.DataFrame:
    """Per candidate, in order: ``expected_index`` (the freshness a fetch at ``now`` buys, in
    days) and ``expected_capture`` (the probability that the page changed since its last
    fetch), both averaged over the page's posterior under the stored prior (``prior``:
    ``change_prior`` rows of the run's hosts, of which the newest fit before ``now`` is used;
    none: the starting weights). One pass gives both: the plan ranks by one and keeps the
    other, the model's forecast that the random verification sample puts to the test.

    ``candidates``: url_class, last_fetched_at (null = never: infinitely stale), and the
    history columns obs_interval_days / obs_changed / last_seen_at (and ``AGE_COLUMN`` when
    url_state has it) from url_state (absent or null: no history); hinted_change = True (a
    trusted sitemap says it changed) is scored as infinitely stale, False is zeroed by the
    planner itself.
    """
    n = candidates.height
    cols = set(candidates.columns)
    if {"obs_interval_days", "obs_changed"} <= cols:
        anchor = "last_seen_at" if "last_seen_at" in cols else None
        hist = flatten_histories(candidates, anchor=anchor)
    else:
        hist = histories_from_arrays(
            np.empty(0, np.int64), np.empty(0), np.empty(0, bool), n, end=np.empty(0)
        )
    now_utc = as_utc(now)
    last = (
        candidates.select(utc_column(candidates, "last_fetched_at").alias("t"))
        if "last_fetched_at" in cols
        else pl.DataFrame({"t": pl.Series([None] * n, dtype=pl.Datetime("us", "UTC"))})
    )
    age = (
        last.select(
            ((pl.lit(now_utc).dt.cast_time_unit("us") - pl.col("t")).dt.total_microseconds())
            / _DAY_US
        )
        .to_series()
        .fill_null(math.inf)
        .to_numpy()
        .astype(np.float64)
    )
    if "hinted_change" in cols:
        hinted = candidates["hinted_change"].cast(pl.Boolean).fill_null(False).to_numpy()
        age = np.where(hinted, math.inf, age)
    periods = _usable_periods(hist, model)
    weights = prior_weights(latest_fit_before(prior, now), model)
    if not periods and model.periods:
        weights = _matching(weights, model, hist)
    summary = posterior_summary(
        hist,
        weights,
        candidates["url_class"] if "url_class" in cols else None,
        grid=model.grid_array,
        periods=periods,
        mismatch=model.mismatch,
        periodic_start=model.periodic_start,
        age_days=age,
        now_days=now_utc.timestamp() / 86_400.0,
    )
    return summary.select("expected_index", "expected_capture")


#: the url_state columns :func:`posterior_rates` gives
RATE_COLUMNS = ("change_rate", "change_rate_median", "n_obs", "n_changes", "rate_is_lower_bound")


def posterior_rates(
    state: pl.DataFrame,
    weights: Mapping[str, np.ndarray] | None,
    *,
    model: ChangeModel = ChangeModel(),  # noqa: B008 - frozen dataclass, safe as a default
) -> pl.DataFrame:
    """url_state's rate columns (:data:`RATE_COLUMNS`) for every row of ``state``, in order,
    under the change prior ``weights`` (one vector per class, as :func:`prior_weights` reads a
    stored fit; None: the starting weights): ``change_rate`` is the posterior mean of the
    page's rate in changes/day (a clock counts 1/P), what an expected number of changes or the
    chance of one over a span is computed from; ``change_rate_median`` its posterior median,
    the typical rate (the mean of a posterior that spans decades sits above most of its mass,
    so on thin evidence the median is the closer guess in log terms); ``n_obs`` and
    ``n_changes`` count the
    observations it rests on, and ``rate_is_lower_bound`` flags a history that only says "at
    least as fast as we sample" (every observation changed, none dated).

    Why this posterior and not a Gamma prior per URL class: a page with a few fetches is
    judged by its prior, and a fixed class prior is the wrong population on most webs (the
    default class expects a change a week, while a site of listings and feeds changes several
    times a day); a page changed at every visit has no rate of its own in its history, and the
    population says what such pages change at; a daily page's content ages, read as Poisson,
    say twice its rate, which a clock component does not. The planner ranks by the same
    posterior (:func:`posterior_gains`), so what url_state reports is what the plan acts on.

    ``state``: url_class, obs_interval_days, obs_changed, last_seen_at (the end of the newest
    observation: the clocks need each observation's time) and optionally ``AGE_COLUMN``. Rows
    without a history get their class prior's mean and median, computed once per class.
    """
    n = state.height
    classes = _class_keys(state["url_class"] if "url_class" in state.columns else None, n)
    has_history = (state["obs_interval_days"].list.len().fill_null(0) > 0).to_numpy()
    rows = np.flatnonzero(has_history)
    anchor = "last_seen_at" if "last_seen_at" in state.columns else None
    part = state[rows] if rows.shape[0] < n else state
    hist = flatten_histories(part, anchor=anchor)
    periods = _usable_periods(hist, model)
    use = _matching(weights, model, hist) if not periods and model.periods else weights
    summary = posterior_summary(
        hist,
        use,
        classes.gather(rows) if rows.shape[0] < n else classes,
        grid=model.grid_array,
        periods=periods,
        mismatch=model.mismatch,
        periodic_start=model.periodic_start,
    )
    mean = np.zeros(n)
    mean[rows] = summary["change_rate"].to_numpy()
    median = np.zeros(n)
    median[rows] = summary["rate_median"].to_numpy()
    n_obs = np.zeros(n, dtype=np.int64)
    n_obs[rows] = summary["n_obs"].to_numpy()
    n_changes = np.zeros(n, dtype=np.int64)
    n_changes[rows] = summary["n_changes"].to_numpy()
    bounded = np.zeros(n, dtype=bool)
    bounded[rows] = summary["rate_is_lower_bound"].to_numpy()
    if rows.shape[0] < n:
        # no history: the posterior is the class prior itself, one row per class
        names = classes.filter(pl.Series(~has_history)).unique().sort()
        empty = histories_from_arrays(
            np.empty(0, np.int64), np.empty(0), np.empty(0, bool), names.len(), end=np.empty(0)
        )
        prior_only = posterior_summary(
            empty,
            weights,
            names,
            grid=model.grid_array,
            periods=model.periods,
            mismatch=model.mismatch,
            periodic_start=model.periodic_start,
        )
        blank = np.flatnonzero(~has_history)
        for column, target in (("change_rate", mean), ("rate_median", median)):
            by_name = dict(zip(names.to_list(), prior_only[column].to_list(), strict=True))
            target[blank] = classes.gather(blank).replace_strict(by_name).to_numpy()
    return pl.DataFrame(
        [
            pl.Series("change_rate", mean, dtype=pl.Float64),
            pl.Series("change_rate_median", median, dtype=pl.Float64),
            pl.Series("n_obs", n_obs, dtype=pl.Int64),
            pl.Series("n_changes", n_changes, dtype=pl.Int64),
            pl.Series("rate_is_lower_bound", bounded, dtype=pl.Boolean),
        ]
    )


# -------------------------------------------------------------------------------- storage


def weights_frame(weights: Mapping[str, np.ndarray], grid: np.ndarray) -> pl.DataFrame:
    """Long table (url_class, rate_per_day, weight) of Poisson-only weights (no periods)."""
    grid = _check_grid(grid)
    rows = []
    for name in sorted(weights):
        w = _check_weights(weights[name], grid.shape[0], name)
        rows.append(
            pl.DataFrame({"url_class": [name] * grid.shape[0], "rate_per_day": grid, "weight": w})
        )
    if not rows:
        return pl.DataFrame(
            schema={"url_class": pl.String, "rate_per_day": pl.Float64, "weight": pl.Float64}
        )
    return pl.concat(rows)


def weights_from_frame(frame: pl.DataFrame) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(grid, weights) back from :func:`weights_frame`; every class must use the same grid."""
    grid = None
    out: dict[str, np.ndarray] = {}
    for (name,), part in frame.sort("rate_per_day").group_by(["url_class"], maintain_order=True):
        rates = part["rate_per_day"].to_numpy()
        if grid is None:
            grid = _check_grid(rates)
        elif rates.shape != grid.shape or not np.allclose(rates, grid, rtol=1e-12):
            raise ValueError("all classes must share one grid")
        out[str(name)] = _check_weights(part["weight"].to_numpy(), grid.shape[0], str(name))
    if grid is None:
        raise ValueError("empty weights frame")
    return grid, out
