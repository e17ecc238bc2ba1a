"""Nonparametric empirical-Bayes change rates: a prior on a fixed grid of rates, learned from
every page's interval-censored history (issue 3).

Why: a single Gamma prior per class scores a page with one or two fetches close to the prior
mean, while the real population is extremely heavy-tailed (cho2000: 30 % of pages change less
than once in four months, 5 % faster than 4/day, science.md §6). The population itself says
what a thin history most likely means: "unchanged after 3 days" on a web where a third of the
pages are nearly static is strong evidence of a static page, and "changed after 2 days" spreads
over the fast and the medium bands in the proportions those bands really have.

Model. Rates live on a fixed grid λ_1 < … < λ_G (default 48 log-spaced points from 1e-4 to
100 changes/day). Per URL class the prior is a weight vector π on the grid (G numbers that sum
to 1: small enough to store per class, see :func:`weights_frame`). A page's history of
(interval Δ, changed?) pairs has, at grid rate λ, the censored likelihood

    L(λ) = Π_unchanged e^{−λΔ} · Π_changed (1 − e^{−λΔ})

(science.md §3), so its posterior is post_g ∝ π_g L(λ_g). The weights are the nonparametric
maximum-likelihood mixing distribution (Laird 1978), fit by EM over all pages' histories:
π_g ← mean over pages of post_g. EM is run for a few iterations per cycle, warm-started from
the previous cycle's weights (the data change little between cycles). A class with little data
is pulled towards the global weights: its M-step adds ``shrinkage`` pseudo-pages distributed as
the global π (a Dirichlet prior centred on the global fit), so a class of 50 pages is mostly
global and a class of 50,000 mostly its own.

From the posterior, per page (:func:`posterior_summary`):

* ``change_rate`` = Σ post_g λ_g, the posterior mean (what the url_state asset reports);
* ``expected_index`` = E[W(λ, a)] = Σ post_g (1/λ_g) g(λ_g a), g(r) = 1 − (1 + r)e^{−r}: the
  Lagrangian freshness index of :mod:`freshness_pipeline.science.schedule` averaged over the
  posterior, at the page's age a (days since its last fetch);
* ``expected_capture`` = E[1 − e^{−λa}], the same for the "capture" objective.

Pass ``expected_index`` (or ``expected_capture``) to ``build_plan`` as the
``expected_gain_override`` column; the plan's priority is then value × that / cost.

Everything is vectorized numpy in log space, computed in chunks of rows whose N × G matrices
stay under ``chunk_cells`` numbers, so memory is bounded whatever the number of URLs. Pure
functions: no I/O, no clock, no randomness.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from freshness_pipeline.science.estimate import DEFAULT_CLASS

__all__ = [
    "GLOBAL",
    "Histories",
    "expected_capture",
    "expected_index",
    "fit_grid_prior",
    "flatten_histories",
    "grid_posterior",
    "histories_from_arrays",
    "initial_weights",
    "posterior_summary",
    "rate_grid",
    "weights_frame",
    "weights_from_frame",
]

#: Key of the weights fit on every page, used for classes without their own weights.
GLOBAL = "__global__"

#: Default chunk size: rows are grouped so that no temporary matrix exceeds this many numbers
#: (2**22 float64 = 32 MB; a chunk holds a few of them).
CHUNK_CELLS = 1 << 22
#: :func:`fit_grid_prior` keeps the pages' log-likelihoods between EM iterations when they fit
#: in this many numbers (2**24 float64 = 128 MB: 350,000 pages at 48 grid points); beyond it
#: each iteration recomputes them chunk by chunk (the slow part of a pass).
CACHE_CELLS = 1 << 24


def rate_grid(points: int = 48, low: float = 1e-4, high: float = 100.0) -> np.ndarray:
    """``points`` log-spaced rates (changes/day) from ``low`` to ``high`` inclusive.

    The ends bound what can be said: a page unchanged for years sits at ``low``, one changed at
    every fetch at or near ``high`` (pages faster than the fetch rate are indistinguishable).
    """
    if points < 2 or not 0 < low < high or not np.isfinite(high):
        raise ValueError("need points >= 2 and 0 < low < high < inf")
    return np.geomspace(low, high, points)


def initial_weights(grid: np.ndarray) -> np.ndarray:
    """Uniform weights over the (log-spaced) grid: the starting prior before any data."""
    return np.full(np.asarray(grid).shape[0], 1.0 / np.asarray(grid).shape[0])


# ----------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Histories:
    """Interval-censored histories reduced to what the likelihood needs.

    Per row: ``n_obs``, ``n_changes`` and ``s_unchanged`` (total days of unchanged intervals:
    the unchanged intervals enter L(λ) only as e^{−λ·S}); and, for every changed interval, its
    row (non-decreasing) and length in days. Build with :func:`flatten_histories` or
    :func:`histories_from_arrays`.
    """

    n_obs: np.ndarray
    n_changes: np.ndarray
    s_unchanged: np.ndarray
    changed_row: np.ndarray
    changed_interval: np.ndarray

    @property
    def n_rows(self) -> int:
        return int(self.n_obs.shape[0])


def histories_from_arrays(
    row: np.ndarray, interval: np.ndarray, changed: np.ndarray, n_rows: int
) -> Histories:
    """Histories from flat observations: row index, interval in days, changed flag.

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
    ok = np.isfinite(d) & (d > 0)
    row, d, c = row[ok], d[ok], c[ok]
    n_obs = np.bincount(row, minlength=n_rows).astype(np.int64)
    n_changes = np.bincount(row[c], minlength=n_rows).astype(np.int64)
    s_unchanged = np.bincount(row[~c], weights=d[~c], minlength=n_rows).astype(np.float64)
    order = np.argsort(row[c], kind="stable")
    return Histories(n_obs, n_changes, s_unchanged, row[c][order], d[c][order])


def flatten_histories(
    state: pl.DataFrame,
    intervals: str = "obs_interval_days",
    changed: str = "obs_changed",
) -> Histories:
    """Histories of every row of ``state`` from its list columns (as url_state stores them).

    Null lists are empty histories; null or invalid entries are skipped; lists of different
    lengths in one row raise (the two columns must describe the same fetches).
    """
    lists = state.select(
        pl.col(intervals).cast(pl.List(pl.Float64)).alias("d"),
        pl.col(changed).cast(pl.List(pl.Boolean)).alias("c"),
    )
    bad = lists.select(
        (pl.col("d").list.len().fill_null(0) != pl.col("c").list.len().fill_null(0)).any()
    ).item()
    if bad:
        raise ValueError(f"{intervals} and {changed} must have equal lengths per row")
    flat = (
        lists.with_row_index("row")
        .explode(["d", "c"])
        .filter(pl.col("d").is_not_null() & pl.col("c").is_not_null())
    )
    return histories_from_arrays(
        flat["row"].to_numpy().astype(np.int64),
        flat["d"].to_numpy().astype(np.float64),
        flat["c"].to_numpy().astype(bool),
        state.height,
    )


def _as_histories(histories: Histories | pl.DataFrame) -> Histories:
    return histories if isinstance(histories, Histories) else flatten_histories(histories)


def _class_keys(classes: Sequence | np.ndarray | pl.Series | None, n: int) -> np.ndarray:
    """Normalized class key per row: stripped, lower-case; null or empty -> DEFAULT_CLASS."""
    if classes is None:
        return np.full(n, DEFAULT_CLASS, dtype=object)
    s = pl.Series("c", classes).cast(pl.String) if not isinstance(classes, pl.Series) else classes
    if s.len() != n:
        raise ValueError(f"classes has {s.len()} entries for {n} rows")
    keys = s.cast(pl.String).str.strip_chars().str.to_lowercase()
    keys = pl.select(pl.when(keys.str.len_chars() > 0).then(keys).otherwise(None)).to_series()
    return keys.fill_null(DEFAULT_CLASS).to_numpy().astype(object)


def _codes(keys: np.ndarray) -> tuple[list[str], np.ndarray]:
    names, codes = np.unique(keys, return_inverse=True)
    return [str(x) for x in names], codes.astype(np.int64)


def _check_grid(grid: np.ndarray) -> np.ndarray:
    grid = np.asarray(grid, dtype=np.float64)
    if grid.ndim != 1 or grid.shape[0] < 2 or not np.all(np.isfinite(grid)) or grid.min() <= 0:
        raise ValueError("grid must be a 1-d array of at least 2 positive finite rates")
    if np.any(np.diff(grid) <= 0):
        raise ValueError("grid must be strictly increasing")
    return grid


def _check_weights(w: np.ndarray, g: int, name: str) -> np.ndarray:
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (g,) or not np.all(np.isfinite(w)) or w.min() < 0 or w.sum() <= 0:
        raise ValueError(f"weights for {name!r} must be {g} finite non-negative numbers")
    return w / w.sum()


# ----------------------------------------------------------------------------- likelihood


def _chunks(h: Histories, g: int, chunk_cells: int) -> Iterator[tuple[int, int]]:
    """Row ranges [r0, r1) whose rows plus changed intervals fit in ``chunk_cells`` / G rows."""
    n = h.n_rows
    if n == 0:
        return
    cap = max(1, int(chunk_cells) // g)
    cost = np.cumsum(1 + h.n_changes)  # one row of L plus one row per changed interval
    r0 = 0
    while r0 < n:
        before = cost[r0 - 1] if r0 else 0
        r1 = int(np.searchsorted(cost, before + cap, side="right"))
        r1 = min(max(r1, r0 + 1), n)
        yield r0, r1
        r0 = r1


def _log_likelihood(h: Histories, grid: np.ndarray, r0: int, r1: int, c_start: np.ndarray):
    """log L(λ_g) for rows r0..r1-1: −λ S_unchanged + Σ_changed log(1 − e^{−λΔ}); (r1−r0) × G."""
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
        rows = h.changed_row[a:b] - r0
        # one bincount per grid point: much faster than reduceat over many short segments
        for k in range(grid.shape[0]):
            ll[:, k] += np.bincount(rows, weights=term[k], minlength=r1 - r0)
    return ll


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
    weights: Mapping[str, np.ndarray] | np.ndarray | None, names: list[str], g: int
) -> np.ndarray:
    """K × G weights for the class names: own weights, else GLOBAL, else uniform."""
    if weights is None:
        base = np.full(g, 1.0 / g)
        return np.tile(base, (len(names), 1))
    if isinstance(weights, np.ndarray):
        w = _check_weights(weights, g, GLOBAL)
        return np.tile(w, (len(names), 1))
    fallback = (
        _check_weights(weights[GLOBAL], g, GLOBAL) if GLOBAL in weights else np.full(g, 1.0 / g)
    )
    return (
        np.stack([_check_weights(weights[k], g, k) if k in weights else fallback for k in names])
        if names
        else np.empty((0, g))
    )


# ------------------------------------------------------------------------------------ fit


def fit_grid_prior(
    histories: Histories | pl.DataFrame,
    classes: Sequence | np.ndarray | pl.Series | None = None,
    *,
    grid: np.ndarray | None = None,
    previous_weights: Mapping[str, np.ndarray] | None = None,
    iterations: int = 5,
    shrinkage: float = 500.0,
    support_floor: float = 1e-6,
    chunk_cells: int = CHUNK_CELLS,
    cache_cells: int = CACHE_CELLS,
) -> dict[str, np.ndarray]:
    """Prior weights on ``grid`` per URL class, by EM on the pages' censored histories.

    ``histories``: a :class:`Histories` or a frame with ``obs_interval_days`` /
    ``obs_changed`` list columns. ``classes``: one class per row (url_class; null, empty or
    None -> ``DEFAULT_CLASS``; case and surrounding spaces ignored). ``previous_weights``: the
    last cycle's result (warm start; classes missing from it start from its ``GLOBAL`` entry,
    else from uniform weights). Each iteration is one pass over the data: E-step (posterior of
    every page with observations under its class's weights and under the global weights) and
    M-step (the global weights are the mean global posterior; a class's weights the mean of its
    pages' posteriors plus ``shrinkage`` pseudo-pages distributed as the global weights).
    When every page is in one class, that class's weights are the global weights. Pages
    without observations carry no information and are skipped. ``support_floor`` mixes
    that share of uniform weight back in after each step, so that no grid point is lost for
    good (EM can never revive a weight that reached 0). ``chunk_cells`` bounds the temporary
    matrices, ``cache_cells`` the likelihoods kept between iterations (see the module constants).

    Returns {class: weights (G floats, sum 1)} for every class in ``classes`` plus ``GLOBAL``.
    With no observations at all the (normalized) starting weights come back unchanged.
    """
    h = _as_histories(histories)
    grid = _check_grid(rate_grid() if grid is None else grid)
    g = grid.shape[0]
    if iterations < 0 or shrinkage < 0 or not 0 <= support_floor < 1:
        raise ValueError("need iterations >= 0, shrinkage >= 0, 0 <= support_floor < 1")
    names, codes = _codes(_class_keys(classes, h.n_rows))
    prev = dict(previous_weights or {})
    glob = _weights_table(prev, [GLOBAL], g)[0]
    table = _weights_table(prev, names, g)

    # one class holding every page is the global fit (and needs one E-step, not two)
    single = len(names) == 1
    if single:
        table = glob[None, :].copy()
    has_data = h.n_obs > 0
    c_start = np.searchsorted(h.changed_row, np.arange(h.n_rows + 1), side="left")
    uniform = np.full(g, 1.0 / g)
    # The likelihood matrix does not change between iterations: keep it when it is small.
    cache: list[tuple[np.ndarray, np.ndarray]] | None = (
        [] if int(has_data.sum()) * g <= cache_cells else None
    )

    def chunks() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        if cache:
            yield from cache
            return
        for r0, r1 in _chunks(h, g, chunk_cells):
            keep = has_data[r0:r1]
            if keep.any():
                item = (_log_likelihood(h, grid, r0, r1, c_start)[keep], codes[r0:r1][keep])
                if cache is not None:
                    cache.append(item)
                yield item

    for _ in range(iterations):
        if not has_data.any():
            break
        acc_glob = np.zeros(g)
        acc_cls = np.zeros((len(names), g))
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
        glob = (1.0 - support_floor) * glob + support_floor * uniform
        denom = n_cls + shrinkage
        with np.errstate(invalid="ignore", divide="ignore"):
            own = (acc_cls + shrinkage * glob[None, :]) / denom[:, None]
        table = np.where(denom[:, None] > 0, own, glob[None, :])
        table = table / table.sum(axis=1, keepdims=True)
        table = (1.0 - support_floor) * table + support_floor * uniform[None, :]
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
    chunk_cells: int = CHUNK_CELLS,
) -> np.ndarray:
    """N × G posterior over the grid for every row (rows sum to 1).

    ``weights``: the result of :func:`fit_grid_prior` (a class without its own entry uses
    ``GLOBAL``, else uniform), one weight vector for all rows, or None (uniform). A row
    without observations gets its class prior. Materializes N × G numbers: for many rows use
    :func:`posterior_summary`, which keeps only per-row summaries.
    """
    h = _as_histories(histories)
    grid = _check_grid(rate_grid() if grid is None else grid)
    names, codes = _codes(_class_keys(classes, h.n_rows))
    log_table = _log(_weights_table(weights, names, grid.shape[0]))
    c_start = np.searchsorted(h.changed_row, np.arange(h.n_rows + 1), side="left")
    out = np.empty((h.n_rows, grid.shape[0]))
    for r0, r1 in _chunks(h, grid.shape[0], chunk_cells):
        ll = _log_likelihood(h, grid, r0, r1, c_start)
        out[r0:r1] = _posterior(ll, log_table[codes[r0:r1]])
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
    """E[W(λ, a)] = Σ_g post_g (1/λ_g) g(λ_g a) per row, in days.

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


def posterior_summary(
    histories: Histories | pl.DataFrame,
    weights: Mapping[str, np.ndarray] | np.ndarray | None,
    classes: Sequence | np.ndarray | pl.Series | None = None,
    *,
    grid: np.ndarray | None = None,
    age_days: np.ndarray | float | None = None,
    chunk_cells: int = CHUNK_CELLS,
) -> pl.DataFrame:
    """Per-row summaries of the grid posterior, one chunk of rows at a time (bounded memory).

    Columns, one row per input row in order: ``change_rate`` (posterior mean, changes/day),
    ``rate_log_mean`` and ``rate_log_sd`` (mean and sd of ln λ: exp(rate_log_mean) is the
    posterior geometric mean, rate_log_sd how sure it is), ``n_obs``, ``n_changes``; and with
    ``age_days`` (days since the last fetch per row, or one number; ∞ = never fetched)
    ``expected_index`` (:func:`expected_index`) and ``expected_capture``.
    """
    h = _as_histories(histories)
    grid = _check_grid(rate_grid() if grid is None else grid)
    names, codes = _codes(_class_keys(classes, h.n_rows))
    log_table = _log(_weights_table(weights, names, grid.shape[0]))
    c_start = np.searchsorted(h.changed_row, np.arange(h.n_rows + 1), side="left")
    n = h.n_rows
    ages = None if age_days is None else np.broadcast_to(np.asarray(age_days, np.float64), (n,))
    mean = np.empty(n)
    log_mean = np.empty(n)
    log_sd = np.empty(n)
    idx = np.empty(n) if ages is not None else None
    cap = np.empty(n) if ages is not None else None
    log_grid = np.log(grid)
    for r0, r1 in _chunks(h, grid.shape[0], chunk_cells):
        post = _posterior(_log_likelihood(h, grid, r0, r1, c_start), log_table[codes[r0:r1]])
        mean[r0:r1] = post @ grid
        m = post @ log_grid
        log_mean[r0:r1] = m
        log_sd[r0:r1] = np.sqrt(np.maximum(post @ (log_grid * log_grid) - m * m, 0.0))
        if ages is not None:
            idx[r0:r1] = expected_index(post, grid, ages[r0:r1])
            cap[r0:r1] = expected_capture(post, grid, ages[r0:r1])
    cols = [
        pl.Series("change_rate", mean, dtype=pl.Float64),
        pl.Series("rate_log_mean", log_mean, dtype=pl.Float64),
        pl.Series("rate_log_sd", log_sd, dtype=pl.Float64),
        pl.Series("n_obs", h.n_obs, dtype=pl.Int64),
        pl.Series("n_changes", h.n_changes, dtype=pl.Int64),
    ]
    if ages is not None:
        cols += [
            pl.Series("expected_index", idx, dtype=pl.Float64),
            pl.Series("expected_capture", cap, dtype=pl.Float64),
        ]
    return pl.DataFrame(cols)


# -------------------------------------------------------------------------------- storage


def weights_frame(weights: Mapping[str, np.ndarray], grid: np.ndarray) -> pl.DataFrame:
    """Long table (url_class, rate_per_day, weight) for storing the weights next to url_state."""
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
