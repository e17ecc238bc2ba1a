"""Scoring a crawl from the truth and the server's request log, never from the crawler's tables.

A crawler's copy of a page is the content version of its last 200 (a 304 keeps the copy it
had; a 404 or 410 makes the copy "gone"). Copies only change at cycle times, so freshness is
integrated exactly: within one cycle's interval a copy of version ``v`` is fresh while the
live version is ``v`` (between the ``v``-th and ``v+1``-th change events, and before the page
went), a "gone" copy is fresh once the page has gone, and a page never fetched is stale from
the moment it exists. Freshness is the value-weighted time average over the pages and moments
that exist.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from .hosts import HostProfile
from .truth import PAGE_ID_REGEX, Truth

#: copy codes besides a content version (>= 0)
NO_COPY = -1
GONE = -2
#: a gap this much shorter than the Crawl-delay is a violation (scheduling jitter is smaller)
CRAWL_DELAY_TOLERANCE_S = 0.05
GONE_STATUSES = (404, 410)


def copies_from_log(truth: Truth, log: pl.DataFrame) -> pl.DataFrame:
    """The crawler's copy of every scored page after each cycle, read from the request log."""
    updates = (
        log.filter((pl.col("kind") == "page") & pl.col("status").is_in([200, *GONE_STATUSES]))
        .with_columns(
            pl.when(pl.col("status") == 200)
            .then(pl.col("served_version"))
            .otherwise(pl.lit(GONE))
            .alias("copy")
        )
        .sort("serial")
        .group_by("page_id", "cycle")
        .agg(pl.col("copy").last())
    )
    return fill_copies(truth, updates)


def fill_copies(truth: Truth, updates: pl.DataFrame) -> pl.DataFrame:
    """Carry each page's copy forward from the cycles that set it (page_id, cycle, copy)."""
    grid = (
        truth.pages.filter(pl.col("scored"))
        .select("page_id")
        .join(pl.DataFrame({"cycle": np.arange(truth.clock.cycles, dtype=np.int64)}), how="cross")
    )
    return (
        grid.join(
            updates.select("page_id", "cycle", pl.col("copy").cast(pl.Int64)),
            on=["page_id", "cycle"],
            how="left",
        )
        .sort("page_id", "cycle")
        .with_columns(pl.col("copy").forward_fill().over("page_id").fill_null(NO_COPY))
    )


def fresh_seconds(truth: Truth, copies: pl.DataFrame) -> pl.DataFrame:
    """Per page and cycle interval: seconds it existed and seconds the copy was fresh, exactly."""
    cycle_s = truth.clock.cycle_s
    events = truth.events
    since = events.select("page_id", pl.col("version").alias("copy"), pl.col("t_s").alias("since"))
    until = events.select(
        "page_id", (pl.col("version") - 1).alias("copy"), pl.col("t_s").alias("until")
    )
    df = (
        copies.join(
            truth.pages.select("page_id", "host", "value", "pattern", "appear_s", "gone_s"),
            on="page_id",
        )
        .join(since, on=["page_id", "copy"], how="left")
        .join(until, on=["page_id", "copy"], how="left")
        .with_columns(
            (pl.col("cycle") * cycle_s).alias("start"),
            ((pl.col("cycle") + 1) * cycle_s).alias("end"),
            pl.col("since").fill_null(-math.inf),
            pl.col("until").fill_null(math.inf),
        )
    )
    exists_from = pl.max_horizontal("start", "appear_s")
    fresh_version = pl.min_horizontal("end", "gone_s", "until") - pl.max_horizontal(
        "start", "appear_s", "since"
    )
    fresh_gone = pl.col("end") - pl.max_horizontal("start", "gone_s")
    return df.with_columns(
        (pl.col("end") - exists_from).clip(0.0, None).alias("exists_s"),
        pl.when(pl.col("copy") >= 0)
        .then(fresh_version.clip(0.0, None))
        .when(pl.col("copy") == GONE)
        .then(fresh_gone.clip(0.0, None))
        .otherwise(0.0)
        .alias("fresh_s"),
    ).select("page_id", "host", "pattern", "value", "cycle", "copy", "exists_s", "fresh_s")


_SCORE = (pl.col("value") * pl.col("fresh_s")).sum() / (pl.col("value") * pl.col("exists_s")).sum()


def weighted_freshness(seconds: pl.DataFrame, *, from_cycle: int = 0) -> float:
    """Value-weighted time-averaged freshness from cycle ``from_cycle`` on."""
    return float(seconds.filter(pl.col("cycle") >= from_cycle).select(_SCORE).item())


def freshness_by(seconds: pl.DataFrame, by: str) -> pl.DataFrame:
    """The same per group (``host``, ``cycle``, ``pattern``): columns ``by``, freshness."""
    return seconds.group_by(by).agg(_SCORE.alias("freshness")).sort(by)


def first_copy_cycles(copies: pl.DataFrame) -> pl.DataFrame:
    """The first cycle each page had a content copy (page_id, first_cycle)."""
    return (
        copies.filter(pl.col("copy") >= 0)
        .group_by("page_id")
        .agg(pl.col("cycle").min().alias("first_cycle"))
    )


def new_page_discovery(truth: Truth, copies: pl.DataFrame, *, within: int = 3) -> dict[str, float]:
    """Of the pages that appeared in a sitemap or feed, the share fetched within ``within``
    cycles of appearing (the first cycle at or after the appearance counts as the first)."""
    cycles = truth.clock.cycles
    cycle_s = truth.clock.cycle_s
    new = truth.pages.filter(~pl.col("initial") & pl.col("scored") & pl.col("listed")).with_columns(
        (pl.col("appear_s") / cycle_s).ceil().cast(pl.Int64).alias("appear_cycle")
    )
    eligible = new.filter(pl.col("appear_cycle") + within - 1 <= cycles - 1)
    joined = eligible.join(first_copy_cycles(copies), on="page_id", how="left")
    on_time = joined.filter(pl.col("first_cycle") <= pl.col("appear_cycle") + within - 1).height
    ever = joined.filter(pl.col("first_cycle").is_not_null()).height
    n = joined.height
    return {
        "eligible": float(n),
        "on_time": float(on_time),
        "share": on_time / n if n else math.nan,
        "ever_share": ever / n if n else math.nan,
    }


def page_ids_from_urls(urls: pl.Expr) -> pl.Expr:
    """The page id in a crawler's URL column, by the web's one URL rule."""
    return pl.coalesce(urls.str.extract(PAGE_ID_REGEX, 1), urls.str.extract(PAGE_ID_REGEX, 2)).cast(
        pl.Int64
    )


def hosts_from_urls(urls: pl.Expr) -> pl.Expr:
    """The host key (``address:port``) of a URL column."""
    return urls.str.extract(r"^[a-zA-Z][a-zA-Z0-9+.-]*://([^/?#]+)", 1).str.to_lowercase()


def gone_marking(truth: Truth, gone_marks: pl.DataFrame, *, within: int = 2) -> pl.DataFrame:
    """Per page that went: the first cycle the crawler's state said 'gone', and whether that
    was within ``within`` cycles of going. ``gone_marks``: page_id, cycle (after which the
    state marked it)."""
    cycles = truth.clock.cycles
    cycle_s = truth.clock.cycle_s
    went = truth.pages.filter(pl.col("scored") & pl.col("gone_s").is_finite()).with_columns(
        (pl.col("gone_s") / cycle_s).ceil().cast(pl.Int64).alias("gone_cycle")
    )
    first = gone_marks.group_by("page_id").agg(pl.col("cycle").min().alias("marked_cycle"))
    return (
        went.filter(pl.col("gone_cycle") + within - 1 <= cycles - 1)
        .join(first, on="page_id", how="left")
        .with_columns(
            (pl.col("marked_cycle") <= pl.col("gone_cycle") + within - 1)
            .fill_null(False)
            .alias("on_time")
        )
        .select("page_id", "host", "listed", "gone_cycle", "marked_cycle", "on_time")
    )


def disallowed_requests(hosts: tuple[HostProfile, ...], log: pl.DataFrame) -> pl.DataFrame:
    """Requests to paths the host's robots.txt disallows (none may be sent)."""
    rules = pl.DataFrame(
        [
            {"host": h, "prefix": prefix}
            for h, profile in enumerate(hosts)
            if not profile.robots_missing
            for prefix in profile.disallow
        ],
        schema={"host": pl.Int64, "prefix": pl.String},
    )
    return log.join(rules, on="host").filter(pl.col("path").str.starts_with(pl.col("prefix")))


def crawl_delay_gaps(hosts: tuple[HostProfile, ...], log: pl.DataFrame) -> pl.DataFrame:
    """Per host with a Crawl-delay: requests, the shortest gap between arrivals, violations."""
    delays = pl.DataFrame(
        [
            {"host": h, "delay": p.crawl_delay}
            for h, p in enumerate(hosts)
            if p.crawl_delay and not p.robots_missing
        ],
        schema={"host": pl.Int64, "delay": pl.Float64},
    )
    return (
        log.join(delays, on="host")
        .sort("host", "arrived_s")
        .with_columns(pl.col("arrived_s").diff().over("host").alias("gap"))
        .group_by("host")
        .agg(
            pl.len().alias("requests"),
            pl.col("delay").first(),
            pl.col("gap").min().alias("min_gap"),
            (pl.col("gap") < pl.col("delay") - CRAWL_DELAY_TOLERANCE_S).sum().alias("violations"),
        )
        .sort("host")
    )


def retry_after_violations(log: pl.DataFrame) -> pl.DataFrame:
    """Requests that arrived while a Retry-After the same host had just sent was still running."""
    pauses = (
        log.filter(pl.col("retry_after_s").is_not_null())
        .select(
            "host",
            pl.col("answered_s").alias("paused_at"),
            (pl.col("answered_s") + pl.col("retry_after_s")).alias("pause_until"),
        )
        .sort("paused_at")
    )
    requests = log.select("serial", "host", "arrived_s", "path", "status").sort("arrived_s")
    if pauses.is_empty():
        return requests.head(0).with_columns(pl.lit(None, pl.Float64).alias("pause_until"))
    return (
        # both sides are sorted by time, which is all an as-of join by host needs
        requests.join_asof(
            pauses,
            left_on="arrived_s",
            right_on="paused_at",
            by="host",
            strategy="backward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        .filter(pl.col("pause_until").is_not_null() & (pl.col("arrived_s") < pl.col("pause_until")))
        .select("serial", "host", "arrived_s", "path", "status", "pause_until")
    )


def successful_fetches(log: pl.DataFrame) -> pl.DataFrame:
    return (
        log.filter((pl.col("kind") == "page") & pl.col("status").is_in([200, 304]))
        .group_by("page_id")
        .agg(pl.len().alias("ok_fetches"))
    )


def rate_accuracy(
    truth: Truth,
    estimates: pl.DataFrame,
    log: pl.DataFrame,
    *,
    min_fetches: tuple[int, ...] = (3, 5),
) -> pl.DataFrame:
    """Per pattern: the median log bias and median |log error| of estimated rates (per day)
    against the true long-run rate, over pages with at least ``n`` successful fetches.
    ``estimates``: page_id, change_rate. Static pages have no log error; their median
    estimate is given instead."""
    df = (
        truth.pages.filter(pl.col("scored"))
        .select("page_id", "pattern", "rate_per_day")
        .join(estimates, on="page_id")
        .join(successful_fetches(log), on="page_id", how="left")
        .with_columns(pl.col("ok_fetches").fill_null(0))
        .with_columns(
            (pl.col("change_rate").clip(1e-6, None) / pl.col("rate_per_day"))
            .log()
            .alias("log_ratio")
        )
    )
    out = []
    for n in min_fetches:
        part = df.filter(pl.col("ok_fetches") >= n)
        out.append(
            part.group_by("pattern")
            .agg(
                pl.len().alias("pages"),
                pl.col("log_ratio")
                .filter(pl.col("rate_per_day") > 0)
                .median()
                .alias("median_log_bias"),
                pl.col("log_ratio")
                .filter(pl.col("rate_per_day") > 0)
                .abs()
                .median()
                .alias("median_abs_log_error"),
                pl.col("change_rate").median().alias("median_estimate"),
                pl.col("rate_per_day").median().alias("median_true"),
            )
            .with_columns(pl.lit(n).alias("min_fetches"))
        )
    return pl.concat(out).sort("min_fetches", "pattern")


def change_detection(
    copies: pl.DataFrame, log: pl.DataFrame, fetch_log: pl.DataFrame
) -> pl.DataFrame:
    """The crawler's verdicts (``fetch_log``: page_id, cycle, outcome) against the truth: per
    fetch that had a copy to compare with, whether the live version differed from the copy
    held before it. Returns the joined rows (host, outcome, truly_changed)."""
    held = copies.select(
        "page_id", (pl.col("cycle") + 1).alias("cycle"), pl.col("copy").alias("held")
    )
    live = (
        log.filter((pl.col("kind") == "page") & pl.col("status").is_in([200, 304]))
        .sort("serial")
        .group_by("page_id", "cycle")
        .agg(pl.col("live_version").last(), pl.col("host").last())
    )
    return (
        fetch_log.filter(pl.col("outcome").is_in(["changed", "unchanged", "not_modified"]))
        .join(live, on=["page_id", "cycle"])
        .join(held, on=["page_id", "cycle"])
        .filter(pl.col("held") >= 0)
        .with_columns((pl.col("live_version") != pl.col("held")).alias("truly_changed"))
    )


def detection_rates(rows: pl.DataFrame, by: str | None = None) -> pl.DataFrame:
    """False-change rate (said changed, was not) and missed-change rate (said unchanged or
    not modified, had changed)."""
    said_changed = pl.col("outcome") == "changed"
    aggs = [
        pl.len().alias("graded"),
        (~pl.col("truly_changed")).sum().alias("truly_unchanged"),
        pl.col("truly_changed").sum().alias("truly_changed_n"),
        (said_changed & ~pl.col("truly_changed")).sum().alias("false_changes"),
        (~said_changed & pl.col("truly_changed")).sum().alias("missed_changes"),
    ]
    grouped = rows.group_by(by).agg(*aggs).sort(by) if by else rows.select(*aggs)
    return grouped.with_columns(
        (pl.col("false_changes") / pl.col("truly_unchanged")).alias("false_change_rate"),
        (pl.col("missed_changes") / pl.col("truly_changed_n")).alias("missed_change_rate"),
    )
