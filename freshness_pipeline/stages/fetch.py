"""fetch_results and host_capacity: the plan's selected URLs fetched with conditional GETs, and
what each host showed it accepts.

Every planned URL gets a row: sent requests with their outcome, the rest 'deferred' (host
throttled, cycle time limit). When a host defers part of its share for its own reasons, the
budget it left goes to the plan's reserve on other hosts in the same cycle ('refill' rows).
Requests actually sent are also appended to the fetch_log history, one file per cycle per host,
named after the cycle so a re-run replaces rather than duplicates. host_capacity keeps each
host's learned pace for the next cycle (science.capacity) with what this one planned, sent and
deferred there.
"""

import concurrent.futures
import contextlib
import ctypes
import functools
import multiprocessing
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from operator import attrgetter
from pathlib import Path

import polars as pl

from freshness_pipeline.config import PipelineConfig
from freshness_pipeline.science.capacity import next_host_capacity
from freshness_pipeline.science.fingerprint import ContentRecord
from freshness_pipeline.science.normalize import normalize_url_column
from freshness_pipeline.science.redirects import soft_404_redirects
from freshness_pipeline.science.retry_after import THROTTLE_STATUSES
from freshness_pipeline.science.schedule import REFILL_REASON
from freshness_pipeline.science.validators import (
    content_age_trust,
    drop_untrusted_validators,
    etag_fails_here,
    etag_refused_here,
    stuck_routes,
    trust_before,
)
from freshness_pipeline.stages.placeholders import placeholder_answers
from freshness_pipeline.stages.rereading import as_reextractions, with_reread_fingerprints
from freshness_pipeline.stages.running_totals import (
    VALIDATOR_HISTORY,
    remember_cycle,
    validator_memory,
)
from freshness_pipeline.stages.versions import change_rows, version_rows
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.archive import (
    ArchivedOriginal,
    ArchiveWriter,
    archive_dir_for,
    recover_archive,
)
from freshness_pipeline.warehouse.host_parts import split_by
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline.web.client import (
    TIME_LIMIT_REASON,
    FetchRequest,
    FetchResult,
    FetchSettings,
    fetch_all_sync,
    header_text,
    host_key,
)
from freshness_pipeline.web.discovery import RECORD_COLUMNS, record_from_row
from freshness_pipeline.web.netguard import ALLOW_ENV, IPNetwork
from freshness_pipeline.web.robots import ALLOW_LIST_REASON, RobotsPolicy, robots_policy
from freshness_pipeline.web.throttle import Throttles

_PACE = {"host_gap_s": pl.Float64, "host_concurrency": pl.Int64}
_RESULT_FIELDS = tuple(f.name for f in fields(FetchResult) if f.name != "hops")


def held_back_reasons(results: pl.DataFrame) -> dict[str, int]:
    """How many planned fetches were not made, by what stopped them, in the words the cycle's
    summary uses (the per-URL detail stays in fetch_results.error)."""
    error = pl.col("error").fill_null("")
    reason = (
        pl.when(pl.col("outcome") == "blocked")
        .then(pl.lit(f"{ALLOW_LIST_REASON} ({ALLOW_ENV})"))
        .when(error == TIME_LIMIT_REASON)
        .then(pl.lit("cycle time limit"))
        .when(error.str.starts_with("host throttled"))
        .then(pl.lit("Retry-After beyond the cycle"))
        .when(error.str.starts_with("host failing"))
        .then(pl.lit("circuit breaker (host failing)"))
        .otherwise(pl.lit("deferred"))
    )
    held = results.filter(pl.col("outcome").is_in(["blocked", "deferred"]))
    return dict(held.group_by(reason.alias("reason")).len().sort("reason").iter_rows())


def fetch_requests(plan: pl.DataFrame, config: PipelineConfig) -> list[FetchRequest]:
    """The plan's selected rows in rank order (a plan without ranks, such as a refill, in its
    own order), each with what the host's pace says, what the archive holds of it and what
    its URL class extracts (one shared object per class, picked by a map over the class
    column).

    Pages that failed last time go after the others: three pages that hang or reset would
    otherwise go first (a page never answered is a new page) and open their host's breaker
    before its healthy pages were asked; behind them, they can only cost themselves. A host
    that is down fails its healthy pages too and still trips the breaker at once."""
    selected = plan.filter(pl.col("selected"))
    failing = (
        (pl.col("consecutive_errors").fill_null(0) > 0)
        if "consecutive_errors" in selected.columns
        else pl.lit(False)
    )
    keys = [failing, *([pl.col("rank")] if "rank" in selected.columns else [])]
    selected = selected.sort(keys, nulls_last=True, maintain_order=True)
    missing = {**_PACE, "archived": pl.String, "request_url": pl.String}
    filled = [pl.lit(None, dtype=t).alias(c) for c, t in missing.items() if c not in selected]
    extractions, extraction_index = config.extractions()
    return [
        FetchRequest(
            url=row["url"],
            host=row["host"],
            etag=row["etag"],
            last_modified=row["last_modified"],
            prev_fingerprint=row["fingerprint"],
            crawl_delay=row["crawl_delay"],
            selectors=extractions[row["extraction"]].selectors,
            fields=extractions[row["extraction"]].fields,
            json_ld=extractions[row["extraction"]].json_ld,
            min_gap_s=row["host_gap_s"],
            concurrency=row["host_concurrency"],
            archived=ArchivedOriginal.from_json(row["archived"]) if row["archived"] else None,
            archived_json=row["archived"] or None,
            request_url=row["request_url"],
        )
        for row in selected.with_columns(filled)
        .select(
            "url",
            "host",
            extraction_index.alias("extraction"),
            "etag",
            "last_modified",
            "fingerprint",
            "crawl_delay",
            "archived",
            "request_url",
            *_PACE,
        )
        .iter_rows(named=True)
    ]


def robots_checker(wh: Warehouse) -> Callable[[str], bool]:
    """robots.txt's word on a URL the plan did not name (a redirect's other spelling of a
    planned page), from the host's robots row read when first asked: only the rare hosts
    with such redirects pay for it. No row: not allowed (a cycle fetches no host without)."""
    policies: dict[str, RobotsPolicy | None] = {}

    def allows(url: str) -> bool:
        host = host_key(url)
        if host not in policies:
            rows = wh.read("robots", [host], columns=list(RECORD_COLUMNS))
            record = record_from_row(rows.row(0, named=True)) if rows.height else None
            policies[host] = robots_policy(record) if record is not None else None
        policy = policies[host]
        return policy is not None and policy.can_fetch(url)

    return allows


def host_deferred(results: list[FetchResult]) -> dict[str, int]:
    """Planned fetches each host left unfetched for reasons of its own (its breaker opened, or
    it asked for a pause longer than the cycle): not the cycle's time limit, nor refused URLs."""
    counts: dict[str, int] = {}
    for r in results:
        if r.outcome == "deferred" and r.error != TIME_LIMIT_REASON:
            counts[r.host] = counts.get(r.host, 0) + 1
    return counts


def refill_rows(plan: pl.DataFrame, freed: int, stopped: set[str]) -> pl.DataFrame:
    """The plan's reserve rows that replace ``freed`` deferred fetches: best first, none of a
    host in ``stopped``, and no host beyond its capacity (the plan's ``host_capacity``, less
    what it had selected already)."""
    if freed <= 0 or "reserve_rank" not in plan.columns:
        return plan.clear()
    taken = plan.filter(pl.col("selected")).group_by("host").len("_taken")
    return (
        plan.filter(pl.col("reserve_rank").is_not_null() & ~pl.col("host").is_in(list(stopped)))
        .sort("reserve_rank")
        .join(taken, on="host", how="left", maintain_order="left")
        .filter(
            pl.int_range(1, pl.len() + 1).over("host") + pl.col("_taken").fill_null(0)
            <= pl.col("host_capacity").fill_null(0)
        )
        .head(freed)
        .drop("_taken")
        .with_columns(selected=pl.lit(True), reason=pl.lit(REFILL_REASON))
    )


def raw_results(results: list[FetchResult]) -> pl.DataFrame:
    """The fetcher's results as one frame, every field (with the versions' text)."""
    if not results:
        return pl.DataFrame()
    # Built column by column: a dict per row, which polars then takes apart again, cost
    # several microseconds per fetch (docs/fetch_rate.md).
    columns = {name: list(map(attrgetter(name), results)) for name in _RESULT_FIELDS}
    try:
        return pl.DataFrame(columns)
    except UnicodeEncodeError:
        # A server's byte that is not UTF-8 reached a field the fetcher did not clean (an
        # exception's message quoting it): cleaned here, so that one answer cannot fail every
        # host's results.
        return pl.DataFrame(
            {
                name: [header_text(v) if isinstance(v, str) else v for v in values]
                for name, values in columns.items()
            }
        )


def results_frame(
    plan: pl.DataFrame,
    results: list[FetchResult] | pl.DataFrame,
    now: datetime,
    config: PipelineConfig,
) -> pl.DataFrame:
    frame = results if isinstance(results, pl.DataFrame) else raw_results(results)
    if frame.is_empty():
        return tables.empty("fetch_results")
    # the model's forecast of a change, kept with the fetch that tests it (the verify metrics);
    # where a trusted sitemap said "changed" the plan's number is the hint's (1), not the
    # model's; a sitemap saying "unchanged" leaves the model's forecast as it was
    forecast = pl.col("expected_change") if "expected_change" in plan.columns else pl.lit(None)
    if "hinted_change" in plan.columns:
        forecast = pl.when(~pl.col("hinted_change").fill_null(False)).then(forecast)
    if {"first_seen_at", "version_observed_at"} <= set(plan.columns):
        # a permanent redirect to the home page or to a page known before: gone (soft 404)
        frame = soft_404_redirects(frame, plan)
    planned = plan.select(
        "url",
        "url_class",
        pl.col("reason").alias("plan_reason"),
        forecast.cast(pl.Float64).alias("expected_change"),
    ).unique(subset="url", keep="last", maintain_order=True)
    return tables.conform(
        "fetch_results",
        normalized_canonicals(frame)
        .join(planned, on="url", how="left")
        .with_columns(
            fetched_at=pl.lit(now).cast(tables.UTC_TIME),
            fingerprint_version=config.version_expr(),
        ),
    )


def followed_hops(results: list[FetchResult], sent: pl.DataFrame) -> pl.DataFrame:
    """fetch_log rows of the redirects fetches followed to other spellings of their pages
    (``hop`` 1, 2, ..), each request under its page's URL with the plan's reason and the
    cycle's time of the page's row in ``sent``. The contract's fetch_log has a row per request
    sent; these had none, and a log of 4 rows stood for 9 requests (a contract audit)."""
    numbered = [(h, i) for r in results if r.hops for i, h in enumerate(r.hops, start=1)]
    if not numbered:
        return tables.empty("fetch_log")
    page = sent.select(
        "url", "plan_reason", "expected_change", "fetched_at", "fingerprint_version"
    ).unique("url", keep="last")
    frame = raw_results([h for h, _ in numbered]).with_columns(
        hop=pl.Series([i for _, i in numbered], dtype=pl.Int64)
    )
    return tables.conform("fetch_log", frame.join(page, on="url", how="left"))


def normalized_canonicals(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with each canonical link normalized as the inventory's URLs are, so that
    url_state can match it against them; one that is the page's own URL so written (another
    case, a tracking parameter) or that does not parse names nothing."""
    if "canonical" not in frame.columns or frame["canonical"].null_count() == frame.height:
        return frame
    normalized = normalize_url_column(frame["canonical"])["url"]
    named = pl.col("_named")
    return (
        frame.with_columns(_named=normalized)
        .with_columns(canonical=pl.when(named != pl.col("url")).then(named))
        .drop("_named")
    )


def dated_by_host(frame: pl.DataFrame, trust: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with ``dates_changes``: whether its host's Last-Modified has earned belief as
    the date of a content change (validators.content_age_trust, judged on the history before
    this cycle; no history: False). url_state keeps content ages only where it is True."""
    verdict = content_age_trust(trust).select("host", pl.col("ages_trusted").alias("_dates"))
    return (
        frame.join(verdict, on="host", how="left", maintain_order="left")
        .with_columns(dates_changes=pl.col("_dates").fill_null(False))
        .drop("_dates")
    )


@dataclass
class FetchStage:
    """One fetch stage's answer: the rows, and what an operator should look at afterwards."""

    frame: pl.DataFrame
    throttled: list[dict]
    trust: pl.DataFrame
    capacity: pl.DataFrame  # host_capacity rows for the next cycle (science.capacity)
    versions: pl.DataFrame  # this cycle's page_versions rows
    changes: pl.DataFrame  # this cycle's changes rows
    #: every request sent, as its fetch_log row: ``frame``'s sent rows and the redirects the
    #: fetches followed to other spellings of their pages (a ``hop``), which only fetch_log
    #: and the totals count
    requests: pl.DataFrame = field(default_factory=lambda: tables.empty("fetch_log"))


def host_groups(plan: pl.DataFrame, hosts: list[str], n_groups: int) -> list[list[str]]:
    """``hosts`` in at most ``n_groups`` groups with about equal numbers of selected URLs
    (largest host first, each to the lightest group), so that no process waits on another.
    Hosts with nothing selected go to no group."""
    counts = (
        plan.filter(pl.col("selected") & pl.col("host").is_in(hosts))
        .group_by("host")
        .len()
        .sort(["len", "host"], descending=[True, False])
    )
    groups: list[list[str]] = [[] for _ in range(max(1, min(n_groups, counts.height)))]
    loads = [0] * len(groups)
    for host, n in counts.iter_rows():
        lightest = loads.index(min(loads))
        groups[lightest].append(host)
        loads[lightest] += n
    return [sorted(g) for g in groups if g]


def run_fetch_stage(
    plan: pl.DataFrame,
    hosts: list[str],
    now: datetime,
    wh: Warehouse,
    config: PipelineConfig,
    settings: FetchSettings,
    allow: tuple[IPNetwork, ...],
    processes: int = 1,
    archive: bool = True,
) -> FetchStage:
    """Fetch the plan's selected URLs and append what was sent to fetch_log: everything the
    asset does but Dagster's part, so that the fetch-rate benchmark measures this code.

    One process tops out near half a bare aiohttp loop's rate, bound by its own CPU
    (docs/fetch_rate.md). With ``processes`` > 1 the hosts are split between that many
    processes; each host stays in one, so its politeness is kept by one throttle. The client
    gets the cycle's ``now`` to date what a response leaves undated (no Date header).
    """
    settings = replace(settings, cycle_now=now)
    groups = host_groups(plan, hosts, processes)
    # what every part gets alike; each part is its rows of the plan and its hosts
    fetch = functools.partial(
        _fetch_hosts,
        now=now,
        home=wh.home,
        config=config,
        settings=settings,
        allow=allow,
        archive=archive,
    )
    if len(groups) <= 1:
        return fetch(plan, hosts)
    idle = sorted(set(hosts) - {h for g in groups for h in g})
    spawn = multiprocessing.get_context("spawn")  # no fork of a process running threads
    with concurrent.futures.ProcessPoolExecutor(len(groups), mp_context=spawn) as pool:
        parts = list(
            pool.map(fetch, [plan.filter(pl.col("host").is_in(g)) for g in groups], groups)
        )
    if idle:
        parts.append(fetch(plan.filter(pl.col("host").is_in(idle)), idle))
    return FetchStage(
        frame=pl.concat([p.frame for p in parts], how="vertical_relaxed"),
        throttled=[t for p in parts for t in p.throttled],
        trust=pl.concat([p.trust for p in parts], how="vertical_relaxed"),
        capacity=pl.concat([p.capacity for p in parts], how="vertical_relaxed").sort("host"),
        versions=pl.concat([p.versions for p in parts], how="vertical_relaxed"),
        changes=pl.concat([p.changes for p in parts], how="vertical_relaxed"),
        requests=pl.concat([p.requests for p in parts], how="vertical_relaxed"),
    )


def _fetch_hosts(
    plan: pl.DataFrame,
    hosts: list[str],
    now: datetime,
    home: Path,
    config: PipelineConfig,
    settings: FetchSettings,
    allow: tuple[IPNetwork, ...],
    archive: bool = True,
) -> FetchStage:
    wh = Warehouse(home)
    evidence, latest = validator_memory(wh, hosts, now)
    trust = trust_before(evidence, now, VALIDATOR_HISTORY)
    # routes whose validator is stuck under a host that may be honest elsewhere: judged apart
    stuck_on_routes = stuck_routes(evidence, now, VALIDATOR_HISTORY)
    earned_trust = trust_before(evidence, now, VALIDATOR_HISTORY, apart=stuck_on_routes)
    # URLs whose last request with their ETag got a 304: the server compares it for them
    honoured = latest.filter((pl.col("http_status") == 304) & (pl.col("validator") == "etag"))[
        "url"
    ]
    # URLs whose ETag does nothing for them: If-Modified-Since goes out instead, where known
    by_date = etag_fails_here(latest)
    # URLs whose server answers any If-None-Match with a 304 naming another ETag
    refused = etag_refused_here(latest)

    def ready(rows: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, ContentRecord]]:
        """Plan rows with the validators their hosts and URLs earned; pages another extractor
        fingerprinted compared against their archived body read again now, so a change since
        their last fetch is a change, not a silent re-extraction."""
        earned = drop_untrusted_validators(
            rows,
            earned_trust,
            honoured=honoured,
            by_date=by_date,
            refused=refused,
            stuck_on_routes=stuck_on_routes,
        )
        return with_reread_fingerprints(earned, home, config)

    planned, rereads = ready(plan.filter(pl.col("selected")))
    throttles = Throttles(settings.throttle)
    robots_allow = robots_checker(wh)
    started = time.monotonic()
    # Every answer goes to the cycle's archive file, which is complete (fsynced and renamed)
    # when the block ends, before any row that points into it is written; a failure leaves
    # no file behind but those completed earlier.
    with cycle_archive(home, now, archive) as writer:
        results = fetch_all_sync(
            fetch_requests(planned, config),
            settings,
            allow=allow,
            throttles=throttles,
            archive=writer,
            robots_allow=robots_allow,
            url_key=config.url_key,
        )
        # Budget a host left for its own reasons goes to the next best buys of the other
        # hosts, while the cycle has time for them.
        deferred = host_deferred(results)
        limit = settings.cycle_time_limit_s
        left = None if limit is None else limit - (time.monotonic() - started)
        refill = refill_rows(plan, sum(deferred.values()), set(deferred))
        if refill.height and (left is None or left > 0):
            refill, more = ready(refill)
            rereads.update(more)
            results += fetch_all_sync(
                fetch_requests(refill, config),
                replace(settings, cycle_time_limit_s=left),
                allow=allow,
                throttles=throttles,
                archive=writer,
                robots_allow=robots_allow,
                url_key=config.url_key,
            )
            plan = pl.concat([plan, refill], how="diagonal_relaxed")
    as_reextractions(results, rereads)
    raw = placeholder_answers(raw_results(results), plan)
    frame = dated_by_host(results_frame(plan, raw, now, config), trust)
    versions = version_rows(raw, plan, now, config)
    changes = change_rows(wh, versions, plan, config, rereads)
    sent = frame.filter(pl.col("sent"))
    requests = pl.concat([followed_hops(results, sent), tables.conform("fetch_log", sent)])
    by_host = split_by(requests, "host")
    for host in hosts:
        part = by_host.get(host)
        if part is not None:
            wh.append_fetch_log(host, now, part)
    remember_cycle(wh, hosts, now, (evidence, latest), sent, plan, requests=requests)
    snapshot = throttles.snapshot()
    capacity = next_host_capacity(
        wh.read("host_capacity", hosts),
        capacity_observations(plan, frame, snapshot, hosts),
        now,
        max_concurrency=settings.host_concurrency,
    )
    return FetchStage(
        frame=frame,
        throttled=snapshot,
        trust=trust,
        capacity=tables.conform("host_capacity", capacity),
        versions=versions,
        changes=changes,
        requests=requests,
    )


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):  # not glibc
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_MALLOC_TRIM = _malloc_trim()


def release_freed_memory() -> None:
    """Hand the C heap's free pages back to the operating system (glibc ``malloc_trim``; a
    no-op elsewhere). The fetch stage allocates and frees a great many small objects (requests,
    responses, parsed pages) over several threads' arenas, and glibc keeps what was freed
    mapped: the steps after it in the same process (url_state, the largest) would otherwise
    start with that memory still counted against the process (docs/scaling.md)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def cycle_archive(
    home: Path, now: datetime, enabled: bool
) -> contextlib.AbstractContextManager[ArchiveWriter | None]:
    """The process's archive writer for this cycle (None when archiving is off): one file per
    cycle and process, named for both."""
    if not enabled:
        return contextlib.nullcontext()
    recover_archive(archive_dir_for(home))  # what a killed run left, before this one writes
    return ArchiveWriter(archive_dir_for(home), now, writer=f"fetch{os.getpid()}")


def capacity_observations(
    plan: pl.DataFrame, frame: pl.DataFrame, snapshot: list[dict], hosts: list[str]
) -> pl.DataFrame:
    """One row per host of what this cycle saw of it (science.capacity.CYCLE_COLUMNS): the
    plan's share and capacity, the rows' outcomes, and the throttle's learned pace."""
    per_host = pl.DataFrame({"host": hosts}, schema={"host": pl.String})
    allowed = (
        plan.filter(pl.col("selected"))
        .group_by("host")
        .agg(
            (pl.col("reason") != REFILL_REASON).fill_null(True).sum().alias("planned"),
            pl.col("host_capacity").max().alias("capacity")
            if "host_capacity" in plan.columns
            else pl.lit(None, dtype=pl.Int64).alias("capacity"),
        )
    )
    deferred = pl.col("outcome") == "deferred"
    outcomes = frame.group_by("host").agg(
        pl.col("sent").sum().cast(pl.Int64).alias("sent"),
        deferred.sum().cast(pl.Int64).alias("deferred"),
        (deferred & (pl.col("error") != TIME_LIMIT_REASON).fill_null(True))
        .sum()
        .cast(pl.Int64)
        .alias("deferred_by_host"),
        (pl.col("sent") & pl.col("http_status").is_in(THROTTLE_STATUSES))
        .sum()
        .cast(pl.Int64)
        .alias("throttled"),
        (pl.col("sent") & (pl.col("outcome") == "error")).sum().cast(pl.Int64).alias("failures"),
        (pl.col("plan_reason") == REFILL_REASON).sum().cast(pl.Int64).alias("refilled"),
        (pl.col("sent") & (pl.col("http_status") == 429))
        .sum()
        .cast(pl.Int64)
        .alias("rate_limited"),
        (pl.col("sent") & (pl.col("http_status") == 503) & pl.col("retry_after_s").is_not_null())
        .sum()
        .cast(pl.Int64)
        .alias("waits_named"),
    )
    pace = pl.DataFrame(
        [
            {
                "host": t["host"],
                "gap_s": t["gap_s"],
                "latency_s": t["latency_s"],
                "crawl_delay_s": t["crawl_delay_s"],
                "pauses": t["n_pauses"],
                "unpaced": t.get("n_unpaced_503", 0),
            }
            for t in snapshot
        ],
        schema={
            "host": pl.String,
            "gap_s": pl.Float64,
            "latency_s": pl.Float64,
            "crawl_delay_s": pl.Float64,
            "pauses": pl.Int64,
            "unpaced": pl.Int64,
        },
    )
    counts = [
        "planned",
        "sent",
        "deferred",
        "deferred_by_host",
        "throttled",
        "failures",
        "rate_limited",
        "waits_named",
    ]
    return (
        per_host.join(allowed, on="host", how="left")
        .join(outcomes, on="host", how="left")
        .join(pace, on="host", how="left")
        .with_columns(
            pl.col([*counts, "refilled", "pauses", "unpaced"]).fill_null(0).cast(pl.Int64),
        )
        # the 503s the throttle took for a flaky host's failures say nothing of its pace
        .with_columns((pl.col("throttled") - pl.col("unpaced")).clip(0).alias("throttled"))
        .drop("unpaced")
    )
