import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from freshness_pipeline.science.estimate import prior_mean
from freshness_pipeline.science.gains import (
    capture_gain,
    freshness_index,
    posterior_freshness_index,
)
from freshness_pipeline.science.schedule import (
    REASONS,
    PlanConfig,
    build_plan,
    error_recheck_wait_days,
    gone_recheck_wait_days,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
OUT_COLUMNS = [
    "age_days",
    "expected_gain",
    "priority",
    "reason",
    "selected",
    "rank",
    "reserve_rank",
]


def _cands(rows: list[dict]) -> pl.DataFrame:
    """Candidates from partial rows: url and host default from the position."""
    full = []
    for i, row in enumerate(rows):
        age = row.get("age")
        full.append(
            {
                "url": row.get("url", f"http://{row.get('host', 'h.example')}/{i}"),
                "host": row.get("host", "h.example"),
                "value": row.get("value", 1.0),
                "url_class": row.get("url_class", "article"),
                "status": row.get("status", "active"),
                "last_fetched_at": None if age is None else NOW - timedelta(days=age),
                "change_rate": row.get("rate", 1.0),
                "cost": row.get("cost", 1.0),
            }
        )
    return pl.DataFrame(
        full,
        schema={
            "url": pl.String,
            "host": pl.String,
            "value": pl.Float64,
            "url_class": pl.String,
            "status": pl.String,
            "last_fetched_at": pl.Datetime("us", "UTC"),
            "change_rate": pl.Float64,
            "cost": pl.Float64,
        },
    )


def _caps(**caps: int) -> pl.DataFrame:
    return pl.DataFrame(
        {"host": [h.replace("_", ".") for h in caps], "capacity": list(caps.values())},
        schema={"host": pl.String, "capacity": pl.Int64},
    )


BIG = _caps(h_example=10_000)


def _selected(plan: pl.DataFrame) -> list[str]:
    return plan.filter("selected").sort("rank")["url"].to_list()


# ---------------------------------------------------------------------------- the index


@pytest.mark.parametrize("lam", [1e-6, 0.01, 0.3, 1.0, 7.0, 96.0])
@pytest.mark.parametrize("age", [1e-4, 0.04, 1.0, 3.0, 30.0, 400.0])
def test_freshness_index_matches_formula(lam: float, age: float) -> None:
    got = pl.select(freshness_index(lam, age)).item()
    r = lam * age
    if r > 1e-2:
        expected = (1 - (1 + r) * math.exp(-r)) / lam
        assert got == pytest.approx(expected, rel=1e-12)
    # equivalent form w[(1 − e^{−λa})/λ − a e^{−λa}], accurate via expm1
    alt = -math.expm1(-r) / lam - age * math.exp(-r)
    assert got == pytest.approx(alt, rel=1e-6, abs=1e-15)


def test_freshness_index_limits() -> None:
    out = pl.select(
        zero=freshness_index(0.0, 5.0),
        tiny=freshness_index(1e-15, 5.0),
        huge_age=freshness_index(2.0, 1e6),
        never=freshness_index(2.0, float("inf")),
        null=freshness_index(None, 1.0),
        col=freshness_index(pl.lit(4.0), pl.lit(0.0)),
    ).row(0, named=True)
    assert out["zero"] == 0.0
    assert out["tiny"] == pytest.approx(1e-15 * 25 / 2)  # λa²/2 as λ → 0
    assert out["huge_age"] == pytest.approx(0.5) and out["never"] == pytest.approx(0.5)
    assert out["null"] is None
    assert out["col"] == 0.0


def test_freshness_index_works_on_columns_and_grows_with_age() -> None:
    df = pl.DataFrame({"rate": [1.0] * 50, "age": [i / 5 for i in range(50)]})
    w = df.select(freshness_index("rate", "age"))["freshness_index"].to_list()
    assert all(b > a for a, b in zip(w, w[1:], strict=False))
    assert max(w) < 1.0  # bounded by 1/λ


def test_index_penalises_pages_too_fast_to_follow() -> None:
    """At equal value and age, a page changing every 15 min is a worse buy than a daily one."""
    w = pl.select(fast=freshness_index(96.0, 1.0), daily=freshness_index(1.0, 1.0)).row(
        0, named=True
    )
    assert w["fast"] < 0.05 * w["daily"]


def test_capture_gain() -> None:
    out = pl.select(
        a=capture_gain(1.0, 1.0), b=capture_gain(1e-9, 2.0), c=capture_gain(5.0, float("inf"))
    ).row(0)
    assert out[0] == pytest.approx(1 - math.exp(-1))
    assert out[1] == pytest.approx(2e-9)
    assert out[2] == 1.0


# ---------------------------------------------------------------------------- build_plan


def test_output_columns_and_row_order() -> None:
    cands = _cands([{"age": a} for a in (1.0, 2.0, 3.0)])
    plan = build_plan(cands, BIG, now=NOW, budget=2)
    assert plan.columns == cands.columns + OUT_COLUMNS
    assert plan["url"].to_list() == cands["url"].to_list()
    assert plan.schema["selected"] == pl.Boolean
    assert plan["age_days"].to_list() == pytest.approx([1.0, 2.0, 3.0])
    assert plan["selected"].sum() == 2
    assert sorted(plan["rank"].drop_nulls().to_list()) == [1, 2]
    assert plan.filter(~pl.col("selected"))["reason"].null_count() == 1


def test_fast_page_gets_less_priority_than_moderate_one() -> None:
    cands = _cands(
        [
            {"url": "http://h.example/fast", "rate": 96.0, "age": 1.0},
            {"url": "http://h.example/daily", "rate": 1.0, "age": 1.0},
        ]
    )
    plan = build_plan(cands, BIG, now=NOW, budget=1)
    assert _selected(plan) == ["http://h.example/daily"]
    fast, daily = plan["priority"].to_list()
    assert fast < daily


def test_capture_objective_ranks_fast_pages_higher() -> None:
    cands = _cands(
        [
            {"url": "http://h.example/fast", "rate": 96.0, "age": 1.0},
            {"url": "http://h.example/daily", "rate": 1.0, "age": 1.0},
        ]
    )
    fresh = build_plan(cands, BIG, now=NOW, budget=1)
    capture = build_plan(cands, BIG, now=NOW, budget=1, config=PlanConfig(objective="capture"))
    assert _selected(fresh) == ["http://h.example/daily"]
    assert _selected(capture) == ["http://h.example/fast"]
    assert capture["expected_gain"][0] == pytest.approx(1.0)


def test_value_and_cost_scale_priority() -> None:
    cands = _cands([{"value": 1.0}, {"value": 3.0}, {"value": 3.0, "cost": 6.0}])
    cands = cands.with_columns(last_fetched_at=pl.lit(NOW - timedelta(days=2)))
    p = build_plan(cands, BIG, now=NOW, budget=None)["priority"].to_list()
    assert p[1] == pytest.approx(3 * p[0])
    assert p[2] == pytest.approx(p[0] / 2)


def test_null_rate_uses_class_prior() -> None:
    cands = _cands([{"rate": None, "url_class": "listing", "age": 2.0}])
    gain = build_plan(cands, BIG, now=NOW, budget=1)["expected_gain"].item()
    lam = prior_mean("listing")
    assert gain == pytest.approx((1 - (1 + 2 * lam) * math.exp(-2 * lam)) / lam)


def test_blocked_never_and_gone_only_after_recheck_delay() -> None:
    cands = _cands(
        [
            {"status": "blocked", "age": 100.0, "value": 100.0},
            {"status": "gone", "age": 5.0, "value": 100.0},
            {"status": "gone", "age": 45.0, "value": 100.0},
            {"status": "active", "age": 2.0},
        ]
    )
    config = PlanConfig(gone_recheck_days=30.0, reestimate_share=0.5)
    plan = build_plan(cands, BIG, now=NOW, budget=None, config=config)
    assert plan["selected"].to_list() == [False, False, True, True]
    assert plan["reason"][2] == "reestimate"


def test_a_gone_page_is_checked_again_soon_once_then_monthly() -> None:
    config = PlanConfig(gone_first_recheck_days=1.0, gone_recheck_days=30.0, reestimate_share=0.5)
    gone_for = pl.Series([0.0, 0.0001, 0.2, 1.0, 40.0, None], dtype=pl.Float64)
    waits = pl.select(gone_recheck_wait_days(pl.lit(gone_for), config)).to_series()
    assert waits.to_list() == pytest.approx([1.0, 1.0, 30.0, 30.0, 30.0, 30.0])
    with pytest.raises(ValueError, match="gone_first_recheck_days"):
        PlanConfig(gone_first_recheck_days=40.0, gone_recheck_days=30.0)
    # in the plan: the same two ages, one page gone since its last fetch, one confirmed gone
    cands = _cands(
        [{"status": "gone", "age": 2.0, "value": 1.0}, {"status": "gone", "age": 2.0}]
    ).with_columns(gone_at=pl.col("last_fetched_at") - pl.Series([timedelta(0), timedelta(days=1)]))
    plan = build_plan(cands, BIG, now=NOW, budget=10, config=config)
    assert plan["selected"].to_list() == [True, False]


def test_a_page_gone_since_its_last_fetch_is_rechecked_before_thin_pages() -> None:
    """The first recheck of a 404 (a deploy glitch as often as a page removed) competed with
    every long-unvisited and thinly observed page for the re-estimation share, which a small
    budget rounds to one fetch now and then: a page back from a glitch stayed out of the copy
    cycle after cycle. It goes first in that share; a confirmed gone page does not."""
    config = PlanConfig(gone_first_recheck_days=1.0, gone_recheck_days=30.0)
    rows = [{"status": "active", "age": 40.0, "value": 50.0} for _ in range(20)]
    rows += [{"status": "gone", "age": 1.5}, {"status": "gone", "age": 45.0}]
    cands = _cands(rows).with_columns(
        gone_at=pl.when(pl.col("status") == "gone").then(
            pl.col("last_fetched_at") - pl.Series([timedelta(0)] * 21 + [timedelta(days=60)])
        )
    )
    plan = build_plan(cands, BIG, now=NOW, budget=20, config=config)  # a share of one fetch
    chosen = plan.filter(pl.col("reason") == "reestimate")
    assert chosen["status"].to_list() == ["gone"], chosen
    assert chosen["age_days"].to_list() == pytest.approx([1.5])


def test_a_url_that_keeps_failing_waits_longer_each_time() -> None:
    """A page answering 401, 403 or 451, or a server that never answers, came back every few
    cycles for ever through the reserved shares, each time a slot (and for a hanging server a
    timeout) a live page lacked (exploratory run). In status 'error' it waits a day after the
    failure that made it one, doubling with each failure since, up to a month."""
    config = PlanConfig(gone_first_recheck_days=1.0, gone_recheck_days=30.0)
    errors = pl.Series([3, 4, 5, 8, 40, None], dtype=pl.Int64)
    waits = pl.select(error_recheck_wait_days(pl.lit(errors), config)).to_series()
    assert waits.to_list() == pytest.approx([1.0, 2.0, 4.0, 30.0, 30.0, 1.0])
    rows = [
        {"status": "error", "age": 0.5, "value": 100.0},  # 3 failures: waits a day
        {"status": "error", "age": 1.5, "value": 100.0},  # 3 failures, a day and a half on
        {"status": "error", "age": 3.0, "value": 100.0},  # 5 failures: waits four days
        {"status": "error", "age": 5.0, "value": 100.0},
        {"status": "active", "age": 0.5},  # a page failing twice is not an error yet
    ]
    cands = _cands(rows).with_columns(consecutive_errors=pl.Series([3, 3, 5, 5, 2], dtype=pl.Int64))
    plan = build_plan(cands, BIG, now=NOW, budget=None, config=config)
    assert plan["selected"].to_list() == [False, True, False, True, True]


def test_tied_pages_are_taken_host_by_host_not_in_url_order() -> None:
    """One host's 20,000 sitemap URLs took 92 % of a crawl's fetches and other hosts' seeds
    were never fetched (found by an exploratory run): never-fetched pages all tie at the
    index's cap, and ties went in URL order, so the alphabetically first host took them all."""
    big = [
        {"host": "a.example", "url": f"http://a.example/{i:03d}", "status": "new"}
        for i in range(40)
    ]
    seeds = [
        {"host": "b.example", "url": f"http://b.example/{i}", "status": "new"} for i in range(3)
    ]
    seeds += [{"host": "c.example", "status": "new", "url": "http://c.example/x"}]
    caps = _caps(a_example=100, b_example=100, c_example=100)
    plan = build_plan(_cands(big + seeds), caps, now=NOW, budget=8)
    chosen = plan.filter("selected").sort("rank")
    assert chosen.group_by("host").len().sort("host").rows() == [
        ("a.example", 4),
        ("b.example", 3),
        ("c.example", 1),
    ]
    # round by round: every host's first URL before any host's second
    firsts = chosen["host"].head(3).to_list()
    assert sorted(firsts) == ["a.example", "b.example", "c.example"], firsts
    # untied priorities still go by priority, whatever the host
    ranked = _cands(
        [
            {"host": "a.example", "url": "http://a.example/1", "value": 5.0, "age": 3.0},
            {"host": "a.example", "url": "http://a.example/2", "value": 4.0, "age": 3.0},
            {"host": "b.example", "url": "http://b.example/1", "value": 1.0, "age": 3.0},
        ]
    )
    plan = build_plan(ranked, caps, now=NOW, budget=2)
    assert _selected(plan) == ["http://a.example/1", "http://a.example/2"]


def test_of_tied_pages_the_newest_and_the_longest_waiting_go_by_turns() -> None:
    """A feed of 1,000 old items and a new one a cycle: at 20 fetches a cycle the new items,
    whose URLs sorted after the backlog's, waited for the whole backlog (found by an
    exploratory run); taken newest first alone, a sitemap listing new URLs on every read kept
    its host's older pages waiting for ever (found by another). Ties go to the newest and the
    oldest by turns: an entry's lastmod or pubDate, else when the crawl first saw it; a
    lastmod in the future says nothing."""
    old = [{"url": f"http://h.example/news/a-old-{i:04d}", "status": "new"} for i in range(1000)]
    new = [{"url": f"http://h.example/news/z-new-{k}", "status": "new"} for k in range(3)]
    undated = {"url": "http://h.example/news/z-undated", "status": "new"}
    future = {"url": "http://h.example/news/b-future", "status": "new"}
    frame = _cands([*old, *new, undated, future])
    n_old = len(old)
    lastmod = (
        [NOW - timedelta(days=400 - i % 300) for i in range(n_old)]
        + [NOW - timedelta(hours=18 - 6 * k) for k in range(3)]
        + [None, datetime(2099, 12, 31, tzinfo=UTC)]
    )
    first_seen = [NOW - timedelta(days=30)] * n_old + [NOW] * 3 + [NOW - timedelta(hours=1)]
    first_seen += [NOW - timedelta(days=30)]
    frame = frame.with_columns(
        pl.Series("lastmod", lastmod, dtype=pl.Datetime("us", "UTC")),
        pl.Series("first_seen_at", first_seen, dtype=pl.Datetime("us", "UTC")),
    )
    plan = build_plan(frame, BIG, now=NOW, budget=8)
    assert _selected(plan) == [
        "http://h.example/news/z-undated",  # first seen an hour ago
        "http://h.example/news/a-old-0900",  # the backlog's oldest (400 days, four tie)
        "http://h.example/news/z-new-2",  # 6 hours old
        "http://h.example/news/a-old-0600",
        "http://h.example/news/z-new-1",
        "http://h.example/news/a-old-0300",
        "http://h.example/news/z-new-0",  # 18 hours old
        "http://h.example/news/a-old-0000",
    ]
    # the 2099 entry ranks as first seen 30 days ago: among the backlog's newest
    later = _selected(build_plan(frame, BIG, now=NOW, budget=10))
    assert "http://h.example/news/b-future" in later[-2:]
    # without dates, URL order as before
    plain = build_plan(frame.drop("lastmod", "first_seen_at"), BIG, now=NOW, budget=2)
    assert _selected(plain) == [
        "http://h.example/news/a-old-0000",
        "http://h.example/news/a-old-0001",
    ]


def test_never_fetched_seeds_go_quietest_first_and_found_urls_newest_and_oldest_by_turns() -> None:
    """At a 2 % budget on seeds a sitemap listed with lastmods, newest and oldest by turns took
    the pages that had changed last, the fastest, first: their copies went stale soonest and
    the crawl lost to round robin (found by an exploratory run). A seed's lastmod dates its last
    change, so seeds go the longest quiet first, undated ones after them by URL; what the
    crawl found itself keeps the newest-and-oldest turns (a new article is news)."""
    ages = [3.0, 0.1, 40.0, 1.0, 400.0, 12.0]  # days since each seed's lastmod
    seeds = [{"url": f"http://h.example/s{i}", "status": "new"} for i in range(len(ages))]
    seeds.append({"url": "http://h.example/s-undated", "status": "new"})
    found = [{"url": f"http://h.example/f{i}", "status": "new"} for i in range(3)]
    frame = _cands([*seeds, *found]).with_columns(
        pl.Series(
            "lastmod",
            [NOW - timedelta(days=a) for a in ages]
            + [None]
            + [NOW - timedelta(days=d) for d in (1, 90, 5)],
            dtype=pl.Datetime("us", "UTC"),
        ),
        pl.Series("discovered", [False] * (len(ages) + 1) + [True] * 3),
    )
    only_seeds = frame.filter(~pl.col("discovered"))
    assert _selected(build_plan(only_seeds, BIG, now=NOW, budget=7)) == [
        "http://h.example/s4",  # quiet for 400 days
        "http://h.example/s2",
        "http://h.example/s5",
        "http://h.example/s0",
        "http://h.example/s3",
        "http://h.example/s1",  # changed 2.4 hours ago
        "http://h.example/s-undated",
    ]
    only_found = frame.filter(pl.col("discovered"))
    assert _selected(build_plan(only_found, BIG, now=NOW, budget=3)) == [
        "http://h.example/f0",  # the newest
        "http://h.example/f1",  # the oldest
        "http://h.example/f2",
    ]
    # together, each keeps its own order
    both = _selected(build_plan(frame, BIG, now=NOW, budget=10))
    assert [u for u in both if "/s" in u] == _selected(
        build_plan(only_seeds, BIG, now=NOW, budget=7)
    )
    assert [u for u in both if "/f" in u] == _selected(
        build_plan(only_found, BIG, now=NOW, budget=3)
    )


def test_a_host_whose_new_urls_never_end_does_not_keep_another_hosts_pages_waiting() -> None:
    """A calendar's sitemap lists 300 new days on every read: its newest URLs took every tie
    against another host's pages waiting since the first cycle, whose fetched pages held
    that host's first places (found by an exploratory run). Places are counted within what
    waits, so the hosts take turns."""
    trap = [
        {
            "url": f"http://cal.example/day/{k:04d}",
            "host": "cal.example",
            "status": "new",
            "first_seen": NOW,
        }
        for k in range(300)
    ]
    honest = [
        {
            "url": f"http://news.example/p/{k:02d}",
            "host": "news.example",
            "status": "active",
            "age": 3.0,
            "rate": 0.01,
            # announced both after and before the waiting pages (updated articles, old ones)
            "first_seen": NOW - timedelta(days=1 if k < 10 else 5),
        }
        for k in range(20)
    ] + [
        {
            "url": f"http://news.example/w/{k:02d}",
            "host": "news.example",
            "status": "new",
            "first_seen": NOW - timedelta(days=2),
        }
        for k in range(20)
    ]
    rows = [{k: v for k, v in row.items() if k != "first_seen"} for row in [*trap, *honest]]
    frame = _cands(rows).with_columns(
        pl.Series(
            "first_seen_at",
            [row["first_seen"] for row in [*trap, *honest]],
            dtype=pl.Datetime("us", "UTC"),
        )
    )
    room = pl.DataFrame({"host": ["cal.example", "news.example"], "capacity": [10_000, 10_000]})
    chosen = _selected(build_plan(frame, room, now=NOW, budget=20))
    waiting = [u for u in chosen if "/w/" in u]
    assert len(waiting) >= 8, chosen
    # the same where only the priority pass decides: never-fetched pages of both hosts tie
    # at the index's cap, and those of a host with fetched pages take their turns too
    cfg = PlanConfig(new_share=0.0, discovery_max_share=0.0, verify_share=0.0)
    chosen = _selected(build_plan(frame, room, now=NOW, budget=20, config=cfg))
    assert len([u for u in chosen if "/w/" in u]) == 10, chosen


def test_min_interval_is_respected_even_by_the_floor() -> None:
    cands = _cands(
        [
            {"age": 0.01, "value": 1000.0, "rate": 5.0},  # 15 minutes ago
            {"age": -1.0, "value": 1000.0},  # fetched "after" now: a backfill of an older cycle
            {"age": 0.5},
        ]
    )
    plan = build_plan(cands, BIG, now=NOW, budget=None)
    assert plan["selected"].to_list() == [False, False, True]


def test_staleness_floor_comes_first() -> None:
    cands = _cands(
        [
            {"url": "http://h.example/hot", "value": 100.0, "age": 2.0, "rate": 0.5},
            {"url": "http://h.example/old", "value": 0.0, "age": 31.0, "rate": 0.0},
            {"url": "http://h.example/older", "value": 0.0, "age": 45.0, "rate": 0.0},
        ]
    )
    uncapped = PlanConfig(floor_share=1.0)
    plan = build_plan(cands, BIG, now=NOW, budget=2, config=uncapped)
    assert _selected(plan) == ["http://h.example/older", "http://h.example/old"]
    assert set(plan.filter("selected")["reason"]) == {"floor"}


def test_the_floor_takes_at_most_its_share_of_the_budget() -> None:
    """A budget too small to revisit every page within the floor's interval keeps most of
    itself for the pages worth a fetch; the oldest overdue pages go first."""
    rows = [
        {"url": f"http://h.example/old{i:02d}", "age": 31.0 + i, "rate": 0.0} for i in range(40)
    ]
    rows += [{"url": f"http://h.example/hot{i:02d}", "age": 2.0, "rate": 0.5} for i in range(40)]
    cands = _cands(rows)
    config = PlanConfig(
        floor_share=0.1,
        floor_hard_factor=10.0,
        new_share=0.0,
        reestimate_share=0.0,
        verify_share=0.0,
    )
    plan = build_plan(cands, BIG, now=NOW, budget=20, config=config)
    chosen = plan.filter("selected")
    floor = chosen.filter(pl.col("reason") == "floor").sort("rank")["url"].to_list()
    assert floor == ["http://h.example/old39", "http://h.example/old38"]  # 10 % of 20, oldest
    assert (chosen.filter(pl.col("reason") != "floor")["url"].str.contains("hot")).all()
    assert chosen.height == 20
    # uncapped, the floor takes the whole budget
    full = build_plan(cands, BIG, now=NOW, budget=20, config=replace(config, floor_share=1.0))
    assert set(full.filter("selected")["reason"]) == {"floor"}
    with pytest.raises(ValueError):
        PlanConfig(floor_share=1.5)


def test_zero_priority_pages_are_not_fetched_for_nothing() -> None:
    cands = _cands([{"age": 2.0, "value": 0.0}, {"age": 2.0, "rate": 0.0}])
    plan = build_plan(cands, BIG, now=NOW, budget=10, config=PlanConfig(verify_share=0.0))
    assert not plan["selected"].any()


def test_host_capacity_caps_each_host_and_missing_hosts_get_nothing() -> None:
    rows = [{"host": "a.example", "age": 2.0, "value": 10.0} for _ in range(5)]
    rows += [{"host": "b.example", "age": 2.0} for _ in range(5)]
    rows += [{"host": "c.example", "age": 2.0, "value": 50.0}]
    plan = build_plan(_cands(rows), _caps(a_example=2, b_example=4), now=NOW, budget=100)
    per_host = dict(plan.filter("selected").group_by("host").len().iter_rows())
    assert per_host == {"a.example": 2, "b.example": 4}


def test_budget_none_is_capacity_only() -> None:
    rows = [{"host": "a.example", "age": 2.0} for _ in range(7)]
    rows += [{"host": "b.example", "age": 3.0} for _ in range(3)]
    plan = build_plan(_cands(rows), _caps(a_example=5, b_example=10), now=NOW, budget=None)
    assert plan["selected"].sum() == 8


def test_reserved_new_share_is_used_when_eligible() -> None:
    # established pages with very high priority would take everything without the reserve
    rows = [{"age": 5.0, "value": 1e6} for _ in range(200)]
    rows += [{"status": "new", "age": None, "value": 0.001 * (i + 1)} for i in range(50)]
    plan = build_plan(_cands(rows), BIG, now=NOW, budget=100)
    new = plan.filter(pl.col("reason") == "new")
    assert new.height == 10
    # by value: the 10 most valuable new URLs
    assert sorted(new["value"].to_list()) == pytest.approx([0.001 * i for i in range(41, 51)])
    assert plan["selected"].sum() == 100


def test_reestimation_and_verification_shares() -> None:
    rows = [{"age": 2.0, "value": 1e6, "rate": 1.0} for _ in range(200)]
    rows += [{"age": 20.0 + i / 10, "value": 1e-9, "rate": 0.001} for i in range(30)]
    config = PlanConfig(new_share=0.1, reestimate_share=0.05, verify_share=0.02)
    plan = build_plan(_cands(rows), BIG, now=NOW, budget=200, config=config)
    reasons = plan.filter("selected").group_by("reason").len()
    counts = dict(reasons.iter_rows())
    assert counts["reestimate"] == 10
    assert counts["verify"] == 4
    assert "new" not in counts  # no new URLs: the share flowed back to priority
    assert counts["priority"] == 186
    # re-estimation picks the longest-quiet pages
    quiet = plan.filter(pl.col("reason") == "reestimate")["age_days"].to_list()
    assert min(quiet) == pytest.approx(20.0 + 2.0)


def test_reestimation_goes_first_where_a_misjudged_rate_costs_most() -> None:
    # 10 re-estimation fetches; the priority pages soak up the rest of the budget
    rows = [{"age": 2.0, "value": 1e6, "rate": 1.0} for _ in range(190)]
    cheap = [{"age": 40.0 + i, "value": 0.01, "rate": 0.001} for i in range(10)]
    dear = [{"age": 15.0, "value": 5.0, "rate": 0.001, "cost": 2.0} for _ in range(10)]
    worthless = [{"age": None, "value": 0.0} for _ in range(10)]  # active, never fetched: ∞ overdue
    cands = _cands(rows + cheap + dear + worthless)
    picked = {}
    for order in ("value", "age"):
        config = PlanConfig(reestimate_share=0.05, verify_share=0.0, reestimate_order=order)
        plan = build_plan(cands, BIG, now=NOW, budget=200, config=config)
        picked[order] = plan.filter(pl.col("reason") == "reestimate")
    # by value: 15/14 overdue x 5/2 beats 40/14 x 0.01; the never-fetched worthless pages last
    assert picked["value"].height == 10
    assert picked["value"]["value"].to_list() == [5.0] * 10
    # by age: the never-fetched (infinitely overdue) first, whatever they are worth
    assert picked["age"]["value"].to_list() == [0.0] * 10
    with pytest.raises(ValueError, match="reestimate_order"):
        PlanConfig(reestimate_order="random")  # type: ignore[arg-type]


def test_a_trusted_unchanged_lastmod_is_the_look_reestimation_would_buy() -> None:
    """Re-estimating a long-quiet page whose trusted sitemap lastmod says it has not changed
    since the last fetch learns what the lastmod said (url_state counts that as a look): on
    an exploratory web 0-3 % of such fetches found a change, 4-5 % of the budget. An
    untrusted or missing hint, or a trusted "changed", leaves the page to re-estimation."""
    rows = [{"age": 2.0, "value": 1e6, "rate": 1.0} for _ in range(190)]
    rows += [{"age": 15.0 + i, "value": 1.0, "rate": 0.01} for i in range(12)]
    hints = [None] * 190 + [False] * 6 + [None] * 3 + [True] * 3
    cands = _cands(rows).with_columns(
        hinted_change=pl.Series(hints, dtype=pl.Boolean),
        hint_recall=pl.Series([0.95 if h is False else None for h in hints]),
    )
    config = PlanConfig(reestimate_share=0.05, verify_share=0.0, probe_share=0.0)
    plan = build_plan(cands, BIG, now=NOW, budget=200, config=config)
    chosen = plan.filter(pl.col("reason") == "reestimate")
    assert chosen.height == 6
    assert chosen["hinted_change"].to_list().count(False) == 0


def test_unused_reserve_flows_back_to_priority() -> None:
    rows = [{"age": 1.0 + i / 100} for i in range(100)]
    config = PlanConfig(verify_share=0.0)  # only active, recently fetched, well observed pages
    plan = build_plan(_cands(rows), BIG, now=NOW, budget=50, config=config)
    assert plan["selected"].sum() == 50
    assert set(plan.filter("selected")["reason"]) == {"priority"}


def test_new_urls_may_outrank_beyond_their_share() -> None:
    """A page we do not have is maximally stale; the reserve is a floor, not a cap."""
    rows = [{"status": "new", "age": None} for _ in range(30)]
    plan = build_plan(_cands(rows), BIG, now=NOW, budget=20)
    assert plan["selected"].sum() == 20
    counts = dict(plan.filter("selected").group_by("reason").len().iter_rows())
    assert counts == {"new": 2, "priority": 18}


def test_rank_follows_fill_order() -> None:
    rows = [
        {"url": "http://h.example/p", "age": 3.0, "value": 100.0},
        {"url": "http://h.example/n", "status": "new", "age": None},
        {"url": "http://h.example/f", "age": 40.0},
    ]
    config = PlanConfig(new_share=0.5, floor_share=1.0)
    plan = build_plan(_cands(rows), BIG, now=NOW, budget=None, config=config)
    ordered = plan.filter("selected").sort("rank")
    assert ordered["url"].to_list() == [
        "http://h.example/f",
        "http://h.example/n",
        "http://h.example/p",
    ]
    assert ordered["reason"].to_list() == ["floor", "new", "priority"]
    assert ordered["rank"].to_list() == [1, 2, 3]


def test_deterministic_per_cycle_and_independent_of_row_order() -> None:
    rows = [{"age": 1.0 + (i * 7919 % 97) / 10, "rate": 0.2 + (i % 13) / 10} for i in range(300)]
    cands = _cands(rows)
    config = PlanConfig(verify_share=0.2, seed=42)
    a = build_plan(cands, BIG, now=NOW, budget=100, config=config)
    b = build_plan(cands, BIG, now=NOW, budget=100, config=config)
    assert a.equals(b)
    shuffled = build_plan(
        cands.sample(fraction=1.0, shuffle=True, seed=1), BIG, now=NOW, budget=100, config=config
    )
    key = ["url", "reason", "rank"]
    assert shuffled.select(key).sort("url").equals(a.select(key).sort("url"))
    verify = set(a.filter(pl.col("reason") == "verify")["url"])
    other_seed = build_plan(
        cands, BIG, now=NOW, budget=100, config=PlanConfig(verify_share=0.2, seed=43)
    )
    later = build_plan(cands, BIG, now=NOW + timedelta(hours=6), budget=100, config=config)
    assert verify != set(other_seed.filter(pl.col("reason") == "verify")["url"])
    assert verify != set(later.filter(pl.col("reason") == "verify")["url"])


def test_verification_looks_first_at_one_page_of_each_host_with_unproven_validators() -> None:
    # 40 hosts of 25 pages and two of 3 whose validators have only ever answered 304: drawn
    # uniformly, a verification share of 4 fetches would reach those 6 pages once in 40 cycles;
    # and 3 pages of h0 on a route whose validators have only answered 304 (a scope of their
    # own), 1 in 340 pages
    rows = [{"host": f"h{i}.example", "age": 1.0 + j / 10} for i in range(40) for j in range(25)]
    rows += [{"host": f"u{i}.example", "age": 1.0 + j / 10} for i in range(2) for j in range(3)]
    cands = _cands(rows).with_columns(
        unproven_scope=pl.when(pl.col("host").str.starts_with("u"))
        .then(pl.col("host"))
        .when((pl.col("host") == "h0.example") & (pl.int_range(pl.len()) % 25 < 3))
        .then(pl.lit("h0.example\t/deals/"))
    )
    rooms = cands.select(pl.col("host").unique(), capacity=pl.lit(100))
    config = PlanConfig(verify_share=0.02)
    for k in range(5):
        now = NOW + timedelta(hours=6 * k)
        plan = build_plan(cands, rooms, now=now, budget=200, config=config)
        verified = plan.filter(pl.col("reason") == "verify")
        assert verified.height == 4
        by_host = dict(verified.group_by("host").len().iter_rows())
        assert by_host.get("u0.example") == by_host.get("u1.example") == 1, by_host
        scoped = cands.filter(pl.col("unproven_scope") == "h0.example\t/deals/")["url"]
        assert verified["url"].is_in(scoped.implode()).sum() == 1
    # without the column the sample is uniform again and reaches them rarely
    plain = build_plan(_cands(rows), rooms, now=NOW, budget=200, config=config)
    assert plain.filter(pl.col("reason") == "verify")["host"].str.starts_with("h").all()


def test_small_budget_shares_round_at_random_but_reproducibly() -> None:
    rows = [{"age": 2.0 + i / 100} for i in range(50)]
    config = PlanConfig(verify_share=0.05)
    verified = []
    for k in range(40):
        plan = build_plan(
            _cands(rows), BIG, now=NOW + timedelta(hours=6 * k), budget=10, config=config
        )
        verified.append(int((plan["reason"] == "verify").sum()))
    assert set(verified) <= {0, 1}
    assert 5 <= sum(verified) <= 40  # ~0.5 per cycle on average, not never


def test_zero_budget_and_empty_input() -> None:
    cands = _cands([{"age": 5.0}])
    assert not build_plan(cands, BIG, now=NOW, budget=0)["selected"].any()
    empty = build_plan(cands.head(0), BIG, now=NOW, budget=10)
    assert empty.height == 0 and empty.columns == cands.columns + OUT_COLUMNS
    with pytest.raises(ValueError):
        build_plan(cands, BIG, now=NOW, budget=-1)


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        PlanConfig(new_share=0.8, reestimate_share=0.3)
    with pytest.raises(ValueError):
        PlanConfig(objective="speed")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        PlanConfig(min_interval_days=40.0, max_interval_days=30.0)


def test_vectorized_plan_is_fast() -> None:
    n = 100_000
    df = pl.DataFrame(
        {
            "url": [f"http://h{i % 500}.example/{i}" for i in range(n)],
            "host": [f"h{i % 500}.example" for i in range(n)],
            "value": [1.0 / (1 + i % 1000) for i in range(n)],
            "url_class": ["article"] * n,
            "status": ["active" if i % 10 else "new" for i in range(n)],
            "last_fetched_at": [
                None if i % 10 == 0 else NOW - timedelta(hours=1 + i % 2000) for i in range(n)
            ],
            "change_rate": [0.01 + (i % 37) / 10 for i in range(n)],
            "cost": [1.0] * n,
        }
    )
    caps = pl.DataFrame({"host": [f"h{i}.example" for i in range(500)], "capacity": [30] * 500})
    plan = build_plan(df, caps, now=NOW, budget=10_000)
    assert plan["selected"].sum() == 10_000


# ----------------------------------------------------------------------- property-based


_STATUSES = ["new", "active", "gone", "blocked", "error"]


@st.composite
def _scenarios(draw):
    n = draw(st.integers(0, 40))
    hosts = [f"h{i}.example" for i in range(draw(st.integers(1, 4)))]
    rows = []
    for i in range(n):
        status = draw(st.sampled_from(_STATUSES))
        age = (
            None
            if status == "new" and draw(st.booleans())
            else draw(
                st.one_of(st.floats(-2, 80), st.sampled_from([0.0, 1 / 48, 1 / 24, 30.0, 31.0]))
            )
        )
        rows.append(
            {
                "url": f"http://x/{i}",
                "host": draw(st.sampled_from(hosts)),
                "status": status,
                "age": age,
                "value": draw(st.floats(0, 100)),
                "rate": draw(st.one_of(st.none(), st.floats(0, 200))),
                "cost": draw(st.floats(0, 10)),
            }
        )
    caps = {h.replace(".", "_"): draw(st.integers(0, 10)) for h in hosts if draw(st.booleans())}
    budget = draw(st.one_of(st.none(), st.integers(0, 50)))
    config = PlanConfig(
        new_share=draw(st.sampled_from([0.0, 0.1, 0.3])),
        reestimate_share=draw(st.sampled_from([0.0, 0.05, 0.3])),
        verify_share=draw(st.sampled_from([0.0, 0.02, 0.3])),
        objective=draw(st.sampled_from(["freshness", "capture"])),
        seed=draw(st.integers(0, 3)),
    )
    return rows, caps, budget, config


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(_scenarios())
def test_plan_guarantees(scenario) -> None:
    rows, caps, budget, config = scenario
    cands = _cands(rows)
    capacity = _caps(**caps)
    plan = build_plan(cands, capacity, now=NOW, budget=budget, config=config)
    assert plan.height == cands.height
    chosen = plan.filter("selected")
    if budget is not None:
        assert chosen.height <= budget
    cap_of = dict(capacity.iter_rows())
    for host, count in chosen.group_by("host").len().iter_rows():
        assert count <= cap_of.get(host, 0)
    assert not (chosen["status"] == "blocked").any()
    gone = chosen.filter(pl.col("status") == "gone")
    assert (gone["reason"] == "reestimate").all()
    assert (gone["age_days"].fill_null(math.inf) >= config.gone_recheck_days).all()
    assert (chosen["age_days"].fill_null(math.inf) >= config.min_interval_days).all()
    assert set(chosen["reason"].to_list()) <= set(REASONS)
    assert sorted(chosen["rank"].to_list()) == list(range(1, chosen.height + 1))
    assert plan.filter(~pl.col("selected"))["rank"].null_count() == plan.height - chosen.height
    # the floor is served before anything else
    ranks = chosen.sort("rank")["reason"].to_list()
    tiers = [REASONS.index(r) for r in ranks]
    assert tiers == sorted(tiers)
    again = build_plan(cands, capacity, now=NOW, budget=budget, config=config)
    assert again.equals(plan)


# ------------------------------------------------------------------ posterior-aware index


@pytest.mark.parametrize(
    ("k", "mean", "age"), [(0.5, 0.2, 3.0), (1.0, 0.5, 2.0), (3.0, 1.0, 1.0), (40.0, 2.0, 0.5)]
)
def test_posterior_index_is_the_expectation_over_the_gamma(k, mean, age) -> None:
    import numpy as np

    from freshness_pipeline.science.gains import posterior_capture_gain

    lam = np.random.default_rng(1).gamma(k, mean / k, 400_000)
    w_mc = ((1 - (1 + lam * age) * np.exp(-lam * age)) / lam).mean()
    c_mc = (1 - np.exp(-lam * age)).mean()
    df = pl.DataFrame({"r": [mean], "a": [age], "k": [k]})
    assert df.select(posterior_freshness_index("r", "a", "k")).item() == pytest.approx(
        w_mc, rel=0.02
    )
    assert df.select(posterior_capture_gain("r", "a", "k")).item() == pytest.approx(c_mc, rel=0.01)


def test_posterior_index_limits() -> None:
    df = pl.DataFrame(
        {
            "r": [0.5, 0.5, 0.5, 0.5, 0.5],
            "a": [2.0, 2.0, math.inf, 0.0, 2.0],
            "k": [1e7, None, 0.5, 0.5, 1.0 + 1e-12],
        }
    )
    got = df.select(posterior_freshness_index("r", "a", "k"))["freshness_index"].to_list()
    point = df.select(freshness_index("r", "a"))["freshness_index"].to_list()
    assert got[0] == pytest.approx(point[0])  # a sure rate is the point index
    assert got[1] == pytest.approx(point[1])  # unknown shape: point index
    assert got[2] == pytest.approx(1 / 0.5)  # never fetched: the cap, as before
    assert got[3] == 0.0
    # k = 1 exactly: θ log(1 + a/θ) − a/(1 + a/θ) with θ = 2
    assert got[4] == pytest.approx(2 * math.log(2.0) - 2.0 / 2.0, rel=1e-9)


def test_uncertainty_moves_priority_both_ways() -> None:
    """Same estimate, thin evidence vs plenty. Early on the thin one is worth less (much of its
    posterior says "barely changes"); long unvisited it is worth more (it may change weekly and
    W ~ 1/λ is large there), which is what keeps thinly observed pages from being starved."""
    rows = [{"rate": 0.05, "age": 20.0}, {"rate": 0.05, "age": 20.0}]
    rows += [{"rate": 0.05, "age": 400.0}, {"rate": 0.05, "age": 400.0}]
    cands = _cands(rows).with_columns(n_changes=pl.Series([0, 200, 0, 200]))
    # (a horizon past the ages, which the default one would cap both long-unvisited at)
    config = PlanConfig(verify_share=0.0, horizon_days=1000.0)
    plan = build_plan(cands, BIG, now=NOW, budget=1, config=config)
    gain = plan["expected_gain"].to_list()
    assert gain[0] < gain[1]
    assert gain[2] > gain[3]
    assert _selected(plan) == [cands["url"][2]]
    off = build_plan(cands, BIG, now=NOW, budget=1, config=PlanConfig(posterior_index=False))
    assert off["expected_gain"][0] == pytest.approx(off["expected_gain"][1])


def test_rate_shape_column_overrides_n_changes() -> None:
    cands = _cands([{"rate": 0.5, "age": 2.0}]).with_columns(
        rate_shape=pl.lit(3.0), n_changes=pl.lit(0)
    )
    gain = build_plan(cands, BIG, now=NOW, budget=1)["expected_gain"].item()
    expect = pl.DataFrame({"r": [0.5], "a": [2.0], "k": [3.0]}).select(
        posterior_freshness_index("r", "a", "k")
    )
    assert gain == pytest.approx(expect.item())


def test_past_the_hard_limit_the_floor_is_not_capped() -> None:
    """The floor's share delays overdue pages; past floor_hard_factor x max_interval_days they
    are forced in whatever the share, and they count against it."""
    rows = [
        {"url": f"http://h.example/old{i:02d}", "age": 31.0 + i, "rate": 0.0} for i in range(40)
    ]
    rows += [{"url": f"http://h.example/hot{i:02d}", "age": 2.0, "rate": 0.5} for i in range(40)]
    config = PlanConfig(
        floor_share=0.1,
        floor_hard_factor=2.0,  # 60 days: old29..old39 are past it
        new_share=0.0,
        reestimate_share=0.0,
        verify_share=0.0,
    )
    plan = build_plan(_cands(rows), BIG, now=NOW, budget=20, config=config)
    floor = plan.filter(pl.col("reason") == "floor").sort("rank")["url"].to_list()
    assert floor == [f"http://h.example/old{i:02d}" for i in range(39, 28, -1)]
    assert plan.filter(pl.col("reason") == "priority").height == 9
    relaxed = build_plan(
        _cands(rows), BIG, now=NOW, budget=20, config=replace(config, floor_hard_factor=3.0)
    )
    assert relaxed.filter(pl.col("reason") == "floor").height == 2
    with pytest.raises(ValueError):
        PlanConfig(floor_hard_factor=0.5)


def test_the_reserve_ranks_the_next_best_buys_within_each_hosts_capacity() -> None:
    """Beyond the budget the plan ranks what it would fetch next, by priority, and never more
    of a host than its capacity leaves: what a deferring host's share is spent on."""
    rows = [{"host": "a.example", "age": 10.0 + i, "value": 10.0 - i} for i in range(6)]
    rows += [{"host": "b.example", "age": 5.0, "value": 0.5 + 0.1 * i} for i in range(4)]
    plan = build_plan(
        _cands(rows),
        _caps(a_example=4, b_example=10),
        now=NOW,
        budget=3,
        config=PlanConfig(new_share=0, reestimate_share=0, verify_share=0),
    )
    chosen = plan.filter("selected")
    assert chosen.height == 3 and set(chosen["host"]) == {"a.example"}
    reserve = plan.filter(pl.col("reserve_rank").is_not_null()).sort("reserve_rank")
    # host a has room for one more; the rest of the reserve is host b's, best first
    assert reserve.filter(pl.col("host") == "a.example").height == 1
    assert reserve["reserve_rank"].to_list() == list(range(1, reserve.height + 1))
    assert reserve["priority"].is_sorted(descending=True)
    assert not (reserve["selected"]).any()
    assert reserve.filter(pl.col("host") == "b.example").height == 4


def test_discovered_urls_go_first_and_grow_the_new_share() -> None:
    """Pages found by the crawl (sitemaps, feeds) are not left behind a backlog of never-fetched
    seeds worth more: the new share grows to take them, up to its cap, before the seeds."""
    seeds = [{"age": None, "status": "new", "value": 5.0} for _ in range(100)]
    found = [{"age": None, "status": "new", "value": 0.5} for _ in range(20)]
    cands = _cands(seeds + found).with_columns(discovered=pl.Series([False] * 100 + [True] * 20))
    cfg = PlanConfig(reestimate_share=0, verify_share=0, discovery_max_share=0.3)
    plan = build_plan(cands, BIG, now=NOW, budget=30, config=cfg)
    new = plan.filter(pl.col("reason") == "new")
    assert new.height == 9  # 30 % of 30: more than the 10 % new share
    assert new["discovered"].all()
    # without the column every new page is a seed, ranked by value, within the 10 % share
    plain = build_plan(cands.drop("discovered"), BIG, now=NOW, budget=30, config=cfg)
    assert plain.filter(pl.col("reason") == "new").height == 3
    # few waiting: the share is what waits, not the cap
    few = cands.with_columns(discovered=pl.Series([False] * 118 + [True] * 2))
    got = build_plan(few, BIG, now=NOW, budget=30, config=cfg).filter(pl.col("reason") == "new")
    assert got.height == 3 and got["discovered"].sum() == 2


def test_only_pages_found_after_the_first_read_of_their_host_are_new_publications() -> None:
    """What the first read of a site's sitemaps finds is the site as it stood: counted as
    published since, a shop's listing variants (value 1) went ahead of the seeds its user
    valued at 5 in a cold start. Pages found on later reads are the site's new ones."""
    from freshness_pipeline.stages.plan import published_since_first_read

    t0, t1 = NOW - timedelta(days=2), NOW - timedelta(days=1)
    rows = [
        ("a", "seed", t0 - timedelta(days=3)),  # seeded days before the first cycle
        ("a", "seed,sitemap", t0 - timedelta(days=3)),
        ("a", "sitemap", t0),  # the first read
        ("a", "feed", t0),
        ("a", "sitemap", t1),  # published since
        ("a", "redirect", NOW),
        ("b", "sitemap", t1),  # another host's first read, a day later
        ("b", "sitemap", NOW),
        ("b", None, NOW),  # no sources known: a seed
    ]
    frame = pl.DataFrame(
        rows,
        schema={"host": pl.String, "sources": pl.String, "first_seen_at": pl.Datetime("us", "UTC")},
        orient="row",
    )
    got = frame.select(published_since_first_read())["discovered"].to_list()
    assert got == [False, False, False, False, True, True, False, True, False]
    # and it is what the plan's inputs call discovered
    from freshness_pipeline.stages.plan import plan_inputs
    from freshness_pipeline.warehouse import tables

    cands = tables.conform(
        "url_candidates",
        frame.with_columns(
            url=pl.format("http://{}.example/{}", "host", pl.int_range(pl.len())),
            allowed=pl.lit(True),
        ),
    )
    capacity = pl.DataFrame(
        {"host": ["a", "b"], "capacity": [10, 10], "cost_multiplier": [1.0, 1.0]}
    ).with_columns(crawl_delay=pl.lit(None, dtype=pl.Float64))
    inputs = plan_inputs(cands, tables.empty("url_state"), capacity)
    assert inputs["discovered"].to_list() == got


def test_pages_a_sitemap_stopped_listing_are_checked_first_within_their_share() -> None:
    """A page that left its host's sitemap has most likely gone: one early fetch says so. The
    check comes before new and priority fetches, most valuable first, within its share."""
    rows = [{"age": 0.5, "value": 1.0 + i, "rate": 0.01} for i in range(20)]
    rows += [{"age": 3.0, "value": 50.0, "rate": 5.0} for _ in range(20)]
    delisted = [True] * 20 + [False] * 20
    cands = _cands(rows).with_columns(delisted=pl.Series(delisted))
    cfg = PlanConfig(reestimate_share=0, verify_share=0, delisted_share=0.1)
    plan = build_plan(cands, BIG, now=NOW, budget=30, config=cfg)
    checks = plan.filter(pl.col("reason") == "delisted")
    assert checks.height == 3 and checks["delisted"].all()
    assert sorted(checks["value"].to_list()) == [18.0, 19.0, 20.0]
    assert checks["rank"].max() < plan.filter(pl.col("reason") == "priority")["rank"].min()
    # without the column there is no such pass: the quiet pages wait for their priority
    plain = build_plan(cands.drop("delisted"), BIG, now=NOW, budget=30, config=cfg)
    assert plain.filter(pl.col("reason") == "delisted").height == 0


def test_delisting_needs_a_complete_read_after_the_last_listing_and_no_fetch_since() -> None:
    from freshness_pipeline.stages.plan import with_delisting

    t0 = NOW - timedelta(days=1)
    inputs = pl.DataFrame(
        {
            "url": ["left", "left_checked", "still_listed", "never_listed", "other_host"],
            "host": ["a", "a", "a", "a", "b"],
            "listed_until": [t0, t0, NOW, None, t0],
            "last_fetched_at": [t0 - timedelta(hours=6), NOW, t0, t0, None],
        },
        schema_overrides={
            "listed_until": pl.Datetime("us", "UTC"),
            "last_fetched_at": pl.Datetime("us", "UTC"),
        },
    )
    robots = pl.DataFrame(
        {"host": ["a", "b"], "sitemaps_read_at": [NOW, t0]},  # b's last complete read: t0
        schema_overrides={"sitemaps_read_at": pl.Datetime("us", "UTC")},
    )
    got = dict(with_delisting(inputs, robots).select("url", "delisted").iter_rows())
    assert got == {
        "left": True,
        "left_checked": False,  # fetched since it left: the fetch said what it is
        "still_listed": False,
        "never_listed": False,
        "other_host": False,  # no complete read after it was last listed
    }


# ---------------------------------------------------------------------------- probes


def _with_history(cands: pl.DataFrame, histories: list[tuple | None]) -> pl.DataFrame:
    """Add obs_interval_days / obs_changed / obs_age_days from (intervals, changed, ages)."""
    return cands.with_columns(
        pl.Series("obs_interval_days", [h and h[0] for h in histories], dtype=pl.List(pl.Float64)),
        pl.Series("obs_changed", [h and h[1] for h in histories], dtype=pl.List(pl.Boolean)),
        pl.Series(
            "obs_age_days",
            [h and (h[2] if len(h) > 2 else [None] * len(h[0])) for h in histories],
            dtype=pl.List(pl.Float64),
        ),
    )


def test_probes_recheck_pages_seen_changed_at_every_far_apart_fetch() -> None:
    # 100 well-known pages soak up the budget; the others were all fetched 6 hours ago
    rows = [{"age": 3.0, "value": 1e6, "rate": 1.0} for _ in range(100)]
    histories: list[tuple | None] = [([3.0, 3.0], [True, False])] * 100
    cases = {
        "all changed, days apart": ([2.0, 3.0, 2.5], [True, True, True]),
        "one unchanged": ([2.0, 3.0, 2.5], [True, False, True]),
        "already seen at 10 h": ([0.4, 3.0], [True, True]),
        "no observation yet": ([], []),
    }
    for name, history in cases.items():
        rows.append({"url": f"http://h.example/{name}", "age": 0.25, "value": 1.0})
        histories.append(history)
    cands = _with_history(_cands(rows), histories)
    config = PlanConfig(probe_share=0.05, verify_share=0.0, reestimate_share=0.0, new_share=0.0)
    plan = build_plan(cands, BIG, now=NOW, budget=100, config=config)
    probes = plan.filter(pl.col("reason") == "probe")["url"].to_list()
    # 0.25 / 2.0 <= 0.5: a probe; 0.25 / 0.4 > 0.5, one unchanged or no history: not
    assert probes == ["http://h.example/all changed, days apart"]
    # without the share the same page is left to priority, which here has no room for it
    plan = build_plan(cands, BIG, now=NOW, budget=100, config=replace(config, probe_share=0.0))
    assert "probe" not in plan["reason"].to_list()
    assert "http://h.example/all changed, days apart" not in _selected(plan)


def test_a_page_seen_changed_at_every_fetch_is_checked_again_as_its_quiet_doubles() -> None:
    """A live blog fetched every six hours of its busy day, changed at each, is believed too
    fast to keep fresh, and its gain (about 1/rate) never buys another fetch: finished, it
    stayed stale for good (found by an exploratory run). Once its last fetch is a day old and
    twice its longest interval it is a probe again, so the checks space out by doubling while
    it keeps changing, and one of them finds it stopped."""
    rows = [{"age": 3.0, "value": 1e6, "rate": 1.0} for _ in range(100)]
    histories: list[tuple | None] = [([3.0, 3.0], [True, False])] * 100
    busy_day = [0.25, 0.25, 0.25]
    cases = {
        "a day after its busy day": (1.1, busy_day, [True] * 3),
        "half a day after": (0.5, busy_day, [True] * 3),
        "changed again a day later, 1.5 days on": (1.5, [*busy_day, 1.0], [True] * 4),
        "changed again a day later, 2.1 days on": (2.1, [*busy_day, 1.0], [True] * 4),
        "once seen quiet": (3.0, [*busy_day, 1.0], [True, True, True, False]),
    }
    for name, (age, intervals, changed) in cases.items():
        rows.append({"url": f"http://h.example/{name}", "age": age, "value": 1.0, "rate": 80.0})
        histories.append((intervals, changed))
    cands = _with_history(_cands(rows), histories)
    config = PlanConfig(probe_share=0.05, verify_share=0.0, reestimate_share=0.0, new_share=0.0)
    plan = build_plan(cands, BIG, now=NOW, budget=100, config=config)
    probes = plan.filter(pl.col("reason") == "probe")["url"].to_list()
    assert sorted(probes) == [
        "http://h.example/a day after its busy day",
        "http://h.example/changed again a day later, 2.1 days on",
    ]
    later = build_plan(
        cands, BIG, now=NOW, budget=100, config=replace(config, dormancy_min_days=2.0)
    )
    assert later.filter(pl.col("reason") == "probe")["url"].to_list() == [
        "http://h.example/changed again a day later, 2.1 days on"
    ]
    with pytest.raises(ValueError, match="dormancy_min_days"):
        PlanConfig(dormancy_min_days=0.0)


def test_probes_take_undated_then_valuable_pages_within_their_share() -> None:
    rows, histories = [], []
    for i in range(40):
        # even: dated (a content age on a change); values rise with i
        rows.append({"age": 0.25, "value": 1.0 + i, "rate": 3.0})
        ages = [0.1, 0.2] if i % 2 == 0 else [None, None]
        histories.append(([1.0, 2.0], [True, True], ages))
    cands = _with_history(_cands(rows), histories)
    config = PlanConfig(probe_share=0.1, verify_share=0.0, reestimate_share=0.0, new_share=0.0)
    plan = build_plan(cands, BIG, now=NOW, budget=40, config=config)
    probes = plan.filter(pl.col("reason") == "probe")
    assert probes.height == 4  # 10 % of 40
    # the four most valuable undated pages: odd i = 39, 37, 35, 33
    assert sorted(probes["value"].to_list()) == [34.0, 36.0, 38.0, 40.0]
    assert probes["rank"].is_not_null().all()


def test_probe_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="probe_max_ratio"):
        PlanConfig(probe_max_ratio=0.0)
    with pytest.raises(ValueError, match="shares"):
        PlanConfig(new_share=0.5, reestimate_share=0.3, probe_share=0.3)


def test_a_hosts_pages_seen_once_wait_for_its_never_fetched_ones() -> None:
    """At a budget too small for every seed, the re-estimation of pages seen once and the probes
    took a tenth of each cycle while a quarter of the seeds were never fetched: the crawl lost to
    round robin (found by an exploratory run). A host with a backlog after the new pass keeps
    those checks for later; a host without one, and a gone page's check, do not wait."""
    backlog = [{"host": "a.example", "status": "new", "age": None} for _ in range(30)]
    seen_once = [{"host": "a.example", "age": 2.0, "rate": 0.01} for _ in range(5)]
    gone = [{"host": "a.example", "status": "gone", "age": 40.0}]
    other = [{"host": "b.example", "age": 2.0, "rate": 0.01} for _ in range(5)]
    cands = _cands(backlog + seen_once + gone + other).with_columns(
        n_obs=pl.Series([0] * 30 + [1] * 5 + [3] + [1] * 5)
    )
    config = PlanConfig(reestimate_share=0.2, new_share=0.1, verify_share=0.0, probe_share=0.0)
    plan = build_plan(cands, _caps(a_example=100, b_example=100), now=NOW, budget=10, config=config)
    reest = plan.filter(pl.col("reason") == "reestimate")
    assert sorted(set(reest["host"])) == ["a.example", "b.example"]
    from_a = reest.filter(pl.col("host") == "a.example")
    assert from_a["status"].to_list() == ["gone"]  # not a page seen once
    assert (
        plan.filter(
            pl.col("selected") & (pl.col("host") == "a.example") & (pl.col("status") == "new")
        ).height
        >= 7
    )
    # once the host's seeds are all fetched, its pages seen once are checked again
    fetched = cands.filter(pl.col("status") != "new")
    later = build_plan(
        fetched, _caps(a_example=100, b_example=100), now=NOW, budget=10, config=config
    )
    assert (
        later.filter(
            (pl.col("reason") == "reestimate")
            & (pl.col("host") == "a.example")
            & (pl.col("status") == "active")
        ).height
        > 0
    )


def test_a_page_worth_more_than_every_waiting_first_copy_is_looked_at_again() -> None:
    """The backlog's hold is for pages a first copy outranks: the value-100 pages of a host
    with value-1 seeds waiting were seen once and then judged by the prior alone for 18 cycles
    (found by an exploratory run). They are checked again; the host's value-1 pages seen once
    still wait, and so do pages worth no more than the most valuable first copy waiting."""
    backlog = [{"host": "a.example", "status": "new", "age": None, "value": 1.0}] * 30
    backlog = backlog + [{"host": "a.example", "status": "new", "age": None, "value": 5.0}]
    dear = [{"host": "a.example", "age": 1.0, "rate": 0.01, "value": 100.0} for _ in range(3)]
    even = [{"host": "a.example", "age": 1.0, "rate": 0.01, "value": 5.0} for _ in range(3)]
    cheap = [{"host": "a.example", "age": 1.0, "rate": 0.01, "value": 1.0} for _ in range(3)]
    rows = backlog + dear + even + cheap
    cands = _cands(rows).with_columns(n_obs=pl.Series([0] * 31 + [0] * 9))
    config = PlanConfig(reestimate_share=0.3, new_share=0.1, verify_share=0.0, probe_share=0.0)
    plan = build_plan(cands, _caps(a_example=100), now=NOW, budget=10, config=config)
    rechecked = plan.filter(pl.col("reason") == "reestimate")
    assert rechecked["value"].to_list() == [100.0] * 3


def test_a_first_copy_is_credited_with_the_freshness_of_the_horizon_at_most() -> None:
    """A never-fetched page's index is E[1/λ] under the prior: a prior with a little weight near
    λ = 0 put it at 487 days, above any revisit, and pages worth 100x went unvisited for ten
    cycles while pages worth 1 got their first copy (found by an exploratory run). Credited with
    the horizon's freshness at most, a stale page worth 100x is revisited first, and among pages
    of equal worth a first copy still goes first."""
    rows = [{"status": "new", "age": None, "rate": 0.002} for _ in range(5)]
    rows += [{"value": 100.0, "age": 0.5, "rate": 4.0}, {"age": 0.5, "rate": 4.0}]
    cands = _cands(rows)
    config = PlanConfig(new_share=0.0, reestimate_share=0.0, verify_share=0.0, probe_share=0.0)
    plan = build_plan(cands, BIG, now=NOW, budget=2, config=config)
    gain = plan["expected_gain"].to_list()
    assert gain[0] == pytest.approx(config.horizon_days)  # 1/λ = 500 days, capped
    assert _selected(plan)[0] == cands["url"][5]  # the page worth 100
    assert cands["url"][6] not in _selected(plan)  # a first copy before a revisit of equal worth
    with pytest.raises(ValueError, match="horizon_days"):
        PlanConfig(horizon_days=0.0)


def test_a_pass_takes_tied_rows_host_by_host_within_each_hosts_room() -> None:
    """science.host_turns, the pass every share is filled by: a host listed twice gets the
    stricter room, and rows tied on the order go host by host, not in URL order."""
    from freshness_pipeline.science.host_turns import fill, host_rooms

    rooms = host_rooms(
        pl.DataFrame({"host": ["a", "a", "b", None], "capacity": [3, 2, 5, 9]})
    ).sort("_host")
    assert rooms.rows() == [("a", 2), ("b", 5)]
    pool = pl.DataFrame(
        {
            "_idx": list(range(6)),
            "_host": ["a"] * 4 + ["b"] * 2,
            "_url": [f"u{i}" for i in range(6)],
            "_new": [True] * 6,
            "_turn": [1, 2, 3, 4, 1, 2],
            "priority": [1.0] * 6,
        }
    )
    taken = fill(pool, rooms, ["priority"], [True], quota=3)
    assert taken["_idx"].to_list() == [0, 4, 1]  # a, b, a: each host's first before its second
    assert fill(pool, rooms, ["priority"], [True], quota=None)["_idx"].sort().to_list() == [
        0,
        1,
        4,
        5,
    ]  # a's room is 2


def _never_fetched(pages: dict[str, int], priority: list[float]) -> pl.DataFrame:
    """A pass's pool of pages never fetched: ``pages`` per host, in host order, with their
    places among their host's rows (1, 2, ...)."""
    hosts = [h for h, n in pages.items() for _ in range(n)]
    turns = [k + 1 for n in pages.values() for k in range(n)]
    return pl.DataFrame(
        {
            "_idx": list(range(len(hosts))),
            "_host": hosts,
            "_url": [f"{h}{t}" for h, t in zip(hosts, turns, strict=True)],
            "_new": [True] * len(hosts),
            "_turn": turns,
            "priority": priority,
        }
    )


def test_a_row_outside_the_tie_holds_no_place_in_it() -> None:
    """A page never fetched whose first request was throttled sorts below the tie of pages
    never fetched, yet it held its host's first place in that tie: each such page cost its host
    a fetch a cycle (found by an exploratory run)."""
    from freshness_pipeline.science.host_turns import fill, host_rooms

    rooms = host_rooms(pl.DataFrame({"host": ["a", "b"], "capacity": [10, 10]}))
    # a's first two pages are no longer in the tie at the cap
    pool = _never_fetched({"a": 3, "b": 3}, [0.05, 0.04, 14.0, 14.0, 14.0, 14.0])
    got = fill(pool, rooms, ["priority"], [True], quota=2)
    assert sorted(got["_host"].to_list()) == ["a", "b"], got  # not b, b


def test_a_pass_goes_on_from_what_each_host_got_in_the_passes_before() -> None:
    """Numbered from one again in each pass, the hosts whose URLs sort first took the new
    pass's few fetches and then the priority pass's first round too: on a cold start they got
    seven fetches a cycle to the other hosts' five (found by an exploratory run)."""
    from freshness_pipeline.science.host_turns import fill, host_rooms

    rooms = host_rooms(pl.DataFrame({"host": ["a", "b", "c"], "capacity": [10, 10, 10]}))
    pool = _never_fetched({"a": 2, "b": 2, "c": 2}, [14.0] * 6)
    earlier = pl.DataFrame(
        {"_host": ["a"], "_taken": [1]}, schema={"_host": pl.String, "_taken": pl.Int64}
    )
    got = fill(pool, rooms, ["priority"], [True], quota=2, taken=earlier)
    assert sorted(got["_host"].to_list()) == ["b", "c"]
    # through build_plan: 9 hosts' seeds, a budget of 9 with a share for new pages of 10 %
    # (one fetch) and the rest by priority: one fetch per host, whichever pass took it
    seeds = [
        {"host": f"h{k}.example", "url": f"http://h{k}.example/{i}", "status": "new"}
        for k in range(9)
        for i in range(3)
    ]
    caps = pl.DataFrame({"host": [f"h{k}.example" for k in range(9)], "capacity": [10] * 9})
    plan = build_plan(_cands(seeds), caps, now=NOW, budget=9)
    assert sorted(plan.filter("selected")["host"].value_counts()["count"].to_list()) == [1] * 9


def test_a_host_of_few_fetches_keeps_its_valuable_pages_fresh_beside_its_backlog() -> None:
    """A host that takes five fetches a cycle (a Crawl-delay) had a backlog of 150 pages never
    fetched: the new pass took all five, cycle after cycle for 30 cycles, and its pages worth
    fifty times the others were fetched twice in 40 cycles (found on an exploratory web). The
    new pass takes at most half of such a host's capacity; the rest goes by priority."""
    slow = [
        {"host": "slow.example", "value": 50.0 / (k + 1), "age": 2.0, "rate": 1.0} for k in range(3)
    ]
    slow += [{"host": "slow.example", "status": "new", "age": None} for _ in range(40)]
    other = [{"host": "big.example", "status": "new", "age": None} for _ in range(200)]
    cands = _cands(slow + other)
    caps = _caps(slow_example=5, big_example=1_000)
    cfg = PlanConfig(reestimate_share=0, verify_share=0, probe_share=0, new_share=0.2)
    plan = build_plan(cands, caps, now=NOW, budget=100, config=cfg)
    slow_rows = plan.filter(pl.col("selected") & (pl.col("host") == "slow.example"))
    assert slow_rows.height == 5
    by_reason = dict(slow_rows.group_by("reason").len().iter_rows())
    assert by_reason.get("new", 0) == 3  # half its capacity, rounded up
    # the two most valuable fetched pages, stale for two days, take the rest
    assert set(slow_rows.filter(pl.col("reason") == "priority")["value"].to_list()) == {50.0, 25.0}
    # a host with room to spare is not held back: its new pages fill the new share
    assert plan.filter(pl.col("selected") & (pl.col("host") == "big.example")).height == 95
    with pytest.raises(ValueError, match="new_host_share"):
        PlanConfig(new_host_share=0.0)
