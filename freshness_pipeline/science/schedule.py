"""Which pages to fetch this cycle: value x freshness a fetch buys / cost, within budget and politeness.

The freshness objective (Cho & Garcia-Molina 2003) is maximised by fetching a page when its
Lagrangian index

    W(a) = (1/λ) g(λa),  g(r) = 1 − (1 + r) e^{−r}

(a = days since the last fetch) times value / cost crosses the budget's shadow price. Greedy on
that index each cycle reproduces the solved optimum to 2e-4 in simulation
without knowing the revisit interval. W is bounded by 1/λ, so a page changing far faster than
the budget can follow gets little priority however stale it is: chasing it buys minutes of
freshness. Rules that grow with λ·age send the budget exactly there and lose to round robin.
A fetch is credited with at most ``horizon_days`` of freshness: the index of a page with no
copy, E[1/λ] under the prior, is otherwise set by the prior's slowest rates (hundreds of days),
and every first copy outranked every revisit whatever the pages were worth.

Two objectives:

* ``"freshness"`` (default): the share of time our copy matches the live page. Index above.
* ``"capture"``: every change matters individually (prices, stock, edits). The gain is the
  probability that at least one change happened since the last fetch, 1 − e^{−λa}; fast pages
  get *more* fetches. Use it when missing an event costs, not when a stale copy costs.

Uncertainty: when the candidates say how sure each rate is (``n_changes`` with the class
prior's α, or ``rate_shape``), both gains are averaged over the Gamma posterior of λ instead of
taken at its mean (:func:`posterior_freshness_index`). After one or two fetches a rate is known
only within decades; the averaged index ranks a thinly observed page below a well known one of
the same estimate early on and above it once it has gone unvisited long, so thin evidence gets
re-checked instead of being trusted or starved. With ``posterior_index=False`` or without those
columns the point index is used. A trusted sitemap hint (``hinted_change``, see
:mod:`freshness_pipeline.science.hints`) overrides the guess: True = certainly stale, False = a
fetch buys only the chance that the host's lastmod missed a change (its recall, ``hint_recall``,
weighed by Bayes against the model's chance of a change). A moved lastmod on a host whose moved
lastmods are too often wrong to be trusted (``hint_likelihood``) weighs the same way the other
way: the gain grows by the chance of a change it adds.

The plan is filled in this order, each step capped per host by ``host_capacity`` and globally by
``budget``:

1. ``floor``: anything not fetched for ``max_interval_days`` (oldest first, at most
   ``floor_share`` of the budget per cycle; past ``floor_hard_factor`` times that interval
   without a cap), so no page is forgotten whatever its estimate;
2. ``delisted``: pages a complete read of their host's sitemaps no longer lists, not fetched
   since (a ``delisted`` column), most valuable first, within ``delisted_share``: a page that
   left an honest sitemap has most likely gone, and one fetch says so;
3. reserved shares of the budget: ``new`` URLs (a seed that reads as a sitemap or feed
   first: what it lists waits to be found until it is read; then those published since the
   crawl's first read of their host, the share growing with how many of them wait; then by
   value), ``reestimate`` (long-quiet or barely observed pages, but not those a trusted
   lastmod says are unchanged: that is the look a fetch would buy; and gone pages once their
   wait is over (see :func:`gone_recheck_wait_days`): the estimator only learns from what the
   scheduler fetches, so pages it starves would stay misjudged forever; a page gone since its
   last fetch only first, then the most overdue, weighted by value per cost, see
   ``reestimate_order``), ``probe`` (pages seen changed at every fetch, fetched again soon
   after the last one, so that an interval short enough to miss a change bounds the rate from
   above, or, once their last fetch is a day old and twice their longest interval, again to
   see whether they stopped: see ``probe_share`` and ``dormancy_min_days``), and a random
   ``verify`` sample that checks the model on pages it would not choose, fetched without
   validators: one page first from each host, or route of a host, whose validators are
   unproven (an ``unproven_scope`` column naming it: 304s so far and never a change seen
   through them, science.unproven), since a stuck validator hides changes behind 304s until
   a body shows it. A host with pages never fetched after the new pass keeps its probes and
   the checks of pages seen too few times for later: a first copy buys more than a second
   look;
4. ``priority``: the rest of the budget, including any unused reserve, by priority.

Beyond the budget the plan ranks a reserve (``reserve_rank``): the next best buys by priority
that still fit their hosts' capacity. When a host defers some of its share at fetch time (its
breaker opens, it asks for a pause longer than the cycle), the fetch stage spends what it left
on the reserve's first rows of the other hosts, so a host that stops taking fetches costs the
cycle nothing but its own pages.

Hard guarantees: selected <= budget; per host selected <= capacity (a host missing from
``host_capacity`` has capacity 0: capacity is the politeness contract, not a hint); blocked never
selected; gone only through the re-estimation rule; no page re-fetched sooner than
``min_interval_days``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import numpy as np
import polars as pl

from freshness_pipeline.science.estimate import class_prior
from freshness_pipeline.science.gains import posterior_capture_gain, posterior_freshness_index
from freshness_pipeline.science.hints import changed_hint_odds, unchanged_hint_odds
from freshness_pipeline.science.host_turns import fill, host_rooms, host_turn, share_of_rooms
from freshness_pipeline.science.normalize import looks_like_listing
from freshness_pipeline.science.timecols import as_utc, duration_days, utc_column

__all__ = [
    "ERRORS_BEFORE_ERROR_STATUS",
    "Objective",
    "PlanConfig",
    "REASONS",
    "REFILL_REASON",
    "build_plan",
    "error_recheck_wait_days",
    "gone_recheck_wait_days",
]

#: failed fetches in a row after which a URL's status is 'error' (url_state)
ERRORS_BEFORE_ERROR_STATUS = 3

#: what the plan ranks by: the freshness a fetch buys, or the chance it catches a change
Objective = Literal["freshness", "capture"]

REASONS = ("floor", "delisted", "new", "reestimate", "probe", "verify", "priority")
#: The reason of a reserve row that the fetch stage fetched with budget another host left.
REFILL_REASON = "refill"


@dataclass(frozen=True)
class PlanConfig:
    """Knobs of :func:`build_plan`; shares are fractions of the cycle's budget."""

    objective: Objective = "freshness"
    new_share: float = 0.10
    #: the most of the budget the early checks of pages their sitemap stopped listing may take
    delisted_share: float = 0.10
    #: the new share grows to cover URLs discovered since the start (sitemaps, feeds,
    #: redirects; a ``discovered`` column), up to this share of the budget, and they go first
    #: within it: a page published since the crawl began is what a fresh copy most lacks, and a
    #: backlog of never-fetched seeds must not keep it waiting cycle after cycle
    discovery_max_share: float = 0.30
    #: the most of a host's capacity the new pass may take: a host of few fetches a cycle spent
    #: them all on its backlog for weeks, its most valuable pages stale; the rest goes by
    #: priority, where a first copy still wins when it is worth more
    new_host_share: float = 0.5
    reestimate_share: float = 0.05
    #: the most of the budget short-interval re-checks may take: a page seen changed at every
    #: fetch, all of them far apart, is fetched again soon after its last fetch (see
    #: ``probe_max_ratio``). Such a history says only "at least as fast as we sample": a page
    #: changing once a day and one changing ten times a day leave the same record when fetched
    #: days apart, and no estimator can tell them apart until an interval short enough to
    #: miss a change of the slower one is observed
    probe_share: float = 0.04
    #: a re-check counts as a probe when the interval it observes is at most this share of the
    #: shortest interval the page's history holds
    probe_max_ratio: float = 0.5
    #: a page seen changed at every fetch is also a probe once its last fetch is this many
    #: days old and at least twice the longest interval its history holds: such a page is
    #: believed too fast to keep fresh and left, and only a fetch can say it stopped (a
    #: finished live blog, a sale that ended, a hot page gone cold); the checks space out by
    #: doubling while it keeps changing
    dormancy_min_days: float = 1.0
    verify_share: float = 0.02
    #: no page is fetched again sooner than this (1 hour): politeness and zero-information guard
    min_interval_days: float = 1.0 / 24.0
    #: staleness floor: a page older than this is forced in before anything else, within
    #: ``floor_share`` of the budget
    max_interval_days: float = 30.0
    #: the most of the cycle's budget the floor may take (oldest first; the rest waits): a
    #: budget too small to revisit every page within ``max_interval_days`` would otherwise go
    #: to the floor, whatever the pages are worth (docs/scheduling.md measures it); 1 = uncapped
    floor_share: float = 0.05
    #: the hard limit, as a multiple of ``max_interval_days``: a page this overdue is forced in
    #: whatever the floor's share, so the cap can delay a page but never forget it
    floor_hard_factor: float = 2.0
    #: active pages not fetched for this many days are re-estimation candidates
    reestimate_after_days: float = 14.0
    #: active pages with fewer observations than this (needs an ``n_obs`` column) likewise
    reestimate_min_obs: int = 2
    #: a page that just answered 404 or 410 is checked again after this many days: a 404 may be
    #: a deploy glitch or a page briefly unpublished, and a page that came back should not stay
    #: out of the copy for a month
    gone_first_recheck_days: float = 1.0
    #: the wait between checks of a gone page once a second answer confirmed it (see
    #: :func:`gone_recheck_wait_days`)
    gone_recheck_days: float = 30.0
    #: which re-estimation candidates go first: ``"value"`` ranks them by how overdue they are
    #: (days since the last fetch over ``reestimate_after_days``, or over a gone page's wait)
    #: times value / cost, so the share goes where a misjudged rate costs most (a thin estimate
    #: of a page worth 100x is checked before a stale one of a page worth little; the floor
    #: still reaches every page); ``"age"``: the most overdue first, value only breaking ties
    reestimate_order: Literal["value", "age"] = "value"
    #: combined with ``now`` to draw the verification sample: same (seed, now) -> same plan
    seed: int = 0
    #: costs are clipped to at least this, so a zero cost cannot make a priority infinite
    min_cost: float = 1e-6
    #: the most days of freshness a fetch is credited with (objective "freshness"): the index
    #: of a page with no copy, E[1/λ], is otherwise dominated by the prior's slowest rates, and
    #: a first copy of a page worth 1 outranked every revisit of a page worth 100
    horizon_days: float = 14.0
    #: rank by the index averaged over the rate's posterior when the candidates say how sure
    #: the estimate is (``rate_shape``, or ``n_changes`` with the class prior); else the point
    posterior_index: bool = True

    def __post_init__(self) -> None:
        if self.objective not in ("freshness", "capture"):
            raise ValueError(f"objective must be 'freshness' or 'capture', not {self.objective!r}")
        if self.reestimate_order not in ("value", "age"):
            raise ValueError(
                f"reestimate_order must be 'value' or 'age', not {self.reestimate_order!r}"
            )
        if not 0.0 < self.new_host_share <= 1.0:
            raise ValueError("new_host_share must be in (0, 1]")
        shares = (self.new_share, self.reestimate_share, self.probe_share, self.verify_share)
        if any(not 0.0 <= s <= 1.0 for s in shares) or sum(shares) > 1.0:
            raise ValueError("shares must be in [0, 1] and sum to at most 1")
        if not 0.0 <= self.delisted_share <= 1.0:
            raise ValueError("delisted_share must be in [0, 1]")
        if not 0.0 <= self.discovery_max_share <= 1.0:
            raise ValueError("discovery_max_share must be in [0, 1]")
        if not 0.0 <= self.floor_share <= 1.0:
            raise ValueError("floor_share must be in [0, 1]")
        if not self.floor_hard_factor >= 1.0:
            raise ValueError("floor_hard_factor must be >= 1")
        if not 0.0 <= self.min_interval_days < self.max_interval_days:
            raise ValueError("need 0 <= min_interval_days < max_interval_days")
        if not 0.0 < self.probe_max_ratio <= 1.0:
            raise ValueError("probe_max_ratio must be in (0, 1]")
        if not self.dormancy_min_days > 0:
            raise ValueError("dormancy_min_days must be positive")
        if self.reestimate_after_days <= 0 or self.gone_recheck_days <= 0:
            raise ValueError("reestimate_after_days and gone_recheck_days must be positive")
        if not 0.0 < self.gone_first_recheck_days <= self.gone_recheck_days:
            raise ValueError("need 0 < gone_first_recheck_days <= gone_recheck_days")
        if self.min_cost <= 0:
            raise ValueError("min_cost must be positive")
        if not self.horizon_days > 0:
            raise ValueError("horizon_days must be positive")


#: a gone answer within this of the first one is that same answer (one minute)
_SAME_ANSWER_DAYS = 1.0 / 1440.0


def gone_recheck_wait_days(gone_for_days: pl.Expr, config: PlanConfig) -> pl.Expr:
    """Days a gone page waits after its last fetch before it is checked again.

    ``gone_for_days``: from the first gone answer (``gone_at``) to the last fetch. A page that
    has answered gone once is checked again soon (``gone_first_recheck_days``), so that a 404
    blip (a deploy glitch, a page briefly unpublished) costs the copy a day, not a month; a
    second gone answer confirms it, and from then on it waits ``gone_recheck_days``: most gone
    pages stay gone, and every recheck takes a slot of the re-estimation share from a live
    page. Unknown (null) means the page has been gone a long time: the longest wait.
    """
    return (
        pl.when(gone_for_days < _SAME_ANSWER_DAYS)
        .then(pl.lit(config.gone_first_recheck_days))
        .otherwise(pl.lit(config.gone_recheck_days))
        .fill_null(config.gone_recheck_days)
    )


def error_recheck_wait_days(consecutive_errors: pl.Expr, config: PlanConfig) -> pl.Expr:
    """Days a URL in status 'error' waits after its last failed fetch before it is tried
    again: ``gone_first_recheck_days`` after the failure that made it an error, doubling with
    each failure since, up to ``gone_recheck_days``. A page that refuses us (401, 403, 451),
    a redirect loop or a server that never answers was otherwise tried every few cycles for
    ever (the reserved shares reach every known page), each time a slot a live page lacked
    and, for a hanging server, a timeout's worth of a host's time."""
    beyond = consecutive_errors.fill_null(ERRORS_BEFORE_ERROR_STATUS) - ERRORS_BEFORE_ERROR_STATUS
    wait = config.gone_first_recheck_days * (2.0 ** beyond.clip(0, 30).cast(pl.Float64))
    return wait.clip(upper_bound=config.gone_recheck_days)


def _prepare(candidates: pl.DataFrame, now: datetime, config: PlanConfig) -> pl.DataFrame:
    """Typed working frame: one row per candidate with the columns the fill needs."""
    cols = set(candidates.columns)
    missing = {"url", "host", "status"} - cols
    if missing:
        raise ValueError(f"candidates lack columns: {sorted(missing)}")
    now_lit = pl.lit(as_utc(now)).dt.cast_time_unit("us")

    def opt(name: str, default: pl.Expr) -> pl.Expr:
        return pl.col(name) if name in cols else default

    last = (
        utc_column(candidates, "last_fetched_at")
        if "last_fetched_at" in cols
        else pl.lit(None, dtype=pl.Datetime("us", "UTC"))
    )
    url_class = opt("url_class", pl.lit(None, dtype=pl.String))
    rate_in = opt("change_rate", pl.lit(None, dtype=pl.Float64)).cast(pl.Float64)
    value_in = opt("value", pl.lit(1.0)).cast(pl.Float64)
    cost_in = opt("cost", pl.lit(1.0)).cast(pl.Float64)
    n_obs = opt("n_obs", pl.lit(None, dtype=pl.Int64)).cast(pl.Int64)
    # Posterior shape: given directly, or the class prior's α plus the changes seen (the
    # Gamma that estimate_rates' EM fixed point is the mean of). Absent: point estimates.
    if "rate_shape" in cols:
        shape = pl.col("rate_shape").cast(pl.Float64)
    elif "n_changes" in cols:
        shape = class_prior(url_class, "alpha") + pl.col("n_changes").cast(pl.Float64)
    else:
        shape = None
    if not config.posterior_index:
        shape = None
    # an estimate that was not ours (null/invalid rate -> prior mean) has the prior's shape
    shape = (
        pl.lit(None, dtype=pl.Float64)
        if shape is None
        else pl.when(rate_in.is_finite() & (rate_in >= 0))
        .then(shape)
        .otherwise(class_prior(url_class, "alpha"))
    )

    # Pages whose every observation saw a change: their rate is only bounded below, and a fetch
    # soon after the last one is what can bound it above (``_shortest``: the shortest interval
    # their history holds; null for the others). ``_dated``: some change came with a content
    # age, which already says more than "changed".
    if {"obs_interval_days", "obs_changed"} <= cols:
        changed = pl.col("obs_changed").cast(pl.List(pl.Boolean))
        unresolved = (changed.list.len() > 0) & changed.list.all()
        intervals = pl.col("obs_interval_days").cast(pl.List(pl.Float64))
        shortest: pl.Expr = pl.when(unresolved).then(intervals.list.min())
        longest: pl.Expr = pl.when(unresolved).then(intervals.list.max())
    else:
        shortest = longest = pl.lit(None, dtype=pl.Float64)
    dated = (
        pl.col("obs_age_days")
        .cast(pl.List(pl.Float64))
        .list.eval(pl.element().is_finite())
        .list.any()
        .fill_null(False)
        if "obs_age_days" in cols
        else pl.lit(False)
    )

    work = candidates.select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("_idx"),
        shortest.cast(pl.Float64).alias("_shortest"),
        longest.cast(pl.Float64).alias("_longest"),
        dated.alias("_dated"),
        pl.col("url").cast(pl.String).alias("_url"),
        looks_like_listing(pl.col("url").cast(pl.String)).fill_null(False).alias("_listing"),
        pl.col("host").cast(pl.String).alias("_host"),
        pl.col("status").cast(pl.String).str.to_lowercase().alias("_status"),
        duration_days(now_lit - last).alias("age_days"),
        pl.when(rate_in.is_finite() & (rate_in >= 0))
        .then(rate_in)
        .otherwise(class_prior(url_class, "mean"))
        .alias("_rate"),
        pl.when(value_in.is_finite())
        .then(value_in.clip(lower_bound=0.0))
        .otherwise(1.0)
        .alias("_value"),
        pl.when(cost_in.is_finite())
        .then(cost_in.clip(lower_bound=config.min_cost))
        .otherwise(1.0)
        .alias("_cost"),
        n_obs.alias("_n_obs"),
        shape.alias("_shape"),
        opt("hinted_change", pl.lit(None, dtype=pl.Boolean)).cast(pl.Boolean).alias("_hint"),
        opt("hint_recall", pl.lit(None, dtype=pl.Float64)).cast(pl.Float64).alias("_recall"),
        opt("hint_likelihood", pl.lit(None, dtype=pl.Float64))
        .cast(pl.Float64)
        .alias("_likelihood"),
        opt("discovered", pl.lit(False)).cast(pl.Boolean).fill_null(False).alias("_discovered"),
        opt("delisted", pl.lit(False)).cast(pl.Boolean).fill_null(False).alias("_delisted"),
        opt("unproven_scope", pl.lit(None, dtype=pl.String)).cast(pl.String).alias("_unproven"),
        opt("expected_gain_override", pl.lit(None, dtype=pl.Float64))
        .cast(pl.Float64)
        .alias("_gain_override"),
        host_turn(candidates, now_lit).alias("_turn"),
        gone_recheck_wait_days(
            duration_days(last - utc_column(candidates, "gone_at"))
            if "gone_at" in cols
            else pl.lit(None, dtype=pl.Float64),
            config,
        ).alias("_gone_wait"),
        error_recheck_wait_days(opt("consecutive_errors", pl.lit(None, dtype=pl.Int64)), config)
        .cast(pl.Float64)
        .alias("_error_wait"),
    ).with_columns(
        pl.col("_status").fill_null(
            pl.when(pl.col("age_days").is_null()).then(pl.lit("new")).otherwise(pl.lit("active"))
        ),
        # the interval a fetch now observes, as a share of the shortest one seen
        pl.when(pl.col("_shortest") > 0)
        .then(pl.col("age_days") / pl.col("_shortest"))
        .alias("_probe_ratio"),
    )
    # A never-fetched page is infinitely stale: its index is the cap 1/λ (capture: 1).
    age_eff = pl.col("age_days").clip(lower_bound=0.0).fill_null(math.inf)
    # A trusted sitemap hint (science.hints) replaces the guess: "changed" means certainly
    # stale (the index at infinite age), "unchanged" means a fetch buys nothing yet.
    hint = pl.col("_hint") if "hinted_change" in cols else None
    if hint is not None:
        age_eff = pl.when(hint.fill_null(False)).then(pl.lit(math.inf)).otherwise(age_eff)
    gain = (
        posterior_freshness_index(pl.col("_rate"), age_eff, pl.col("_shape"))
        if config.objective == "freshness"
        else posterior_capture_gain(pl.col("_rate"), age_eff, pl.col("_shape"))
    )
    if "expected_gain_override" in cols:
        # A gain computed elsewhere (science.prior: the index averaged over an empirical-Bayes
        # posterior) replaces the Gamma/point gain wherever it is a usable number.
        override = pl.col("_gain_override")
        gain = pl.when(override.is_finite() & (override >= 0)).then(override).otherwise(gain)
    if hint is not None:
        gain = (
            pl.when(hint.not_().fill_null(False))
            .then(
                gain * unchanged_hint_odds(pl.col("_recall"), pl.col("_rate"), pl.col("age_days"))
            )
            .otherwise(gain)
        )
    if "hint_likelihood" in cols:
        gain = gain * changed_hint_odds(pl.col("_likelihood"), pl.col("_rate"), pl.col("age_days"))
    if config.objective == "freshness":
        # The index of a page with no copy is E[1/λ] under the prior, the mean of a
        # heavy-tailed quantity: a prior with a little weight near λ = 0 put every
        # never-fetched page at 487 days, above any revisit, and pages worth 100x went
        # unvisited for ten cycles while pages worth 1 got their first copy (found by an
        # exploratory run). A fetch is credited with the freshness it buys over the horizon.
        gain = gain.clip(upper_bound=config.horizon_days)
    return work.with_columns(expected_gain=gain).with_columns(
        priority=pl.col("_value") * pl.col("expected_gain") / pl.col("_cost")
    )


def _rng(seed: int, now: datetime, *, stream: int) -> np.random.Generator:
    """A generator fixed by (seed, now): the same cycle re-planned draws the same numbers."""
    stamp = int(as_utc(now).timestamp() * 1_000_000)
    return np.random.default_rng(np.random.SeedSequence([seed % 2**63, stamp % 2**63, stream]))


def _verify_keys(pool: pl.DataFrame, seed: int, now: datetime) -> pl.DataFrame:
    """Uniform random keys, reproducible per (seed, now) and independent of input row order,
    and ``_vfirst`` on one page drawn by them from each scope (host or route) whose validators
    are unproven."""
    ordered = pool.sort(["_url", "_idx"])
    keys = _rng(seed, now, stream=0).random(ordered.height)
    drawn_first = pl.col("_vkey").rank("ordinal").over("_unproven") == 1
    first = pl.col("_unproven").is_not_null() & drawn_first
    return ordered.with_columns(pl.Series("_vkey", keys)).with_columns(_vfirst=first)


def build_plan(
    candidates: pl.DataFrame,
    host_capacity: pl.DataFrame,
    *,
    now: datetime,
    budget: int | None,
    config: PlanConfig = PlanConfig(),  # noqa: B008 - frozen dataclass, safe as a default
) -> pl.DataFrame:
    """Every candidate row plus ``age_days``, ``expected_gain``, ``priority``, ``reason``,
    ``selected``, ``rank`` (1..k in fill order over selected rows, null otherwise) and
    ``reserve_rank`` (1..m over the next best unselected rows that fit their hosts' capacity).

    ``candidates``: url, host, status ('new'|'active'|'gone'|'blocked'|'error') required;
    value (default 1), url_class, last_fetched_at (null = never), change_rate (null = prior mean
    of the class), cost (default 1, clipped to ``min_cost``); optional n_obs, n_changes or
    rate_shape (how sure the rate is: see :func:`posterior_freshness_index`) and hinted_change
    (a trusted sitemap hint from :func:`freshness_pipeline.science.hints.lastmod_hints`);
    optional unproven_scope (the host or route whose validators are unproven, null where
    they are not: see the verify share above);
    optional gone_at (a gone page's first gone answer, which sets how long it waits: see
    :func:`gone_recheck_wait_days`; without it a gone page waits ``gone_recheck_days``);
    optional expected_gain_override: a precomputed expected gain for the configured objective
    at ``now`` (e.g. ``expected_index`` from
    :func:`freshness_pipeline.science.prior.posterior.posterior_summary`)
    that replaces the computed one where it is finite and >= 0 (null/NaN/negative: computed as
    without the column); a hint of "unchanged" still zeroes it, and for a hint of "changed" the
    caller should pass the gain at infinite age. ``host_capacity``:
    host, capacity (most fetches that host can take this cycle). ``budget=None``: no global
    limit; the reserved shares are then taken of the total usable capacity.
    """
    if budget is not None and budget < 0:
        raise ValueError("budget must be >= 0 or None")
    work = _prepare(candidates, now, config)
    room = host_rooms(host_capacity)
    cfg = config
    rooms_at_start = room

    age = pl.col("age_days")
    status = pl.col("_status")
    spaced = age.is_null() | (
        (age >= cfg.min_interval_days)
        & ((status != "error") | (age >= pl.col("_error_wait"))).fill_null(True)
    )
    not_gone_or_blocked = ~status.is_in(["gone", "blocked"])
    # fetched before and still there; unknown statuses behave like 'active'
    known = ~status.is_in(["gone", "blocked", "new"])
    # A page gone since its last fetch only (one gone answer) is checked first: a 404 that
    # was a deploy glitch keeps a live page out of the copy until then, where a misjudged
    # rate costs a little freshness; competing on overdue-ness with every thinly observed
    # page, it waited cycle after cycle in a small share.
    first_gone_check = (status == "gone") & (pl.col("_gone_wait") < cfg.gone_recheck_days)
    overdue = (
        pl.when(first_gone_check)
        .then(math.inf)
        .when(status == "gone")
        .then(age / pl.col("_gone_wait"))
        .otherwise(age / cfg.reestimate_after_days)
        .fill_null(math.inf)
    )
    worth = pl.col("_value") / pl.col("_cost")
    if cfg.reestimate_order == "value":
        # a worthless page is not worth re-estimating (and ∞ × 0 must not sort first)
        overdue = pl.when(worth > 0).then(overdue * worth).otherwise(0.0)
    work = work.with_columns(
        _floor=spaced & not_gone_or_blocked & (age >= cfg.max_interval_days).fill_null(False),
        _hard=spaced
        & not_gone_or_blocked
        & (age >= cfg.max_interval_days * cfg.floor_hard_factor).fill_null(False),
        _new=spaced & (status == "new"),
        _delist=spaced & not_gone_or_blocked & pl.col("_delisted"),
        _reest=spaced
        & (
            (
                known
                & (
                    (age >= cfg.reestimate_after_days).fill_null(True)
                    | (pl.col("_n_obs") < cfg.reestimate_min_obs).fill_null(False)
                )
                # a trusted lastmod saying "unchanged" is the look a re-estimation would buy
                # (url_state counts it as one): on hosts with honest sitemaps 0-3 % of such
                # fetches found a change, 4-5 % of the budget (found by an exploratory run)
                & pl.col("_hint").fill_null(True)
            )
            | ((status == "gone") & (age >= pl.col("_gone_wait")).fill_null(True))
        ),
        # learning about a page seen once or twice (a thin estimate, a probe), which a host
        # with pages never fetched yet does not do while they wait (see the new pass below)
        _thin=known
        & (age < cfg.reestimate_after_days).fill_null(False)
        & (pl.col("_n_obs") < cfg.reestimate_min_obs).fill_null(False),
        _probe=spaced
        & known
        & (
            (pl.col("_probe_ratio") <= cfg.probe_max_ratio)
            | (
                pl.col("_longest").is_not_null()
                & (age >= pl.max_horizontal(2.0 * pl.col("_longest"), cfg.dormancy_min_days))
            )
        ).fill_null(False),
        _worth=worth,
        _verify=spaced & known,
        _prio=spaced & not_gone_or_blocked & (pl.col("priority") > 0),
        _overdue=overdue,
    )

    if budget is None:
        usable = (
            work.filter(pl.col("_floor") | pl.col("_new") | pl.col("_reest") | pl.col("_prio"))
            .group_by("_host")
            .len()
            .join(room, on="_host", how="inner")
            .select(pl.min_horizontal("len", "_room").sum())
            .item()
        )
        base = int(usable or 0)
    else:
        base = int(budget)
    # Shares of a small budget are fractions of a fetch: round them at random (reproducibly per
    # cycle) so that a 2 % verification share of 10 fetches is one fetch every fifth cycle on
    # average instead of never.
    draws = _rng(cfg.seed, now, stream=1).random(6)
    quotas: dict[str, int | None] = {
        name: math.floor(share * base) + int(draw < share * base - math.floor(share * base))
        for (name, share), draw in zip(
            (
                ("new", cfg.new_share),
                ("reestimate", cfg.reestimate_share),
                ("verify", cfg.verify_share),
                ("floor", cfg.floor_share),
                ("delisted", cfg.delisted_share),
                ("probe", cfg.probe_share),
            ),
            draws,
            strict=True,
        )
    }
    if cfg.floor_share >= 1.0:
        quotas["floor"] = None
    waiting = work.filter(pl.col("_new") & pl.col("_discovered")).height
    discovery = min(waiting, math.floor(cfg.discovery_max_share * base))
    quotas["new"] = max(quotas["new"] or 0, discovery)

    taken_parts: list[pl.DataFrame] = []
    taken_idx = pl.Series("_idx", [], dtype=pl.Int64)
    # what each host got from the passes so far: the next pass's turns go on from there
    taken_by_host = pl.DataFrame(schema={"_host": pl.String, "_taken": pl.Int64})
    remaining = None if budget is None else int(budget)

    def run(reason: str, flag: str, order: list[str], desc: list[bool], quota: int | None) -> None:
        nonlocal room, taken_idx, taken_by_host, remaining
        if remaining is not None:
            quota = remaining if quota is None else min(quota, remaining)
        pool = work.filter(pl.col(flag) & ~pl.col("_idx").is_in(taken_idx.implode()))
        if reason == "verify":
            pool = _verify_keys(pool, cfg.seed, now)
        share = cfg.new_host_share if reason == "new" else 1.0
        rooms = room if share >= 1.0 else share_of_rooms(room, rooms_at_start, share)
        got = fill(pool, rooms, order, desc, quota, taken_by_host)
        if got.height == 0:
            return
        taken_parts.append(got.select("_idx", "_pos", pl.lit(reason).alias("reason")))
        taken_idx = pl.concat([taken_idx, got["_idx"]])
        used = got.group_by("_host").len()
        room = room.join(used, on="_host", how="left").select(
            "_host", (pl.col("_room") - pl.col("len").fill_null(0)).alias("_room")
        )
        taken_by_host = (
            pl.concat(
                [taken_by_host, used.select("_host", pl.col("len").cast(pl.Int64).alias("_taken"))]
            )
            .group_by("_host")
            .agg(pl.col("_taken").sum())
        )
        if remaining is not None:
            remaining -= got.height

    run("floor", "_hard", ["age_days", "_value"], [True, True], None)
    if quotas["floor"] is not None:
        quotas["floor"] = max(0, quotas["floor"] - taken_idx.len())
    run("floor", "_floor", ["age_days", "_value"], [True, True], quotas["floor"])
    run("delisted", "_delist", ["_value", "priority"], [True, True], quotas["delisted"])
    run("new", "_new", ["_listing", "_discovered", "_value", "priority"], [True] * 4, quotas["new"])
    # A host with pages never fetched after the new pass has a backlog: a first copy of one of
    # them buys more than a second look at a page seen once, and the probes and thin-estimate
    # checks of its pages wait until the backlog is fetched. At a budget of 2 % they took a
    # tenth of every cycle while a quarter of the seeds were never fetched, and the crawl lost
    # to round robin (found by an exploratory run). Not a page worth more (value per cost)
    # than every first copy its host has waiting: held, the value-100 pages of a host with
    # value-1 seeds waiting were seen once and then judged by the prior alone for 18 cycles,
    # their fast ones stale all along (found by an exploratory run).
    backlog = (
        work.filter(pl.col("_new") & ~pl.col("_idx").is_in(taken_idx.implode()))
        .group_by("_host")
        .agg(pl.col("_worth").max().alias("_waiting_worth"))
    )
    if backlog.height:
        work = work.join(backlog, on="_host", how="left", maintain_order="left")
        waits = pl.col("_waiting_worth").is_not_null() & (
            pl.col("_worth") <= pl.col("_waiting_worth")
        )
        work = work.with_columns(
            _reest=pl.col("_reest") & ~(waits & pl.col("_thin")),
            _probe=pl.col("_probe") & ~waits,
        ).drop("_waiting_worth")
    run("reestimate", "_reest", ["_overdue", "_value"], [True, True], quotas["reestimate"])
    # undated histories first (nothing else can tell their pages apart), the most valuable
    # next, then the shortest interval relative to what was seen
    run(
        "probe",
        "_probe",
        ["_dated", "_worth", "_probe_ratio"],
        [False, True, False],
        quotas["probe"],
    )
    run("verify", "_verify", ["_vfirst", "_vkey"], [True, False], quotas["verify"])
    run("priority", "_prio", ["priority"], [True], None)
    if budget is None:
        # No global limit: whatever is due for a re-check and still fits its host goes too. A
        # share of a small crawl rounds to nothing, and a gone page due for its check (it has
        # no priority of its own) waited cycle after cycle.
        run("reestimate", "_reest", ["_overdue", "_value"], [True, True], None)
    selected_n = taken_idx.len()
    reserve = fill(
        work.filter(pl.col("_prio") & ~pl.col("_idx").is_in(taken_idx.implode())),
        room,
        ["priority"],
        [True],
        2 * selected_n + 16,  # enough to replace every selected fetch, whichever hosts defer
        taken_by_host,
    ).select("_idx", (pl.col("_pos") + 1).alias("reserve_rank"))

    tier = {r: i for i, r in enumerate(REASONS)}
    if taken_parts:
        chosen = (
            pl.concat(taken_parts)
            .with_columns(
                pl.col("reason").replace_strict(tier, return_dtype=pl.Int64).alias("_tier")
            )
            .sort(["_tier", "_pos"])
            .with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("rank"))
            .select("_idx", "reason", "rank")
        )
    else:
        chosen = pl.DataFrame(schema={"_idx": pl.Int64, "reason": pl.String, "rank": pl.Int64})

    result = (
        work.select("_idx", "age_days", "expected_gain", "priority")
        .join(chosen, on="_idx", how="left", maintain_order="left")
        .join(reserve, on="_idx", how="left", maintain_order="left")
    )
    extra = result.sort("_idx").select(
        "age_days",
        "expected_gain",
        "priority",
        "reason",
        pl.col("reason").is_not_null().alias("selected"),
        "rank",
        "reserve_rank",
    )
    base_cols = candidates.drop([c for c in extra.columns if c in candidates.columns])
    return pl.concat([base_cols, extra], how="horizontal")
