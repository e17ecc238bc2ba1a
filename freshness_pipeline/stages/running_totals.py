"""The running totals the fetch stage keeps per host, so that neither a cycle nor the metric
views re-read fetch_log: validator evidence (science.validators.remember_requests, tables
validator_evidence and validator_latest) and what each cycle's requests add up to
(science.fetch_totals, table fetch_totals: the metrics and pricing by bytes).

fetch_log is one file per host and cycle: a month of it at 1,500 hosts is 180,000 files, read in
37 s, against 0.6 s for the validator tables (docs/validator_history.md). A host without the
tables (a warehouse from before them) has them rebuilt once from its fetch_log. Only the hosts
whose totals moved are written back, since each file written costs a few milliseconds of fsync.
"""

from datetime import UTC, datetime, timedelta

import polars as pl

from freshness_pipeline.science.fetch_totals import fetch_counts, remember_fetches
from freshness_pipeline.science.validators import (
    latest_requests,
    remember_requests,
    validator_counts,
)
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.storage import Warehouse

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# How far back validator behaviour is judged: long enough to see a stuck Last-Modified, short
# enough that a host that fixes its server is trusted again within weeks.
VALIDATOR_HISTORY = timedelta(days=30)


def _missing(wh: Warehouse, table: str, hosts: list[str]) -> list[str]:
    return [h for h in hosts if not wh.has_partition(table, h)]


def _per_cycle(frame: pl.DataFrame, table: str) -> pl.DataFrame:
    return tables.conform(table, frame.rename({"fetched_at": "cycle_at"}))


def validator_memory(
    wh: Warehouse, hosts: list[str], now: datetime
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The validator evidence of ``hosts`` as of ``now``: (validator_evidence,
    validator_latest)."""
    evidence = wh.read("validator_evidence", hosts)
    latest = wh.read("validator_latest", hosts)
    missing = _missing(wh, "validator_evidence", hosts)
    if not missing:
        return evidence, latest
    history = wh.read_fetch_log(missing, now - VALIDATOR_HISTORY).filter(
        (pl.col("fetched_at") < now) & pl.col("hop").is_null()  # a page's answers, as live
    )
    counts = validator_counts(history, by=("host", "fetched_at"))
    return (
        pl.concat([evidence, _per_cycle(counts, "validator_evidence")]),
        pl.concat([latest, tables.conform("validator_latest", latest_requests(history))]),
    )


def fetch_memory(
    wh: Warehouse, hosts: list[str], classes: pl.DataFrame, since: datetime = _EPOCH
) -> pl.DataFrame:
    """The fetch_totals of ``hosts``; a host without them has them counted from its fetch_log
    since ``since`` (the fetch stage, which writes them: all of it, once, on the first cycle
    after an upgrade; a reader that needs less passes less), each URL's class taken from
    ``classes`` (``url``, ``url_class``: the plan or its inputs)."""
    totals = wh.read("fetch_totals", hosts)
    missing = _missing(wh, "fetch_totals", hosts)
    if not missing:
        return totals
    history = wh.read_fetch_log(missing, since).join(
        classes.select("url", "url_class").unique("url"), on="url", how="left"
    )
    counts = fetch_counts(history, ("host", "fetched_at", "url_class"))
    return pl.concat([totals, _per_cycle(counts.with_columns(cycles=pl.lit(1)), "fetch_totals")])


def remember_cycle(
    wh: Warehouse,
    hosts: list[str],
    now: datetime,
    memory: tuple[pl.DataFrame, pl.DataFrame],
    sent: pl.DataFrame,
    classes: pl.DataFrame,
    *,
    requests: pl.DataFrame | None = None,
) -> None:
    """Add the cycle's ``sent`` requests (fetch_results rows) to the totals and write back
    the hosts whose totals moved: those with requests, those without a file yet, and for the
    validator evidence those whose oldest cycles left its window. ``memory``: :func:`validator_memory` before
    the fetch; ``classes``: each URL's url_class (the plan). ``requests``: every request sent
    (fetch_log rows; default ``sent``), the redirects fetches followed to other spellings of
    their pages included: requests in the totals, but no answer to a validator (a redirected
    conditional GET says nothing of whether the page's validators work)."""
    evidence, latest = remember_requests(*memory, sent, now, VALIDATOR_HISTORY)
    active = set(sent["host"].to_list())
    since = now - VALIDATOR_HISTORY
    expired = set(memory[0].filter(pl.col("cycle_at") < since)["host"].to_list())
    expired |= set(memory[1].filter(pl.col("fetched_at") < since)["host"].to_list())
    moved = active | expired | set(_missing(wh, "validator_evidence", hosts))
    _write(wh, "validator_latest", [h for h in hosts if h in moved], latest)
    _write(wh, "validator_evidence", [h for h in hosts if h in moved], evidence)

    # lifetime totals: only a host with requests (or without a file yet) has anything to add
    moved = active | set(_missing(wh, "fetch_totals", hosts))
    written = [h for h in hosts if h in moved]
    every = sent if requests is None else requests
    classed = every.join(classes.select("url", "url_class").unique("url"), on="url", how="left")
    totals = remember_fetches(fetch_memory(wh, written, classes), classed, now)
    _write(wh, "fetch_totals", written, totals)


def _write(wh: Warehouse, table: str, hosts: list[str], frame: pl.DataFrame) -> None:
    if hosts:
        wh.write_partitions(table, hosts, frame.filter(pl.col("host").is_in(hosts)))
