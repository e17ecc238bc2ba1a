"""What the assets call: the ``change_prior`` table's rows (refit each cycle, read back
the next) and, under them, url_state's rates and the plan's gains. Frames in and frames
out, so that the assets stay thin and all of this is testable without Dagster."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import polars as pl

from freshness_pipeline.science.estimate import AGE_COLUMN, aligned_ages
from freshness_pipeline.science.prior.components import (
    DEFAULT_PERIODS,
    GLOBAL,
    Components,
    Period,
    checked_grid,
    class_codes,
    class_keys,
    normalized_weights,
)
from freshness_pipeline.science.prior.fit import fit_grid_prior
from freshness_pipeline.science.prior.histories import (
    Histories,
    flatten_histories,
    histories_from_arrays,
)
from freshness_pipeline.science.prior.posterior import posterior_summary
from freshness_pipeline.science.timecols import (
    DAY_US,
    as_utc,
    duration_days,
    utc_column,
    utc_literal,
)

__all__ = [
    "ChangeModel",
    "GAIN_COLUMN",
    "RATE_COLUMNS",
    "component_table",
    "expected_gains",
    "latest_fit_before",
    "posterior_gains",
    "posterior_rates",
    "prior_weights",
    "refit_change_prior",
    "weights_frame",
    "weights_from_frame",
    "with_dated_hint",
]


@dataclass(frozen=True)
class ChangeModel(Components):
    """The components the assets fit and score (every clock of DEFAULT_PERIODS by default)
    and the fitting knobs (see the module docstring)."""

    periods: tuple[Period, ...] = DEFAULT_PERIODS
    #: EM iterations per cycle, warm-started from the stored weights
    iterations: int = 3
    shrinkage: float = 500.0
    #: the prior is fit on at most this many pages with observations (an even sample)
    max_fit_rows: int = 100_000

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.iterations < 0 or self.shrinkage < 0 or self.max_fit_rows < 1:
            raise ValueError("need iterations >= 0, shrinkage >= 0, max_fit_rows >= 1")


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
    names, codes = class_codes(rows["url_class"].filter(pl.Series(usable)))
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


def _usable(h: Histories, model: ChangeModel) -> Components:
    """The model's components, without its clocks when the observations' times are unknown."""
    return model if h.has_times else model.without_clocks()


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
    classes = class_keys(state["url_class"] if "url_class" in state.columns else None, state.height)
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
        components=_usable(hist, model),
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
    start = model.start()
    g = len(model.grid)
    floored: np.ndarray = np.r_[w * (1.0 - start[g:].sum()), start[g:]]
    return floored


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
        hist = flatten_histories(with_dated_hint(candidates, now), anchor=anchor)
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
            / DAY_US
        )
        .to_series()
        .fill_null(math.inf)
        .to_numpy()
        .astype(np.float64)
    )
    if "hinted_change" in cols:
        hinted = candidates["hinted_change"].cast(pl.Boolean).fill_null(False).to_numpy()
        age = np.where(hinted, math.inf, age)
    usable = _usable(hist, model)
    weights = prior_weights(latest_fit_before(prior, now), model)
    if not usable.periods and model.periods:
        weights = _matching(weights, model, hist)
    summary = posterior_summary(
        hist,
        weights,
        candidates["url_class"] if "url_class" in cols else None,
        components=usable,
        age_days=age,
        now_days=now_utc.timestamp() / 86_400.0,
    )
    return summary.select("expected_index", "expected_capture")


def with_dated_hint(candidates: pl.DataFrame, now: datetime) -> pl.DataFrame:
    """``candidates`` with the change a trusted sitemap lastmod dates since the last fetch
    already in each history: an interval from ``last_seen_at`` to ``now``, changed
    ``lastmod_age_days`` before ``now`` and quiet since, as url_state records it once the
    fetch confirms (science.hints). The quiet time is known before the fetch, and it is what
    tells a page that has stopped from one that goes on changing: a live blog seen changed at
    every fetch of its busy day was believed at 30-95 changes a day, so a fetch of it bought a
    minute of freshness and its copy stayed mid-event for weeks after its lastmod, a day old,
    said it had stopped (found by an exploratory run on a news publisher's web). Rows without
    a dated hint, or a frame without these columns, are left as they are."""
    needed = {"hinted_change", "lastmod_age_days", "last_seen_at", "obs_interval_days"}
    if not needed <= set(candidates.columns):
        return candidates
    interval = duration_days(utc_literal(now) - utc_column(candidates, "last_seen_at"))
    quiet = pl.col("lastmod_age_days").cast(pl.Float64)
    dated = (
        pl.col("hinted_change").cast(pl.Boolean)
        & quiet.is_finite()
        & (quiet >= 0)
        & (interval > quiet)
    ).fill_null(False)
    if not candidates.select(dated.any()).item():
        return candidates  # most cycles of most crawls: the histories as they are, uncopied

    def grown(history: str, new: pl.Expr, dtype: pl.DataType) -> pl.Expr:
        listed = pl.col(history).cast(pl.List(dtype)).fill_null(pl.lit([], dtype=pl.List(dtype)))
        return pl.when(dated).then(pl.concat_list(listed, new)).otherwise(pl.col(history))

    return candidates.with_columns(aligned_ages(candidates).alias(AGE_COLUMN)).with_columns(
        grown("obs_interval_days", interval, pl.Float64()),
        grown("obs_changed", pl.lit(True), pl.Boolean()),
        grown(AGE_COLUMN, quiet, pl.Float64()),
        pl.when(dated)
        .then(utc_literal(now))
        .otherwise(utc_column(candidates, "last_seen_at"))
        .alias("last_seen_at"),
    )


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
    classes = class_keys(state["url_class"] if "url_class" in state.columns else None, n)
    has_history = (state["obs_interval_days"].list.len().fill_null(0) > 0).to_numpy()
    rows = np.flatnonzero(has_history)
    anchor = "last_seen_at" if "last_seen_at" in state.columns else None
    part = state[rows] if rows.shape[0] < n else state
    hist = flatten_histories(part, anchor=anchor)
    usable = _usable(hist, model)
    use = _matching(weights, model, hist) if not usable.periods and model.periods else weights
    summary = posterior_summary(
        hist, use, classes.gather(rows) if rows.shape[0] < n else classes, components=usable
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
        prior_only = posterior_summary(empty, weights, names, components=model)
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


# ------------------------------------------------------------ weights as a long frame


def weights_frame(weights: Mapping[str, np.ndarray], grid: np.ndarray) -> pl.DataFrame:
    """Long table (url_class, rate_per_day, weight) of Poisson-only weights (no periods)."""
    grid = checked_grid(grid)
    rows = []
    for name in sorted(weights):
        w = normalized_weights(weights[name], grid.shape[0], name)
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
            grid = checked_grid(rates)
        elif rates.shape != grid.shape or not np.allclose(rates, grid, rtol=1e-12):
            raise ValueError("all classes must share one grid")
        out[str(name)] = normalized_weights(part["weight"].to_numpy(), grid.shape[0], str(name))
    if grid is None:
        raise ValueError("empty weights frame")
    return grid, out
