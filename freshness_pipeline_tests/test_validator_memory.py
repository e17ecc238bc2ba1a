"""Validator evidence and fetch totals kept as running totals per host and cycle
(validators.remember_requests, fetch_totals.remember_fetches) instead of re-reading a month of
fetch_log every cycle: the totals must judge exactly as the month of history does, on random
histories and through real cycles on the synthetic web."""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from freshness_pipeline.science.validators import (
    COUNT_COLUMNS,
    ROUTE_COUNT_COLUMNS,
    latest_requests,
    remember_requests,
    stuck_routes,
    trust_before,
    validator_counts,
    validator_trust,
)
from freshness_pipeline.stages.running_totals import (
    VALIDATOR_HISTORY,
    fetch_memory,
    remember_cycle,
    validator_memory,
)
from freshness_pipeline.synthweb import DEFAULT_START, SiteSpec, SyntheticWeb, build_world
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.crawls import crawl

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CYCLE = timedelta(hours=6)
MONTH = timedelta(days=30)


def random_history(seed: int, cycles: int, urls: int = 12, hosts: int = 3) -> pl.DataFrame:
    """fetch_log-like rows with every kind of validator behaviour mixed at random: bodies and
    304s, ETags and Last-Modifieds that move or stay with or without the content, requests
    with either validator or none, a second extractor version, errors without a body, 304s
    the fetch refused."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(cycles):
        for u in range(urls):
            if rng.random() < 0.4:
                continue  # not fetched this cycle
            roll = rng.random()
            sent = rng.choice(["etag", "last_modified", "none"])
            rows.append(
                {
                    "url": f"https://h{u % hosts}.test/{'ab'[u % 2]}/p{u}",
                    "host": f"h{u % hosts}.test",
                    "fetched_at": T0 + c * CYCLE,
                    "http_status": 304 if roll < 0.3 else (503 if roll < 0.35 else 200),
                    # a 304 the fetch refused (it named another ETag) says 'error'
                    "outcome": ("error" if roll < 0.05 else "not_modified")
                    if roll < 0.3
                    else ("error" if roll < 0.35 else "changed"),
                    "conditional": sent != "none",
                    "validator": None if sent == "none" else str(sent),
                    "fingerprint": None if 0.3 <= roll < 0.35 else f"fp{rng.integers(3)}",
                    "fingerprint_version": int(rng.choice([1, 1, 1, 2])),
                    "etag": None if rng.random() < 0.2 else f'"e{rng.integers(3)}"',
                    "last_modified": None if rng.random() < 0.2 else f"lm{rng.integers(3)}",
                }
            )
    return tables.conform("validator_latest", pl.DataFrame(rows, infer_schema_length=None))


def run_cycles(history: pl.DataFrame, window: timedelta = MONTH):
    """Feed ``history`` to remember_requests one cycle at a time, as the fetch stage does."""
    evidence = tables.empty("validator_evidence")
    latest = tables.empty("validator_latest")
    for (now,), rows in sorted(history.partition_by("fetched_at", as_dict=True).items()):
        evidence, latest = remember_requests(evidence, latest, rows, now, window)
        evidence = tables.conform("validator_evidence", evidence)
        latest = tables.conform("validator_latest", latest)
    return evidence, latest


def test_the_evidence_columns_are_the_counts_the_verdicts_need():
    assert list(tables.VALIDATOR_EVIDENCE) == ["host", "cycle_at", *COUNT_COLUMNS, "routes"]


def route_sums(evidence: pl.DataFrame) -> pl.DataFrame:
    return (
        evidence.select("host", "routes")
        .explode("routes")
        .drop_nulls("routes")
        .unnest("routes")
        .group_by("host", "route")
        .agg(pl.col(*ROUTE_COUNT_COLUMNS).sum())
        .sort("host", "route")
    )


@pytest.mark.parametrize("seed", range(6))
def test_running_totals_judge_as_the_whole_history_does(seed):
    history = random_history(seed, cycles=40)
    evidence, _ = run_cycles(history)
    after = history["fetched_at"].max() + CYCLE
    kept = trust_before(evidence, after, MONTH)
    whole = validator_trust(history)
    assert kept.equals(whole)
    # route by route too: the same changed bodies, the same stuck routes
    counted = validator_counts(history).with_columns(cycle_at=pl.lit(T0))
    assert route_sums(evidence).equals(route_sums(counted))
    assert set(route_sums(evidence)["route"]) == {"/a/", "/b/"}
    routes = stuck_routes(evidence, after, MONTH)
    assert routes.height > 0 and routes.equals(stuck_routes(counted, after, MONTH))
    # and every cycle's counts are that cycle's requests' share of the whole
    per_cycle = validator_counts(history, by=("host", "fetched_at"))
    assert (
        evidence.sort(["host", "cycle_at"])
        .select(COUNT_COLUMNS)
        .equals(per_cycle.sort(["host", "fetched_at"]).select(COUNT_COLUMNS))
    )


def test_the_totals_keep_one_window_and_the_latest_rows_only():
    history = random_history(7, cycles=200)  # 50 days of cycles
    window = timedelta(days=10)
    evidence, latest = run_cycles(history, window)
    last = history["fetched_at"].max()
    assert evidence["cycle_at"].min() >= last - window
    # at most a last request, a last body and a last refused 304 per URL, none older than
    # the window
    assert latest.group_by("url").len()["len"].max() <= 3
    assert latest["fetched_at"].min() >= last - window
    recent = history.filter(pl.col("fetched_at") >= last - window)
    assert latest.sort("url", "fetched_at").equals(
        latest_requests(recent).sort("url", "fetched_at")
    )
    # what the window holds judges as the window's history does, but for the pairs whose
    # first half lies before it (counted while it was in the window)
    counts = evidence.select(COUNT_COLUMNS).sum()
    again = validator_counts(recent).select(COUNT_COLUMNS).sum()
    assert (counts["n_fetches"] == again["n_fetches"]).all()
    assert counts["n_body_pairs"][0] >= again["n_body_pairs"][0]


def test_a_rerun_cycle_replaces_its_counts_instead_of_adding_to_them():
    history = random_history(3, cycles=10)
    evidence, latest = run_cycles(history)
    now = history["fetched_at"].max()
    again, _ = remember_requests(
        evidence, latest, history.filter(pl.col("fetched_at") == now), now, MONTH
    )
    assert (
        again.filter(pl.col("cycle_at") == now).height
        == evidence.filter(pl.col("cycle_at") == now).height
    )
    assert again["n_fetches"].sum() == evidence["n_fetches"].sum()


def test_real_cycles_keep_totals_that_judge_as_the_fetch_log_does(tmp_path):
    """Hosts that earn and lose trust for real; the running totals must give the verdicts a
    month of fetch_log gives, and a warehouse without totals rebuilds them from fetch_log."""
    os.environ.setdefault("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    world = build_world(
        5,
        start=DEFAULT_START,
        horizon_days=3,
        sites=[
            SiteSpec("honest", "honest", 25),
            SiteSpec("frozen", "stale_lastmod", 25),
            SiteSpec("stamped", "volatile", 15),
        ],
    )
    home = tmp_path / "home"
    with SyntheticWeb(world) as web:
        now = list(crawl(web, home, tmp_path, 6))[-1]
        hosts = [web.hosts[name] for name in ("honest", "frozen", "stamped")]
    wh = Warehouse(home)
    after = now + CYCLE
    log = wh.read_fetch_log(hosts, after - VALIDATOR_HISTORY)
    from_log = validator_trust(log)
    evidence, latest = validator_memory(wh, hosts, after)
    from_totals = trust_before(evidence, after, VALIDATOR_HISTORY)
    assert from_totals.equals(from_log)
    verdicts = {r["host"]: r for r in from_totals.iter_rows(named=True)}
    assert verdicts[web.hosts["honest"]]["etag_trusted"]
    assert verdicts[web.hosts["honest"]]["etag_honored"] > 0
    assert not verdicts[web.hosts["frozen"]]["last_modified_trusted"]
    assert not verdicts[web.hosts["stamped"]]["etag_trusted"]
    assert latest.height <= 2 * log["url"].n_unique()

    fetch_totals = wh.read("fetch_totals", hosts)
    assert fetch_totals["requests"].sum() == log.height

    # a warehouse from before the running totals: rebuilt from fetch_log on first use
    for table in ("validator_evidence", "validator_latest", "fetch_totals"):
        shutil.rmtree(wh.table_dir(table))
    rebuilt, rebuilt_latest = validator_memory(wh, hosts, after)
    assert trust_before(rebuilt, after, VALIDATOR_HISTORY).equals(from_log)
    assert rebuilt_latest.sort("url", "fetched_at").equals(latest.sort("url", "fetched_at"))
    order = ["host", "cycle_at", "url_class"]
    assert (
        fetch_memory(wh, hosts, wh.read("revisit_plan", hosts))
        .sort(order)
        .equals(fetch_totals.sort(order))
    )


def test_only_hosts_whose_totals_moved_are_written_back(tmp_path):
    """Each file written costs an fsync: a host without requests this cycle, and with nothing
    leaving the window, keeps its files; one with requests, or with old cycles to drop, and
    one without files yet, are written. fetch_totals are lifetime sums: only requests (or no
    file yet) move them."""
    wh = Warehouse(tmp_path / "home")
    history = random_history(11, cycles=8, urls=9, hosts=3)
    hosts = sorted(history["host"].unique().to_list())
    classes = history.select("url", pl.lit("article").alias("url_class")).unique()

    def cycle(now, sent):
        memory = validator_memory(wh, hosts, now)
        sent = sent.with_columns(
            bytes=pl.lit(100), plan_reason=pl.lit("due"), expected_change=pl.lit(0.5)
        )
        remember_cycle(wh, hosts, now, memory, sent, classes)

    def stamps():
        return {
            (t, h): wh.partition_file(t, h).stat().st_mtime_ns
            for t in ("validator_evidence", "validator_latest", "fetch_totals")
            for h in hosts
        }

    first = history["fetched_at"].min()
    cycle(first, history.filter(pl.col("fetched_at") == first))
    before = stamps()  # every host got its files, requests or not
    later = first + CYCLE
    busy = hosts[0]
    cycle(later, history.filter((pl.col("fetched_at") == later) & (pl.col("host") == busy)))
    after = stamps()
    assert {k for k in before if before[k] != after[k]} == {
        (t, busy) for t in ("validator_evidence", "validator_latest", "fetch_totals")
    }
    assert wh.read("validator_evidence", [busy])["cycle_at"].max() == later
    # a month on, the quiet hosts' old evidence leaves its window: they are written too
    cycle(later + MONTH + CYCLE, history.clear())
    quiet = {k: v for k, v in stamps().items() if k[1] != busy}
    assert all(before[k] != v for k, v in quiet.items() if k[0] != "fetch_totals")
    assert all(before[k] == v for k, v in quiet.items() if k[0] == "fetch_totals")
    assert wh.read("validator_evidence", hosts).height == 0
