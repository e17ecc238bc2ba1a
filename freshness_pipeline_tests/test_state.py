"""The url_state update on small hand-made frames: status transitions, observations counted
once, content duplicates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from freshness_pipeline.science.estimate import FIRST_LOOK_SPAN_DAYS
from freshness_pipeline.science.fingerprint import FINGERPRINT_VERSION
from freshness_pipeline.science.prior.components import GLOBAL
from freshness_pipeline.science.prior.table import expected_gains
from freshness_pipeline.science.schedule import PlanConfig, build_plan
from freshness_pipeline.stages.plan import plan_inputs
from freshness_pipeline.stages.state import (
    EMPTY_FINGERPRINT,
    PLAN_COLUMNS,
    sitemap_dating,
    update_state,
)
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.storage import Warehouse

T0 = datetime(2026, 11, 1, tzinfo=UTC)
T1 = T0 + timedelta(hours=6)
HOST = "a.example"


def room_for_ten() -> pl.DataFrame:
    """host_capacity for the one host: ten fetches a cycle, no Crawl-delay."""
    return pl.DataFrame(
        {"host": [HOST], "capacity": [10], "cost_multiplier": [1.0], "crawl_delay": [None]},
        schema_overrides={"crawl_delay": pl.Float64},
    )


def candidates(*urls: str, blocked: tuple[str, ...] = ()) -> pl.DataFrame:
    return tables.conform(
        "url_candidates",
        pl.DataFrame(
            {
                "url": list(urls),
                "host": HOST,
                "value": 1.0,
                "url_class": "article",
                "first_seen_at": T0,
                "allowed": [u not in blocked for u in urls],
            }
        ),
    )


def results(rows: list[dict]) -> pl.DataFrame:
    base = {"host": HOST, "sent": True, "fingerprint_version": FINGERPRINT_VERSION}
    return tables.conform("fetch_results", pl.DataFrame([{**base, **r} for r in rows]))


def plan_for(urls: list[str]) -> pl.DataFrame:
    return tables.conform(
        "revisit_plan",
        pl.DataFrame(
            {"url": urls, "host": HOST, "selected": True, "cost": 1.0, "status": "active"}
        ),
    )


def one_fetch(url, at, outcome, fp, age, dating) -> pl.DataFrame:
    """fetch_results of one sent fetch; ``dating``: the host's Last-Modified may date changes."""
    return results(
        [
            {
                "url": url,
                "fetched_at": at,
                "outcome": outcome,
                "http_status": 200,
                "fingerprint": fp,
                "content_age_days": age,
                "dates_changes": dating,
            }
        ]
    )


def step(previous, cands, res, now):
    return update_state(previous, cands, res, plan_for(cands["url"].to_list()), now).state


def test_first_fetch_then_change_then_gone_then_revived():
    url = "http://a.example/p"
    cands = candidates(url)
    s0 = step(tables.empty("url_state"), cands, results([]), T0)
    assert s0.row(0, named=True)["status"] == "new"
    s1 = step(
        s0,
        cands,
        results(
            [
                {
                    "url": url,
                    "fetched_at": T0,
                    "outcome": "new",
                    "http_status": 200,
                    "fingerprint": "f1",
                }
            ]
        ),
        T0,
    )
    assert s1.row(0, named=True)["status"] == "active" and s1["n_obs"][0] == 0
    s2 = step(
        s1,
        cands,
        results(
            [
                {
                    "url": url,
                    "fetched_at": T1,
                    "outcome": "changed",
                    "http_status": 200,
                    "fingerprint": "f2",
                }
            ]
        ),
        T1,
    )
    row = s2.row(0, named=True)
    assert row["n_obs"] == 1 and row["n_changes"] == 1 and row["last_changed_at"] == T1
    assert row["obs_interval_days"] == [0.25]
    t2 = T1 + timedelta(hours=6)
    s3 = step(
        s2,
        cands,
        results([{"url": url, "fetched_at": t2, "outcome": "gone", "http_status": 410}]),
        t2,
    )
    row = s3.row(0, named=True)
    assert row["status"] == "gone" and row["gone_at"] == t2 and row["fingerprint"] == "f2"
    t3 = t2 + timedelta(days=40)
    s4 = step(
        s3,
        cands,
        results(
            [
                {
                    "url": url,
                    "fetched_at": t3,
                    "outcome": "changed",
                    "http_status": 200,
                    "fingerprint": "f3",
                }
            ]
        ),
        t3,
    )
    row = s4.row(0, named=True)
    assert row["status"] == "active" and row["gone_at"] is None and row["n_obs"] == 2


def test_a_404_blip_costs_the_copy_a_day_and_a_confirmed_gone_page_a_check_a_month():
    """A page that answered 404 once used to wait 30 days for its next check, however live it
    was (found by an exploratory run: a deploy glitch took a page out of the copy for a month).
    Now a first gone answer is checked again a day later; a second one confirms it."""
    url = "http://a.example/p"
    cands = candidates(url)
    capacity = room_for_ten()

    def planned(state, now):
        inputs = plan_inputs(
            cands.with_columns(lastmod=pl.lit(None, dtype=tables.UTC_TIME)), state, capacity
        )
        plan = build_plan(inputs, capacity, now=now, budget=100, config=PlanConfig())
        return plan.filter("selected")["reason"].to_list()

    page = {"url": url, "http_status": 200, "fingerprint": "f1"}
    state = step(tables.empty("url_state"), cands, results([]), T0)
    state = step(state, cands, results([{**page, "fetched_at": T0, "outcome": "new"}]), T0)
    gone_at = T0 + timedelta(days=2)
    missing = {"url": url, "outcome": "gone", "http_status": 404}
    state = step(state, cands, results([{**missing, "fetched_at": gone_at}]), gone_at)
    row = state.row(0, named=True)
    assert row["status"] == "gone" and row["next_check_at"] == gone_at + timedelta(days=1)
    assert planned(state, gone_at + timedelta(hours=18)) == []
    assert planned(state, gone_at + timedelta(days=1)) == ["reestimate"]

    # still gone a day later: confirmed, the next check is a month after this fetch
    again = gone_at + timedelta(days=1)
    state = step(state, cands, results([{**missing, "fetched_at": again}]), again)
    row = state.row(0, named=True)
    late = again + timedelta(days=PlanConfig().gone_recheck_days)
    assert row["gone_at"] == gone_at and row["next_check_at"] == late
    assert planned(state, again + timedelta(days=29)) == []
    assert planned(state, late) == ["reestimate"]
    state = step(state, cands, results([{**missing, "fetched_at": late}]), late)
    assert state["next_check_at"][0] == late + timedelta(days=PlanConfig().gone_recheck_days)

    # back: active again, planned by priority like any page
    back = late + timedelta(days=30)
    state = step(
        state, cands, results([{**page, "fetched_at": back, "outcome": "unchanged"}]), back
    )
    row = state.row(0, named=True)
    assert row["status"] == "active" and row["gone_at"] is None


def test_after_a_304_that_validated_nothing_the_page_is_asked_for_itself():
    url = "http://a.example/p"
    cands = candidates(url)
    page = {"url": url, "http_status": 200, "fingerprint": "f1", "etag": '"n8"'}
    state = step(tables.empty("url_state"), cands, results([]), T0)
    state = step(state, cands, results([{**page, "fetched_at": T0, "outcome": "new"}]), T0)
    capacity = room_for_ten()

    def sent_etag(state):
        inputs = plan_inputs(
            cands.with_columns(lastmod=pl.lit(None, dtype=tables.UTC_TIME)), state, capacity
        )
        return inputs["etag"][0]

    assert sent_etag(state) == '"n8"'
    refused = {"url": url, "fetched_at": T1, "outcome": "error", "http_status": 304}
    state = step(state, cands, results([refused]), T1)
    assert state["etag"][0] == '"n8"' and sent_etag(state) is None
    # a server error after it says nothing of the validators: they are sent again
    later = T1 + timedelta(hours=6)
    failed = {"url": url, "fetched_at": later, "outcome": "error", "http_status": 500}
    assert sent_etag(step(state, cands, results([failed]), later)) == '"n8"'


def test_a_url_that_redirects_is_known_and_planned_by_priority_not_as_new():
    """Left 'new' after answering 301, a URL took a slot of the new pages' share every cycle,
    for ever (found by an exploratory run: 7 of 9 'new' picks were redirects)."""
    url, target = "http://a.example/old", "http://a.example/new"
    cands = candidates(url)
    s0 = step(tables.empty("url_state"), cands, results([]), T0)
    answer = {"url": url, "fetched_at": T0, "outcome": "redirect", "http_status": 301}
    s1 = step(s0, cands, results([{**answer, "location": target}]), T0)
    row = s1.row(0, named=True)
    assert (row["status"], row["last_outcome"], row["redirect_to"]) == (
        "active",
        "redirect",
        target,
    )
    assert row["n_obs"] == 0 and row["last_seen_at"] is None  # it answered, but with no page
    capacity = room_for_ten()
    inputs = plan_inputs(
        cands.with_columns(lastmod=pl.lit(None, dtype=tables.UTC_TIME)), s1, capacity
    )
    plan = build_plan(inputs, capacity, now=T1, budget=1, config=PlanConfig())
    assert plan.filter(pl.col("url") == url)["reason"].to_list() != ["new"]
    assert inputs["cost"][0] > 1.0  # a permanent redirect costs what a second copy does


def test_a_rerun_of_the_same_cycle_adds_no_observation():
    url = "http://a.example/p"
    cands = candidates(url)
    first = results(
        [{"url": url, "fetched_at": T0, "outcome": "new", "http_status": 200, "fingerprint": "f1"}]
    )
    s1 = step(tables.empty("url_state"), cands, first, T0)
    again = results(
        [
            {
                "url": url,
                "fetched_at": T1,
                "outcome": "unchanged",
                "http_status": 200,
                "fingerprint": "f1",
            }
        ]
    )
    s2 = step(s1, cands, again, T1)
    s2_rerun = step(s2, cands, again, T1)
    assert s2["n_obs"].to_list() == s2_rerun["n_obs"].to_list() == [1]


def test_blocked_urls_stay_and_content_duplicates_are_marked():
    urls = [
        "http://a.example/a",
        "http://a.example/b",
        "http://a.example/c",
        "http://a.example/e1",
        "http://a.example/e2",
    ]
    cands = candidates(*urls, "http://a.example/private", blocked=("http://a.example/private",))
    fps = ["same", "same", "other", EMPTY_FINGERPRINT, EMPTY_FINGERPRINT]
    res = results(
        [
            {"url": u, "fetched_at": T0, "outcome": "new", "http_status": 200, "fingerprint": f}
            for u, f in zip(urls, fps, strict=True)
        ]
    )
    state = step(tables.empty("url_state"), cands, res, T0)
    by_url = {r["url"]: r for r in state.iter_rows(named=True)}
    assert by_url["http://a.example/private"]["status"] == "blocked"
    assert by_url["http://a.example/b"]["duplicate_of"] == "http://a.example/a"
    assert by_url["http://a.example/a"]["duplicate_of"] is None
    assert by_url["http://a.example/c"]["duplicate_of"] is None
    assert by_url["http://a.example/e2"]["duplicate_of"] is None
    assert state.height == 6


def test_pages_whose_paths_carry_other_numbers_are_not_copies_of_each_other():
    """A concert's pages per day and spare parts by number fingerprint alike (dates and long
    numbers are dropped): they were marked copies and fetched at a second copy's cost. A print
    view of one of them still is its copy."""
    urls = [
        "http://a.example/event/2026-12-24",
        "http://a.example/event/2026-12-25",
        "http://a.example/event/2026-12-24?print=1",
        "http://a.example/part/4006381333",
        "http://a.example/part/4006381334",
        "http://a.example/part/4006381334/",  # the same part, its path's slash aside
    ]
    cands = candidates(*urls)
    fps = ["concert", "concert", "concert", "seal", "seal", "seal"]
    res = results(
        [
            {"url": u, "fetched_at": T0, "outcome": "new", "http_status": 200, "fingerprint": f}
            for u, f in zip(urls, fps, strict=True)
        ]
    )
    state = step(tables.empty("url_state"), cands, res, T0)
    copies = dict(state.select("url", "duplicate_of").iter_rows())
    assert copies == {
        "http://a.example/event/2026-12-24": None,
        "http://a.example/event/2026-12-25": None,
        "http://a.example/event/2026-12-24?print=1": "http://a.example/event/2026-12-24",
        "http://a.example/part/4006381333": None,
        "http://a.example/part/4006381334": None,
        "http://a.example/part/4006381334/": "http://a.example/part/4006381334",
    }


def test_a_query_variant_whose_canonical_is_its_path_is_a_copy_of_that_page():
    """A shop's sitemap lists every category's view modes (``?mode=list``, ``?limit=36``),
    each naming the category as canonical: fetched at other times they read differently, and
    each was kept fresh as a page of its own. A canonical at another path (a moved article
    naming its new address, a listing naming its first page elsewhere), one that names another
    page itself, or one not crawled, makes no copy."""
    base = "http://a.example"
    rows = {
        "/c/lamps": None,
        "/c/lamps?mode=list": "/c/lamps",
        "/c/lamps?limit=36": "/c/lamps",
        "/c/desks?mode=list": "/c/desks",  # the category itself is not crawled
        "/story?page=2": "/story-all",  # another path
        "/a?x=1": "/a?x=2",  # two pages naming each other
        "/a?x=2": "/a?x=1",
        # a trailing slash's spelling naming the page without it (fetched as a page of its
        # own before, found by a second held-out web)
        "/c/chairs": None,
        "/c/chairs/": "/c/chairs",
    }
    urls = [base + u for u in rows]
    cands = candidates(*urls)
    fps = [f"fp{i}" for i in range(len(urls))]  # every page reads differently
    res = results(
        [
            {
                "url": u,
                "fetched_at": T0,
                "outcome": "new",
                "http_status": 200,
                "fingerprint": f,
                "canonical": base + c if c else None,
            }
            for u, f, c in zip(urls, fps, rows.values(), strict=True)
        ]
    )
    state = step(tables.empty("url_state"), cands, res, T0)
    copies = {u.removeprefix(base): d for u, d in state.select("url", "duplicate_of").iter_rows()}
    assert copies == {
        "/c/lamps": None,
        "/c/lamps?mode=list": f"{base}/c/lamps",
        "/c/lamps?limit=36": f"{base}/c/lamps",
        "/c/desks?mode=list": None,
        "/story?page=2": None,
        "/a?x=1": None,
        "/a?x=2": None,
        "/c/chairs": None,
        "/c/chairs/": f"{base}/c/chairs",
    }


def test_the_change_prior_is_fit_from_url_state_and_scores_the_next_plan():
    """The wiring of url_state -> change_prior -> revisit_plan, without Dagster: the same
    functions the assets call, on the frames they pass."""
    urls = [f"http://a.example/p{i}" for i in range(6)]
    cands = candidates(*urls)
    state = tables.empty("url_state")
    prior = tables.empty("change_prior")
    now = T0
    for cycle in range(8):
        # p0..p2 never change, p3..p5 at every fetch
        outcome = "new" if cycle == 0 else None
        rows = [
            {
                "url": u,
                "fetched_at": now,
                "outcome": outcome or ("changed" if i >= 3 else "unchanged"),
                "http_status": 200,
                "fingerprint": f"f{cycle if i >= 3 else 0}",
            }
            for i, u in enumerate(urls)
        ]
        state, _grades, prior = update_state(
            state, cands, results(rows), plan_for(urls), now, change_prior=prior
        )
        now += timedelta(hours=6)
    assert set(prior["host"]) == {HOST}
    assert set(prior["url_class"]) == {"article", GLOBAL}
    assert prior.filter(pl.col("url_class") == GLOBAL)["n_pages"].unique().to_list() == [6]
    stored = tables.conform("change_prior", prior)
    assert stored.columns == list(tables.CHANGE_PRIOR)
    capacity = pl.DataFrame(
        {
            "host": [HOST],
            "capacity": [10],
            "cost_multiplier": [1.0],
            "crawl_delay": [None],
            "gap_s": [None],
            "concurrency": [None],
        },
        schema_overrides={"crawl_delay": pl.Float64, "gap_s": pl.Float64, "concurrency": pl.Int64},
    )
    inputs = plan_inputs(
        cands.with_columns(lastmod=pl.lit(None, dtype=tables.UTC_TIME)), state, capacity
    )
    assert {"obs_interval_days", "obs_changed", "last_seen_at"} <= set(inputs.columns)
    gains = expected_gains(inputs, stored, now=now)
    assert gains.is_finite().all() and (gains >= 0).all()
    plan = build_plan(
        inputs.with_columns(expected_gain_override=gains),
        pl.DataFrame({"host": [HOST], "capacity": [10]}),
        now=now,
        budget=3,
        config=PlanConfig(new_share=0.0, reestimate_share=0.0, verify_share=0.0),
    )
    assert plan["expected_gain"].to_list() == pytest.approx(gains.to_list())
    # six hours after the last fetch a page that changed at every fetch is the better buy
    assert sorted(plan.filter("selected")["url"].to_list()) == urls[3:]


def test_content_ages_are_kept_for_dating_hosts_only_and_dropped_when_trust_goes():
    url = "http://a.example/p"
    cands = candidates(url)

    def fetch(previous, at, outcome, fp, age, dating):
        res = one_fetch(url, at, outcome, fp, age, HOST in dating)
        plan = plan_for([url])
        return update_state(previous, cands, res, plan, at).state

    times = [T0 + timedelta(hours=6 * i) for i in range(5)]
    s = fetch(tables.empty("url_state"), times[0], "new", "f0", 30.0, [HOST])
    # the first look: last changed 30 days before it, not since (first_looks)
    first = s.row(0, named=True)
    assert first["obs_changed"] == [True] and first["obs_age_days"] == [30.0]
    assert first["obs_interval_days"] == [pytest.approx(30.0 + FIRST_LOOK_SPAN_DAYS)]
    s = fetch(s, times[1], "changed", "f1", 0.1, [HOST])
    s = fetch(s, times[2], "unchanged", "f1", 0.35, [HOST])  # no change: nothing to date
    s = fetch(s, times[3], "changed", "f2", 3.0, [HOST])  # dated before our last look: lags
    row = s.row(0, named=True)
    assert row["obs_changed"] == [True, True, False, True]
    assert row["obs_age_days"] == [30.0, 0.1, None, None]
    dated_rate = row["change_rate"]
    # a cycle that does not fetch the host says nothing about its trust: the ages stay
    idle = update_state(s, cands, results([]), plan_for([url]), times[3] + timedelta(hours=1)).state
    assert idle["obs_age_days"][0].to_list() == [30.0, 0.1, None, None]
    # the same history on a host not (or no longer) trusted to date changes: the ages go, and
    # the first look with them (it rests on the header alone)
    s = fetch(s, times[4], "unchanged", "f2", 1.25, [])
    row = s.row(0, named=True)
    assert row["obs_age_days"] is None and len(row["obs_interval_days"]) == 4
    assert row["obs_changed"] == [True, False, True, False]
    undated = fetch(tables.empty("url_state"), times[0], "new", "f0", None, [])
    for i, (outcome, fp) in enumerate([("changed", "f1"), ("unchanged", "f1"), ("changed", "f2")]):
        undated = fetch(undated, times[i + 1], outcome, fp, None, [])
    assert undated["obs_age_days"][0] is None
    # the dated change moved the estimate; once the dates are dropped, it is the undated one
    assert dated_rate != pytest.approx(undated["change_rate"][0], rel=1e-3)
    undated = fetch(undated, times[4], "unchanged", "f2", None, [])
    assert row["change_rate"] == pytest.approx(undated["change_rate"][0])


def test_a_first_look_at_a_dated_host_tells_a_page_long_unchanged_from_a_fresh_one():
    """The first fetch of a page on a host whose Last-Modified dates changes is an
    observation: unchanged for 400 days reads as a slow page at once, changed half a day ago
    as a fast one. On a host not trusted yet the age waits, and goes first in the page's
    history in the cycle the host is trusted, fetched or not; a page seen before adds none."""
    url, other = "http://a.example/p", "http://a.example/q"
    cands = candidates(url, other)

    def first(age, dating):
        res = one_fetch(url, T0, "new", "f0", age, dating)
        made = update_state(tables.empty("url_state"), cands, res, plan_for([url]), T0).state
        return made.filter(pl.col("url") == url).row(0, named=True)

    old, fresh, untrusted = first(400.0, True), first(0.5, True), first(400.0, False)
    assert old["obs_age_days"] == [400.0] and old["obs_changed"] == [True]
    assert old["first_look_age_days"] is None
    assert not untrusted["obs_interval_days"] and untrusted["first_look_age_days"] == 400.0
    assert old["change_rate"] * 10 < min(untrusted["change_rate"], fresh["change_rate"])

    # untrusted at the first fetch; a day later the page is fetched again, unchanged, still
    # untrusted; then the host earns trust in a cycle that fetches only another of its pages
    t1, t2 = T0 + timedelta(days=1), T0 + timedelta(days=2)
    s = update_state(
        tables.empty("url_state"),
        cands,
        one_fetch(url, T0, "new", "f0", 400.0, False),
        plan_for([url]),
        T0,
    ).state
    s = update_state(
        s, cands, one_fetch(url, t1, "unchanged", "f0", 401.0, False), plan_for([url]), t1
    ).state
    waiting = s.filter(pl.col("url") == url).row(0, named=True)
    assert waiting["obs_changed"] == [False] and waiting["first_look_age_days"] == 400.0
    s = update_state(
        s, cands, one_fetch(other, t2, "new", "g0", None, True), plan_for([other]), t2
    ).state
    row = s.filter(pl.col("url") == url).row(0, named=True)
    assert row["obs_changed"] == [True, False] and row["obs_age_days"] == [400.0, None]
    assert row["obs_interval_days"] == [pytest.approx(400.0 + FIRST_LOOK_SPAN_DAYS), 1.0]
    assert row["first_look_age_days"] is None
    assert row["change_rate"] * 10 < waiting["change_rate"]
    # a page seen before (a gone page back, its fingerprint lost) keeps no first-look age
    again = (
        update_state(
            s,
            cands,
            one_fetch(url, t2 + timedelta(days=1), "new", "f1", 9.0, False),
            plan_for([url]),
            t2 + timedelta(days=1),
        )
        .state.filter(pl.col("url") == url)
        .row(0, named=True)
    )
    assert again["first_look_age_days"] is None


def test_a_trusted_sitemap_dates_the_changes_its_header_cannot():
    url = "http://a.example/p"
    cands = candidates(url)

    def fetch(previous, at, outcome, fp, *, header=None, sitemap=None, trusted=True):
        res = one_fetch(url, at, outcome, fp, header, header is not None)
        plan = plan_for([url]).with_columns(
            lastmod_dates=pl.lit(trusted), lastmod_age_days=pl.lit(sitemap, pl.Float64)
        )
        return update_state(previous, cands, res, plan, at).state

    times = [T0 + timedelta(hours=6 * i) for i in range(6)]
    s = fetch(tables.empty("url_state"), times[0], "new", "f0")
    s = fetch(s, times[1], "changed", "f1", sitemap=0.1)
    s = fetch(s, times[2], "unchanged", "f1")
    s = fetch(s, times[3], "changed", "f2", header=0.05, sitemap=0.2)  # the header is nearer
    s = fetch(s, times[4], "changed", "f3", sitemap=5.0)  # older than our last look: no date
    row = s.row(0, named=True)
    assert row["obs_changed"] == [True, False, True, True]
    assert row["obs_age_days"] == [0.1, None, 0.05, None]
    # neither the header nor the sitemap trusted any more: the host's ages go
    s = fetch(s, times[5], "unchanged", "f3", trusted=False)
    assert s["obs_age_days"][0] is None and len(s["obs_interval_days"][0]) == 5


def test_a_host_robots_txt_allows_again_is_planned_in_that_cycle():
    """A host whose robots.txt could not be read (down, 5xx: disallow all) had its URLs
    'blocked' in url_state; the cycle whose robots.txt read allowed them again planned them as
    still blocked, nothing was fetched, and they waited a cycle more (found by an exploratory
    run). They are planned as what they were before: a fetched page active, the rest new."""
    fetched, never = "http://a.example/p", "http://a.example/q"
    capacity = room_for_ten()
    state = step(tables.empty("url_state"), candidates(fetched, never), results([]), T0)
    page = {"url": fetched, "http_status": 200, "fingerprint": "f1", "outcome": "new"}
    state = step(state, candidates(fetched, never), results([{**page, "fetched_at": T0}]), T0)
    down = T0 + timedelta(days=2)
    state = step(state, candidates(fetched, never, blocked=(fetched, never)), results([]), down)
    assert state["status"].to_list() == ["blocked", "blocked"]

    back = down + timedelta(hours=6)
    cands = candidates(fetched, never).with_columns(lastmod=pl.lit(None, dtype=tables.UTC_TIME))
    inputs = plan_inputs(cands, state, capacity)
    assert dict(zip(inputs["url"], inputs["status"], strict=True)) == {
        fetched: "active",
        never: "new",
    }
    plan = build_plan(inputs, capacity, now=back, budget=100, config=PlanConfig())
    assert sorted(plan.filter("selected")["url"].to_list()) == [fetched, never]


def test_two_urls_redirecting_to_each_other_fail_like_errors():
    """A cookie wall across two URLs (A sends to B, B back to A) leads to no page, yet both
    stayed 'active' redirects, fetched at full cost for ever (found by an exploratory run).
    A redirect that closes a loop now counts as a failure: its cost grows with each one and
    after three the URL's status is 'error'. A redirect elsewhere is still just a redirect."""
    wall, consent, moved = (
        "http://a.example/p",
        "http://a.example/consent?next=p",
        "http://a.example/old",
    )
    cands = candidates(wall, consent, moved)
    state = step(tables.empty("url_state"), cands, results([]), T0)

    def redirect(url: str, to: str, at: datetime) -> dict:
        return {
            "url": url,
            "fetched_at": at,
            "outcome": "redirect",
            "http_status": 302,
            "location": to,
        }

    for k in range(3):
        at = T0 + timedelta(hours=6 * (k + 1))
        answers = [redirect(wall, consent, at), redirect(moved, "http://a.example/new", at)]
        if k:  # the consent page is found by the first redirect and fetched from then on
            answers.append(redirect(consent, "http://a.example/p", at))
        state = step(state, cands, results(answers), at)
    rows = {r["url"]: r for r in state.iter_rows(named=True)}
    assert rows[wall]["consecutive_errors"] == 2 and rows[wall]["status"] == "active"
    assert rows[consent]["consecutive_errors"] == 2
    assert rows[wall]["redirect_to"] == consent and rows[wall]["last_outcome"] == "redirect"
    assert rows[moved]["consecutive_errors"] == 0 and rows[moved]["status"] == "active"
    at = T0 + timedelta(hours=24)
    state = step(
        state, cands, results([redirect(wall, consent, at), redirect(consent, wall, at)]), at
    )
    rows = {r["url"]: r for r in state.iter_rows(named=True)}
    assert (rows[wall]["status"], rows[consent]["status"]) == ("error", "error")


def test_a_server_asking_to_slow_down_is_no_failure_of_the_page():
    """A 429 counted as the page failing: three in a row (a host whose limit the learned pace
    probes now and then) put the page in error status, waiting a day and more, and each one
    doubled its cost (found by an exploratory run). A 429, or an answer with a Retry-After,
    neither counts nor clears a page's failures; a 500 still counts."""
    url, other = "http://a.example/p", "http://a.example/q"
    cands = candidates(url, other)
    state = step(tables.empty("url_state"), cands, results([]), T0)

    def answer(u: str, at: datetime, status: int, retry: float | None = None) -> dict:
        return {
            "url": u,
            "fetched_at": at,
            "outcome": "error",
            "http_status": status,
            "retry_after_s": retry,
        }

    for k in range(4):
        at = T0 + timedelta(hours=6 * (k + 1))
        throttled = answer(url, at, 429) if k % 2 else answer(url, at, 503, 30.0)
        state = step(state, cands, results([throttled, answer(other, at, 500)]), at)
    rows = {r["url"]: r for r in state.iter_rows(named=True)}
    assert (rows[url]["consecutive_errors"], rows[url]["status"]) == (0, "new")
    assert (rows[other]["consecutive_errors"], rows[other]["status"]) == (4, "error")
    # and a 429 between two failures neither clears nor adds to them
    at = T0 + timedelta(days=2)
    state = step(state, cands, results([answer(url, at, 500)]), at)
    for k, status in enumerate((429, 500)):
        later = at + timedelta(hours=6 * (k + 1))
        state = step(state, cands, results([answer(url, later, status)]), later)
    assert {r["url"]: r for r in state.iter_rows(named=True)}[url]["consecutive_errors"] == 2


def test_without_a_budget_a_gone_page_is_checked_when_due():
    """With no global budget the re-estimation share is 5 % of what the hosts can take: a
    fraction of a fetch in a small crawl, so a gone page due for its check a day later waited
    cycles for a lucky draw (found by a newcomer). Without a budget, what is due and fits its
    host goes."""
    url, other = "http://a.example/p", "http://a.example/q"
    cands = candidates(url, other)
    capacity = room_for_ten()
    state = step(tables.empty("url_state"), cands, results([]), T0)
    pages = [
        {"url": u, "http_status": 200, "fingerprint": u, "outcome": "new"} for u in (url, other)
    ]
    state = step(state, cands, results([{**p, "fetched_at": T0} for p in pages]), T0)
    gone_at = T0 + timedelta(days=2)
    missing = {"url": url, "outcome": "gone", "http_status": 404, "fetched_at": gone_at}
    state = step(state, cands, results([missing]), gone_at)
    inputs = plan_inputs(
        cands.with_columns(lastmod=pl.lit(None, dtype=tables.UTC_TIME)), state, capacity
    )
    for hours in range(24, 30):  # every cycle from the day it is due: not a lucky draw
        at = gone_at + timedelta(hours=hours)
        plan = build_plan(inputs, capacity, now=at, budget=None, config=PlanConfig())
        chosen = dict(zip(plan["url"], plan["reason"], strict=True))
        assert chosen[url] == "reestimate", (hours, chosen)
    before = build_plan(
        inputs, capacity, now=gone_at + timedelta(hours=18), budget=None, config=PlanConfig()
    )
    assert dict(zip(before["url"], before["reason"], strict=True))[url] is None  # not yet due


def test_a_url_that_keeps_refusing_us_is_tried_again_later_each_time():
    """A page answering 403 came back every few cycles for ever, the budget full (exploratory
    run). Once it is an 'error' (three failures) its next check is a day after the last
    failure, then two, four, ... up to a month: url_state says so, and the plan keeps to it."""
    url, other = "http://a.example/private", "http://a.example/q"
    cands = candidates(url, other)
    capacity = room_for_ten()
    state = step(tables.empty("url_state"), cands, results([]), T0)
    at = T0
    for k in range(4):
        at = T0 + timedelta(hours=6 * k)
        refused = {"url": url, "outcome": "error", "http_status": 403, "fetched_at": at}
        state = step(state, cands, results([refused]), at)
        row = state.filter(pl.col("url") == url).row(0, named=True)
        if k == 2:
            assert (row["status"], row["consecutive_errors"]) == ("error", 3)
            assert row["next_check_at"] == at + timedelta(days=1)
    assert row["consecutive_errors"] == 4 and row["next_check_at"] == at + timedelta(days=2)
    inputs = plan_inputs(
        cands.with_columns(lastmod=pl.lit(None, dtype=tables.UTC_TIME)), state, capacity
    )

    def planned(hours: float) -> bool:
        plan = build_plan(
            inputs, capacity, now=at + timedelta(hours=hours), budget=None, config=PlanConfig()
        )
        return dict(zip(plan["url"], plan["selected"], strict=True))[url]

    assert not any(planned(h) for h in (6, 24, 42)) and planned(48)


def test_cycles_a_trusted_lastmod_said_unchanged_are_quiet_time_of_the_next_interval():
    """On a host whose lastmod has earned trust a page is fetched when its lastmod moves, so
    every fetch found a change, and the rates were those of pages that change at every look
    (3.3/day on pages changing 0.16/day, found by an exploratory run). A cycle whose trusted
    lastmod said "unchanged" is a look without a fetch: the next interval is quiet up to it."""
    url = "http://a.example/p"
    cands = candidates(url)
    times = [T0 + timedelta(days=i) for i in range(5)]

    def cycle(previous, at, *, fetched=None, hint=None, sitemap_age=None, trusted=True):
        res = one_fetch(url, at, *fetched, None, False) if fetched else results([])
        plan = plan_for([url]).with_columns(
            hinted_change=pl.lit(hint, pl.Boolean),
            lastmod_dates=pl.lit(trusted),
            lastmod_age_days=pl.lit(sitemap_age, pl.Float64),
        )
        return update_state(previous, cands, res, plan, at).state

    s = cycle(tables.empty("url_state"), times[0], fetched=("new", "f0"))
    s = cycle(s, times[1], hint=False)  # quiet, not fetched
    s = cycle(s, times[2], hint=False)
    assert s["hint_quiet_until"][0] == times[2]
    # a host whose sitemap lost its trust since loses the quiet it vouched for
    lost = cycle(s, times[3], fetched=("changed", "f1"), trusted=False)
    assert lost["obs_interval_days"][0].to_list() == pytest.approx([3.0])
    assert lost["hint_quiet_until"][0] is None
    s = cycle(s, times[3], fetched=("changed", "f1"), hint=True, sitemap_age=0.25)
    row = s.row(0, named=True)
    assert row["obs_interval_days"] == pytest.approx([2.0, 1.0])
    assert row["obs_changed"] == [False, True] and row["obs_age_days"] == [None, 0.25]
    assert row["hint_quiet_until"] is None  # taken in
    # an unchanged fetch is quiet throughout: one observation, as before
    s = cycle(s, times[4], fetched=("unchanged", "f1"), hint=False)
    assert s["obs_interval_days"][0].to_list() == pytest.approx([2.0, 1.0, 1.0])


def test_a_throttled_page_is_aged_from_its_copy_not_from_the_429():
    """A 429 brings no copy. Aged from it, a first copy throttled on a cold start fell from
    the tie of pages never fetched to the bottom of the plan, and a page with a copy was
    taken for freshly fetched (found by an exploratory run). url_state and revisit_plan
    still say when the request went out."""
    new, seen, other = "http://a.example/n", "http://a.example/s", "http://a.example/o"
    cands = candidates(new, seen, other)
    capacity = room_for_ten()
    state = step(tables.empty("url_state"), cands, results([]), T0)
    first = {"url": seen, "fetched_at": T0, "outcome": "new", "http_status": 200}
    state = step(state, cands, results([{**first, "fingerprint": "f1"}]), T0)
    throttled = [
        {"url": u, "fetched_at": T1, "outcome": "error", "http_status": 429} for u in (new, seen)
    ]
    state = step(state, cands, results(throttled), T1)
    rows = {r["url"]: r for r in state.iter_rows(named=True)}
    assert rows[new]["last_fetched_at"] == T1 and rows[new]["status"] == "new"
    now = T1 + timedelta(hours=6)
    inputs = plan_inputs(
        cands.with_columns(lastmod=pl.lit(None, dtype=tables.UTC_TIME)), state, capacity
    )
    plan = build_plan(inputs, capacity, now=now, budget=100, config=PlanConfig()).sort("url")
    by_url = {r["url"]: r for r in plan.iter_rows(named=True)}
    # never fetched: as old as a page never asked for, and tied with it at the top
    assert by_url[new]["age_days"] is None and by_url[other]["age_days"] is None
    assert by_url[new]["priority"] == by_url[other]["priority"]
    # its copy is from T0, not from the 429 at T1
    assert by_url[seen]["age_days"] == pytest.approx(0.5)
    assert by_url[new]["last_request_at"] == T1


def test_a_graded_lastmod_names_the_series_of_files_that_listed_the_page():
    """Lastmod trust is earned per series of sitemap files (science.hints.listing_of), so each
    grading keeps the file the page was listed in when it was fetched."""
    url = "http://a.example/p"
    cands = candidates(url).with_columns(
        lastmod=pl.lit(T0 + timedelta(hours=3), dtype=tables.UTC_TIME),
        listed_in=pl.lit("http://a.example/post-sitemap2.xml"),
    )
    s = update_state(
        tables.empty("url_state"),
        cands,
        one_fetch(url, T0, "new", "f0", None, False),
        plan_for([url]),
        T0,
    ).state
    grades = update_state(
        s, cands, one_fetch(url, T1, "changed", "f1", None, False), plan_for([url]), T1
    ).grades
    assert grades.select("listing", "hint_changed", "changed").rows() == [
        ("/post-sitemap.xml", True, True)
    ]


def test_the_plan_as_the_state_step_reads_it_keeps_the_sitemaps_hints(tmp_path):
    """The url_state step loads only PLAN_COLUMNS of revisit_plan. Without hinted_change among
    them, sitemap_dating took the plan for one written before the column and a trusted
    "unchanged" was never quiet time (url_state.hint_quiet_until stayed null through the CLI;
    found by an exploratory run)."""
    wh = Warehouse(tmp_path)
    plan = plan_for(["http://a.example/p", "http://a.example/q"]).with_columns(
        hinted_change=pl.Series([False, None], dtype=pl.Boolean),
        lastmod_dates=pl.lit(True),
        lastmod_age_days=pl.Series([None, 0.5], dtype=pl.Float64),
    )
    wh.write_partition("revisit_plan", HOST, plan)
    dating = sitemap_dating(wh.read("revisit_plan", [HOST], columns=list(PLAN_COLUMNS)))
    assert dating.sort("url").rows() == [
        ("http://a.example/p", True, None, True),
        ("http://a.example/q", True, 0.5, None),
    ]


def test_held_back_by_the_allow_list_keeps_each_status_and_a_gone_page_stays_gone():
    """A cycle run without FRESHNESS_ALLOW_NETWORKS made every URL 'blocked', and once
    unblocked its gone pages came back 'active' (a contract audit). The allow-list is this
    machine's, not the site's word: statuses stay. A robots.txt that shuts the site out is
    the site's: 'blocked', and a page gone before is gone again after."""
    live, dead = "http://a.example/live", "http://a.example/dead"
    state = step(
        tables.empty("url_state"),
        candidates(live, dead),
        results(
            [
                {
                    "url": live,
                    "fetched_at": T0,
                    "outcome": "new",
                    "http_status": 200,
                    "fingerprint": "l",
                },
                {"url": dead, "fetched_at": T0, "outcome": "gone", "http_status": 404},
            ]
        ),
        T0,
    )
    assert dict(state.select("url", "status").rows()) == {live: "active", dead: "gone"}

    def refused(reason: str) -> pl.DataFrame:
        return candidates(live, dead, blocked=(live, dead)).with_columns(
            blocked_reason=pl.lit(reason)
        )

    held = step(state, refused("address not allowed (FRESHNESS_ALLOW_NETWORKS)"), results([]), T1)
    assert dict(held.select("url", "status").rows()) == {live: "active", dead: "gone"}
    shut = step(held, refused("robots.txt answered HTTP 503"), results([]), T1 + timedelta(hours=6))
    assert set(shut["status"]) == {"blocked"}
    back = step(shut, candidates(live, dead), results([]), T1 + timedelta(hours=12))
    assert dict(back.select("url", "status").rows()) == {live: "active", dead: "gone"}


def test_a_twin_on_another_host_naming_its_page_as_canonical_is_a_copy_of_it():
    """A site served under both www and its apex (or http and https), both spellings seeded,
    each page naming the apex one as canonical: each spelling was fetched as a page of its
    own, about 4 % of a budget (found by an outside held-out web). A page naming
    another host's page at another path (a syndicated copy naming its original), or a host
    this crawl does not plan, makes no copy."""
    rows = {
        "http://a.example/p": None,
        "http://www.a.example/p": "http://a.example/p",
        "http://www.a.example/q/": "http://a.example/q",
        "http://a.example/q": None,
        "http://news.example/story-1": "http://a.example/p",  # another path: syndicated
        "http://www.a.example/r": "http://elsewhere.example/r",  # not crawled here
    }
    urls = list(rows)
    host = pl.col("url").str.extract(r"://([^/]+)")
    cands = candidates(*urls).with_columns(host=host)
    res = results(
        [
            {
                "url": u,
                "fetched_at": T0,
                "outcome": "new",
                "http_status": 200,
                "fingerprint": f"fp{i}",
                "canonical": c,
            }
            for i, (u, c) in enumerate(rows.items())
        ]
    ).with_columns(host=host)
    plan = plan_for(urls).with_columns(host=host)
    state = update_state(tables.empty("url_state"), cands, res, plan, T0).state
    copies = dict(state.select("url", "duplicate_of").iter_rows())
    assert copies == {
        "http://a.example/p": None,
        "http://www.a.example/p": "http://a.example/p",
        "http://www.a.example/q/": "http://a.example/q",
        "http://a.example/q": None,
        "http://news.example/story-1": None,
        "http://www.a.example/r": None,
    }
