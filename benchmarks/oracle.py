"""The yardstick: the best freshness any scheduler could reach if it knew the true change rates.

Evaluation only (the product never knows the true rates), so it lives with the benchmarks; g
and its inverse are the product's own (``science.intervals``). Benchmarks score a scheduler as
its weighted freshness divided by this optimum on the same synthetic web and seed: absolute
freshness moves by ±0.02 between random webs, the ratio by < 0.001.

Periodic refresh of a page with Poisson rate λ at frequency f keeps it fresh a share
F(λ, f) = (f/λ)(1 − e^{−λ/f}) of the time. Maximising Σ w F(λ, f) subject to Σ f = total is
concave; with r = λ/f, ∂F/∂f = g(r)/λ where g(r) = 1 − (1 + r)e^{−r} rises from 0 to 1, so the
KKT conditions are g(λ/f) = μλ/w, and f = 0 when λ >= w/μ: pages changing faster than the
budget's shadow price allows are not refreshed at all (Cho & Garcia-Molina 2003).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from freshness_pipeline.science.intervals import g_inverse

__all__ = ["optimal_frequencies", "periodic_freshness", "weighted_freshness"]


def periodic_freshness(rate: ArrayLike, freq: ArrayLike) -> np.ndarray:
    """Time-averaged freshness (f/λ)(1 − e^{−λ/f}) of a page refreshed every 1/f days.

    Limits: λ = 0 (never changes) is always fresh, 1; f = 0 with λ > 0 is never fresh, 0;
    small λ/f tends to 1 without cancellation.
    """
    lam = np.asarray(rate, dtype=np.float64)
    f = np.asarray(freq, dtype=np.float64)
    lam, f = np.broadcast_arrays(lam, f)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r = lam / f
        small = r < 1e-8
        out = np.where(small, 1.0 - r / 2.0, -np.expm1(-r) / np.where(small, 1.0, r))
    out = np.where(lam <= 0, 1.0, np.where(f <= 0, 0.0, out))
    return out if out.ndim else out[()]


def weighted_freshness(rates: ArrayLike, weights: ArrayLike, freqs: ArrayLike) -> float:
    """Σ w F(λ, f) / Σ w: the benchmark metric in steady state under periodic refresh."""
    w = np.asarray(weights, dtype=np.float64)
    total = w.sum()
    if total <= 0:
        return float("nan")
    return float((w * periodic_freshness(rates, freqs)).sum() / total)


def _freqs_for(mu: float, lam: np.ndarray, w: np.ndarray, cap: np.ndarray) -> np.ndarray:
    y = mu * lam / w
    r = g_inverse(y)
    with np.errstate(divide="ignore"):
        f = np.where(r > 0, lam / r, np.inf)
    f = np.where(y >= 1.0, 0.0, f)
    capped: np.ndarray = np.minimum(f, cap)
    return capped


def optimal_frequencies(
    rates: ArrayLike,
    weights: ArrayLike,
    total_freq: float,
    max_freq: float | ArrayLike | None = None,
) -> np.ndarray:
    """Refresh frequencies (per day) maximising Σ w F(λ, f) with Σ f = total_freq, 0 <= f <= max.

    Bisection on the multiplier μ (Σ f decreases in μ), with an inner solve of g(λ/f) = μλ/w.
    Pages with λ = 0 or w = 0 gain nothing and get 0; so, if only such pages or caps remain,
    Σ f is the largest attainable total, which may be below ``total_freq``.
    """
    lam = np.asarray(rates, dtype=np.float64).ravel()
    w = np.asarray(weights, dtype=np.float64).ravel()
    if lam.shape != w.shape:
        raise ValueError("rates and weights must have the same length")
    if total_freq < 0:
        raise ValueError("total_freq must be >= 0")
    cap = (
        np.full_like(lam, np.inf)
        if max_freq is None
        else np.broadcast_to(np.asarray(max_freq, dtype=np.float64), lam.shape).astype(np.float64)
    )
    useful = (lam > 0) & (w > 0) & np.isfinite(lam) & (cap > 0)
    out = np.zeros_like(lam)
    if total_freq == 0 or not useful.any():
        return out
    lam_u, w_u, cap_u = lam[useful], w[useful], cap[useful]
    if cap_u.sum() <= total_freq:
        out[useful] = cap_u
        return out

    # At μ = max(w/λ) every page is at the cut-off (f = 0); Σf grows without bound as μ → 0.
    log_hi = float(np.log(np.max(w_u / lam_u)))
    log_lo = log_hi - 2.0
    while _freqs_for(float(np.exp(log_lo)), lam_u, w_u, cap_u).sum() < total_freq:
        log_lo -= 4.0
        if log_lo < log_hi - 1400:  # pragma: no cover - caps make this unreachable
            break
    for _ in range(200):
        mid = 0.5 * (log_lo + log_hi)
        s = _freqs_for(float(np.exp(mid)), lam_u, w_u, cap_u).sum()
        if s > total_freq:
            log_lo = mid
        else:
            log_hi = mid
        if log_hi - log_lo < 1e-15 * max(1.0, abs(log_hi)):
            break
    f = _freqs_for(float(np.exp(0.5 * (log_lo + log_hi))), lam_u, w_u, cap_u)
    # Remove the last rounding residue from the uncapped pages so that Σ f = total exactly.
    free = f < cap_u
    s = f.sum()
    if s > 0 and free.any():
        fixed = f[~free].sum()
        scale = (total_freq - fixed) / f[free].sum() if f[free].sum() > 0 else 1.0
        f[free] = np.minimum(f[free] * scale, cap_u[free])
    out[useful] = f
    return out
