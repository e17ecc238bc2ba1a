"""The prior's weights by EM over every page's history (the nonparametric maximum
likelihood mixing distribution), shrunk per class towards the global fit, so that a
small class borrows from the whole web and a large one keeps its own shape."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import polars as pl

from freshness_pipeline.science.prior.components import (
    GLOBAL,
    Classes,
    Components,
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
    "CACHE_CELLS",
    "fit_grid_prior",
]

#: :func:`fit_grid_prior` keeps the pages' log-likelihoods between EM iterations when they fit
#: in this many numbers (2**24 float64 = 128 MB: 300,000 pages at 51 components); beyond it
#: each iteration recomputes them chunk by chunk (the slow part of a pass).
CACHE_CELLS = 1 << 24


def fit_grid_prior(
    histories: Histories | pl.DataFrame,
    classes: Classes = None,
    *,
    components: Components = Components(),  # noqa: B008 - frozen dataclass, safe as a default
    previous_weights: Mapping[str, np.ndarray] | None = None,
    iterations: int = 5,
    shrinkage: float = 500.0,
    support_floor: float = 1e-6,
    max_rows: int | None = None,
    chunk_cells: int = CHUNK_CELLS,
    cache_cells: int = CACHE_CELLS,
) -> dict[str, np.ndarray]:
    """Prior weights on the ``components`` (grid rates, then clocks) per URL class, by EM
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
    h = as_histories(histories)
    grid, periods = components.grid_array, components.periods
    start = components.start()
    c = start.shape[0]
    if iterations < 0 or shrinkage < 0 or not 0 <= support_floor < 1:
        raise ValueError("need iterations >= 0, shrinkage >= 0, 0 <= support_floor < 1")
    if max_rows is not None and max_rows < 1:
        raise ValueError("max_rows must be >= 1")
    names, codes = row_classes(classes, h.n_rows)
    prev = dict(previous_weights or {})
    glob = components.weight_matrix(prev, [GLOBAL])[0]
    table = components.weight_matrix(prev, names)

    with_data = np.flatnonzero(h.n_obs > 0)
    if max_rows is not None and with_data.shape[0] > max_rows:
        with_data = with_data[np.linspace(0, with_data.shape[0] - 1, max_rows).astype(np.int64)]
    sub = histories_of_rows(h, with_data)
    sub_codes = codes[with_data]
    # one class holding every page is the global fit (and needs one E-step, not two)
    single = len(names) == 1
    if single:
        table = glob[None, :].copy()
    lik = ChunkedLikelihood(sub, grid, periods, components.mismatch, chunk_cells)
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
        log_glob, log_table = log_weights(glob), log_weights(table)
        for ll, cc in chunks():
            post = row_posteriors(ll, log_glob[None, :])
            acc_glob += post.sum(axis=0)
            if not single:
                post = row_posteriors(ll, log_table[cc])
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
