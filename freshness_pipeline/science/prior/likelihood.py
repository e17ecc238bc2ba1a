"""Each page's log-likelihood under every component, computed in chunks of rows: the
numerical core the fit and the posterior share, and the cost that dominates both, so its
memory bound (``CHUNK_CELLS``) is set here once for both."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from freshness_pipeline.science.prior.components import Period, mismatch_logs
from freshness_pipeline.science.prior.histories import Histories

__all__ = [
    "CHUNK_CELLS",
    "ChunkLikelihoods",
    "ChunkedLikelihood",
    "log_weights",
    "row_posteriors",
]

#: Default chunk size: rows are grouped so that no temporary matrix exceeds this many numbers
#: (2**22 float64 = 32 MB; a chunk holds a few of them).
CHUNK_CELLS = 1 << 22


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


def _log_likelihood(
    h: Histories, grid: np.ndarray, r0: int, r1: int, c_start: np.ndarray
) -> np.ndarray:
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
    t = h.times()
    rows = t.row[a:b] - r0
    s, e, c = t.start[a:b], t.end[a:b], t.changed[a:b]
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
    out: np.ndarray = (m + np.log(np.exp(x - m).mean(axis=1, keepdims=True)))[:, 0]
    return out


@dataclass
class ChunkLikelihoods:
    """Likelihoods of one chunk of rows: per component (R × C) and the phase bins behind the
    periodic components (one R × bins matrix per period)."""

    components: np.ndarray
    phases: list[np.ndarray]


class ChunkedLikelihood:
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
        self.logs = mismatch_logs(mismatch)
        self.c_start = np.searchsorted(h.changed_row, np.arange(h.n_rows + 1), side="left")
        self.o_start = (
            np.searchsorted(h.times().row, np.arange(h.n_rows + 1), side="left")
            if h.has_times
            else None
        )
        self.cells = _row_cells(h, grid.shape[0], self.periods)
        self.chunk_cells = chunk_cells

    def ranges(self) -> Iterator[tuple[int, int]]:
        return _chunks(self.h, self.cells, self.chunk_cells)

    def chunk(self, r0: int, r1: int) -> ChunkLikelihoods:
        poisson = _log_likelihood(self.h, self.grid, r0, r1, self.c_start)
        if not self.periods:
            return ChunkLikelihoods(poisson, [])
        n = r1 - r0
        if self.o_start is not None:  # the histories have times
            phases = _phase_log_likelihood(self.h, self.periods, self.logs, r0, r1, self.o_start)
            # a row with observations of unknown time cannot be judged by a clock
            ruled_out = ~self.h.times().timed[r0:r1] & (self.h.n_obs[r0:r1] > 0)
        else:
            phases = [np.zeros((n, p.bins)) for p in self.periods]
            ruled_out = self.h.n_obs[r0:r1] > 0
        periodic = np.stack([_logmeanexp(ph) for ph in phases], axis=1)
        periodic[ruled_out] = -np.inf
        return ChunkLikelihoods(np.concatenate([poisson, periodic], axis=1), phases)


def row_posteriors(ll: np.ndarray, log_prior: np.ndarray) -> np.ndarray:
    """Row-normalized exp(ll + log_prior), stable in log space."""
    z: np.ndarray = ll + log_prior
    z -= z.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    return z


def log_weights(w: np.ndarray) -> np.ndarray:
    """log of prior weights, a weight of 0 giving -inf without a warning."""
    with np.errstate(divide="ignore"):
        out: np.ndarray = np.log(w)
    return out
