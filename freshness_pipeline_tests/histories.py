"""url_state-like frames of observation histories, for the estimator tests."""

from __future__ import annotations

import polars as pl

from freshness_pipeline.science.estimate import AGE_COLUMN

LIST_F = pl.List(pl.Float64)
LIST_B = pl.List(pl.Boolean)


def history_frame(intervals, changed, ages=None, alpha=0.5, beta=3.5) -> pl.DataFrame:
    """One row per history (urls u0, u1, ...) under one Gamma(alpha, beta) prior; ``ages``
    (content ages, aligned with the intervals) becomes AGE_COLUMN when given."""
    n = len(intervals)
    cols = {
        "url": [f"u{i}" for i in range(n)],
        "obs_interval_days": pl.Series(intervals, dtype=LIST_F),
        "obs_changed": pl.Series(changed, dtype=LIST_B),
        "prior_alpha": [alpha] * n,
        "prior_beta": [beta] * n,
    }
    if ages is not None:
        cols[AGE_COLUMN] = pl.Series(ages, dtype=LIST_F)
    return pl.DataFrame(cols)
