"""What a host accepts, learned across cycles (science.capacity): the gap a throttle teaches,
its slow recovery, concurrency, and the capacity the plan caps a host at."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from freshness_pipeline.science.capacity import (
    CYCLE_COLUMNS,
    FORGET_GAP_S,
    GAP_RECOVERY,
    THROTTLE_GAP_STEP_S,
    next_host_capacity,
    paced_capacity,
    throttled_gap,
)
from freshness_pipeline.stages.plan import host_capacity
from freshness_pipeline.warehouse import tables
from freshness_pipeline.web.throttle import ThrottlePolicy

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def cycle_rows(**hosts: dict) -> pl.DataFrame:
    defaults = {c: 0 for c, t in CYCLE_COLUMNS.items() if t == pl.Int64}
    rows = [
        {**defaults, "gap_s": None, "latency_s": None, "crawl_delay_s": 0.0, "host": h, **kw}
        for h, kw in hosts.items()
    ]
    return pl.DataFrame(rows, schema=CYCLE_COLUMNS)


def test_a_throttle_at_least_doubles_the_gap_and_adds_a_step() -> None:
    assert throttled_gap(0.0) == THROTTLE_GAP_STEP_S
    assert throttled_gap(0.0, observed_gap_s=0.4) == pytest.approx(0.8)
    assert throttled_gap(1.0, observed_gap_s=0.1) == pytest.approx(2.0)
    assert throttled_gap(0.1) == pytest.approx(0.1 + THROTTLE_GAP_STEP_S)
    assert throttled_gap(50.0) == 60.0  # capped


def test_a_throttle_that_names_its_wait_teaches_no_gap_past_it() -> None:
    # a 503 with Retry-After: 2 to a request that came 3 s after the last: the host said 2 s
    assert throttled_gap(0.0, observed_gap_s=3.0, retry_after_s=2.0) == pytest.approx(2.0)
    # a host throttling at the pace it named still teaches a step each time
    assert throttled_gap(2.0, observed_gap_s=3.0, retry_after_s=2.0) == pytest.approx(
        2.0 + THROTTLE_GAP_STEP_S
    )
    # a wait longer than what doubling gives changes nothing: doubling is still the least
    assert throttled_gap(0.0, observed_gap_s=0.1, retry_after_s=5.0) == THROTTLE_GAP_STEP_S
    assert throttled_gap(1.0, observed_gap_s=0.1, retry_after_s=5.0) == pytest.approx(2.0)
    assert throttled_gap(0.0, observed_gap_s=3.0, retry_after_s=0.0) == THROTTLE_GAP_STEP_S


def test_throttled_hosts_keep_their_gap_and_drop_to_one_request_at_a_time() -> None:
    first = next_host_capacity(
        tables.empty("host_capacity"),
        cycle_rows(
            t_example={"gap_s": 0.5, "sent": 10, "throttled": 2, "planned": 10},
            ok_example={"gap_s": 0.0, "sent": 10, "planned": 10, "latency_s": 0.01},
        ),
        NOW,
        max_concurrency=2,
    )
    rows = {r["host"]: r for r in first.iter_rows(named=True)}
    throttled, ok = rows["t_example"], rows["ok_example"]
    assert throttled["gap_s"] == 0.5 and throttled["concurrency"] == 1
    assert throttled["clean_cycles"] == 0 and throttled["last_throttled_at"] == NOW
    assert ok["concurrency"] == 2 and ok["clean_cycles"] == 1 and ok["gap_s"] == 0.0

    # A clean cycle shrinks the gap by the recovery factor; a cycle without requests teaches
    # nothing; a host missing from the cycle keeps its row untouched.
    later = NOW + timedelta(hours=6)
    second = next_host_capacity(
        tables.conform("host_capacity", first),
        cycle_rows(t_example={"gap_s": 0.5, "sent": 5, "planned": 5}),
        later,
        max_concurrency=2,
    )
    rows = {r["host"]: r for r in second.iter_rows(named=True)}
    assert rows["t_example"]["gap_s"] == pytest.approx(0.5 * GAP_RECOVERY)
    assert rows["t_example"]["concurrency"] == 2
    assert rows["t_example"]["last_throttled_at"] == NOW
    assert rows["ok_example"]["updated_at"] == NOW  # not in this cycle: kept as it was

    idle = next_host_capacity(
        tables.conform("host_capacity", second),
        cycle_rows(t_example={"gap_s": None, "sent": 0}),
        later + timedelta(hours=6),
        max_concurrency=2,
    )
    kept = idle.filter(pl.col("host") == "t_example").row(0, named=True)
    assert kept["gap_s"] == pytest.approx(0.5 * GAP_RECOVERY) and kept["clean_cycles"] == 1


def test_a_cycle_of_named_503_waits_carries_one_step_more_than_it_started_with() -> None:
    """Within the cycle each refusal doubled the pace (here to 12 s); carried whole, the busy
    cycles of a host refusing at fixed hours whatever the pace outgrew the quiet ones."""
    before = next_host_capacity(
        tables.empty("host_capacity"),
        cycle_rows(h_example={"gap_s": 0.5, "sent": 10, "throttled": 1, "rate_limited": 1}),
        NOW,
        max_concurrency=2,
    )
    assert before.row(0, named=True)["gap_s"] == 0.5
    later = NOW + timedelta(hours=6)
    busy = {"gap_s": 12.0, "sent": 9, "planned": 9, "throttled": 3, "waits_named": 3}

    def carried(previous: pl.DataFrame, **cycle: int) -> float:
        row = next_host_capacity(
            previous, cycle_rows(h_example={**busy, **cycle}), later, max_concurrency=2
        ).row(0, named=True)
        assert row["concurrency"] == 1 and row["clean_cycles"] == 0
        return float(row["gap_s"])

    known = tables.conform("host_capacity", before)
    assert carried(known) == pytest.approx(0.5 + THROTTLE_GAP_STEP_S)
    assert carried(tables.empty("host_capacity")) == THROTTLE_GAP_STEP_S  # nothing known yet
    # a 429 among them, or a 503 that named no wait: the host spoke of our pace
    assert carried(known, rate_limited=1) == 12.0
    assert carried(known, waits_named=2) == 12.0
    # never below what the cycle started with: a cycle that ended under the step keeps it
    assert carried(known, gap_s=0.6) == pytest.approx(0.6)


def test_a_host_with_a_crawl_delay_is_one_request_in_flight_whatever_it_answered() -> None:
    """The fetcher sends a Crawl-delay host one request at a time; host_capacity said 2 after a
    clean cycle (an outside check read it against "default 1 when a crawl-delay is set"), and
    the plan sized a slow host's share by it, twice what the fetcher would send."""
    clean = {"gap_s": 0.0, "sent": 10, "planned": 10, "latency_s": 2.0}
    out = next_host_capacity(
        tables.empty("host_capacity"),
        cycle_rows(delayed={**clean, "crawl_delay_s": 1.0}, free=clean),
        NOW,
        max_concurrency=4,
    )
    rows = {r["host"]: r for r in out.iter_rows(named=True)}
    assert rows["delayed"]["concurrency"] == 1 and rows["delayed"]["clean_cycles"] == 1
    assert rows["free"]["concurrency"] == 2
    # a 2 s answer one at a time: 150 fetches fit a 300 s window (two in flight: 300)
    shares = (
        out.sort("host")
        .with_columns(crawl_delay=pl.col("crawl_delay_s"))
        .select(paced_capacity(window_s=300.0).alias("capacity"))["capacity"]
    )
    assert shares.to_list() == [150, 300]


def test_a_host_that_refused_a_second_request_in_flight_gets_one_until_a_week_has_passed() -> None:
    """A host that takes one request at a time answered 429 every ten cycles or so, each time
    the concurrency had grown back to two (found by an exploratory run). Once refused, two in
    flight wait a week; a throttle at one in flight, or a host that was down, sets no ceiling."""
    clean = {"gap_s": 0.0, "sent": 10, "planned": 10}
    refused = {**clean, "throttled": 1, "rate_limited": 1}
    outage = {**clean, "throttled": 10, "failures": 10}
    rows = cycle_rows(one_at_a_time=clean, pacing=clean, was_down=clean)
    state = next_host_capacity(tables.empty("host_capacity"), rows, NOW, max_concurrency=4)
    assert set(state["concurrency"]) == {2}
    at = NOW + timedelta(hours=6)
    state = next_host_capacity(
        tables.conform("host_capacity", state),
        cycle_rows(one_at_a_time=refused, pacing=clean, was_down=outage),
        at,
        max_concurrency=4,
    )
    # pacing: throttled while it had one request in flight
    state = next_host_capacity(
        tables.conform("host_capacity", state.with_columns(concurrency=pl.lit(1, pl.Int64))),
        cycle_rows(one_at_a_time=clean, pacing=refused, was_down=clean),
        at,
        max_concurrency=4,
    )
    seen: dict[str, list[int]] = {"one_at_a_time": [], "pacing": [], "was_down": []}
    for hours in range(6, 8 * 24, 6):
        state = next_host_capacity(
            tables.conform("host_capacity", state),
            cycle_rows(one_at_a_time=clean, pacing=clean, was_down=clean),
            at + timedelta(hours=hours),
            max_concurrency=4,
        )
        for host, concurrency in state.select("host", "concurrency").iter_rows():
            seen[host].append(concurrency)
    week = 7 * 4  # cycles of six hours
    assert seen["one_at_a_time"][: week - 1] == [1] * (week - 1)
    assert seen["one_at_a_time"][week - 1 : week + 1] == [2, 3]  # a week on: asked again
    assert seen["pacing"][:3] == [2, 3, 4]
    assert seen["was_down"][:2] == [3, 4]


def test_a_recovered_gap_below_the_threshold_is_forgotten() -> None:
    prev = tables.conform(
        "host_capacity", pl.DataFrame({"host": ["h"], "gap_s": [FORGET_GAP_S * 1.05]})
    )
    out = next_host_capacity(
        prev, cycle_rows(h={"gap_s": FORGET_GAP_S * 1.05, "sent": 3}), NOW, max_concurrency=2
    )
    assert out["gap_s"].to_list() == [0.0]


def test_a_host_that_deferred_for_its_own_reasons_takes_at_most_twice_what_it_took() -> None:
    out = next_host_capacity(
        tables.empty("host_capacity"),
        cycle_rows(
            stuck={"sent": 3, "planned": 131, "deferred": 128, "deferred_by_host": 128},
            slow_cycle={"sent": 3, "planned": 10, "deferred": 7, "deferred_by_host": 0},
        ),
        NOW,
        max_concurrency=2,
    )
    caps = dict(out.select("host", "accepted_cap").iter_rows())
    assert caps == {"stuck": 6, "slow_cycle": None}


def test_a_host_that_was_down_is_not_capped_at_what_it_took() -> None:
    """A daily hour of maintenance (every request 503, no Retry-After, the breaker deferring
    the rest) cost the next, healthy cycle too: it was planned twice the three requests the
    outage took (found by an exploratory run). A host that said 429 did refuse us."""
    deferred = {"sent": 3, "planned": 30, "deferred": 27, "deferred_by_host": 27}
    out = next_host_capacity(
        tables.empty("host_capacity"),
        cycle_rows(
            maintenance={**deferred, "throttled": 3, "failures": 3},
            refusing={**deferred, "throttled": 3, "failures": 3, "rate_limited": 3},
            half_down={**deferred, "throttled": 2, "failures": 2},
        ),
        NOW,
        max_concurrency=2,
    )
    caps = dict(out.select("host", "accepted_cap").iter_rows())
    assert caps == {"maintenance": None, "refusing": 6, "half_down": 6}


def test_capacity_is_what_fits_the_window_at_the_hosts_pace() -> None:
    frame = pl.DataFrame(
        {
            "crawl_delay": [None, 2.0, None, None, 0.5, None],
            "gap_s": [None, None, 0.5, 0.0, 1.0, None],
            "concurrency": [None, None, 1, 2, 1, 1],
            "latency_s": [None, None, None, 0.2, None, None],
            "accepted_cap": [None, None, None, None, None, 6],
        },
        schema={
            "crawl_delay": pl.Float64,
            "gap_s": pl.Float64,
            "concurrency": pl.Int64,
            "latency_s": pl.Float64,
            "accepted_cap": pl.Int64,
        },
    )
    caps = frame.select(paced_capacity(600.0).alias("cap"))["cap"].to_list()
    # nothing learned: a few a second; Crawl-delay; learned gap; latency with concurrency
    # (2 / 0.2 s = 10 a second, over the default rate: the default wins); the larger of
    # Crawl-delay and gap; what a deferring host took, doubled
    assert caps == [2400, 300, 1200, 2400, 600, 6]
    slow = frame.with_columns(latency_s=pl.lit(2.0)).select(paced_capacity(600.0).alias("c"))
    assert slow["c"][0] == 300  # one request in flight at 2 s each
    # Two allowed in flight at 2 s each is 600, unless the fetcher keeps one in flight: its
    # latency-driven gap (latency / target concurrency 1) starts one request per latency.
    both = frame.with_columns(latency_s=pl.lit(2.0), concurrency=pl.lit(2))
    assert both.select(paced_capacity(600.0).alias("c"))["c"][3] == 600
    assert both.select(paced_capacity(600.0, 1.0).alias("c"))["c"][3] == 300
    assert ThrottlePolicy().latency_in_flight == 1.0
    assert ThrottlePolicy(autothrottle=False).latency_in_flight is None


def test_the_plan_sizes_a_slow_host_by_what_the_fetcher_keeps_in_flight() -> None:
    """A host answering in 7.8 s, allowed two requests in flight, was planned 153 fetches of a
    600-s window while the fetcher's gap (one latency) sent about 77: the cycle ran past its
    window (found by an exploratory run)."""
    robots = pl.DataFrame({"host": ["slow"], "crawl_delay": [None]}, schema=ROBOTS_SCHEMA)
    health = pl.DataFrame({"host": ["slow"], "error_share": [0.0]})
    learned = tables.conform(
        "host_capacity",
        pl.DataFrame({"host": ["slow"], "concurrency": [2], "latency_s": [7.8]}),
    )
    assert host_capacity(robots, health, 600.0, None, learned)["capacity"][0] == 76
    assert host_capacity(robots, health, 600.0, None, learned, in_flight=None)["capacity"][0] == 153


ROBOTS_SCHEMA = {"host": pl.String, "crawl_delay": pl.Float64}


def test_the_plan_caps_a_host_at_its_learned_pace_and_holds_win() -> None:
    robots = pl.DataFrame(
        {"host": ["a", "b", "c"], "crawl_delay": [None, 1.0, None]}, schema=ROBOTS_SCHEMA
    )
    health = pl.DataFrame({"host": ["a", "b", "c"], "error_share": [0.0, 0.0, 0.0]})
    learned = tables.conform(
        "host_capacity",
        pl.DataFrame({"host": ["a", "b"], "gap_s": [2.0, 0.1], "concurrency": [1, 2]}),
    )
    holds = pl.DataFrame({"host": ["c"], "retry_until": [NOW]})
    caps = host_capacity(robots, health, 600.0, holds, learned)
    got = {r["host"]: r for r in caps.iter_rows(named=True)}
    assert got["a"]["capacity"] == 300 and got["a"]["gap_s"] == 2.0
    assert got["b"]["capacity"] == 600  # the Crawl-delay is stricter than the learned gap
    assert got["c"]["capacity"] == 0 and got["c"]["concurrency"] == 1  # held; nothing learned


# ------------------------------------------------------------------ the fetch stage, for real


def _stage_plan(urls: list[str], selected: int, reserve: list[int]) -> pl.DataFrame:
    """A plan over ``urls``: the first ``selected`` chosen; ``reserve`` ranks of the others."""
    from freshness_pipeline.web.client import host_key

    n = len(urls)
    ranks = [None] * n
    for rank, i in enumerate(reserve, start=1):
        ranks[i] = rank
    return tables.conform(
        "revisit_plan",
        pl.DataFrame(
            {
                "url": urls,
                "host": [host_key(u) for u in urls],
                "planned_at": [NOW] * n,
                "value": [1.0] * n,
                "url_class": ["page"] * n,
                "status": ["new"] * n,
                "reason": ["priority" if i < selected else None for i in range(n)],
                "selected": [i < selected for i in range(n)],
                "rank": [i + 1 if i < selected else None for i in range(n)],
                "reserve_rank": ranks,
                "host_capacity": [100] * n,
                "host_concurrency": [1] * n,  # what the plan gives a host it knows nothing of
            }
        ),
    )


def test_budget_a_host_left_goes_to_the_reserve_of_the_others_in_the_same_cycle(tmp_path) -> None:
    """A host that asks for a pause longer than the cycle defers its share; the stage spends
    it on the plan's reserve on other hosts, and host_capacity says who took what."""
    from aiohttp import web

    from freshness_pipeline.config import PipelineConfig
    from freshness_pipeline.stages.fetch import run_fetch_stage
    from freshness_pipeline.warehouse.storage import Warehouse
    from freshness_pipeline.web.client import FetchSettings
    from freshness_pipeline_tests.support import LoopThread
    from freshness_pipeline_tests.test_client import LOOPBACK, serve, text

    async def closed(request: web.Request) -> web.Response:
        return web.Response(status=429, headers={"Retry-After": "3600"})

    loop = LoopThread()
    try:
        stuck_cm, good_cm = serve({"/s": closed}), serve({"/g": text("g")})
        stuck, good = loop.run(stuck_cm.__aenter__()), loop.run(good_cm.__aenter__())
        urls = [stuck.url(f"/s?i={i}") for i in range(4)] + [
            good.url(f"/g?i={i}") for i in range(6)
        ]
        # 4 of the stuck host and 2 of the good one chosen; the reserve: a stuck page first
        # (it must be skipped), then the good host's other four
        plan = _stage_plan(urls, selected=0, reserve=[])
        plan = plan.with_columns(
            selected=pl.Series([True] * 4 + [True, True] + [False] * 4),
            reason=pl.Series(["priority"] * 6 + [None] * 4),
            rank=pl.Series([1, 2, 3, 4, 5, 6] + [None] * 4),
            reserve_rank=pl.Series([None] * 6 + [2, 3, 4, 5]),
        )
        wh = Warehouse(tmp_path / "home")
        hosts = sorted(set(plan["host"]))
        stage = run_fetch_stage(
            plan, hosts, NOW, wh, PipelineConfig(), FetchSettings(fetch_window_s=60), LOOPBACK
        )
        loop.run(stuck_cm.__aexit__(None, None, None))
        loop.run(good_cm.__aexit__(None, None, None))
    finally:
        loop.close()
    frame = stage.frame
    stuck_rows = frame.filter(pl.col("host") == stuck.host)
    assert stuck_rows.filter(pl.col("sent")).height == 1  # the 429, nothing more
    assert stuck_rows.filter(pl.col("outcome") == "deferred").height == 3
    refilled = frame.filter(pl.col("plan_reason") == "refill")
    assert refilled.height == 3 and set(refilled["host"]) == {good.host}
    assert refilled["outcome"].to_list() == ["new"] * 3
    assert len(good.log) == 5 and len(stuck.log) == 1
    cap = {r["host"]: r for r in stage.capacity.iter_rows(named=True)}
    assert (cap[stuck.host]["planned"], cap[stuck.host]["sent"]) == (4, 1)
    assert (cap[stuck.host]["deferred"], cap[stuck.host]["throttled"]) == (3, 1)
    assert cap[stuck.host]["accepted_cap"] == 2 and cap[stuck.host]["concurrency"] == 1
    assert (cap[good.host]["planned"], cap[good.host]["refilled"]) == (2, 3)
    assert cap[good.host]["sent"] == 5 and cap[good.host]["deferred"] == 0


def test_a_host_that_answered_only_failures_keeps_the_pace_it_had_before_it_went_down() -> None:
    """Every request 503 (robots.txt too) is a host that is down, not one pacing us: each 503
    doubled the fetcher's gap, and the host came back paced at 8 s a request, its first cycle
    back over three minutes (found by an exploratory run). A 429 among the answers, or any
    answer served, is the host speaking of its pace: that gap is learned as before."""
    before = next_host_capacity(
        tables.empty("host_capacity"),
        cycle_rows(h_example={"gap_s": 0.1, "sent": 10, "planned": 10}),
        NOW,
        max_concurrency=2,
    )
    later = NOW + timedelta(hours=6)
    outage = {"gap_s": 8.0, "sent": 6, "planned": 10, "throttled": 6, "failures": 6}
    down = next_host_capacity(
        tables.conform("host_capacity", before),
        cycle_rows(h_example=outage),
        later,
        max_concurrency=2,
    ).row(0, named=True)
    assert down["gap_s"] == pytest.approx(0.1 * GAP_RECOVERY)  # the pace from before
    assert down["concurrency"] == 1  # one request at a time until it answers
    for spoke in ({"rate_limited": 1}, {"failures": 5}):
        paced = next_host_capacity(
            tables.conform("host_capacity", before),
            cycle_rows(h_example={**outage, **spoke}),
            later,
            max_concurrency=2,
        ).row(0, named=True)
        assert paced["gap_s"] == 8.0, spoke


@pytest.mark.usefixtures("loopback_crawl")
def test_a_host_that_trickles_its_bodies_is_learned_as_slow(tmp_path) -> None:
    """A host sending its headers at once and its bodies over seconds was learned with the
    latency of its headers (5 ms) and a capacity of 2,378 a window, though each page held a
    slot for 6 s (found by an exploratory run). The host's time runs until the body is in."""
    import asyncio

    from aiohttp import web

    from freshness_pipeline.app.runner import load_seeds, run_cycle
    from freshness_pipeline.warehouse.storage import Warehouse
    from freshness_pipeline_tests.support import serve_on_loopback

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")
        if request.path == "/sitemap.xml":
            return web.Response(status=404)
        answer = web.StreamResponse(headers={"Content-Type": "text/html"})
        await answer.prepare(request)
        await answer.write(b"<html><title>slow</title><body><main><p>")
        for word in (b"a ", b"page ", b"sent ", b"slowly"):
            await asyncio.sleep(0.25)
            await answer.write(word)
        await answer.write(b"</p></main></body></html>")
        await answer.write_eof()
        return answer

    home = tmp_path / "home"
    with serve_on_loopback(handle) as base:
        load_seeds(home, f"url\n{base}/one\n{base}/two\n".encode(), added_at=NOW)
        run_cycle(home, NOW)
    learned = Warehouse(home).read("host_capacity")
    assert learned["sent"].to_list() == [2]
    assert learned["latency_s"][0] >= 0.9, learned.select("latency_s", "capacity")


@pytest.mark.usefixtures("loopback_crawl")
def test_a_host_refusing_at_its_own_hours_with_a_named_wait_is_not_paced_by_them(tmp_path) -> None:
    """Two hosts refuse every third page request whatever the pace, one with 503 and a
    Retry-After of a second, the other with 429 and the same wait. Each refusal is waited
    out and, within the cycle, doubles the pace. The 503 host hands the next cycle one step a
    cycle, the 429 host what it ended with (before: the 503 host carried 0.5-1 s after one
    cycle, as much as the 429 host)."""
    from aiohttp import web

    from freshness_pipeline.app.runner import load_seeds, run_cycle
    from freshness_pipeline.warehouse.storage import Warehouse
    from freshness_pipeline_tests.support import serve_on_loopback

    def refusing(status: int):  # type: ignore[no-untyped-def]
        asked = [0]

        async def handle(request: web.Request) -> web.Response:
            if request.path == "/robots.txt":
                return web.Response(text="User-agent: *\nAllow: /\n")
            if not request.path.startswith("/p"):
                return web.Response(status=404)
            asked[0] += 1
            if asked[0] % 3 == 0:
                return web.Response(status=status, headers={"Retry-After": "1"}, text="busy")
            return web.Response(
                text=f"<html><title>{request.path}</title><main><p>page {request.path}</p></main>",
                content_type="text/html",
            )

        return handle

    home = tmp_path / "home"
    pages = "".join(f"/p{i}\n" for i in range(9))
    with (
        serve_on_loopback(refusing(503)) as unavailable,
        serve_on_loopback(refusing(429)) as limiting,
    ):
        seeds = "url\n" + "".join(
            f"{base}{line}" for base in (unavailable, limiting) for line in pages.splitlines(True)
        )
        load_seeds(home, seeds.encode(), added_at=NOW)
        run_cycle(home, NOW)
        learned = Warehouse(home).read("host_capacity")
        gaps = {r["host"]: r for r in learned.iter_rows(named=True)}
        busy, limited = (gaps[u.removeprefix("http://")] for u in (unavailable, limiting))
        assert busy["throttled"] >= 2 and limited["throttled"] >= 2, learned
        assert busy["gap_s"] == pytest.approx(THROTTLE_GAP_STEP_S)
        assert limited["gap_s"] >= 2 * THROTTLE_GAP_STEP_S


def test_cycle_observations_without_a_column_are_refused_by_name() -> None:
    rows = cycle_rows(h_example={"gap_s": 0.5, "sent": 1}).drop("waits_named")
    with pytest.raises(ValueError, match="waits_named"):
        next_host_capacity(tables.empty("host_capacity"), rows, NOW, max_concurrency=2)
