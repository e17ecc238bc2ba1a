"""Interval-censored histories flattened into arrays, the one form the likelihoods read:
url_state keeps them as list columns per row, and flattening them once per call rather
than row by row is what keeps a cycle over a million pages tractable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import polars as pl

from freshness_pipeline.science import estimate as _estimate
from freshness_pipeline.science.estimate import AGE_COLUMN, aligned_ages, clean_ages
from freshness_pipeline.science.timecols import DAY_US, utc_column

__all__ = [
    "Histories",
    "ObservationTimes",
    "as_histories",
    "flatten_histories",
    "histories_from_arrays",
    "histories_of_rows",
]


class ObservationTimes(NamedTuple):
    """The arrays of :class:`Histories` that exist together or not at all (see there)."""

    row: np.ndarray
    start: np.ndarray
    end: np.ndarray
    changed: np.ndarray
    timed: np.ndarray


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

    def times(self) -> ObservationTimes:
        """The observations' times, which the clocks need; ValueError when they are unknown
        (:attr:`has_times`). One accessor for the arrays that come together, so that code using
        them checks once instead of each optional field."""
        if (
            self.obs_row is None
            or self.obs_start is None
            or self.obs_end is None
            or self.obs_changed is None
            or self.timed is None
        ):
            raise ValueError("these histories hold no observation times")
        return ObservationTimes(
            self.obs_row, self.obs_start, self.obs_end, self.obs_changed, self.timed
        )


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
    end: np.ndarray | None = None
    weight: np.ndarray | None = None
    if anchor is not None or half is not None:
        # days from each observation's end to the end of its row's newest one: the row's
        # running total at its last observation minus the running total at this one
        back = np.cumsum(np.bincount(row, weights=d, minlength=state.height), dtype=float)[row]
        back -= np.cumsum(d)
        if anchor is not None:
            epoch_days = (
                state.select(utc_column(state, anchor).dt.epoch("us").cast(pl.Float64) / DAY_US)
                .to_series()
                .fill_null(np.nan)
                .to_numpy()
            )
            end = epoch_days[row]
            end -= back
        if half is not None:
            weight = np.exp2(-back / half[row])
        del back
    if not known.all():
        row, d, c = row[known], d[known], c[known]
        end = None if end is None else end[known]
        weight = None if weight is None else weight[known]
        age = None if age is None else age[known]
    return _sorted_histories(row, d, c, state.height, end, weight, age)


def as_histories(histories: Histories | pl.DataFrame) -> Histories:
    """``histories`` as they are, or flattened from a url_state frame."""
    return histories if isinstance(histories, Histories) else flatten_histories(histories)


def histories_of_rows(h: Histories, rows: np.ndarray) -> Histories:
    """The histories of ``rows`` (sorted row indices), renumbered 0..len(rows)-1."""
    new = np.full(h.n_rows, -1, dtype=np.int64)
    new[rows] = np.arange(rows.shape[0])
    keep_c = new[h.changed_row] >= 0
    parts: dict[str, np.ndarray | None] = {
        "changed_weight": None if h.changed_weight is None else h.changed_weight[keep_c],
        "changed_age": None if h.changed_age is None else h.changed_age[keep_c],
    }
    if h.has_times:
        t = h.times()
        keep_o = new[t.row] >= 0
        parts.update(
            obs_row=new[t.row][keep_o],
            obs_start=t.start[keep_o],
            obs_end=t.end[keep_o],
            obs_changed=t.changed[keep_o],
            obs_weight=None if h.obs_weight is None else h.obs_weight[keep_o],
            obs_age=None if h.obs_age is None else h.obs_age[keep_o],
            timed=t.timed[rows],
        )
    return Histories(
        h.n_obs[rows],
        h.n_changes[rows],
        h.s_unchanged[rows],
        new[h.changed_row][keep_c],
        h.changed_interval[keep_c],
        **parts,
    )
