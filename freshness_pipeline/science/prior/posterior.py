"""A page's posterior under the fitted weights and what it implies: its rate, and what a
fetch now is worth. Only per-page summaries leave a chunk of rows, so memory stays bounded
whatever the number of pages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from freshness_pipeline.science.intervals import g
from freshness_pipeline.science.prior.components import (
    Classes,
    Components,
    Period,
    checked_grid,
    row_classes,
)
from freshness_pipeline.science.prior.histories import Histories, as_histories, histories_of_rows
from freshness_pipeline.science.prior.likelihood import (
    CHUNK_CELLS,
    ChunkedLikelihood,
    log_weights,
    row_posteriors,
)

__all__ = [
    "CLOCK_FLOOR",
    "PosteriorMedianRate",
    "expected_capture",
    "expected_index",
    "grid_posterior",
    "posterior_summary",
]


def grid_posterior(
    histories: Histories | pl.DataFrame,
    weights: Mapping[str, np.ndarray] | np.ndarray | None,
    classes: Classes = None,
    *,
    components: Components = Components(),  # noqa: B008 - frozen dataclass, safe as a default
    chunk_cells: int = CHUNK_CELLS,
) -> np.ndarray:
    """N × C posterior over the components for every row (rows sum to 1).

    ``weights``: the result of :func:`fit_grid_prior` (a class without its own entry uses
    ``GLOBAL``, else the starting weights), one weight vector for all rows, or None (starting
    weights). A row without observations gets its class prior. Materializes N × C numbers: for
    many rows use :func:`posterior_summary`, which keeps only per-row summaries.
    """
    h = as_histories(histories)
    start = components.start()
    names, codes = row_classes(classes, h.n_rows)
    log_table = log_weights(components.weight_matrix(weights, names))
    lik = ChunkedLikelihood(
        h, components.grid_array, components.periods, components.mismatch, chunk_cells
    )
    out = np.empty((h.n_rows, start.shape[0]))
    for r0, r1 in lik.ranges():
        out[r0:r1] = row_posteriors(lik.chunk(r0, r1).components, log_table[codes[r0:r1]])
    return out


def _broadcast(
    posterior: np.ndarray, age_days: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray]:
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
    grid = checked_grid(grid)
    pos = np.where(a > 0, a, 0.0)
    with np.errstate(invalid="ignore"):
        w = g(pos[:, None] * grid[None, :]) / grid[None, :]
    out = (post * w).sum(axis=1)
    return np.where(np.isnan(a), np.nan, np.where(a > 0, out, 0.0))


def expected_capture(
    posterior: np.ndarray, grid: np.ndarray, age_days: np.ndarray | float
) -> np.ndarray:
    """E[1 − e^{−λa}] = Σ_g post_g (1 − e^{−λ_g a}): P(the page changed since its last fetch)."""
    post, a = _broadcast(posterior, age_days)
    grid = checked_grid(grid)
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
    q = row_posteriors(phase_ll, np.zeros(period.bins))
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


class PosteriorMedianRate:
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
        rate: np.ndarray = np.exp(self.log_rates[k] - half + 2.0 * half * np.clip(within, 0.0, 1.0))
        return rate


def _only_bounded_below(h: Histories) -> np.ndarray:
    """Rows whose every observation saw a change and none carries a content age: the history
    says only "at least as fast as we sample" (the rate is the prior's fast tail)."""
    aged = np.zeros(h.n_rows, dtype=np.int64)
    if h.changed_age is not None:
        aged = np.bincount(h.changed_row[np.isfinite(h.changed_age)], minlength=h.n_rows).astype(
            np.int64
        )
    bounded: np.ndarray = (h.n_obs > 0) & (h.n_changes == h.n_obs) & (aged == 0)
    return bounded


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
    median = PosteriorMedianRate(grid, rates)
    out = {k: np.empty(n) for k in ("mean", "log_mean", "log_sd", "share", "median")}
    if ages is not None:
        out |= {"idx": np.empty(n), "cap": np.empty(n)}
    lik = ChunkedLikelihood(h, grid, periods, mismatch, chunk_cells)
    for r0, r1 in lik.ranges():
        chunk = lik.chunk(r0, r1)
        post = row_posteriors(chunk.components, log_table[codes[r0:r1]])
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
                assert now_days is not None, "posterior_summary checks it for periodic gains"
                days, stale = _periodic_gains(phase_ll, period, float(now_days), a)
                w_idx = w_idx + post[:, g + j] * np.where(a > 0, days, 0.0)
                w_cap = w_cap + post[:, g + j] * np.where(a > 0, stale, 0.0)
            out["idx"][r0:r1] = w_idx
            out["cap"][r0:r1] = np.clip(w_cap, 0.0, 1.0)  # a probability: weights sum to 1 ± ulps
    return out


def posterior_summary(
    histories: Histories | pl.DataFrame,
    weights: Mapping[str, np.ndarray] | np.ndarray | None,
    classes: Classes = None,
    *,
    components: Components = Components(),  # noqa: B008 - frozen dataclass, safe as a default
    age_days: np.ndarray | float | None = None,
    now_days: float | None = None,
    chunk_cells: int = CHUNK_CELLS,
) -> pl.DataFrame:
    """Per-row summaries of the posterior, one chunk of rows at a time (bounded memory).

    Columns, one row per input row in order: ``change_rate`` (posterior mean, changes/day; a
    periodic component counts 1/P), ``rate_log_mean`` and ``rate_log_sd`` (mean and sd of ln λ:
    exp(rate_log_mean) is the posterior geometric mean, rate_log_sd how sure it is),
    ``rate_median`` (the posterior median, what url_state reports: :class:`PosteriorMedianRate`),
    ``periodic_share`` (posterior probability that the page follows a clock), ``n_obs``,
    ``n_changes``; and with ``age_days`` (days since the last fetch per row, or one number;
    ∞ = never fetched) ``expected_index`` and ``expected_capture`` (see the module docstring).
    With clocks among the ``components`` and ``age_days``, ``now_days`` (now in days since the
    Unix epoch) places the phases.
    """
    h = as_histories(histories)
    grid, periods, mismatch = components.grid_array, components.periods, components.mismatch
    g = grid.shape[0]
    names, codes = row_classes(classes, h.n_rows)
    log_table = log_weights(components.weight_matrix(weights, names))
    n = h.n_rows
    ages = None if age_days is None else np.broadcast_to(np.asarray(age_days, np.float64), (n,))
    if ages is not None and periods and now_days is None:
        raise ValueError("periodic gains need now_days")
    clockless = np.zeros(n, dtype=bool)
    if periods:
        clockless = (np.exp(log_table[:, g:]).sum(axis=1) < CLOCK_FLOOR)[codes]
    out: dict[str, np.ndarray] = {}
    unobserved = h.n_obs == 0
    for clocks, use in ((~clockless, periods), (clockless, ())):
        # A row without observations has the prior of its class as its posterior: its
        # summary depends on its class and its age only, so each (class, age) is computed once
        # (most rows of a large crawl were never fetched twice).
        seen = np.flatnonzero(clocks & ~unobserved)
        fresh = np.flatnonzero(clocks & unobserved)
        key = np.stack(
            [codes[fresh], np.zeros_like(fresh) if ages is None else ages[fresh].view(np.int64)]
        )
        _, first, spread = np.unique(key, axis=1, return_index=True, return_inverse=True)
        order = np.argsort(first)  # the representatives in row order, as histories_of_rows takes
        rank = np.empty_like(order)
        rank[order] = np.arange(order.shape[0])
        for rows, scatter in ((seen, None), (fresh[first[order]], rank[spread.reshape(-1)])):
            if rows.shape[0] == 0:
                continue
            whole = rows.shape[0] == n
            part = _summary_arrays(
                h if whole else histories_of_rows(h, rows),
                grid,
                use,
                mismatch,
                chunk_cells,
                log_table if use else log_table[:, :g],
                codes if whole else codes[rows],
                None if ages is None else (ages if whole else ages[rows]),
                now_days,
            )
            target = rows if scatter is None else fresh
            for name, values in part.items():
                out.setdefault(name, np.zeros(n))[target] = (
                    values if scatter is None else values[scatter]
                )
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
