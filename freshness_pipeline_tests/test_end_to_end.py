"""The whole product through its contract: the `freshness` command against the synthetic web on
loopback, then SQL on the DuckDB views. Real HTTP, real Dagster runs, real DuckDB files."""

from __future__ import annotations

import inspect
import math
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import duckdb
import polars as pl
import pytest

from freshness_pipeline.config import PipelineConfig
from freshness_pipeline.science.calibration import MIN_VERIFY_VARIANCE
from freshness_pipeline.science.normalize import normalize_url
from freshness_pipeline.stages.fetch import results_frame
from freshness_pipeline.synthweb import DEFAULT_START, SyntheticWeb, build_world, default_sites
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline.web.client import FetchResult
from freshness_pipeline_tests.support import readme_sql_blocks, run_freshness

CYCLES = 4
STEP = timedelta(hours=6)
# The default web with its polite site cut from 80 pages to 36 (6 of them still under
# /private/): its Crawl-delay of 0.05 s a request paced every cycle, 3.7 s at 74 public pages,
# 1.5 s at 30. (At 36 the web keeps the margins of the default one: pages removed during the
# test, fetched pages without a sitemap hint, verification fetches.)
SITES = [replace(s, n_pages=36) if s.name == "polite" else s for s in default_sites()]


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    """Seed through the CLI, then run CYCLES cycles through the CLI, 6 simulated hours apart."""
    home = tmp_path_factory.mktemp("home")
    world = build_world(
        7, start=DEFAULT_START, horizon_days=CYCLES * STEP / timedelta(days=1), sites=SITES
    )
    with SyntheticWeb(world) as web:
        web.set_now(DEFAULT_START)
        seeds = web.seeds_csv(home / "seeds.csv", variants=True, invalid_rows=True)
        seeded = run_freshness("seed", str(seeds), "--now", DEFAULT_START.isoformat(), home=home)
        log_sizes = []
        cycle_outputs = []
        for i in range(CYCLES):
            now = DEFAULT_START + i * STEP
            web.set_now(now)
            done = run_freshness("cycle", "--now", now.isoformat(), home=home)
            cycle_outputs.append(done)
            assert done.returncode == 0, done.stderr
            con = duckdb.connect(str(home / "freshness.duckdb"), read_only=True)
            log_sizes.append(con.execute("SELECT count(*) FROM fetch_log").fetchall()[0][0])
            con.close()
        yield {
            "home": home,
            "web": web,
            "truth": web.truth(),
            "world": world,
            "seeded": seeded,
            "log_sizes": log_sizes,
            "requests": web.request_log.snapshot(),
            "end": DEFAULT_START + (CYCLES - 1) * STEP,
        }


def sql(home: Path, query: str, params=None) -> pl.DataFrame:
    con = duckdb.connect(str(home / "freshness.duckdb"), read_only=True)
    try:
        return con.sql(query, params=params).pl()
    finally:
        con.close()


def test_seed_reports_bad_rows_and_loads_the_rest(crawled):
    seeded = crawled["seeded"]
    assert seeded.returncode == 0, seeded.stderr
    assert "ftp://x/y" in seeded.stderr and "not a url" in seeded.stderr
    assert ":4: skipped" in seeded.stderr or ":5: skipped" in seeded.stderr
    assert "seeded" in seeded.stdout


def test_fetch_log_grows_every_cycle(crawled):
    sizes = crawled["log_sizes"]
    assert all(b > a for a, b in zip(sizes, sizes[1:], strict=False)), sizes
    assert sizes[0] > 0


def test_honest_hosts_answer_304(crawled):
    web = crawled["web"]
    for site in ("honest", "polite"):
        host = web.hosts[site]
        frame = sql(
            crawled["home"],
            "SELECT count(*) FILTER (WHERE http_status = 304) AS n304, "
            "count(*) FILTER (WHERE conditional) AS ncond FROM fetch_log WHERE host = ?",
            [host],
        )
        assert frame["n304"][0] > 0, site
        assert frame["ncond"][0] >= frame["n304"][0]
    novalid = sql(
        crawled["home"],
        "SELECT count(*) FILTER (WHERE conditional) AS n FROM fetch_log WHERE host = ?",
        [web.hosts["novalid"]],
    )
    assert novalid["n"][0] == 0


def test_no_request_reached_a_disallowed_path_and_crawl_delay_held(crawled):
    requests = crawled["requests"]
    assert requests, "the server saw no requests"
    assert not [r.path for r in requests if r.path.startswith("/private/")]
    assert all((r.user_agent or "").startswith("freshness-pipeline/") for r in requests)
    polite = sorted(r.real_time for r in requests if r.site == "polite")
    gaps = [b - a for a, b in zip(polite, polite[1:], strict=False)]
    assert gaps and min(gaps) >= 0.05 * 0.95, min(gaps)
    blocked = sql(crawled["home"], "SELECT count(*) AS n FROM url_state WHERE status = 'blocked'")
    assert blocked["n"][0] >= 1


def test_a_removed_page_is_marked_gone(crawled):
    truth, end = crawled["truth"], crawled["end"]
    died = [
        u
        for u in truth.urls()
        if not truth.disallowed(u)
        and truth.is_alive(u, DEFAULT_START)
        and not truth.is_alive(u, end - STEP)
    ]
    assert died, "the synthetic web should remove some pages during the test"
    state = sql(crawled["home"], "SELECT url, status, gone_at FROM url_state WHERE status = 'gone'")
    gone = set(state["url"].to_list())
    assert {normalize_url(u) for u in died} <= gone
    assert state["gone_at"].null_count() == 0


def test_url_state_has_one_row_per_canonical_url_and_variants_collapsed(crawled):
    home, world, web = crawled["home"], crawled["world"], crawled["web"]
    counts = sql(home, "SELECT count(*) AS n, count(DISTINCT url) AS d FROM url_state")
    assert counts["n"][0] == counts["d"][0]
    variants = world.variant_urls(web.base_urls)
    assert variants
    canonical = {normalize_url(c) for _, c in variants}
    for variant, target in variants:
        assert normalize_url(variant) == normalize_url(target)
    present = sql(home, "SELECT url FROM url_state")["url"].to_list()
    assert canonical <= set(present)
    seeded_pages = {
        normalize_url(u)
        for u in crawled["truth"].urls()
        if crawled["truth"].is_alive(u, DEFAULT_START)
    }
    assert seeded_pages <= set(present)


def test_contract_columns_and_outcomes(crawled):
    home = crawled["home"]
    state_cols = set(sql(home, "SELECT * FROM url_state LIMIT 0").columns)
    assert {
        "url",
        "host",
        "status",
        "value",
        "url_class",
        "first_seen_at",
        "last_fetched_at",
        "last_changed_at",
        "change_rate",
        "next_check_at",
        "fingerprint",
        "etag",
        "last_modified",
    } <= state_cols
    log_cols = set(sql(home, "SELECT * FROM fetch_log LIMIT 0").columns)
    assert {
        "url",
        "host",
        "fetched_at",
        "http_status",
        "outcome",
        "bytes",
        "conditional",
        "duration_ms",
    } <= log_cols
    outcomes = set(sql(home, "SELECT DISTINCT outcome FROM fetch_log")["outcome"].to_list())
    assert outcomes <= {
        "not_modified",
        "unchanged",
        "changed",
        "new",
        "gone",
        "error",
        "redirect",
        "blocked",
    }
    assert {"new", "not_modified", "changed"} <= outcomes
    statuses = set(sql(home, "SELECT DISTINCT status FROM url_state")["status"].to_list())
    assert statuses <= {"new", "active", "gone", "blocked", "error"}
    times = sql(home, "SELECT DISTINCT fetched_at FROM fetch_log ORDER BY 1")[
        "fetched_at"
    ].to_list()
    assert len(times) == CYCLES and times[0] == DEFAULT_START
    rates = sql(
        home,
        "SELECT min(change_rate) AS lo, max(change_rate) AS hi FROM url_state WHERE status = 'active'",
    )
    assert 0 < rates["lo"][0] <= rates["hi"][0] < 1000
    for view in ("url_inventory", "url_candidates", "revisit_plan", "fetch_results"):
        assert sql(home, f"SELECT count(*) AS n FROM {view}")["n"][0] > 0  # noqa: S608


def test_every_outcome_agrees_with_the_truth(crawled):
    """Changed exactly when the true content version moved between two fetches: volatile
    boilerplate, lying ETags and frozen Last-Modified must neither fake nor hide a change."""
    truth, home = crawled["truth"], crawled["home"]
    log = sql(
        home,
        "SELECT url, fetched_at, outcome FROM fetch_log "
        "WHERE outcome IN ('new', 'changed', 'unchanged', 'not_modified') ORDER BY url, fetched_at",
    ).with_columns(previous=pl.col("fetched_at").shift(1).over("url"))
    pairs = log.filter(pl.col("previous").is_not_null())
    assert pairs.height > 50
    by_url = {normalize_url(u): u for u in truth.urls()}
    wrong = []
    for url, at, outcome, before in pairs.select(
        "url", "fetched_at", "outcome", "previous"
    ).iter_rows():
        moved = truth.version_at(by_url[url], at) != truth.version_at(by_url[url], before)
        if moved != (outcome == "changed"):
            wrong.append((url, outcome, moved))
    assert not wrong, wrong[:5]
    volatile = pairs.filter(pl.col("url").str.starts_with(crawled["web"].base_urls["volatile"]))
    assert volatile.filter(pl.col("outcome") == "unchanged").height > 0


def test_dry_run_plans_without_fetching_and_report_runs(crawled):
    home, web = crawled["home"], crawled["web"]
    before = len(web.request_log.snapshot())
    later = (crawled["end"] + STEP).isoformat()
    done = run_freshness("cycle", "--now", later, "--dry-run", "--budget", "7", home=home)
    assert done.returncode == 0, done.stderr
    assert len(web.request_log.snapshot()) == before
    plan = sql(
        home, "SELECT count(*) FILTER (WHERE selected) AS n, max(planned_at) AS t FROM revisit_plan"
    )
    assert plan["n"][0] == 7
    report = run_freshness("report", home=home)
    assert report.returncode == 0, report.stderr
    assert "By host" in report.stdout and "share_304" in report.stdout


def test_readme_queries_run_on_the_views(crawled):
    """The README's example queries are part of the contract users copy from."""
    blocks = readme_sql_blocks()
    assert len(blocks) >= 5
    for query in blocks:
        frame = sql(crawled["home"], query)
        assert frame.width > 0
    gone = sql(crawled["home"], next(b for b in blocks if "status = 'gone'" in b))
    assert gone.height > 0
    # measured from the newest cycle, not the wall clock: simulated days give real answers
    recent = sql(crawled["home"], next(b for b in blocks if "INTERVAL 1 DAY" in b))
    assert recent.height > 0
    stale = sql(crawled["home"], next(b for b in blocks if "p_stale" in b))
    assert stale.height > 0 and stale["p_stale"].min() < 0.99
    # the crawled copy's: the web starts on the README's date, and its pages change
    since = sql(crawled["home"], next(b for b in blocks if "changed_at >= TIMESTAMPTZ" in b))
    assert since.height > 0 and (since["text_lines_added"] + since["text_lines_removed"] > 0).any()


def test_lying_etags_stop_being_sent_honest_ones_keep_working(crawled):
    """The volatile site answers every request with a new ETag on unchanged content: once the
    history shows it, the crawler stops sending its validators there (and only there)."""
    web, home = crawled["web"], crawled["home"]
    last = DEFAULT_START + (CYCLES - 1) * STEP
    frame = sql(
        home,
        "SELECT host, count(*) FILTER (WHERE conditional) AS conditional, count(*) AS n "
        "FROM fetch_log WHERE fetched_at = ? GROUP BY host",
        [last],
    )
    by_host = {h: (c, n) for h, c, n in frame.iter_rows()}
    volatile = by_host[web.hosts["volatile"]]
    honest = by_host[web.hosts["honest"]]
    assert volatile[1] > 0 and volatile[0] == 0, volatile
    assert honest[0] > 0, honest


# The request metrics straight from fetch_log, one row per request: what the views' sums over
# fetch_totals must reproduce.
LOG_METRICS = f"""
SELECT host,
    count(*) AS requests,
    count(*) FILTER (WHERE conditional) AS conditional,
    round(count(*) FILTER (WHERE http_status = 304)
        / nullif(count(*) FILTER (WHERE conditional), 0), 3) AS share_304,
    round(count(*) FILTER (WHERE outcome = 'unchanged')
        / nullif(count(*) FILTER (WHERE outcome IN ('changed', 'unchanged')), 0), 3)
        AS unchanged_share,
    count(*) FILTER (WHERE outcome = 'changed') AS changes,
    round(count(*) / nullif(count(*) FILTER (WHERE outcome = 'changed'), 0), 2)
        AS requests_per_change,
    round(sum(bytes) / nullif(count(*) FILTER (WHERE outcome = 'changed'), 0))
        AS bytes_per_change,
    count(*) FILTER (WHERE outcome = 'error') AS errors,
    count(*) FILTER (WHERE http_status IN (429, 503)) AS throttled,
    count(*) FILTER (WHERE v) AS verified,
    round(avg(expected_change) FILTER (WHERE v), 3) AS verify_forecast,
    round(avg(CASE WHEN outcome = 'changed' THEN 1.0 ELSE 0.0 END) FILTER (WHERE v), 3)
        AS verify_observed,
    round(CASE WHEN sum(expected_change * (1 - expected_change)) FILTER (WHERE v) >= {MIN_VERIFY_VARIANCE}
        THEN (sum(CASE WHEN outcome = 'changed' THEN 1.0 ELSE 0.0 END) FILTER (WHERE v)
              - sum(expected_change) FILTER (WHERE v))
             / sqrt(sum(expected_change * (1 - expected_change)) FILTER (WHERE v)) END, 2)
        AS verify_z
FROM (SELECT *, plan_reason = 'verify' AND expected_change BETWEEN 0 AND 1
        AND outcome IN ('changed', 'unchanged', 'not_modified') AS v FROM fetch_log)
GROUP BY host
"""  # noqa: S608 (a constant)


def test_metric_views_match_the_report(crawled):
    home = crawled["home"]
    by_host = sql(home, "SELECT * FROM host_metrics")
    assert by_host.height == len(crawled["web"].hosts)
    assert {
        "share_304",
        "unchanged_share",
        "requests_per_change",
        "expected_age_h",
        "throttled",
    } <= set(by_host.columns)
    total_requests = sql(home, "SELECT count(*) AS n FROM fetch_log")["n"][0]
    assert by_host["requests"].sum() == total_requests
    # the views sum fetch_totals; every figure is what fetch_log itself says
    from_log = sql(home, LOG_METRICS).sort("host")
    columns = [c for c in from_log.columns if c != "host"]
    assert by_host.select("host", *columns).sort("host").equals(from_log.select("host", *columns))
    assert from_log["verified"].sum() > 0 and from_log["changes"].sum() > 0
    # the median rate is over pages seen at least twice, not the once-seen pages' class prior
    state = Warehouse(home).read("url_state")
    revisited = state.filter(
        (pl.col("status") == "active") & (pl.col("obs_interval_days").list.len() > 0)
    )
    medians = revisited.group_by("host").agg(pl.col("change_rate").median().round(3).alias("m"))
    got = by_host.select("host", "median_rate_per_day").join(medians, on="host")
    assert got.height >= 3
    assert (got["median_rate_per_day"] - got["m"]).abs().max() < 1e-9
    # unchanged bodies among the pages fetched again: a first fetch is neither; the view and
    # the README's query say the same
    log = Warehouse(home).read("fetch_log")
    refetched = log.filter(pl.col("outcome").is_in(["changed", "unchanged"]))
    expected = refetched.group_by("host").agg(
        (pl.col("outcome") == "unchanged").mean().round(3).alias("expected")
    )
    readme = sql(home, next(b for b in readme_sql_blocks() if "unchanged_share" in b))
    compared = expected.join(by_host.select("host", "unchanged_share"), on="host").join(
        readme.select("host", pl.col("unchanged_share").alias("readme")), on="host"
    )
    assert compared.height >= 3 and log.filter(pl.col("outcome") == "new").height > 0
    assert (compared["unchanged_share"] - compared["expected"]).abs().max() < 1e-9
    assert (compared["readme"] - compared["expected"]).abs().max() < 1e-9
    by_class = sql(home, "SELECT * FROM class_metrics")
    assert set(by_class["url_class"].to_list()) >= {"article", "listing", "static"}


def test_each_cycle_refits_the_change_prior_the_next_plan_scores_with(crawled):
    """url_state stores a fit per host and url_class (plus the global one) every cycle and
    keeps the one before it, so a cycle run again plans from what its first run saw."""
    home = crawled["home"]
    sums = sql(
        home,
        "SELECT host, url_class, fitted_at, list_sum(weight) AS total, "
        "len(weight) AS components, len(rate_per_day) AS rates FROM change_prior",
    )
    assert sums.height > 0
    assert sums["total"].to_list() == pytest.approx([1.0] * sums.height)
    assert sums["components"].n_unique() == 1 and sums["components"].equals(sums["rates"])
    assert sums.select("host", "url_class", "fitted_at").is_unique().all()
    stamps = sorted(set(sums["fitted_at"].to_list()))
    assert stamps[-1] == crawled["end"] and len(stamps) == 2
    per_host = sums.group_by("host").agg(pl.col("url_class").n_unique().alias("classes"))
    assert (per_host["classes"] >= 2).all()  # "__global__" and at least one url_class
    gains = sql(home, "SELECT expected_gain FROM revisit_plan WHERE expected_gain IS NOT NULL")
    assert gains.height > 0 and (gains["expected_gain"] >= 0).all()


def test_fetches_keep_the_models_forecast_unless_a_sitemap_said_changed():
    """The verification metrics score the model's forecast: a fetch keeps it, except where a
    trusted sitemap said "changed" and the plan's number is the hint's certainty."""
    now = DEFAULT_START
    plan = pl.DataFrame(
        {
            "url": ["https://h/a", "https://h/b", "https://h/c"],
            "url_class": ["article"] * 3,
            "reason": ["verify"] * 3,
            "expected_change": [0.3, 0.4, 1.0],
            "hinted_change": [None, False, True],
        },
        schema_overrides={"hinted_change": pl.Boolean},
    )
    results = [
        FetchResult(url=u, host="h", http_status=200, outcome="changed") for u in plan["url"]
    ]
    frame = results_frame(plan, results, now, PipelineConfig())
    assert frame.sort("url")["expected_change"].to_list() == [0.3, 0.4, None]


def test_the_plan_forecasts_a_change_for_every_page_it_knows(crawled):
    """revisit_plan.expected_change: the model's probability that the page changed since its
    last fetch, which the verification sample's check (science.calibration) puts to the test."""
    plan = sql(
        crawled["home"],
        "SELECT status, last_fetched_at, expected_change, hinted_change FROM revisit_plan",
    )
    fetched = plan.filter(pl.col("last_fetched_at").is_not_null() & (pl.col("status") == "active"))
    assert fetched.height > 0
    assert fetched["expected_change"].is_between(0.0, 1.0).all()
    # a trusted sitemap saying "changed" makes it certain; without one a fetched page is not
    hinted = fetched.filter(pl.col("hinted_change").fill_null(False))
    assert hinted["expected_change"].to_list() == pytest.approx([1.0] * hinted.height)
    unhinted = fetched.filter(pl.col("hinted_change").is_null())
    assert unhinted.height > 0 and unhinted["expected_change"].max() < 1.0
    never = plan.filter(pl.col("last_fetched_at").is_null() & (pl.col("status") == "new"))
    # (whether any page is still unfetched after the last cycle varies with fetch timing;
    # test_eb checks the never-fetched forecast directly)
    assert never["expected_change"].to_list() == pytest.approx([1.0] * never.height)


def test_the_verification_metrics_compare_forecast_and_outcome_of_verified_fetches(crawled):
    """fetch_log keeps why each fetch was planned and the model's forecast of a change; the
    metric views reduce the random verification fetches to forecast, observed share and z."""
    home = crawled["home"]
    log = sql(home, "SELECT plan_reason, outcome, expected_change FROM fetch_log")
    assert log["plan_reason"].is_not_null().all()
    verified = log.filter(
        (pl.col("plan_reason") == "verify")
        & pl.col("outcome").is_in(["changed", "unchanged", "not_modified"])
        & pl.col("expected_change").is_between(0.0, 1.0)
    )
    assert verified.height > 0
    by_host = sql(
        home, "SELECT verified, verify_forecast, verify_observed, verify_z FROM host_metrics"
    )
    assert by_host["verified"].sum() == verified.height
    p = verified["expected_change"]
    changed = (verified["outcome"] == "changed").cast(pl.Float64)
    z = (changed.sum() - p.sum()) / math.sqrt((p * (1 - p)).sum())
    totals = sql(
        home,
        "SELECT sum(verified * verify_forecast) / sum(verified) AS forecast FROM host_metrics",
    )
    assert totals["forecast"][0] == pytest.approx(p.mean(), abs=2e-3)  # host rows round to 3
    assert abs(z) < 4.0  # the change model is not far off on the synthetic web


def test_what_each_step_and_check_reads_of_a_table_is_enough(crawled):
    """Steps and checks load only some columns of some tables (``Warehouse.read(columns=)``):
    on a real crawl's tables, each gives with those columns what it gives with the whole
    tables. A column left out would raise, or worse, be taken for a table without it."""
    from polars.testing import assert_frame_equal

    from freshness_pipeline.defs import checks
    from freshness_pipeline.defs.resources import CycleResource
    from freshness_pipeline.science.retry_after import retry_holds
    from freshness_pipeline.stages import inventory, plan, state

    wh = Warehouse(crawled["home"])
    now = crawled["end"]
    hosts = wh.hosts_in("seeds")

    # the checks, as a cycle's run reads their tables
    for check in checks._CHECKS:
        outcomes = []
        for columns in (check.columns, {}):
            frames: dict[str, object] = {
                param: wh.read(table, hosts, columns=columns.get(param))
                for param, table in check.reads.items()
            }
            if "cycle" in inspect.signature(check.fn).parameters:
                frames["cycle"] = CycleResource()
            result = check.fn(**frames)
            shown = {k: v.value for k, v in result.metadata.items()}
            outcomes.append((result.passed, result.severity, shown))
        assert outcomes[0] == outcomes[1], check.fn.__name__
    verified = checks.verify_sample_matches_the_model(wh.read("fetch_results"))
    assert verified.metadata["verified_pages"].value > 0  # so that comparison was not empty

    # the plan: last cycle's health, the learned pace, what it knows of each candidate
    results = wh.read("fetch_results", hosts)
    health = plan.host_health(results, hosts)
    assert_frame_equal(
        plan.host_health(wh.read("fetch_results", hosts, columns=plan.RESULT_COLUMNS), hosts),
        health,
    )
    robots = wh.read("robots", hosts)
    capacity = plan.host_capacity(robots, health, 3600.0, None, wh.read("host_capacity", hosts))
    assert_frame_equal(
        plan.host_capacity(
            robots,
            health,
            3600.0,
            None,
            wh.read("host_capacity", hosts, columns=plan.PACE_COLUMNS),
        ),
        capacity,
    )
    # (plan_inputs keeps only STATE_COLUMNS of whatever state it is given: the read and the
    # select are one list, so this only checks that the read feeds it)
    candidates = wh.read("url_candidates", hosts)
    assert_frame_equal(
        plan.plan_inputs(
            candidates, wh.read("url_state", hosts, columns=plan.STATE_COLUMNS), capacity
        ),
        plan.plan_inputs(candidates, wh.read("url_state", hosts), capacity),
    )

    # the state update: everything merge_state takes of this cycle's results
    previous = wh.read("url_state", hosts)
    some_candidates = wh.read("url_candidates", hosts, columns=state.CANDIDATE_COLUMNS)
    assert_frame_equal(
        state.merge_state(
            previous,
            some_candidates,
            wh.read("fetch_results", hosts, columns=state.RESULT_COLUMNS),
            now,
        ),
        state.merge_state(previous, some_candidates, results, now),
    )

    # the state update: what it takes of the plan (the sitemap's hints and dates; whether this
    # crawl earned trust goes by its timing, so test_state also checks it on a plan written
    # with a trusted "unchanged")
    assert_frame_equal(
        state.sitemap_dating(wh.read("revisit_plan", hosts, columns=state.PLAN_COLUMNS)).sort(
            "url"
        ),
        state.sitemap_dating(wh.read("revisit_plan", hosts)).sort("url"),
    )

    # the inventory: redirects and Retry-After answers (none in this crawl, so made up here)
    row = pl.int_range(pl.len())
    answers = results.with_columns(
        outcome=pl.when(row % 5 == 0).then(pl.lit("redirect")).otherwise("outcome"),
        location=pl.when(row % 5 == 0).then(pl.col("url") + "?moved").otherwise("location"),
        canonical=pl.when(row % 5 == 1).then(pl.col("url") + "/named").otherwise("canonical"),
        http_status=pl.when(row % 7 == 0)
        .then(pl.lit(429, dtype=results.schema["http_status"]))
        .otherwise("http_status"),
        retry_after_s=pl.when(row % 7 == 0)
        .then(pl.lit(3600.0, dtype=results.schema["retry_after_s"]))
        .otherwise("retry_after_s"),
    )
    redirects = inventory.pointed_discoveries(answers, previous, now)
    assert redirects.height > 0 and redirects["value"].is_not_null().any()
    assert set(redirects["source"]) == {"redirect", "canonical"}
    assert_frame_equal(
        inventory.pointed_discoveries(
            answers.select(inventory.RESULT_COLUMNS),
            previous.select(inventory.STATE_COLUMNS),
            now,
        ),
        redirects,
    )
    holds = retry_holds(answers, now)
    assert holds.height > 0
    assert_frame_equal(retry_holds(answers.select(inventory.RESULT_COLUMNS), now), holds)
