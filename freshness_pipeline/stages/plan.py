"""revisit_plan: every candidate scored, and the best buys selected within budget and capacity.

The scoring is the pure planner in science.schedule, with each page's gain taken from the change
prior url_state fit last cycle (science.prior); this asset only joins what it needs (the previous
url_state, the change prior, robots crawl-delays and Retry-After holds, last cycle's host
health and each host's learned pace, science.capacity) and passes the cycle's now. Each row
carries its host's capacity and pace, which the fetch stage fetches with.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import cast

import polars as pl

from freshness_pipeline.config import PipelineConfig
from freshness_pipeline.science.capacity import START_CONCURRENCY, paced_capacity
from freshness_pipeline.science.cost import BYTES_HISTORY, bytes_cost, credits_cost
from freshness_pipeline.science.hints import lastmod_hints, lastmod_trust
from freshness_pipeline.science.prior.table import GAIN_COLUMN, posterior_gains
from freshness_pipeline.science.retry_after import TOO_MANY_REQUESTS, asks_to_slow_down, held_hosts
from freshness_pipeline.science.schedule import Objective, PlanConfig, build_plan
from freshness_pipeline.science.timecols import cycles_within
from freshness_pipeline.science.unproven import (
    UNPROVEN_COLUMNS,
    unproven_hosts,
    unproven_routes,
    unproven_scope,
)
from freshness_pipeline.science.validators import is_refused_304
from freshness_pipeline.stages.running_totals import VALIDATOR_HISTORY, fetch_memory
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline.web.client.settings import FetchSettings

ERROR_COST_WEIGHT = 3.0
# A URL that moved for good, or whose content another URL of its host duplicates, is only a
# second copy: it is re-checked now and then (in case it diverges), not kept fresh. So is a
# feed or sitemap that discovery reads every cycle (with_listing_cost).
SECOND_COPY_COST = 8.0


#: What the product's fetcher (its default throttle) keeps in flight to a latency-paced host.
_FETCHER_IN_FLIGHT = FetchSettings().throttle.latency_in_flight


def host_health(results: pl.DataFrame, hosts: list[str]) -> pl.DataFrame:
    """Share of last cycle's sent requests per host that failed; 0 for hosts with none.

    A server asking to slow down (science.retry_after.asks_to_slow_down) is not a failure of
    the host: counted as one, one 429 among a cold start's three requests raised every page's
    cost by 3x and halved the host's room, and with never-fetched pages tied at the index's cap
    on every host, the host got nothing next cycle, each time the learned gap probed its limit
    again (found by an exploratory run)."""
    sent = tables.conform("fetch_results", results).filter(pl.col("sent"))
    slow_down = asks_to_slow_down(pl.col("http_status"), pl.col("retry_after_s"))
    health = sent.group_by("host").agg(
        ((pl.col("outcome") == "error") & ~slow_down).mean().alias("error_share"),
    )
    return (
        pl.DataFrame({"host": hosts}, schema={"host": pl.String})
        .join(health, on="host", how="left")
        .with_columns(pl.col("error_share").fill_null(0.0))
    )


def host_capacity(
    robots: pl.DataFrame,
    health: pl.DataFrame,
    window_s: float,
    holds: pl.DataFrame | None = None,
    learned: pl.DataFrame | None = None,
    in_flight: float | None = _FETCHER_IN_FLIGHT,
) -> pl.DataFrame:
    """How many fetches a host can take in one cycle's fetch window, and at what pace: the
    window at the host's learned pace (``learned``: the host_capacity table; science.capacity),
    never more than its Crawl-delay allows, halved when most of its requests failed last cycle,
    and none while a Retry-After holds it (``holds``: host, retry_until;
    science.retry_after.held_hosts): the server asked for the pause, and capacity is what no
    priority can buy past. ``gap_s`` and ``concurrency`` are the pace the fetch starts from.
    ``in_flight``: what the fetcher keeps in flight to a latency-paced host
    (``ThrottlePolicy.latency_in_flight``; the default is the product's fetcher's)."""
    delays = robots.select("host", "crawl_delay")
    held = pl.col("host").is_in([] if holds is None else holds["host"].to_list())
    pace = (learned if learned is not None else tables.empty("host_capacity")).select(
        "host", "gap_s", "concurrency", "latency_s", "accepted_cap"
    )
    return (
        health.join(delays, on="host", how="left")
        .join(pace, on="host", how="left")
        .with_columns(
            paced_capacity(window_s, in_flight).alias("raw_capacity"),
            pl.col("concurrency").fill_null(START_CONCURRENCY),
        )
        .with_columns(
            (
                pl.col("raw_capacity")
                * pl.when(held).then(0.0).when(pl.col("error_share") > 0.5).then(0.5).otherwise(1.0)
            )
            .floor()
            .cast(pl.Int64)
            .alias("capacity"),
            (1.0 + ERROR_COST_WEIGHT * pl.col("error_share")).alias("cost_multiplier"),
        )
        .select("host", "capacity", "cost_multiplier", "crawl_delay", "gap_s", "concurrency")
    )


#: what the plan reads of url_state (plan_inputs); the rest of the table is not loaded
STATE_COLUMNS = (
    "url",
    "status",
    "last_fetched_at",
    "last_seen_at",
    # when a gone page first answered gone: how long it waits for its next check
    "gone_at",
    "change_rate",
    "n_obs",
    "n_changes",
    # the history the change prior scores each page on (science.prior.table.posterior_gains)
    "obs_interval_days",
    "obs_changed",
    "obs_age_days",
    "etag",
    "last_modified",
    "fingerprint",
    "fingerprint_version",
    "consecutive_errors",
    "redirect_to",
    "duplicate_of",
    "last_http_status",
    "last_outcome",
    "archived",
    "version_observed_at",
)
#: what the plan reads of last cycle's fetch_results (host_health) and host_capacity
#: (host_capacity's learned pace)
RESULT_COLUMNS = ("host", "sent", "outcome", "http_status", "retry_after_s")
PACE_COLUMNS = ("host", "gap_s", "concurrency", "latency_s", "accepted_cap")


def published_since_first_read() -> pl.Expr:
    """Whether a candidate was found by the crawl (a sitemap, a feed, a redirect) rather than
    given as a seed, after the crawl's first find on its host: the pages a site publishes while
    it is crawled, which the plan's new pass takes first. What the first read of a site's
    sitemaps finds is the site as it stood, a backlog like the seeds: counted as new
    publications, a shop's listing variants and every old page of its sitemap went ahead of
    the seeds the user valued five times higher in a cold start (found by an exploratory run)."""
    found = ~pl.col("sources").fill_null("seed").str.contains("seed", literal=True)
    first_find = pl.col("first_seen_at").filter(found).min().over("host")
    return (found & (pl.col("first_seen_at") > first_find).fill_null(False)).alias("discovered")


def plan_inputs(
    candidates: pl.DataFrame,
    state: pl.DataFrame,
    capacity: pl.DataFrame,
    config: PipelineConfig | None = None,
) -> pl.DataFrame:
    """Candidates joined with what we know of them: status, last fetch, rate and validators."""
    known = state.select(STATE_COLUMNS).rename({"status": "state_status"})
    permanent_redirect = pl.col("redirect_to").is_not_null() & pl.col("last_http_status").is_in(
        [301, 308]
    )
    config = config or PipelineConfig()
    other_extractor = pl.col("fingerprint_version").is_not_null() & (
        pl.col("fingerprint_version") != config.version_expr()
    )
    # what the fetch stage cannot read again (rereading.with_reread_fingerprints's rows)
    unreadable = other_extractor & (
        pl.col("archived").is_null() | pl.col("version_observed_at").is_null()
    )
    returning = (pl.col("state_status") == "gone").fill_null(False)
    # a 304 that was no revalidation: the next fetch asks for the page itself
    refused_304 = is_refused_304("last_http_status", "last_outcome").fill_null(False)
    return (
        candidates.join(known, on="url", how="left")
        # A fingerprint from another extractor (an older release, other selectors, fields or
        # json_ld) cannot be compared: the fetch stage reads the page's archived body again
        # under the current extraction (stages/rereading.py) and compares with that, and a
        # 304 is then that reading. A page without an archived body goes without validators:
        # a 304 would bring no body to extract, the page would keep the old fingerprint until
        # its next change, and that change would be taken for a re-extraction (after an
        # upgrade, every page fetched whole once: 2.4x the bytes, no 304s, for cycles).
        # A gone page is fetched as if never seen: should it be back, even unchanged, it
        # comes back as a new version, which `freshness export` hands downstream after the
        # tombstone it sent, and the time it was gone is not taken for an interval observed.
        .with_columns(
            fingerprint=pl.when(
                (pl.col("fingerprint_version") == config.version_expr()) & ~returning
            ).then("fingerprint"),
            etag=pl.when(~unreadable & ~returning & ~refused_304).then("etag"),
            last_modified=pl.when(~unreadable & ~returning & ~refused_304).then("last_modified"),
        )
        .join(host_pace(capacity), on="host", how="left")
        .with_columns(
            discovered=published_since_first_read(),
            # A URL robots.txt allows again is planned as what it was before it was blocked
            # (as url_state will say after this cycle): left 'blocked' it waited a cycle more.
            status=pl.when(~pl.col("allowed"))
            .then(pl.lit("blocked"))
            .when(pl.col("state_status") == "blocked")
            .then(
                pl.when(pl.col("last_seen_at").is_null())
                .then(pl.lit("new"))
                .otherwise(pl.lit("active"))
            )
            .otherwise(pl.col("state_status").fill_null("new")),
            # A page's age is its copy's: a 429 brought none, so it is as stale as before and a
            # page never fetched is still never fetched. Aged from the 429 (url_state's
            # last_fetched_at: a request went out), a first copy throttled on a cold start fell
            # from the never-fetched tie to the bottom, yet still 'new' it held one of its
            # host's first turns: each such page cost its host a fetch a cycle, for cycles
            # (found by an exploratory run). The host's pace is what answers a 429.
            last_fetched_at=pl.when(
                (pl.col("last_http_status") == TOO_MANY_REQUESTS).fill_null(False)
            )
            .then(pl.col("last_seen_at"))
            .otherwise(pl.col("last_fetched_at")),
            last_request_at=pl.col("last_fetched_at"),
            # A URL failing again and again costs more, up to 16x, so it yields to healthy ones.
            cost=pl.col("cost_multiplier").fill_null(1.0)
            * (2.0 ** pl.col("consecutive_errors").fill_null(0).clip(0, 4))
            * pl.when(permanent_redirect | pl.col("duplicate_of").is_not_null())
            .then(SECOND_COPY_COST)
            .otherwise(1.0),
        )
    )


def host_pace(capacity: pl.DataFrame) -> pl.DataFrame:
    """What each plan row carries of its host (``host_capacity`` rows; a frame without the pace
    columns, as from an older caller, leaves them null: nothing learned)."""
    names = {"capacity": "host_capacity", "gap_s": "host_gap_s", "concurrency": "host_concurrency"}
    types = {"capacity": pl.Int64, "gap_s": pl.Float64, "concurrency": pl.Int64}
    return capacity.select(
        "host",
        "cost_multiplier",
        "crawl_delay",
        *(
            (pl.col(c) if c in capacity.columns else pl.lit(None, dtype=types[c])).alias(name)
            for c, name in names.items()
        ),
    )


def page_type_cost(
    inputs: pl.DataFrame, settings: PipelineConfig, sent_bytes: pl.DataFrame | None
) -> pl.Series:
    """Each candidate's cost basis (science.cost): 1, its class's credits, or its type's bytes
    per request relative to an average request (``sent_bytes``: fetch_totals rows)."""
    if settings.cost_basis == "credits":
        return inputs.select(credits_cost(pl.col("url_class"), settings.class_credits)).to_series()
    if settings.cost_basis == "bytes" and sent_bytes is not None:
        return bytes_cost(inputs.select("host", "url_class"), sent_bytes)
    return pl.Series("cost", [1.0] * inputs.height, dtype=pl.Float64)


def with_lastmod_hints(inputs: pl.DataFrame, evidence: pl.DataFrame, now: datetime) -> pl.DataFrame:
    """Add ``hinted_change``: what a host's sitemap lastmod says about each page since we last
    saw it, only where the host's lastmod (in the page's sitemap files) has proven accurate
    against our own fetches; and ``lastmod_dates`` / ``lastmod_age_days``, which url_state
    reads to date the change the fetch then finds (science.hints.lastmod_hints)."""
    trust = lastmod_trust(evidence, now=now)
    pages = inputs.select(
        "host",
        "lastmod",
        pl.col("last_seen_at").alias("last_fetched_at"),
        # without it (a benchmark's candidates) every page is judged by its host's figures
        *[c for c in ("listed_in",) if c in inputs.columns],
    )
    hints = lastmod_hints(pages, trust, now=now)
    return inputs.with_columns(
        hints.select(
            "hinted_change", "hint_recall", "hint_likelihood", "lastmod_dates", "lastmod_age_days"
        )
    )


def with_delisting(inputs: pl.DataFrame, robots: pl.DataFrame) -> pl.DataFrame:
    """Add ``delisted``: a complete read came after the page was last listed
    (``listed_until``), and the page was not fetched since it was last listed. A complete read
    of the file that listed it (``listed_in``; robots.sitemap_reads' ``complete_at``, a 304 to
    its validators included) or of all the host's sitemaps (robots.sitemaps_read_at): only a
    complete read counts, since a read that failed or was cut by a cap says nothing of the URLs
    it did not reach. Per file, so that one failing child file, or a walk cut by its caps,
    does not keep every page that left the host's other files from its early check (found by
    an exploratory run)."""
    read = robots.select("host", pl.col("sitemaps_read_at").alias("_read_at"))
    files = (
        robots.select("host", pl.col("sitemap_reads").alias("_f"))
        .explode("_f")
        .drop_nulls("_f")
        .select(
            "host",
            pl.col("_f").struct.field("url").alias("_file"),
            pl.col("_f").struct.field("complete_at").alias("_file_read_at"),
        )
        .drop_nulls()
        .unique(["host", "_file"], keep="last")
        if "sitemap_reads" in robots.columns
        else None
    )
    last = pl.col("last_fetched_at")
    out = inputs.join(read, on="host", how="left", maintain_order="left")
    if files is not None and "listed_in" in inputs.columns:
        out = out.join(
            files,
            left_on=["host", "listed_in"],
            right_on=["host", "_file"],
            how="left",
            maintain_order="left",
        )
    else:
        out = out.with_columns(_file_read_at=pl.lit(None, dtype=tables.UTC_TIME))
    read_since = pl.max_horizontal("_read_at", "_file_read_at")
    return out.with_columns(
        delisted=(
            (read_since > pl.col("listed_until"))
            & (last.is_null() | (last <= pl.col("listed_until")))
        ).fill_null(False)
    ).drop("_read_at", "_file_read_at")


def with_listing_cost(inputs: pl.DataFrame, robots: pl.DataFrame) -> pl.DataFrame:
    """A URL its host's discovery reads every cycle as a feed or sitemap (robots.feeds: a
    seeded listing, or a feed the pages announce) costs a second copy's: fetched as a page
    too, a seeded feed went out twice a cycle, once for its items and once for a copy nobody
    reads, every version of it a change."""
    if "feeds" not in robots.columns:
        return inputs
    # a URL names its host: the URLs alone say which rows are read as listings
    read = robots["feeds"].explode().drop_nulls().implode()
    listing = pl.col("url").is_in(read)
    return inputs.with_columns(
        cost=pl.when(listing).then(pl.col("cost") * SECOND_COPY_COST).otherwise(pl.col("cost"))
    )


@dataclass(frozen=True)
class CyclePlan:
    """A cycle's plan, with what the asset reports beside it."""

    frame: pl.DataFrame
    #: hosts no page of which is planned: a Retry-After still holds them
    held_by_retry_after: int


def cycle_plan(
    wh: Warehouse,
    hosts: list[str],
    candidates: pl.DataFrame,
    now: datetime,
    *,
    window_s: float,
    budget: int | None,
    objective: str,
    settings: PipelineConfig,
) -> CyclePlan:
    """The revisit plan of ``hosts`` as of ``now``, from this cycle's candidates and what the
    warehouse holds of earlier cycles (url_state, the change prior, robots, last cycle's
    answers, each host's learned pace and what its validators have shown). The revisit_plan
    asset is this between Dagster's read of the candidates and its write of the plan;
    benchmarks call it to plan as the product does without Dagster."""
    health = host_health(wh.read("fetch_results", hosts, columns=RESULT_COLUMNS), hosts)
    # what the plan reads of robots: the holds, Crawl-delays, the last complete sitemap walk
    # and the feeds and seeded sitemaps discovery reads
    robots = wh.read(
        "robots",
        hosts,
        columns=[
            "host",
            "retry_until",
            "crawl_delay",
            "sitemaps_read_at",
            "sitemap_reads",
            "feeds",
        ],
    )
    holds = held_hosts(robots, now)
    pace = wh.read("host_capacity", hosts, columns=PACE_COLUMNS)
    capacity = host_capacity(robots, health, window_s, holds, pace)
    inputs = with_lastmod_hints(
        plan_inputs(
            candidates, wh.read("url_state", hosts, columns=STATE_COLUMNS), capacity, settings
        ),
        wh.read("lastmod_evidence", hosts),
        now,
    )
    inputs = with_listing_cost(with_delisting(inputs, robots), robots)
    evidence = wh.read(
        "validator_evidence", hosts, columns=["host", "cycle_at", *UNPROVEN_COLUMNS, "routes"]
    )
    recent = evidence.filter(cycles_within(now, VALIDATOR_HISTORY))
    scope = unproven_scope(unproven_hosts(recent), unproven_routes(recent))
    inputs = inputs.with_columns(unproven_scope=scope)
    sent_bytes = (
        fetch_memory(wh, hosts, inputs, since=now - BYTES_HISTORY).filter(
            cycles_within(now, BYTES_HISTORY) & (pl.col("cycles") == 1)
        )
        if settings.cost_basis == "bytes"
        else None
    )
    inputs = inputs.with_columns(pl.col("cost") * page_type_cost(inputs, settings, sent_bytes))
    config = PlanConfig(objective=cast(Objective, objective))  # PlanConfig checks the value
    # What a fetch now is worth under the change prior url_state fit last cycle, and the
    # model's forecast that it changed, which the random verification sample is scored on.
    gains = posterior_gains(inputs, wh.read("change_prior", hosts), now=now)
    inputs = inputs.with_columns(
        expected_gain_override=gains[GAIN_COLUMN[config.objective]],
        expected_change=gains["expected_capture"],
    )
    plan = build_plan(
        inputs, capacity.select("host", "capacity"), now=now, budget=budget, config=config
    ).with_columns(
        planned_at=pl.lit(now).cast(tables.UTC_TIME),
        # the plan aged a throttled page from its copy (plan_inputs); the table says, as
        # url_state does, when a request last went out
        last_fetched_at=pl.col("last_request_at"),
    )
    frame = tables.conform("revisit_plan", plan).sort(["host", "url"])
    return CyclePlan(frame, holds.height)
