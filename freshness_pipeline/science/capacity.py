"""What a host accepts, learned from its own answers and kept from one cycle to the next.

A fixed rate per host is wrong both ways: too slow for a healthy site, too fast for one that
punishes bursts. The host says which it is. Its robots.txt ``Crawl-delay`` is an explicit rule
and a hard floor (kept elsewhere, never relaxed). Beyond that rule each host has a learned pace:

* ``gap_s``: the shortest gap between two request starts the host has taken without
  throttling us, a soft floor under the fetcher's latency-driven gap. A throttling answer (429,
  503) raises it at once to at least twice its value, twice the gap the throttled request came
  after, and :data:`THROTTLE_GAP_STEP_S` more than before, so a host that answers 429 to two
  requests within a fraction of a second is paced correctly after one or two answers; one that
  names its wait (Retry-After) raises it to no more than that wait or one step
  (:func:`throttled_gap`). Each cycle in which the host answered without throttling lets it
  shrink by :data:`GAP_RECOVERY`, so a host that relaxes its limit is used more again. This is
  AIMD's shape: a throttle cuts the request rate at least in half, good answers raise it
  slowly. The growth is proportional rather than additive because safe rates span decades
  between hosts, and a few percent a cycle is slow enough that a host's limit is probed about
  once a week of six-hour cycles. A cycle whose throttles were all 503s naming their wait
  carries at most one step more than it started with into the next (:func:`carried_gap`).
* ``concurrency``: requests in flight. A host we know nothing about gets one (so the first
  throttling answer arrives before a second request is on its way); each cycle without
  throttling adds one, up to the client's per-host limit; a throttle sets it back to one, since
  parallel requests are the commonest burst. A host with a Crawl-delay stays at one. A host
  that throttled while it had ``c`` requests in flight (``throttled_concurrency``) grows back
  to ``c - 1`` at most until :data:`PROBE_AGAIN_AFTER` has passed since: it said what it does
  not take, and asking again every few cycles cost one refused request and a doubled gap each
  time (a host that takes one request at a time, found by an exploratory run: a 429 every ten
  cycles). A throttle at one request in flight sets no such ceiling; it is about pace.
* ``latency_s``: how long the host takes to answer; with the concurrency it bounds the rate a
  host can serve whatever we would like.

A cycle's capacity for a host is the number of fetches that fit its fetch window at that pace
(:func:`paced_capacity`); the planner caps each host there and spends the rest of the budget on
other hosts. A host that deferred planned fetches for reasons of its own (its breaker opened,
its Retry-After outlasted the window) gets at most twice what it took last cycle
(``accepted_cap``), so that its unfetched pages, growing staler, cannot pull ever more of the
budget to a host that does not take it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

__all__ = [
    "DEFAULT_HOST_RATE_PER_S",
    "FORGET_GAP_S",
    "GAP_RECOVERY",
    "MAX_LEARNED_GAP_S",
    "PROBE_AGAIN_AFTER",
    "START_CONCURRENCY",
    "THROTTLE_GAP_STEP_S",
    "carried_gap",
    "next_host_capacity",
    "paced_capacity",
    "polite_capacity",
    "throttled_gap",
]

#: Without a Crawl-delay we still keep to a few requests a second per host.
DEFAULT_HOST_RATE_PER_S = 4.0
#: The least a throttling answer adds to a host's learned gap (seconds): doubling alone would
#: leave a gap of zero at zero, and hosts that punish bursts mostly mean "under a second".
THROTTLE_GAP_STEP_S = 0.25
#: What a cycle of good answers leaves of the learned gap (10 % shorter each time).
GAP_RECOVERY = 0.9
#: A learned gap that has recovered below this (seconds) is forgotten: latency paces the host.
FORGET_GAP_S = 0.02
#: The most a host can teach us to wait between requests; beyond this its pages are deferred
#: by the breaker and Retry-After holds, not paced.
MAX_LEARNED_GAP_S = 60.0
#: Requests in flight to a host we have no answers from yet.
START_CONCURRENCY = 1
#: How long a host that throttled at some concurrency is kept below it before it is tried
#: again: one refused request a week is no burden to a host, and a host that now takes more
#: is found within the week.
PROBE_AGAIN_AFTER = timedelta(days=7)


def throttled_gap(
    gap_s: float, observed_gap_s: float | None = None, retry_after_s: float | None = None
) -> float:
    """The learned gap after a throttling answer: at least doubled, at least one step longer,
    and at least twice the gap the throttled request actually came after; but when the answer
    names its wait (``retry_after_s``), no longer than that wait or one step, whichever is
    longer.

    A host that says how long to wait has said what it wants, and the pause holds the host for
    that long in any case (the fetcher's ``not_before``). Doubling past it guessed at a pace
    the host never asked for: a host that answered 503 with Retry-After: 1-6 in two busy
    hours a day, whatever our pace, was taught a gap twice as long as the one each refused
    request came after, burst cycle after burst cycle, while its quiet cycles gave back
    :data:`GAP_RECOVERY` each, and it ended paced at one or two fetches a cycle even in its
    quiet hours (found by an outside held-out web). A host that keeps throttling at the pace
    it named still teaches a step each time."""
    observed = max(0.0, observed_gap_s or 0.0)
    raised = max(2.0 * gap_s, 2.0 * observed, gap_s + THROTTLE_GAP_STEP_S)
    if retry_after_s is not None and retry_after_s >= 0:
        raised = min(raised, max(gap_s + THROTTLE_GAP_STEP_S, retry_after_s))
    return min(raised, MAX_LEARNED_GAP_S)


def carried_gap(gap_now: pl.Expr, previous_gap: pl.Expr, waits_named: pl.Expr) -> pl.Expr:
    """The learned gap a throttled cycle hands to the next: the gap it ended with, or, where
    every throttle was a 503 with a Retry-After (``waits_named``), at most one step more than
    the gap it started with.

    Within a cycle each refusal still doubles the pace, and each named wait is waited out. But
    a 503 says the server is unavailable for a while, and its Retry-After says how long: from
    one cycle's answers nothing tells a host refusing requests that came too fast from one
    refusing in its busy hours whatever the pace. Carried in full, the doubled gaps of each
    busy cycle outgrew what the quiet cycles gave back: a host answering every third request
    in two hours a day with a 503 and a Retry-After of some seconds ended paced at its longest
    wait, a few fetches a cycle at any hour (found by two outside held-out webs). A step a busy
    cycle still finds a real limiter's pace, more slowly; a 429 ("too many requests") and a 503
    without a wait are carried in full."""
    stepped = previous_gap.fill_null(0.0) + THROTTLE_GAP_STEP_S
    return pl.when(waits_named).then(pl.min_horizontal(gap_now, stepped)).otherwise(gap_now)


def polite_capacity(window_s: float) -> pl.Expr:
    """The most fetches a host's Crawl-delay (column ``crawl_delay``) allows in one window: the
    upper bound every plan keeps, whatever was learned."""
    return (
        pl.when(pl.col("crawl_delay") > 0)
        .then(window_s / pl.col("crawl_delay"))
        .otherwise(window_s * DEFAULT_HOST_RATE_PER_S)
        .floor()
    )


def paced_capacity(window_s: float, in_flight: float | None = None) -> pl.Expr:
    """Fetches that fit one fetch window at the host's pace (columns ``crawl_delay``, ``gap_s``,
    ``concurrency``, ``latency_s``, ``accepted_cap``; nulls mean nothing learned): never more
    than :func:`polite_capacity`.

    ``in_flight``: the requests the fetcher keeps in flight to a host on average when latency
    paces it (a latency-driven gap of latency / target concurrency keeps that many, whatever
    the host's concurrency allows); None: as many as the concurrency. A slow host planned at
    twice what the fetcher sends it held a cycle far past its window."""
    gap = pl.max_horizontal(pl.col("crawl_delay").fill_null(0.0), pl.col("gap_s").fill_null(0.0))
    by_gap = pl.when(gap > 0).then(window_s / gap).otherwise(window_s * DEFAULT_HOST_RATE_PER_S)
    latency = pl.col("latency_s")
    concurrency = pl.col("concurrency").fill_null(START_CONCURRENCY).cast(pl.Float64)
    if in_flight is not None:
        concurrency = pl.min_horizontal(concurrency, pl.lit(float(in_flight)))
    by_latency = pl.when(latency > 0).then(window_s * concurrency / latency).otherwise(None)
    paced = pl.min_horizontal(polite_capacity(window_s), by_gap, by_latency, pl.col("accepted_cap"))
    return paced.floor().cast(pl.Int64)


#: The per-host end-of-cycle observations :func:`next_host_capacity` learns from.
CYCLE_COLUMNS = {
    "host": pl.String,
    "gap_s": pl.Float64,  # the fetcher's learned gap at the end of the cycle
    "latency_s": pl.Float64,
    "crawl_delay_s": pl.Float64,
    "capacity": pl.Int64,  # what the plan allowed this cycle
    "planned": pl.Int64,
    "sent": pl.Int64,
    "deferred": pl.Int64,
    "deferred_by_host": pl.Int64,  # deferred for the host's reasons (breaker, long Retry-After)
    "throttled": pl.Int64,
    "failures": pl.Int64,
    "pauses": pl.Int64,  # Retry-After pauses waited out within the cycle
    "refilled": pl.Int64,  # fetches given to the host from budget another host left
    # 429 answers: the host saying "slower" in so many words (a 503 may be a host that is down)
    "rate_limited": pl.Int64,
    # 503 answers with a Retry-After: the host unavailable for as long as it said
    "waits_named": pl.Int64,
}


#: what next_host_capacity takes of a host's last row, under the names it joins them by
_PREVIOUS_ALIASES = {
    "gap_s": "_prev_gap",
    "concurrency": "_prev_conc",
    "latency_s": "_prev_latency",
    "clean_cycles": "_prev_clean",
    "last_throttled_at": "_prev_throttled_at",
    "throttled_concurrency": "_prev_throttled_conc",
}


def next_host_capacity(
    previous: pl.DataFrame,
    cycle: pl.DataFrame,
    now: datetime,
    *,
    max_concurrency: int,
) -> pl.DataFrame:
    """Each host's pace for the next cycle from the last one's and what this cycle saw.

    ``previous``: the host_capacity rows so far (may be empty); ``cycle``: one row per host the
    cycle planned for, with :data:`CYCLE_COLUMNS`. Hosts not in ``cycle`` keep their row as it
    was: only answers teach anything. A host that sent nothing keeps its pace too.
    """
    missing = [c for c in CYCLE_COLUMNS if c not in cycle.columns]
    if missing:
        raise ValueError(f"cycle observations lack column(s) {missing}")
    prev = previous.select("host", *_PREVIOUS_ALIASES).rename(_PREVIOUS_ALIASES)
    seen = cycle.join(prev, on="host", how="left")
    answered = pl.col("sent") > 0
    throttled = pl.col("throttled") > 0
    not_429 = pl.col("rate_limited") == 0
    # A host that answered nothing but failures, none of them a 429, was down, not pacing us:
    # each of its 503s had doubled the fetcher's gap, and the host came back paced at 8 s a
    # request, its first cycle back over three minutes (found by an exploratory run). The
    # pace from before the outage stands; one request at a time until it answers.
    down = answered & (pl.col("failures") >= pl.col("sent")) & not_429
    gap_now = (
        pl.when(down)
        .then(pl.coalesce("_prev_gap", pl.lit(0.0)))
        .otherwise(pl.coalesce(pl.col("gap_s"), pl.col("_prev_gap"), pl.lit(0.0)))
    )
    recovered = gap_now * GAP_RECOVERY
    waits_named = not_429 & (pl.col("waits_named") >= pl.col("throttled"))
    gap = (
        pl.when(throttled)
        .then(carried_gap(gap_now, pl.col("_prev_gap"), waits_named))
        .when(answered)
        .then(pl.when(recovered < FORGET_GAP_S).then(0.0).otherwise(recovered))
        .otherwise(gap_now)
    )
    prev_conc = pl.min_horizontal(
        pl.col("_prev_conc").fill_null(START_CONCURRENCY), max_concurrency
    )
    # a Crawl-delay spaces request starts, one at a time (the fetcher's per-host queue): a host
    # that asks for one is one request in flight, in the row the plan sizes its share by too
    delayed = pl.col("crawl_delay_s").fill_null(0.0) > 0
    # what the host refused last, while the refusal is recent; a host that was down refused
    # nothing (its 503s say so, not its limit)
    throttled_conc = (
        pl.when(throttled & ~down).then(prev_conc).otherwise(pl.col("_prev_throttled_conc"))
    )
    throttled_at = pl.when(throttled).then(pl.lit(now)).otherwise(pl.col("_prev_throttled_at"))
    recent = throttled_at > pl.lit(now - PROBE_AGAIN_AFTER)
    ceiling = (
        pl.when(recent & (throttled_conc > 1))
        .then(throttled_conc - 1)
        .otherwise(pl.lit(max_concurrency))
    )
    concurrency = (
        pl.when(throttled | delayed)
        .then(1)
        .when(answered)
        .then(pl.min_horizontal(prev_conc + 1, ceiling))
        .otherwise(pl.min_horizontal(prev_conc, ceiling))
    )
    clean = pl.col("_prev_clean").fill_null(0)
    updated = seen.select(
        "host",
        pl.lit(now).cast(pl.Datetime("us", "UTC")).alias("updated_at"),
        gap.alias("gap_s"),
        concurrency.cast(pl.Int64).alias("concurrency"),
        pl.coalesce("latency_s", "_prev_latency").alias("latency_s"),
        "crawl_delay_s",
        "capacity",
        # a host that left planned fetches unfetched for its own reasons takes at most twice
        # what it took, until a cycle goes by in which it took everything it was given; not
        # one that was down: its breaker deferred the rest, but it refused nothing, and a
        # daily hour of maintenance cost it the next, healthy cycle too (three fetches
        # planned of thirty, found by an exploratory run); if it is still down, its breaker
        # opens again and the fetch stage gives what it leaves to other hosts
        pl.when((pl.col("deferred_by_host") > 0) & ~down)
        .then(pl.max_horizontal(2 * pl.col("sent"), pl.lit(1)))
        .otherwise(None)
        .cast(pl.Int64)
        .alias("accepted_cap"),
        "planned",
        "sent",
        "deferred",
        "throttled",
        "failures",
        "pauses",
        "refilled",
        pl.when(throttled)
        .then(0)
        .when(answered)
        .then(clean + 1)
        .otherwise(clean)
        .cast(pl.Int64)
        .alias("clean_cycles"),
        throttled_at.cast(pl.Datetime("us", "UTC")).alias("last_throttled_at"),
        throttled_conc.cast(pl.Int64).alias("throttled_concurrency"),
    )
    kept = previous.join(cycle.select("host"), on="host", how="anti")
    return pl.concat([updated, kept.select(updated.columns)], how="vertical_relaxed").sort("host")
