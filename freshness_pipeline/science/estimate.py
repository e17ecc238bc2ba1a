"""Change-rate estimation from interval-censored fetches (Cho & Garcia-Molina, ACM TOIT 2003).

Each fetch says only "changed or not since the previous fetch". Treating a changed interval as
one change over the whole interval (the exposure count) underestimates every page that changes
about as often as we look (−50 % at λΔ = 1) and feeds a loop in which busy pages are fetched
less and look quieter still. The censored likelihood counts what the observation really says:
P(unchanged) = e^{−λΔ}, P(changed) = 1 − e^{−λΔ}.

url_state does not report this estimate: its ``change_rate`` is the posterior mean (and
``change_rate_median`` the median) under the change prior it refits each cycle
(science.prior.table.posterior_rates). The fixed class prior here
sat far below the populations the pages came from (a change a week for a page without a class),
its cap for a page changed at every visit is the sampling rate however fast the page, and it
reads a clock page's content ages as Poisson ages, about twice the clock's rate: on webs of
clock, bursty and fast pages url_state's rates were biased low (docs/estimator_patterns.md).
The observation lists, class keys and age rules below are the ones both use; the estimate
stays as the comparison the benchmarks measure.

Model: changes are Poisson with rate λ per day; prior λ ~ Gamma(α, β) per URL class (α pseudo
changes seen over β pseudo days). The estimate is the fixed point of the EM map

    λ ← (α + X) / (β + S_unchanged + Σ_changed E[τ | τ < Δ]),   E[τ | τ < Δ] = 1/λ − Δ/(e^{λΔ} − 1)

i.e. a changed interval contributes the expected time until its first change rather than the
whole interval. This is the posterior mode under Gamma(α + 1, β) and within ~1 % of the exact
posterior mean. Plain EM iteration converges very slowly exactly where it
matters (when most intervals saw a change, the missing information is nearly everything), so
the same fixed point is found with a safeguarded Newton method on the equivalent equation
λ(β + S_u) = α + Σ_changed φ(λΔ), φ(x) = x/(e^x − 1), whose left side increases and right side
decreases in λ: the root is unique and Newton from the exposure estimate (always below it)
climbs monotonically to it in a handful of steps.

When every observed interval saw a change, the data only say "at least as fast as we sample":
the likelihood has no maximum, and the estimate is the sampling rate λ* at which half an
unchanged interval was to be expected, Σ_i e^{−λ*Δ_i} = 1/2, capped at max_rate_per_day and
flagged ``rate_is_lower_bound``. At n regular visits that is ln(2n)/Δ, next to ln(2n + 1)/Δ,
the largest finite value of Cho's estimator. With unequal intervals every interval counts by
how likely it was to be seen unchanged, so one short interval does not set the rate alone
(ln(2n + 1)/shortest interval would), and one more changed interval adds a term to the sum,
so it never lowers the estimate. The class prior is not let pull such a page down: its
pseudo-exposure of "no change" held an all-changed page near 3 changes per interval after 20
fetches however fast it was, which cost 0.02 of median |log error| over pages within 10x of the
sampling rate (0.318 -> 0.295, docs/scheduling.md, estimator table).

Old observations can be discounted (exponential forgetting, ``obs_half_life_days`` column or
``HALF_LIFE_DAYS``): each observation then counts 2^(−age/h) in both sums. Off by default: on
the benchmark's bursty web it bought under 0.5 % of freshness and on the periodic web it cost
up to 2 % (docs/scheduling.md), because it throws away evidence that stationary pages need; it
is there for page types known to change behaviour.

Content ages (``AGE_COLUMN``): a fetch that finds changed content may also tell how long ago it
changed (a trusted Last-Modified header). A changed interval whose last change is known to be a
days before the fetch has likelihood λ e^{−λa} instead of the censored 1 − e^{−λΔ}: it is one
change over an exposure of a (the conjugate update α + 1, β + a) and leaves the censored sum.
A page changed at every visit is then no longer only bounded below once one of its changes
carries an age.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import numpy as np
import polars as pl

__all__ = [
    "AGE_COLUMN",
    "DEFAULT_CLASS",
    "FIRST_LOOK_SPAN_DAYS",
    "PRIORS_BY_CLASS",
    "aligned_ages",
    "append_observations",
    "by_class",
    "class_prior",
    "class_key",
    "clean_ages",
    "estimate_rates",
    "prior_columns",
    "prior_mean",
    "with_first_looks",
    "without_first_look",
]

DEFAULT_CLASS = "default"

#: url_state list column of content ages, aligned with ``obs_interval_days``: per fetch, the days
#: since the content last changed (server Date minus a trusted Last-Modified), null = unknown. A
#: null list (or no column) means no age is known for that row.
AGE_COLUMN = "obs_age_days"
#: How many observations a page's history keeps (the newest)
MAX_OBS = 64
#: An age up to this share (plus ``_AGE_SLACK_DAYS``) past its interval is rounding (clock skew,
#: second-resolution headers) and is clipped to the interval; a larger one is not trusted.
_AGE_SLACK = 1e-3
_AGE_SLACK_DAYS = 1e-6

#: (alpha, beta in days) per URL class: prior mean alpha/beta changes per day. The
#: pseudo-exposure beta is at most one day: it weighs like a day of observation, so a few
#: fetches override it. A beta of 7 days still biases a daily page
#: −15 % after 50 daily fetches; the benchmark (docs/scheduling.md) measured the median
#: |log error| at 20 fetches over pages within 10x of the sampling rate at 0.35 with
#: (0.5, 3.5) and 0.29 with (1/7, 1), at no cost in freshness (freshness barely depends on
#: the prior, rate reports do). Means by page type, as crawlers commonly revisit them:
#: index 6 h, listing 1 d, detail 3 d, archive 30 d.
PRIORS_BY_CLASS: dict[str, tuple[float, float]] = {
    "index": (0.5, 0.125),  # home pages, section fronts: ~4 changes/day
    "feed": (0.5, 0.125),  # RSS/Atom, JSON feeds: ~4/day
    "listing": (0.5, 0.5),  # hubs, category and search listings: ~1/day
    "product": (1 / 3, 1.0),  # price / stock pages: ~1 per 3 days
    "detail": (1 / 3, 1.0),  # generic detail pages: ~1 per 3 days
    "article": (1 / 7, 1.0),  # news or blog posts: ~1/week (corrections, comments)
    "archive": (1 / 30, 1.0),  # dated archives: ~1/month
    "static": (1 / 90, 1.0),  # about, legal, docs: ~1 per 90 days
    DEFAULT_CLASS: (1 / 7, 1.0),  # unknown: ~1/week
}

#: Half-life (days) of the exponential forgetting of old observations; None keeps the whole
#: window at full weight. Overridden per row by an ``obs_half_life_days`` column.
HALF_LIFE_DAYS: float | None = None

_MIN_BETA = 1e-12
_SMALL_X = 1e-4


def prior_mean(url_class: str | None = None) -> float:
    """Prior mean rate (changes/day) of a class; the default for unknown or missing classes."""
    key = (url_class or DEFAULT_CLASS).strip().lower()
    alpha, beta = PRIORS_BY_CLASS.get(key, PRIORS_BY_CLASS[DEFAULT_CLASS])
    return alpha / beta


def class_key(url_class: pl.Expr) -> pl.Expr:
    """URL classes compare trimmed and case-blind; a missing or empty class is the default.

    Every table keyed by class (priors, credits, bytes per page type, the change prior) goes
    through this one rule, so a class spelt " Article" in a seed file finds its entries."""
    key = url_class.cast(pl.String).str.strip_chars().str.to_lowercase()
    return pl.when(key.str.len_chars() > 0).then(key).otherwise(pl.lit(DEFAULT_CLASS))


def by_class(url_class: pl.Expr, table: Mapping[str, float], default: float) -> pl.Expr:
    """``table``'s number for each row's class (:func:`class_key`), ``default`` if it has none."""
    return class_key(url_class).replace_strict(
        dict(table), default=default, return_dtype=pl.Float64
    )


def class_prior(url_class: pl.Expr, part: Literal["alpha", "beta", "mean"]) -> pl.Expr:
    """The class prior's ``part`` (α, β, or its mean α/β) for each row's class: the default
    class's for a class without one."""
    table = {
        k: {"alpha": a, "beta": b, "mean": a / b}[part] for k, (a, b) in PRIORS_BY_CLASS.items()
    }
    return by_class(url_class, table, table[DEFAULT_CLASS])


def prior_columns(df: pl.DataFrame, class_col: str = "url_class") -> pl.DataFrame:
    """Add ``prior_alpha`` and ``prior_beta`` from the URL class (default for unknown/null)."""
    if class_col not in df.columns:
        alpha, beta = PRIORS_BY_CLASS[DEFAULT_CLASS]
        return df.with_columns(
            prior_alpha=pl.lit(alpha, dtype=pl.Float64), prior_beta=pl.lit(beta, dtype=pl.Float64)
        )
    return df.with_columns(
        prior_alpha=class_prior(pl.col(class_col), "alpha"),
        prior_beta=class_prior(pl.col(class_col), "beta"),
    )


def append_observations(
    state: pl.DataFrame, observations: pl.DataFrame, *, max_obs: int = MAX_OBS
) -> pl.DataFrame:
    """Append this cycle's (interval, changed) to each URL's history, keeping the last ``max_obs``.

    Observations with a null, non-finite or non-positive interval are ignored: a re-run of a
    cycle with the same ``now`` yields a zero interval, which carries no information and would
    otherwise count as a free "unchanged". Observations for URLs absent from ``state`` are
    ignored (the state defines the universe); a URL observed twice is a caller bug and raises.

    Content ages: ``observations`` may carry ``age_days`` (Float64, null = unknown). When it
    does or ``state`` has ``AGE_COLUMN``, the result has ``AGE_COLUMN`` kept aligned with the
    interval lists: a row's null age list is padded with nulls to its history's length before
    the new age is appended, and it is cut to the last ``max_obs`` like the others. Without
    either, the result has no age column (exactly as before ages existed).
    """
    if max_obs < 1:
        raise ValueError("max_obs must be >= 1")
    if observations["url"].is_duplicated().any():
        raise ValueError("observations must hold at most one row per url")
    with_ages = AGE_COLUMN in state.columns or "age_days" in observations.columns
    obs = observations.select(
        pl.col("url"),
        pl.col("interval_days").cast(pl.Float64).alias("_obs_interval"),
        pl.col("changed").cast(pl.Boolean).alias("_obs_changed"),
        *(
            [
                (
                    pl.col("age_days").cast(pl.Float64)
                    if "age_days" in observations.columns
                    else pl.lit(None, dtype=pl.Float64)
                ).alias("_obs_age")
            ]
            if with_ages
            else []
        ),
    ).filter(
        pl.col("_obs_interval").is_finite()
        & (pl.col("_obs_interval") > 0)
        & pl.col("_obs_changed").is_not_null()
    )
    list_f = pl.List(pl.Float64)
    list_b = pl.List(pl.Boolean)
    base = state.with_columns(
        pl.col("obs_interval_days").cast(list_f), pl.col("obs_changed").cast(list_b)
    )
    if with_ages:
        base = base.with_columns(aligned_ages(base).alias(AGE_COLUMN))
    if obs.height == 0:
        return base
    joined = base.join(obs, on="url", how="left", maintain_order="left")
    has = pl.col("_obs_interval").is_not_null()

    def appended(history: str, new: str, dtype: pl.List) -> pl.Expr:
        """``history`` with this cycle's ``new`` value at its end (kept to ``max_obs``)."""
        grown = pl.concat_list(pl.col(history).fill_null(pl.lit([], dtype=dtype)), pl.col(new))
        return pl.when(has).then(grown.list.tail(max_obs)).otherwise(pl.col(history)).alias(history)

    lists = [
        appended("obs_interval_days", "_obs_interval", list_f),
        appended("obs_changed", "_obs_changed", list_b),
    ]
    if with_ages:
        # base's ages are aligned already: null only where the intervals are, so both lists
        # start from the same length and the new age lands beside the new interval
        lists.append(appended(AGE_COLUMN, "_obs_age", list_f))
    return joined.with_columns(lists).drop(
        "_obs_interval", "_obs_changed", *(["_obs_age"] if with_ages else [])
    )


def _null_list_like(intervals: str) -> pl.Expr:
    """A list of nulls (Float64) as long as each row's ``intervals`` list (null stays null)."""
    return pl.col(intervals).list.eval(pl.element().cast(pl.Float64) * pl.lit(None, pl.Float64))


def aligned_ages(state: pl.DataFrame, intervals: str = "obs_interval_days") -> pl.Series:
    """``AGE_COLUMN`` as a List(Float64) series aligned with ``intervals``: a null list (or no
    column) becomes as many nulls as the row's intervals (null where the intervals are null).

    A non-null age list of another length than the row's intervals raises ValueError: the
    ages could not be matched to their fetches.
    """
    list_f = pl.List(pl.Float64)
    if AGE_COLUMN not in state.columns:
        return state.select(_null_list_like(intervals).cast(list_f).alias(AGE_COLUMN))[AGE_COLUMN]
    frame = state.select(
        pl.col(intervals).cast(list_f).alias("_d"), pl.col(AGE_COLUMN).cast(list_f).alias("_a")
    )
    bad = frame.select(
        (
            pl.col("_a").is_not_null()
            & (pl.col("_a").list.len() != pl.col("_d").list.len().fill_null(0))
        ).any()
    ).item()
    if bad:
        raise ValueError(f"{AGE_COLUMN} must be null or as long as {intervals} in every row")
    return frame.select(
        pl.when(pl.col("_a").is_null())
        .then(_null_list_like("_d"))
        .otherwise(pl.col("_a"))
        .alias(AGE_COLUMN)
    )[AGE_COLUMN]


def clean_ages(age: np.ndarray, interval: np.ndarray) -> np.ndarray:
    """Usable content ages of changed intervals: an age in [0, Δ] as is, one a hair past Δ
    (at most Δ·1.001 + 1e-6 days: clock skew, header rounding) clipped to Δ; NaN otherwise
    (unknown, negative, or too long to be the age of a change inside the interval)."""
    age = np.asarray(age, dtype=np.float64)
    interval = np.asarray(interval, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        ok = (
            np.isfinite(age) & (age >= 0) & (age <= interval * (1.0 + _AGE_SLACK) + _AGE_SLACK_DAYS)
        )
    return np.where(ok, np.minimum(age, interval), np.nan)


# ---------------------------------------------------------------------------------------------
# The censored estimator


def _phi_and_slope(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """φ(x) = x/(e^x − 1) and φ'(x), stable from x → 0 (φ → 1) to x → ∞ (φ → 0)."""
    small = x < _SMALL_X
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        xs = np.where(small, 1.0, x)
        phi = np.where(small, 1.0 - x / 2.0 + x * x / 12.0, xs / np.expm1(xs))
        # φ'(x) = (φ/x)(1 − x/(1 − e^{−x})); no e^{2x} so nothing overflows before φ underflows
        slope = np.where(small, -0.5 + x / 6.0, (phi / xs) * (1.0 - xs / -np.expm1(-xs)))
    return phi, slope


def _flatten_with_ages(
    state: pl.DataFrame,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(row index, interval, changed, content age) of every valid observation, as flat numpy
    arrays; the ages (NaN = unknown) are None when the state has no ``AGE_COLUMN`` or no age
    in it is known."""
    with_ages = AGE_COLUMN in state.columns and state[AGE_COLUMN].null_count() < state.height
    lists = state.select(
        pl.col("obs_interval_days").cast(pl.List(pl.Float64)).alias("d"),
        pl.col("obs_changed").cast(pl.List(pl.Boolean)).alias("c"),
    )
    mismatch = lists.select(
        (pl.col("d").list.len().fill_null(0) != pl.col("c").list.len().fill_null(0)).any()
    ).item()
    if mismatch:
        raise ValueError("obs_interval_days and obs_changed must have equal lengths per row")
    columns = ["d", "c"]
    if with_ages:
        lists = lists.with_columns(aligned_ages(state).alias("a"))
        columns.append("a")
    flat = (
        lists.with_row_index("row")
        .explode(columns)
        .filter(pl.col("d").is_finite() & (pl.col("d") > 0) & pl.col("c").is_not_null())
    )
    age = None
    if with_ages:
        age = flat["a"].fill_null(np.nan).to_numpy().astype(np.float64, copy=False)
        if not np.isfinite(age).any():
            age = None
    return (
        flat["row"].to_numpy().astype(np.int64, copy=False),
        flat["d"].to_numpy().astype(np.float64, copy=False),
        flat["c"].to_numpy().astype(bool, copy=False),
        age,
    )


def _prior_arrays(state: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    default_alpha, default_beta = PRIORS_BY_CLASS[DEFAULT_CLASS]
    priors = state.select(
        pl.col("prior_alpha").cast(pl.Float64).fill_null(default_alpha).fill_nan(default_alpha),
        pl.col("prior_beta").cast(pl.Float64).fill_null(default_beta).fill_nan(default_beta),
    )
    alpha = np.clip(priors["prior_alpha"].to_numpy(), 0.0, None)
    beta = np.clip(priors["prior_beta"].to_numpy(), _MIN_BETA, None)
    return alpha, beta


def _solve_censored(
    alpha: np.ndarray,
    beta: np.ndarray,
    s_unchanged: np.ndarray,
    n_changes: np.ndarray,
    s_changed: np.ndarray,
    c_row: np.ndarray,
    c_len: np.ndarray,
    stop_at: np.ndarray,
    iterations: int,
    c_weight: np.ndarray | None = None,
) -> np.ndarray:
    """Root of λ(β + S_u) = α + Σ_changed w φ(λΔ) per row, by monotone Newton from below.

    ``c_weight`` (default 1) discounts old changed intervals; S_u and the change count are then
    the caller's discounted sums, and the equation keeps its shape (and its unique root).

    Rows whose iterate passes ``stop_at`` stop there: the caller caps them anyway, and for the
    all-changed rows with a weak prior the root may be astronomically large.
    """
    n = alpha.shape[0]
    slope_const = beta + s_unchanged
    # the exposure estimate, <= the root
    lam: np.ndarray = (alpha + n_changes) / (beta + s_unchanged + s_changed)
    active = (n_changes > 0) & (lam < stop_at)
    # Rows without a changed interval have a linear equation: solved exactly, no iteration.
    no_change = n_changes == 0
    lam[no_change] = alpha[no_change] / slope_const[no_change]
    entries = np.flatnonzero(active[c_row])
    for _ in range(max(iterations, 1)):
        if not active.any():
            break
        rows_e = c_row[entries]
        phi, slope = _phi_and_slope(lam[rows_e] * c_len[entries])
        cw = 1.0 if c_weight is None else c_weight[entries]
        sum_phi = np.bincount(rows_e, weights=cw * phi, minlength=n)
        sum_slope = np.bincount(rows_e, weights=cw * c_len[entries] * slope, minlength=n)
        h = lam * slope_const - alpha - sum_phi
        h_prime = slope_const - sum_slope  # > 0: φ is decreasing
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(active, -h / h_prime, 0.0)
        # Concavity makes Newton monotone from below; the guard only absorbs rounding.
        step = np.where(np.isfinite(step), np.maximum(step, 0.0), lam)
        new = lam + step
        converged = step <= 1e-12 * np.maximum(lam, 1e-300)
        lam = np.where(active, new, lam)
        active = active & ~converged & (lam < stop_at)
        entries = entries[active[c_row[entries]]]
    return lam


def _sampling_rate(
    row: np.ndarray, d: np.ndarray, rows: np.ndarray, n_obs: np.ndarray, iterations: int = 60
) -> np.ndarray:
    """λ* with Σ_i e^{−λ*Δ_i} = 1/2 for the masked rows (NaN elsewhere).

    The left side is convex and decreasing in λ, so Newton from ln(2n)/longest interval (where
    the sum is at least 1/2) climbs monotonically to the root.
    """
    n = rows.shape[0]
    entries = np.flatnonzero(rows[row])
    r, dd = row[entries], d[entries]
    longest = np.zeros(n)
    np.maximum.at(longest, r, dd)
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.where(rows, np.log(2.0 * n_obs) / longest, np.nan)
    active = rows.copy()
    for _ in range(iterations):
        e = np.exp(-lam[r] * dd)
        f = np.bincount(r, weights=e, minlength=n) - 0.5
        slope = -np.bincount(r, weights=dd * e, minlength=n)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(active & (slope < 0), -f / slope, 0.0)
        step = np.maximum(np.nan_to_num(step, nan=0.0, posinf=0.0), 0.0)
        lam = lam + step
        active = active & (step > 1e-12 * lam)
        if not active.any():
            break
    return lam


def _forgetting_weights(state: pl.DataFrame, row: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Weight 2^{−age/h} of each observation, age = days from its end to the latest fetch.

    h comes from an ``obs_half_life_days`` column when the state has one (null or
    non-positive: no forgetting for that row), else from ``HALF_LIFE_DAYS``. Why forget:
    a page whose behaviour changes (bursts, a site redesign, a section going quiet) would
    otherwise be judged by the average of its whole window for as long as the window lasts.
    """
    if "obs_half_life_days" in state.columns:
        h = state["obs_half_life_days"].cast(pl.Float64).fill_null(np.inf).to_numpy()
        h = np.where(np.isfinite(h) & (h > 0), h, np.inf)
    elif HALF_LIFE_DAYS is not None and HALF_LIFE_DAYS > 0:
        h = np.full(state.height, float(HALF_LIFE_DAYS))
    else:
        return np.ones(d.shape[0])
    if d.shape[0] == 0:
        return np.ones(0)
    # rows are contiguous and in list order after the explode: age = what follows in the row
    cs = np.cumsum(d)
    first = np.searchsorted(row, row, side="left")
    within = cs - (cs[first] - d[first])
    total = np.bincount(row, weights=d, minlength=state.height)
    age = total[row] - within
    weight: np.ndarray = np.exp2(-age / h[row])
    return weight


_ESTIMATE_COLUMNS = ("change_rate", "n_obs", "n_changes", "rate_is_lower_bound")


def estimate_rates(
    state: pl.DataFrame,
    *,
    max_rate_per_day: float = 96.0,
    iterations: int = 40,
    only_rows: pl.Series | np.ndarray | None = None,
) -> pl.DataFrame:
    """Add ``change_rate``, ``n_obs``, ``n_changes`` and ``rate_is_lower_bound`` to ``state``.

    Needs ``obs_interval_days`` (list[f64]), ``obs_changed`` (list[bool]), ``prior_alpha`` and
    ``prior_beta``; reads ``AGE_COLUMN`` (list[f64], content ages) when present (module
    docstring: an aged change is one change over exposure a, and a page changed at every visit
    with at least one aged change is not a lower bound). Null or empty history gives the prior
    mean α/β. Invalid observations (null, non-positive or non-finite interval) are skipped.
    Vectorized over all rows: one bincount per Newton step over the flattened observations;
    ``iterations`` bounds the steps, which are typically 3–8 (about 6 s for 1M URLs x 20
    observations on 2 cores, benchmarks/scale_plan.py).

    ``only_rows`` (a boolean mask, one entry per row; null counts as False) makes the update
    incremental: only those rows are re-estimated and every other row keeps the four columns it
    already has. Why: a cycle adds an observation to the few pages it fetched, and a row's
    estimate depends only on its own history and prior, so re-solving the other 90 % gives back
    the numbers they already hold (exactly, bit for bit) at most of the cost of a cycle. A row
    outside the mask is still estimated when ``state`` lacks any of the four columns or that row
    has a null or non-finite ``change_rate`` or a null count or flag (a page new to the state).
    The caller must put in the mask every row whose history, prior (``url_class``) or
    ``obs_half_life_days`` changed since its stored estimate; ``None`` (the default)
    re-estimates every row from its whole history, as before.
    """
    if max_rate_per_day <= 0:
        raise ValueError("max_rate_per_day must be positive")
    if only_rows is None or not all(c in state.columns for c in _ESTIMATE_COLUMNS):
        lam, n_obs, n_changes, lower_bound = _estimate_arrays(state, max_rate_per_day, iterations)
    else:
        lam, n_obs, n_changes, lower_bound = _estimate_some(
            state, _row_mask(only_rows, state.height), max_rate_per_day, iterations
        )
    return state.with_columns(
        pl.Series("change_rate", lam, dtype=pl.Float64),
        pl.Series("n_obs", n_obs, dtype=pl.Int64),
        pl.Series("n_changes", n_changes, dtype=pl.Int64),
        pl.Series("rate_is_lower_bound", lower_bound, dtype=pl.Boolean),
    )


def _row_mask(only_rows: pl.Series | np.ndarray, n: int) -> np.ndarray:
    if isinstance(only_rows, pl.Series):
        if only_rows.dtype != pl.Boolean:
            raise ValueError("only_rows must be a boolean mask")
        mask = only_rows.fill_null(False).to_numpy()
    else:
        mask = np.asarray(only_rows)
        if mask.dtype != np.bool_:
            raise ValueError("only_rows must be a boolean mask")
    if mask.ndim != 1 or mask.shape[0] != n:
        raise ValueError(f"only_rows has {mask.shape[0]} entries for {n} rows")
    return mask


def _estimate_some(
    state: pl.DataFrame, mask: np.ndarray, max_rate_per_day: float, iterations: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The stored estimates, with the masked rows (and rows without a usable estimate) redone."""
    kept = state.select(
        pl.col("change_rate").cast(pl.Float64),
        pl.col("n_obs").cast(pl.Int64),
        pl.col("n_changes").cast(pl.Int64),
        pl.col("rate_is_lower_bound").cast(pl.Boolean),
    )
    unusable = kept.select(
        pl.col("change_rate").is_null()
        | ~pl.col("change_rate").is_finite()
        | pl.any_horizontal(pl.col("n_obs", "n_changes", "rate_is_lower_bound").is_null())
    ).to_series()
    redo = np.flatnonzero(mask | unusable.fill_null(True).to_numpy())
    lam = kept["change_rate"].fill_null(np.nan).to_numpy().copy()
    n_obs = kept["n_obs"].fill_null(0).to_numpy().copy()
    n_changes = kept["n_changes"].fill_null(0).to_numpy().copy()
    lower_bound = kept["rate_is_lower_bound"].fill_null(False).to_numpy().copy()
    if redo.shape[0]:
        subset = state[redo] if redo.shape[0] < state.height else state
        sub = _estimate_arrays(subset, max_rate_per_day, iterations)
        lam[redo], n_obs[redo], n_changes[redo], lower_bound[redo] = sub
    return lam, n_obs, n_changes, lower_bound


def _estimate_arrays(
    state: pl.DataFrame, max_rate_per_day: float, iterations: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(change_rate, n_obs, n_changes, rate_is_lower_bound) of every row, from its history."""
    n = state.height
    alpha, beta = _prior_arrays(state)
    row, d, c, age = _flatten_with_ages(state)
    n_obs = np.bincount(row, minlength=n)
    n_changes = np.bincount(row[c], minlength=n)
    wt = _forgetting_weights(state, row, d)
    s_unchanged = np.bincount(row[~c], weights=wt[~c] * d[~c], minlength=n)
    lower_bound = (n_obs > 0) & (n_changes == n_obs)
    if age is not None:
        # a changed interval with a known content age a: one change over exposure a
        # (likelihood λ e^{−λa}, the conjugate update α + 1, β + a); it leaves the censored set
        a = clean_ages(age, d)
        aged = c & np.isfinite(a)
        if aged.any():
            alpha = alpha + np.bincount(row[aged], weights=wt[aged], minlength=n)
            s_unchanged = s_unchanged + np.bincount(
                row[aged], weights=wt[aged] * a[aged], minlength=n
            )
            lower_bound &= np.bincount(row[aged], minlength=n) == 0
            c = c & ~aged
    x_w = np.bincount(row[c], weights=wt[c], minlength=n)
    s_changed = np.bincount(row[c], weights=wt[c] * d[c], minlength=n)

    cap = np.full(n, float(max_rate_per_day))
    stop_at = np.where(lower_bound, 0.0, cap)  # those rows take the sampling rate: no root
    lam = _solve_censored(
        alpha, beta, s_unchanged, x_w, s_changed, row[c], d[c], stop_at, iterations, wt[c]
    )
    lam = np.minimum(np.where(np.isfinite(lam), lam, cap), cap)
    if lower_bound.any():
        sampled = _sampling_rate(row, d, lower_bound, n_obs)
        lam = np.where(lower_bound, np.minimum(sampled, cap), lam)
    return lam, n_obs, n_changes, lower_bound


#: How long before its dated moment a first look's change is put (with_first_looks): a
#: changed interval must hold its age, and its score does not depend on this once it does.
FIRST_LOOK_SPAN_DAYS = 1 / 1440


def with_first_looks(
    state: pl.DataFrame, dating: pl.Expr, *, max_obs: int = MAX_OBS
) -> pl.DataFrame:
    """``state`` with the observation a page's first fetch makes put first in its history, on
    the rows of hosts whose Last-Modified dates content changes (``dating``): the content last
    changed ``first_look_age_days`` before that fetch, and not since. Without it a page's first
    fetch said nothing of its rate, so a page unchanged for a year was fetched again and again
    until its own fetches said so (re-fetches of never-changing pages were the largest loss of
    a held-out web against its oracle). It is the changed observation a dated fetch makes
    later (scored as the density λ e^{−λa}, science.prior.likelihood), over an interval just
    longer than the age; a page created then, not changed, reads as changed then, which at the
    ages that matter here (long unchanged) weighs as little as it should.

    A host earns that trust from the changes its pages show after their first fetches, so the
    age waits in ``first_look_age_days`` (null once used) and goes in front, where it belongs
    in time, in the cycle the host is trusted, whether the page is fetched in it or not. A
    history cut to ``max_obs`` no longer starts at the first fetch: its age is left unused.
    ``_first_look_now`` marks the rows that took one."""
    age = pl.col("first_look_age_days")
    now = (
        age.is_not_null() & dating & (pl.col("obs_interval_days").list.len().fill_null(0) < max_obs)
    )

    def first(column: str, value: pl.Expr, dtype: pl.List) -> pl.Expr:
        history = pl.col(column).fill_null(pl.lit([], dtype=dtype))
        grown = pl.concat_list(value, history)
        return pl.when(now).then(grown).otherwise(pl.col(column)).alias(column)

    return state.with_columns(
        first("obs_interval_days", age + FIRST_LOOK_SPAN_DAYS, pl.List(pl.Float64)),
        first("obs_changed", pl.lit(True), pl.List(pl.Boolean)),
        first(AGE_COLUMN, age, pl.List(pl.Float64)),
        pl.when(now).then(None).otherwise(age).alias("first_look_age_days"),
        now.alias("_first_look_now"),
    )


def without_first_look(state: pl.DataFrame, distrusted: pl.Expr) -> pl.DataFrame:
    """``state`` with the first-look observation (with_first_looks) taken out of the histories of
    the ``distrusted`` rows: unlike a later observation, which a fetch saw change or not,
    it rests on the header alone, so a host that loses its trust loses it whole (its age
    gone, it would still say "changed in the days before the first look"). It is a history's
    first observation, the only one whose interval exceeds its age by FIRST_LOOK_SPAN_DAYS."""
    interval, age = pl.col("obs_interval_days"), pl.col(AGE_COLUMN)
    lead = interval.list.first() - age.list.first()
    drop = distrusted & ((lead - FIRST_LOOK_SPAN_DAYS).abs() < 1e-9).fill_null(False)
    return state.with_columns(
        pl.when(drop).then(pl.col(c).list.slice(1)).otherwise(pl.col(c)).alias(c)
        for c in ("obs_interval_days", "obs_changed", AGE_COLUMN)
    )
