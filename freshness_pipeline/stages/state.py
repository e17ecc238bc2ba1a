"""url_state: one row per canonical URL with its status, validators, change-rate estimate and
next check time, updated from this cycle's fetch results.

Each successful fetch adds one interval-censored observation ("changed or not since the last
time we saw the page"); an observation is added only when the fetch is newer than the last one
recorded, so re-running a cycle never counts the same fetch twice. A first fetch adds one only
where a trusted Last-Modified dates it (science.estimate.with_first_looks). No URL ever leaves
the table: pages that vanish are marked gone, with their history kept. Each cycle also refits
the change prior (table ``change_prior``, science.prior) from these histories: ``change_rate``
is each page's posterior mean under it (``change_rate_median`` its median), and the next plan
scores every page under it.
"""

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import NamedTuple

import numpy as np
import polars as pl

from freshness_pipeline.science.estimate import (
    AGE_COLUMN,
    append_observations,
    with_first_looks,
    without_first_look,
)
from freshness_pipeline.science.fingerprint import content_fingerprint
from freshness_pipeline.science.hints import hint_evidence
from freshness_pipeline.science.intervals import due_age_days
from freshness_pipeline.science.normalize import normalize_url_column, url_path
from freshness_pipeline.science.prior.table import (
    RATE_COLUMNS,
    ChangeModel,
    posterior_rates,
    prior_weights,
    refit_change_prior,
)
from freshness_pipeline.science.retry_after import asks_to_slow_down
from freshness_pipeline.science.schedule import (
    ERRORS_BEFORE_ERROR_STATUS,
    PlanConfig,
    error_recheck_wait_days,
    gone_recheck_wait_days,
)
from freshness_pipeline.science.timecols import DAY_US, duration_days
from freshness_pipeline.warehouse import tables
from freshness_pipeline.web.robots import ALLOW_LIST_REASON

OBSERVED = ["not_modified", "unchanged", "changed"]


def plan_threshold(plan: pl.DataFrame) -> float:
    """The cycle's cut-off: the lowest priority the budget still bought. Zero when the budget
    did not bind (every due page was bought), which makes pages due as soon as allowed."""
    bought = plan.filter(pl.col("selected") & (pl.col("reason") == "priority"))
    not_bought = plan.filter(~pl.col("selected") & (pl.col("status") != "blocked"))
    if bought.is_empty() or not_bought.is_empty():
        return 0.0
    lowest = bought["priority"].min()
    return float(lowest) if isinstance(lowest, int | float) else 0.0  # None: no priority bought


#: what merge_state takes of the candidates, under the names it joins them by
_CANDIDATE_ALIASES = {
    "host": "c_host",
    "value": "c_value",
    "url_class": "c_class",
    "first_seen_at": "c_first_seen",
    "allowed": "c_allowed",
    "lastmod": "c_lastmod",
    "listed_in": "c_listed_in",
    "blocked_reason": "c_blocked_reason",
}
#: what merge_state takes of this cycle's sent results, under the names it joins them by
_RESULT_ALIASES = {
    "fetched_at": "r_at",
    "outcome": "r_outcome",
    "http_status": "r_status",
    "fingerprint": "r_fp",
    "fingerprint_version": "r_fp_version",
    "etag": "r_etag",
    "last_modified": "r_last_modified",
    "location": "r_location",
    "canonical": "r_canonical",
    "content_age_days": "r_age",
    "dates_changes": "r_dates",
    "archived": "r_archived",
    "retry_after_s": "r_retry_after",
}


def merge_state(
    previous: pl.DataFrame, candidates: pl.DataFrame, results: pl.DataFrame, now: datetime
) -> pl.DataFrame:
    """Previous state + new candidates + this cycle's sent results, before re-estimation."""
    prev = tables.conform("url_state", previous)
    for name in ("listed_in", "blocked_reason"):  # a caller that lists no files or reasons
        if name not in candidates.columns:
            candidates = candidates.with_columns(pl.lit(None, dtype=pl.String).alias(name))
    cand = candidates.select("url", *_CANDIDATE_ALIASES).rename(_CANDIDATE_ALIASES)
    # a results frame from before a column existed has it as nulls (conform)
    sent = (
        tables.conform("fetch_results", results)
        .filter(pl.col("sent"))
        .select("url", *_RESULT_ALIASES)
        .rename(_RESULT_ALIASES)
    )
    merged = prev.join(cand, on="url", how="full", coalesce=True).join(sent, on="url", how="left")
    outcome = pl.col("r_outcome")
    success = outcome.is_in(tables.SUCCESS_OUTCOMES)
    changed = outcome == "changed"
    fresh_fetch = pl.col("r_at").is_not_null() & (
        pl.col("last_fetched_at").is_null() | (pl.col("r_at") > pl.col("last_fetched_at"))
    )
    moved = fresh_fetch & (outcome == "redirect")
    merged = with_redirect_loops(
        merged.with_columns(
            _target=pl.when(moved)
            .then("r_location")
            .when(fresh_fetch & success)
            .then(None)
            .otherwise("redirect_to")
        ),
        moved,
    )
    # A redirect that closes a loop (two URLs sending the reader to each other, as a cookie
    # wall does) leads to no page: it fails like an error, its cost growing with each one. A
    # server asking us to slow down says nothing of the page: its errors neither count nor
    # clear (the host's pace and hold answer them).
    slowed = (outcome == "error") & asks_to_slow_down(pl.col("r_status"), pl.col("r_retry_after"))
    is_error = ((outcome == "error") & ~slowed) | pl.col("_loop")
    # Held back by this machine's network allow-list (FRESHNESS_ALLOW_NETWORKS unset for a
    # cycle) is no word of the site's: every page kept what it was, where a cycle run so
    # made each one 'blocked', and its gone pages came back 'active' (a contract audit).
    held_back = pl.col("c_blocked_reason").str.starts_with(ALLOW_LIST_REASON).fill_null(False)
    new_status = (
        pl.when(held_back)
        .then(pl.col("status").fill_null("new"))
        .when(pl.col("c_allowed").fill_null(True).not_())
        .then(pl.lit("blocked"))
        .when(fresh_fetch & (outcome == "gone"))
        .then(pl.lit("gone"))
        .when(fresh_fetch & success)
        .then(pl.lit("active"))
        .when(
            fresh_fetch
            & is_error
            & (pl.col("consecutive_errors").fill_null(0) + 1 >= ERRORS_BEFORE_ERROR_STATUS)
        )
        .then(pl.lit("error"))
        # A URL that answers with a redirect is known, not new: left 'new' it took a slot of
        # the share for new pages every cycle, for ever; as 'active' it is planned by priority
        # (a permanent redirect at a second copy's cost), with redirect_to saying where it goes.
        .when(fresh_fetch & (outcome == "redirect"))
        .then(pl.lit("active"))
        .when(pl.col("status") == "blocked")
        .then(
            # a page gone when robots.txt shut it out is still gone when it lets it in
            pl.when(pl.col("last_outcome") == "gone")
            .then(pl.lit("gone"))
            .when(pl.col("last_seen_at").is_null())
            .then(pl.lit("new"))
            .otherwise(pl.lit("active"))
        )
        .otherwise(pl.col("status").fill_null("new"))
    )
    observed = fresh_fetch & outcome.is_in(OBSERVED) & pl.col("last_seen_at").is_not_null()
    interval = duration_days(pl.col("r_at") - pl.col("last_seen_at"))
    # A candidate's class is this cycle's word, none included: the plan fetched the page as
    # that class, and a URL a narrowed match pattern no longer finds must not keep the old
    # one for retention and redirect targets. A URL no longer among the candidates keeps
    # what it had.
    candidate = pl.col("c_host").is_not_null()
    return merged.with_columns(
        host=pl.coalesce("host", "c_host"),
        value=pl.coalesce("c_value", "value", pl.lit(1.0)),
        url_class=pl.when(candidate).then("c_class").otherwise("url_class"),
        # the earlier of the two: a cycle dated before the newest (a backfill) sees the URL
        # earlier than the state said, as the inventory it read does
        first_seen_at=pl.coalesce(
            pl.min_horizontal("first_seen_at", "c_first_seen"), pl.lit(now).cast(tables.UTC_TIME)
        ),
        status=new_status,
        observed_interval=pl.when(observed).then(interval),
        observed_changed=pl.when(observed).then(changed),
        # Only a change can be dated, and only within the interval it was seen in: content
        # dated before our previous look, yet changed since, means the header lags.
        observed_age=pl.when(observed & changed & (pl.col("r_age") <= interval)).then("r_age"),
        # the content's age at the page's first fetch ever, until it is used (with_first_looks)
        first_look_age_days=pl.when(
            fresh_fetch
            & (outcome == "new")
            & pl.col("last_seen_at").is_null()
            & (pl.col("r_age") > 0)
        )
        .then("r_age")
        .otherwise("first_look_age_days"),
        observed_since=pl.when(observed).then(pl.col("last_seen_at")),
        # A new class means a new prior: that row's estimate must be redone too.
        class_changed=candidate & pl.col("c_class").ne_missing(pl.col("url_class")),
        last_fetched_at=pl.when(fresh_fetch).then("r_at").otherwise("last_fetched_at"),
        last_seen_at=pl.when(fresh_fetch & success).then("r_at").otherwise("last_seen_at"),
        last_changed_at=pl.when(fresh_fetch & changed).then("r_at").otherwise("last_changed_at"),
        fingerprint=pl.when(fresh_fetch & pl.col("r_fp").is_not_null())
        .then("r_fp")
        .otherwise("fingerprint"),
        fingerprint_version=pl.when(fresh_fetch & pl.col("r_fp").is_not_null())
        .then("r_fp_version")
        .otherwise("fingerprint_version"),
        etag=pl.when(fresh_fetch & success & pl.col("r_etag").is_not_null())
        .then("r_etag")
        .otherwise("etag"),
        last_modified=pl.when(fresh_fetch & success & pl.col("r_last_modified").is_not_null())
        .then("r_last_modified")
        .otherwise("last_modified"),
        last_outcome=pl.when(fresh_fetch).then(outcome).otherwise("last_outcome"),
        last_http_status=pl.when(fresh_fetch).then("r_status").otherwise("last_http_status"),
        redirect_to=pl.col("_target"),
        # a page's canonical link as last seen; a new version without one has none (an
        # identical body is not read again, so its answer says nothing of it)
        canonical=pl.when(fresh_fetch & pl.col("r_canonical").is_not_null())
        .then("r_canonical")
        .when(fresh_fetch & outcome.is_in(["new", "changed"]))
        .then(None)
        .otherwise("canonical"),
        gone_at=pl.when(fresh_fetch & (outcome == "gone"))
        .then(pl.coalesce("gone_at", "r_at"))
        .when(fresh_fetch & success)
        .then(None)
        .otherwise("gone_at"),
        # what the archive holds of the page (its last original), and when page_versions last
        # took a version of it (every new or changed body is one)
        archived=pl.when(fresh_fetch & pl.col("r_archived").is_not_null())
        .then("r_archived")
        .otherwise("archived"),
        version_observed_at=pl.when(fresh_fetch & outcome.is_in(["new", "changed"]))
        .then("r_at")
        .otherwise("version_observed_at"),
        n_fetches=pl.col("n_fetches").fill_null(0) + fresh_fetch.cast(pl.Int64),
        n_not_modified=pl.col("n_not_modified").fill_null(0)
        + (fresh_fetch & (outcome == "not_modified")).cast(pl.Int64),
        consecutive_errors=pl.when(fresh_fetch & is_error)
        .then(pl.col("consecutive_errors").fill_null(0) + 1)
        .when(fresh_fetch & ~slowed)
        .then(0)
        .otherwise(pl.col("consecutive_errors").fill_null(0)),
    )


def with_redirect_loops(merged: pl.DataFrame, moved: pl.Expr) -> pl.DataFrame:
    """``merged`` (with each URL's redirect target as of this cycle in ``_target``) with
    ``_loop``: the URL was just ``moved`` to a URL whose own target is the URL again. Targets
    are compared normalized, as the URLs are stored; only this cycle's redirects and their
    targets pay for it (normalizing is a Python call per URL)."""
    just = merged.filter(moved).select("url", "_target")
    if just.is_empty():
        return merged.with_columns(_loop=pl.lit(False))
    just = just.with_columns(_key=normalize_url_column(just["_target"])["url"])
    onward = (
        merged.join(just.select(pl.col("_key").alias("url")).unique(), on="url", how="semi")
        .select(pl.col("url").alias("_key"), "_target")
        .filter(pl.col("_target").is_not_null())
    )
    onward = onward.with_columns(_back=normalize_url_column(onward["_target"])["url"])
    looped = just.join(onward.select("_key", "_back"), on="_key").filter(
        pl.col("_back") == pl.col("url")
    )["url"]
    return merged.with_columns(_loop=moved & pl.col("url").is_in(looped.implode()))


class StateUpdate(NamedTuple):
    """What one cycle's url_state update writes."""

    #: url_state rows
    state: pl.DataFrame
    #: this cycle's grading of sitemap lastmod hints (lastmod_evidence rows)
    grades: pl.DataFrame
    #: change_prior rows after this cycle's refit (the next plan scores pages under them)
    change_prior: pl.DataFrame


def update_state(
    previous: pl.DataFrame,
    candidates: pl.DataFrame,
    results: pl.DataFrame,
    plan: pl.DataFrame,
    now: datetime,
    config: PlanConfig | None = None,
    change_prior: pl.DataFrame | None = None,
    model: ChangeModel = ChangeModel(),  # noqa: B008 - frozen dataclass, safe as a default
) -> StateUpdate:
    """The whole state update: merge, add observations, refit the change prior (warm-started
    from ``change_prior``, the table's rows for these hosts), re-estimate rates under it, set
    next checks; also returns this cycle's grading of sitemap lastmod hints.

    ``change_rate`` is the posterior mean (``change_rate_median`` the median) under the prior
    this cycle fits (science.prior.table.posterior_rates): the population the page belongs to, not a
    fixed class prior, is what a thinly observed page is judged against. Only rows whose
    history, class or ages moved are re-scored, and rows without a history (their class
    prior's, one number per class); the others keep the estimate of the fit they were last scored under, which
    moves little from one cycle to the next.

    Content ages: ``results.dates_changes`` says whether the fetch stage found the host's
    Last-Modified fit to date content changes (validators.content_age_trust). On such hosts a
    changed fetch keeps the content's age in ``obs_age_days``, which the estimates read as
    "changed then, not since". Where the header gives no age, a sitemap lastmod the plan found
    fit to date changes does (``plan.lastmod_age_days``, science.hints): quiet since the
    lastmod up to the cycle's start. A host fetched this cycle with neither trusted loses every
    age it has, also those kept while it was trusted, so a host that starts lying stops
    steering its rates at once; a host not fetched this cycle keeps what it has. (A host that
    keeps one source's trust keeps the ages of both.)

    ``n_obs`` and ``n_changes`` count the observations the estimate rests on (the kept history
    window); lifetime counts are in fetch_log.
    """
    config = config or PlanConfig()
    merged = merge_state(previous, candidates, results, now).join(
        sitemap_dating(plan), on="url", how="left", maintain_order="left"
    )
    verdict = (
        merged.filter(pl.col("r_outcome").is_not_null())
        .group_by("host")
        .agg(
            pl.col("r_dates").fill_null(False).all().alias("_dates"),
            pl.col("_sm_dates").fill_null(False).any().alias("_sm_host"),
        )
    )
    merged = merged.join(verdict, on="host", how="left", maintain_order="left")
    dating = pl.col("_dates").fill_null(False)
    distrusted = ~pl.col("_dates").fill_null(True) & ~pl.col("_sm_host").fill_null(False)
    sitemap_age = pl.when(
        pl.col("observed_changed") & (pl.col("_sm_age") <= pl.col("observed_interval"))
    ).then("_sm_age")
    observed = merged.filter(pl.col("observed_interval").is_not_null()).select(
        "url",
        pl.col("observed_interval").alias("interval_days"),
        pl.col("observed_changed").alias("changed"),
        pl.coalesce(pl.when(dating).then("observed_age"), sitemap_age).alias("age_days"),
        # (a host that lost its sitemap's trust since loses the quiet it vouched for)
        pl.when(~distrusted)
        .then(duration_days(pl.col("hint_quiet_until") - pl.col("observed_since")))
        .alias("_quiet"),
    )
    quiet, observations = hinted_quiet(observed)
    had_ages = pl.col(AGE_COLUMN).list.drop_nulls().list.len().fill_null(0) > 0
    merged = merged.with_columns(
        ages_dropped=had_ages & distrusted,
        # a trusted "unchanged" this cycle on a page not fetched: quiet up to now; an
        # observation made takes the quiet in (hinted_quiet) and starts it over
        hint_quiet_until=pl.when(pl.col("observed_since").is_not_null() | distrusted)
        .then(None)
        .when(pl.col("_sm_quiet").fill_null(False))
        .then(pl.lit(now).cast(tables.UTC_TIME))
        .otherwise("hint_quiet_until"),
    )
    # in url_state's order, so that the refit (and a re-run of this cycle) sums in one order
    with_history = (
        without_first_look(
            with_first_looks(
                append_observations(append_observations(merged, quiet), observations), dating
            ),
            distrusted,
        )
        .with_columns(
            pl.when(distrusted).then(None).otherwise(pl.col(AGE_COLUMN)).alias(AGE_COLUMN)
        )
        .sort(["host", "url"])
    )
    # The merged frame is a second copy of every row, in another order: what the rest needs of
    # it is taken now and the frame let go before the refit and the re-estimation, where the
    # step holds the most.
    grades = lastmod_grades(merged)
    del merged, observations
    prior = refit_change_prior(with_history, change_prior, now=now, model=model)
    weights = prior_weights(
        prior.filter(pl.col("fitted_at") == pl.lit(now).cast(tables.UTC_TIME)), model
    )
    redo = (
        pl.col("observed_interval").is_not_null()
        | pl.col("_first_look_now")
        | pl.col("class_changed")
        | pl.col("ages_dropped")
        | (pl.col("obs_interval_days").list.len().fill_null(0) == 0)
        | ~pl.col("change_rate").is_finite().fill_null(False)
        | pl.any_horizontal(
            pl.col("change_rate_median", "n_obs", "n_changes", "rate_is_lower_bound").is_null()
        )
    )
    estimated = with_posterior_rates(
        with_history, with_history.select(redo).to_series(), weights, model
    )
    cost = plan.select("url", "cost")
    estimated = estimated.join(cost, on="url", how="left")
    due_days = due_age_days(
        estimated["change_rate"].to_numpy(),
        estimated["value"].to_numpy(),
        estimated["cost"].fill_null(1.0).to_numpy(),
        plan_threshold(plan),
        min_days=config.min_interval_days,
        max_days=config.max_interval_days,
    )
    estimated = estimated.with_columns(
        due_us=pl.Series(np.round(due_days * DAY_US).astype(np.int64))
    )
    anchor = pl.coalesce("last_fetched_at", pl.lit(now).cast(tables.UTC_TIME))
    due_at = anchor + pl.duration(microseconds=pl.col("due_us"))
    next_check = (
        pl.when(pl.col("status") == "blocked")
        .then(None)
        .when(pl.col("status") == "new")
        .then(pl.lit(now).cast(tables.UTC_TIME))
        .when(pl.col("status") == "gone")
        .then(
            _after_last_fetch(
                gone_recheck_wait_days(
                    duration_days(pl.col("last_fetched_at") - pl.col("gone_at")), config
                )
            )
        )
        .when(pl.col("status") == "error")
        .then(_after_last_fetch(error_recheck_wait_days(pl.col("consecutive_errors"), config)))
        .otherwise(due_at)
    )
    state = estimated.with_columns(next_check_at=next_check, duplicate_of=content_duplicates())
    return StateUpdate(tables.conform("url_state", state).sort(["host", "url"]), grades, prior)


def _after_last_fetch(days: pl.Expr) -> pl.Expr:
    """``days`` after the URL's last fetch, to the microsecond."""
    return pl.col("last_fetched_at") + pl.duration(
        microseconds=(days * DAY_US).round().cast(pl.Int64)
    )


def with_posterior_rates(
    state: pl.DataFrame,
    redo: pl.Series,
    weights: Mapping[str, np.ndarray] | None,
    model: ChangeModel,
) -> pl.DataFrame:
    """``state`` with RATE_COLUMNS re-scored under ``weights`` on the ``redo`` rows; the other
    rows keep what they hold."""
    rows = np.flatnonzero(redo.fill_null(True).to_numpy())
    if rows.shape[0] == state.height:
        return state.with_columns(posterior_rates(state, weights, model=model).get_columns())
    kept = state.select(
        pl.col("change_rate").cast(pl.Float64),
        pl.col("change_rate_median").cast(pl.Float64),
        pl.col("n_obs").cast(pl.Int64),
        pl.col("n_changes").cast(pl.Int64),
        pl.col("rate_is_lower_bound").cast(pl.Boolean),
    )
    if rows.shape[0] == 0:
        return state.with_columns(kept)
    fresh = posterior_rates(state[rows], weights, model=model)
    index = pl.Series(rows)
    return state.with_columns(kept[name].scatter(index, fresh[name]) for name in RATE_COLUMNS)


# Pages whose extracted content is empty all share one fingerprint; they are not duplicates.
EMPTY_FINGERPRINT = content_fingerprint(b"", content_type="text/html")


#: what :func:`sitemap_dating` takes of the plan, under the names it joins them by (the
#: url_state step loads them: ``PLAN_COLUMNS``)
SITEMAP_DATING_COLUMNS = {
    "lastmod_dates": "_sm_dates",
    "lastmod_age_days": "_sm_age",
    "hinted_change": "_sm_hint",
}


def sitemap_dating(plan: pl.DataFrame) -> pl.DataFrame:
    """Per planned URL: ``_sm_dates`` (its host's sitemap lastmod may date changes), ``_sm_age``
    (the quiet days it gives, null if none) and ``_sm_quiet`` (a trusted lastmod says it has not
    changed since its last fetch); a plan written before the plan carried them conforms to
    nulls."""
    schema = tables.SCHEMAS["revisit_plan"]
    return (
        plan.select(
            "url",
            *(
                (pl.col(c) if c in plan.columns else pl.lit(None, dtype=schema[c])).alias(alias)
                for c, alias in SITEMAP_DATING_COLUMNS.items()
            ),
        )
        .unique("url", keep="first")
        .with_columns(_sm_quiet=~pl.col("_sm_hint"))
        .drop("_sm_hint")
    )


def hinted_quiet(observed: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """This cycle's observations with the quiet a trusted sitemap lastmod vouched for taken out
    of them: (the quiet parts, what is left). On a host whose lastmod has earned trust a page is
    fetched when its lastmod moves, so every fetch found a change, and the rates the intervals
    gave were those of pages that change at every look: 3.3/day on pages changing 0.16/day
    (found by an exploratory run). Each cycle the lastmod said "unchanged" was a look without a
    fetch: the interval is quiet up to the last of them (``_quiet`` days after its start), then
    holds the change. Only a changed observation is split (an unchanged one is quiet
    throughout), and only where the change, dated or not, fits after the quiet part."""
    remainder = pl.col("interval_days") - pl.col("_quiet")
    splits = (
        pl.col("changed")
        & (pl.col("_quiet") > 0)
        & (remainder > 0)
        & (pl.col("age_days").is_null() | (pl.col("age_days") <= remainder))
    ).fill_null(False)
    quiet = observed.filter(splits).select(
        "url",
        pl.col("_quiet").alias("interval_days"),
        pl.lit(False).alias("changed"),
        pl.lit(None, dtype=pl.Float64).alias("age_days"),
    )
    rest = observed.select(
        "url",
        pl.when(splits).then(remainder).otherwise("interval_days").alias("interval_days"),
        "changed",
        "age_days",
    )
    return quiet, rest


def content_duplicates() -> pl.Expr:
    """For a live page whose content fingerprint another page of its host shares, the copy we
    keep fetching; null otherwise. Print views, session-id URLs and mirrors then cost one
    fetch instead of one each. The copy kept is one a page of the host names as canonical,
    if any of them is (the address the site wants its content known by), else the first URL.

    Pages whose paths carry other numbers are other items, whatever their fingerprints say:
    the fingerprint drops dates and long numbers, so a concert's pages for the 24th and the
    25th, or spare parts 4006381333 and 4006381334, read the same and were marked copies of one
    another, fetched at a second copy's cost (found by an exploratory run). A print view or a
    session's spelling of a page keeps its path's numbers.

    A live page whose canonical link names another live page at the same path (the two differ
    in their query alone, in a trailing slash, or in their scheme or host: a view mode, a page
    size, a variant, a sort order, ``/a/`` served as ``/a``, a www twin) is that page's copy
    too, whatever its fingerprint: a listing's view modes read differently when
    fetched at different times, and a shop's sitemap listing every category's
    ``?product_list_mode=list`` and ``?product_list_limit=36`` took an eighth of a cold
    start's fetches, each kept fresh as a page of its own (found by an exploratory run)."""
    # the numbers alone: "/item/12/" and "/item/12" are one item's spellings
    path_numbers = url_path(pl.col("url")).str.replace_all(r"\D+", "-").str.strip_chars("-")
    group = ["host", "fingerprint", "fingerprint_version", path_numbers.alias("_path_numbers")]
    same = (
        (pl.col("status") == "active")
        & pl.col("fingerprint").is_not_null()
        & (pl.col("fingerprint") != EMPTY_FINGERPRINT)
    )
    named = pl.col("url").is_in(pl.col("canonical").drop_nulls().implode())
    # "0" sorts before "1": a named URL comes first, then URL order
    key = pl.when(named).then(pl.lit("0")).otherwise(pl.lit("1")) + pl.col("url")
    first = key.filter(same).min().over(group).str.slice(1)
    shared = pl.col("url").filter(same).count().over(group) > 1
    live = pl.col("status") == "active"
    variant = (
        live
        # one that names no other page itself: two pages naming each other keep both
        & pl.col("canonical").is_in(
            pl.col("url").filter(live & pl.col("canonical").is_null()).implode()
        )
        # the same path: all that is between the authority and the query, a trailing slash
        # aside (a site serving "/a/" as "/a", naming "/a" canonical: each was fetched as a
        # page of its own, found by a second held-out web), on any scheme and host the crawl
        # plans (a www twin naming its apex, an http spelling its https one: both seeded, each
        # was fetched as a page of its own, found by an outside held-out web)
        & (
            url_path(pl.col("canonical")).str.strip_suffix("/")
            == url_path(pl.col("url")).str.strip_suffix("/")
        )
    )
    return (
        pl.when(same & shared & (first != pl.col("url")))
        .then(first)
        .when(variant.fill_null(False))
        .then("canonical")
    )


def lastmod_grades(merged: pl.DataFrame) -> pl.DataFrame:
    """This cycle's grading of sitemap lastmod: for each observed interval, whether the lastmod
    known now claimed a change after the previous fetch, next to what the fingerprints saw."""
    observed = merged.filter(pl.col("observed_interval").is_not_null()).select(
        "url",
        "host",
        pl.col("r_at").alias("fetched_at"),
        pl.col("observed_since").alias("prev_fetched_at"),
        pl.col("observed_changed").alias("changed"),
        pl.col("c_lastmod").alias("lastmod"),
        pl.col("c_listed_in").alias("listed_in"),
    )
    return hint_evidence(observed)


EVIDENCE_KEPT_DAYS = 180


def updated_evidence(previous: pl.DataFrame, grades: pl.DataFrame, now: datetime) -> pl.DataFrame:
    """Accumulated lastmod evidence: a re-run of this cycle replaces its own rows, and rows past
    EVIDENCE_KEPT_DAYS (weightless under the trust half-life anyway) are dropped."""
    now_lit = pl.lit(now).cast(tables.UTC_TIME)
    kept = tables.conform("lastmod_evidence", previous).filter(
        (pl.col("observed_at") != now_lit)
        & (pl.col("observed_at") >= now_lit - timedelta(days=EVIDENCE_KEPT_DAYS))
    )
    return pl.concat([kept, tables.conform("lastmod_evidence", grades)])


#: what the state update reads of the plan, the candidates and the results (update_state);
#: the rest of those tables is not loaded
PLAN_COLUMNS = (
    "url",
    "selected",
    "reason",
    "status",
    "priority",
    "cost",
    # read apart, the trusted "unchanged" went missing: the step loaded no hinted_change, and
    # sitemap_dating took the plan for one from before the column (found by an exploratory run)
    *SITEMAP_DATING_COLUMNS,
)
CANDIDATE_COLUMNS = (
    "url",
    "host",
    "value",
    "url_class",
    "first_seen_at",
    "allowed",
    "lastmod",
    "listed_in",
    "blocked_reason",
)
#: what it reads of this cycle's fetch_results (merge_state, and the run's metadata)
RESULT_COLUMNS = (
    "url",
    "host",
    "sent",
    "fetched_at",
    "outcome",
    "http_status",
    "fingerprint",
    "fingerprint_version",
    "etag",
    "last_modified",
    "location",
    "canonical",
    "content_age_days",
    "dates_changes",
    "archived",
    "retry_after_s",
)
