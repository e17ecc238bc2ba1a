"""Retry-After across cycles: the hold rule on its own (science.retry_after), the planner's
capacity for a held host, the client's dates measured in the cycle's ``now`` when a response has
no Date header, and real cycles against a loopback server that asks for a day's pause."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest
from aiohttp import web

from freshness_pipeline.app.runner import load_seeds, run_cycle
from freshness_pipeline.science.retry_after import MAX_RETRY_AFTER_S, retry_holds
from freshness_pipeline.stages.plan import host_capacity, host_health
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline.web.client import (
    FetchRequest,
    FetchSettings,
    fetch_all_sync,
    parse_retry_after,
)
from freshness_pipeline.web.throttle import ThrottlePolicy
from freshness_pipeline_tests.support import LoopThread, serve_on_loopback

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"),)
T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
DAY_S = 86_400.0


def log_rows(*rows: tuple[str, datetime, int, float | None]) -> pl.DataFrame:
    """fetch_log rows from (host, fetched_at, http_status, retry_after_s)."""
    columns = ("host", "fetched_at", "http_status", "retry_after_s")
    frame = pl.DataFrame(list(rows), schema={c: tables.FETCH_LOG[c] for c in columns}, orient="row")
    return tables.conform("fetch_log", frame)


# ------------------------------------------------------------------ the hold rule


def test_a_day_is_honoured_in_full_and_ends_at_its_instant() -> None:
    log = log_rows(("a", T0, 429, DAY_S))
    assert MAX_RETRY_AFTER_S >= DAY_S
    held = retry_holds(log, T0 + timedelta(hours=23, minutes=59))
    assert held.rows() == [("a", T0 + timedelta(days=1))]
    assert retry_holds(log, T0 + timedelta(days=1)).is_empty()


def test_a_hostile_retry_after_is_capped() -> None:
    log = log_rows(("a", T0, 503, 10 * 365 * DAY_S))
    cap = timedelta(seconds=MAX_RETRY_AFTER_S)
    assert retry_holds(log, T0 + cap - timedelta(seconds=1))["host"].to_list() == ["a"]
    assert retry_holds(log, T0 + cap).is_empty()


def test_only_throttling_answers_hold_and_the_latest_end_wins() -> None:
    log = log_rows(
        ("a", T0, 429, 600.0),
        ("a", T0 + timedelta(minutes=5), 503, 3600.0),
        ("b", T0, 200, 3600.0),  # not a throttling answer
        ("c", T0, 503, None),  # no Retry-After: only the in-cycle back-off applies
    )
    held = retry_holds(log, T0 + timedelta(minutes=30))
    assert held.rows() == [("a", T0 + timedelta(minutes=65))]


def test_a_carried_hold_outlives_the_answers_that_set_it() -> None:
    """The robots rows carry a hold from cycle to cycle; fetch_results only has the last one."""
    carried = pl.DataFrame(
        {"host": ["a", "b"], "retry_until": [T0 + timedelta(hours=20), T0 - timedelta(hours=1)]},
        schema={"host": pl.String, "retry_until": pl.Datetime("us", "UTC")},
    )
    later = T0 + timedelta(hours=6)
    held = retry_holds(log_rows(("b", T0, 429, 600.0)), later, carried=carried)
    assert held.rows() == [("a", T0 + timedelta(hours=20))]
    extended = retry_holds(log_rows(("a", later, 503, DAY_S)), later, carried=carried)
    assert extended.rows() == [("a", later + timedelta(days=1))]


def test_a_backfill_ignores_answers_from_after_its_now() -> None:
    log = log_rows(("a", T0, 429, DAY_S))
    assert retry_holds(log, T0 - timedelta(hours=1)).is_empty()


def test_a_held_host_has_no_capacity_and_the_others_keep_theirs() -> None:
    robots = pl.DataFrame(
        {"host": ["a", "b"], "crawl_delay": [None, 2.0]},
        schema={"host": pl.String, "crawl_delay": pl.Float64},
    )
    health = host_health(tables.empty("fetch_results"), ["a", "b"])
    holds = retry_holds(log_rows(("a", T0, 429, DAY_S)), T0 + timedelta(hours=6))
    capacity = dict(host_capacity(robots, health, 600.0, holds).select("host", "capacity").rows())
    assert capacity == {"a": 0, "b": 300}
    free = host_capacity(robots, health, 600.0)
    assert dict(free.select("host", "capacity").rows())["a"] > 0


def test_a_server_asking_to_slow_down_is_no_failure_of_the_host() -> None:
    """One 429 among a cold start's three requests counted as a failed host: every page's
    cost went up 3x and, never-fetched pages tying at the index's cap on every host, the host
    got no fetch in the next cycle, each time its learned gap probed its limit again (found by
    an exploratory run). The pace and the hold answer a 429 or a Retry-After; a 500, or a 503
    without one, is still the host failing."""
    rows = [
        # host, status, Retry-After, outcome
        ("paced", 429, None, "error"),
        ("paced", 429, 2.0, "error"),
        ("paced", 200, None, "new"),
        ("paused", 503, 120.0, "error"),
        ("paused", 200, None, "new"),
        ("broken", 500, None, "error"),
        ("broken", 503, None, "error"),
        ("broken", 200, None, "new"),
    ]
    results = tables.conform(
        "fetch_results",
        pl.DataFrame(
            [(h, s, r, o, True) for h, s, r, o in rows],
            schema={
                "host": pl.String,
                "http_status": pl.Int64,
                "retry_after_s": pl.Float64,
                "outcome": pl.String,
                "sent": pl.Boolean,
            },
            orient="row",
        ),
    )
    hosts = ["paced", "paused", "broken"]
    health = dict(host_health(results, hosts).rows())
    assert health == {"paced": 0.0, "paused": 0.0, "broken": pytest.approx(2 / 3)}
    robots = pl.DataFrame(
        {"host": hosts, "crawl_delay": [None] * 3}, schema_overrides={"crawl_delay": pl.Float64}
    )
    capacity = host_capacity(robots, host_health(results, hosts), 600.0)
    cost = dict(capacity.select("host", "cost_multiplier").rows())
    room = dict(capacity.select("host", "capacity").rows())
    assert cost["paced"] == cost["paused"] == 1.0 and cost["broken"] == pytest.approx(3.0)
    assert room["paced"] == room["paused"] == 2 * room["broken"]


# ------------------------------------------------------------------ undated responses


UNDATED_LAST_MODIFIED = "Mon, 02 Mar 2026 06:00:00 GMT"  # six hours before T0
UNDATED_RETRY_AT = "Mon, 02 Mar 2026 14:00:00 GMT"  # two hours after T0


async def undated(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Raw HTTP with no Date header (aiohttp's own server always adds one)."""
    request = await reader.readuntil(b"\r\n\r\n")
    path = request.split(b" ", 2)[1]
    if path == b"/busy":
        head = f"HTTP/1.1 503 Service Unavailable\r\nRetry-After: {UNDATED_RETRY_AT}\r\n"
        body = b""
    else:
        head = f"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nLast-Modified: {UNDATED_LAST_MODIFIED}\r\n"
        body = b"<html><body><article>an undated page</article></body></html>"
    head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    writer.write(head.encode() + body)
    await writer.drain()
    writer.close()


@pytest.fixture(scope="module")
def undated_base() -> Iterator[list[str]]:
    loop = LoopThread()
    servers = [loop.run(asyncio.start_server(undated, "127.0.0.1", 0)) for _ in range(2)]
    yield [f"http://127.0.0.1:{s.sockets[0].getsockname()[1]}" for s in servers]
    for server in servers:
        loop.loop.call_soon_threadsafe(server.close)
    loop.close()


def test_content_age_without_a_date_header_is_measured_from_the_cycle_now(undated_base) -> None:
    page, _ = undated_base
    cycle = FetchSettings(cycle_now=T0)
    (result,) = fetch_all_sync([FetchRequest(url=f"{page}/page")], cycle, allow=LOOPBACK)
    assert result.outcome == "new"
    assert result.content_age_days == pytest.approx(0.25)
    # outside a cycle there is no reference at all: no age, rather than the wall clock's
    (bare,) = fetch_all_sync([FetchRequest(url=f"{page}/page")], FetchSettings(), allow=LOOPBACK)
    assert bare.outcome == "new" and bare.content_age_days is None


def test_an_http_date_retry_after_without_a_date_header_counts_from_the_cycle_now(
    undated_base,
) -> None:
    _, busy = undated_base
    cycle = FetchSettings(cycle_now=T0, throttle=ThrottlePolicy(failure_limit=None))
    (result,) = fetch_all_sync([FetchRequest(url=f"{busy}/busy")], cycle, allow=LOOPBACK)
    assert (result.http_status, result.retry_after_s) == (503, 7200.0)
    assert parse_retry_after(UNDATED_RETRY_AT, now=T0) == 7200.0
    assert parse_retry_after(str(10 * 365 * DAY_S)) == MAX_RETRY_AFTER_S
    assert parse_retry_after(str(DAY_S)) == DAY_S


def test_cycle_now_must_be_timezone_aware() -> None:
    with pytest.raises(ValueError, match="timezone"):
        FetchSettings(cycle_now=datetime(2026, 3, 2, 12))  # noqa: DTZ001


# ------------------------------------------------------------------ real cycles


@dataclass
class PausingSite:
    """One loopback host: pages answer 429 with Retry-After while ``pausing``, else 200;
    robots.txt and the sitemap are 404. Every request is logged by path."""

    pausing: bool = True
    requests: list[str] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append(request.path)
        if not request.path.startswith("/p"):
            return web.Response(status=404)
        if self.pausing:
            return web.Response(status=429, headers={"Retry-After": f"{DAY_S:g}"})
        return web.Response(
            text=f"<html><body>{request.path}</body></html>", content_type="text/html"
        )

    def take(self) -> list[str]:
        taken, self.requests[:] = list(self.requests), []
        return taken


@pytest.fixture
def pausing_site() -> Iterator[tuple[PausingSite, str]]:
    site = PausingSite()
    with serve_on_loopback(site.handle) as base:
        yield site, base


def test_a_day_long_retry_after_keeps_a_host_unasked_across_cycles(
    pausing_site, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    site, base = pausing_site
    home = tmp_path / "home"
    load_seeds(home, f"url\n{base}/p1\n{base}/p2\n".encode(), added_at=T0)
    wh = Warehouse(home)

    run_cycle(home, T0)
    first = site.take()
    pages = [p for p in first if p.startswith("/p")]
    assert pages and set(pages) <= {"/p1", "/p2"}, first  # two may be in flight at once
    assert "/sitemap.xml" in first
    throttled = wh.read("fetch_log").filter(pl.col("http_status") == 429)
    assert throttled["retry_after_s"].to_list() == [DAY_S] * len(pages)

    # From here on the pages would be served: any request now is ours to answer for.
    site.pausing = False
    for hours in (6, 12, 23):
        outcome = run_cycle(home, T0 + timedelta(hours=hours))
        assert site.take() == [], hours  # no page, no robots.txt, no sitemap
        assert outcome.planned == 0 and outcome.fetched == 0, hours

    run_cycle(home, T0 + timedelta(days=1, minutes=10))
    after = site.take()
    assert {"/p1", "/p2"} <= set(after), after
    assert "/robots.txt" in after and "/sitemap.xml" in after
    latest = wh.read("fetch_results")
    assert set(latest["http_status"].to_list()) == {200}
