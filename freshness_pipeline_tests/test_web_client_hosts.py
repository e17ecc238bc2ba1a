"""web/client/hosts.py: one host's queue, run directly against real loopback servers. What the
host's requests agree on (the strictest crawl-delay, the longest learned gap, the smallest
learned concurrency), how many of its requests are in flight at once, and what stops or defers
the rest of its queue: a throttling answer, a Retry-After longer than the cycle, the cycle's
deadline, an address outside the allow-list."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from aiohttp import web

from freshness_pipeline.web.client.context import Attempt, CycleContext
from freshness_pipeline.web.client.fetches import TIME_LIMIT_REASON, FetchRequest, FetchResult
from freshness_pipeline.web.client.hosts import HostRun
from freshness_pipeline.web.client.session import open_session
from freshness_pipeline.web.client.settings import FetchSettings
from freshness_pipeline.web.netguard import IPNetwork
from freshness_pipeline.web.politeness import LEDGER
from freshness_pipeline.web.throttle import ThrottlePolicy, Throttles
from freshness_pipeline_tests.test_client import LOOPBACK, Server, fp, serve, status, text

#: no latency-driven pacing and a tiny back-off: what is left is the scheduler's own rules
PLAIN = ThrottlePolicy(autothrottle=False, backoff_base_s=0.01, backoff_jitter=0.0)


@contextlib.asynccontextmanager
async def cycle_context(
    settings: FetchSettings,
    *,
    allow: tuple[IPNetwork, ...] = LOOPBACK,
    deadline_in: float | None = None,
    pause_window: float = 600.0,
) -> AsyncIterator[CycleContext]:
    now = time.monotonic()
    async with open_session(settings, allow=allow) as session:
        yield CycleContext(
            session=session,
            settings=settings,
            slots=asyncio.Semaphore(settings.global_concurrency),
            deadline=None if deadline_in is None else now + deadline_in,
            pause_deadline=now + pause_window,
            fingerprint=fp,
            throttles=Throttles(settings.throttle),
        )


def host_run(
    server: Server, requests: list[FetchRequest], ctx: CycleContext
) -> tuple[HostRun, list[FetchResult | None]]:
    results: list[FetchResult | None] = [None] * len(requests)
    return HostRun(server.host, list(range(len(requests))), requests, results, ctx), results


def pages(server: Server, n: int, **kw: object) -> list[FetchRequest]:
    return [
        FetchRequest(url=server.url(f"/p{i}"), host=server.host, **kw)  # type: ignore[arg-type]
        for i in range(n)
    ]


class InFlight:
    """A handler that counts the requests being answered at once; each holds until ``meet``
    requests are in flight together (or ``hold`` seconds pass), so a host allowed that many at
    once always shows it."""

    def __init__(self, meet: int = 1, hold: float = 2.0) -> None:
        self.now = 0
        self.most = 0
        self.meet = meet
        self.hold = hold
        self.spans: dict[str, tuple[float, float]] = {}
        self._met = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        began = time.monotonic()
        self.now += 1
        self.most = max(self.most, self.now)
        if self.now >= self.meet:
            self._met.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._met.wait(), self.hold)
        await asyncio.sleep(0.05)
        self.now -= 1
        self.spans[request.path] = (began, time.monotonic())
        return web.Response(text=f"page {request.path}", content_type="text/html")


def test_a_host_takes_its_strictest_crawl_delay_longest_gap_and_smallest_concurrency() -> None:
    async def scenario() -> None:
        async with serve({}) as srv:
            async with cycle_context(FetchSettings(host_concurrency=4)) as ctx:
                delayed = [
                    FetchRequest(url=srv.url("/a"), host=srv.host, crawl_delay=0.05),
                    FetchRequest(url=srv.url("/b"), host=srv.host, crawl_delay=0.3),
                    FetchRequest(url=srv.url("/c"), host=srv.host, concurrency=3),
                ]
                run, _ = host_run(srv, delayed, ctx)
                assert run.crawl_delay == 0.3
                assert run.concurrency == 1  # a crawl-delay means one at a time
                assert run.throttle.floor == 0.3 and run.throttle.delay >= 0.3

            async with cycle_context(FetchSettings(host_concurrency=4)) as ctx:
                learned = [
                    FetchRequest(url=srv.url("/a"), host=srv.host, concurrency=3, min_gap_s=0.02),
                    FetchRequest(url=srv.url("/b"), host=srv.host, concurrency=2, min_gap_s=0.07),
                    FetchRequest(url=srv.url("/c"), host=srv.host),
                ]
                run, _ = host_run(srv, learned, ctx)
                assert run.crawl_delay == 0.0 and run.concurrency == 2
                assert run.throttle.min_gap == 0.07 and run.throttle.delay == 0.07
                assert ctx.throttles[srv.host] is run.throttle  # what the cycle reads back

            # what was learned never lifts the settings' own limit
            async with cycle_context(FetchSettings(host_concurrency=2)) as ctx:
                run, _ = host_run(srv, pages(srv, 3, concurrency=8), ctx)
                assert run.concurrency == 2

    asyncio.run(scenario())


def test_a_host_has_its_concurrency_in_flight_and_never_more() -> None:
    counter = InFlight(meet=3)

    async def scenario() -> list[FetchResult | None]:
        async with (
            serve({f"/p{i}": counter.handle for i in range(7)}) as srv,
            cycle_context(FetchSettings(host_concurrency=3, throttle=PLAIN)) as ctx,
        ):
            run, results = host_run(srv, pages(srv, 7), ctx)
            await run.run()
            assert sorted(srv.paths()) == sorted(f"/p{i}" for i in range(7))
            return results

    results = asyncio.run(scenario())
    assert counter.most == 3
    assert [r.outcome for r in results if r is not None] == ["new"] * 7
    assert [r.url.rsplit("/", 1)[1] for r in results if r] == [f"p{i}" for i in range(7)]


def test_the_first_429_drops_the_host_to_one_request_at_a_time() -> None:
    counter = InFlight(meet=2, hold=0.3)
    routes = {"/p0": status(429), **{f"/p{i}": counter.handle for i in range(1, 7)}}

    async def scenario() -> tuple[HostRun, list[FetchResult | None]]:
        async with (
            serve(routes) as srv,
            cycle_context(FetchSettings(host_concurrency=2, throttle=PLAIN)) as ctx,
        ):
            run, results = host_run(srv, pages(srv, 7), ctx)
            assert run.concurrency == 2
            await run.run()
            return run, results

    run, results = asyncio.run(scenario())
    assert run.concurrency == 1 and run.stop_outcome is None
    first, *rest = results
    assert first is not None and (first.outcome, first.http_status) == ("error", 429)
    assert [r.outcome for r in rest if r is not None] == ["new"] * 6
    # /p1 went out beside the 429 and finishes; every request taken after the 429 came back
    # (/p2 on) had the host to itself: no two of them were ever in flight together
    after = sorted(counter.spans[f"/p{i}"] for i in range(2, 7))
    assert all(b[0] >= a[1] for a, b in zip(after, after[1:], strict=False)), after


def test_a_retry_after_that_fits_the_cycle_pauses_the_host_and_then_carries_on() -> None:
    calls: list[float] = []

    async def once_429(request: web.Request) -> web.Response:
        calls.append(time.monotonic())
        if len(calls) == 1:
            return web.Response(status=429, headers={"Retry-After": "0.4"})
        return web.Response(text=f"page {len(calls)}", content_type="text/html")

    async def scenario() -> tuple[HostRun, list[FetchResult | None]]:
        async with (
            serve({"/p0": once_429, "/p1": once_429, "/p2": once_429}) as srv,
            cycle_context(
                FetchSettings(host_concurrency=1, throttle=PLAIN),
                pause_window=60.0,
            ) as ctx,
        ):
            run, results = host_run(srv, pages(srv, 3), ctx)
            await run.run()
            return run, results

    run, results = asyncio.run(scenario())
    assert [r.outcome for r in results if r] == ["error", "new", "new"]
    assert results[0] is not None and results[0].retry_after_s == 0.4
    assert run.stop_outcome is None and run.throttle.n_pauses == 1
    assert len(calls) == 3 and calls[1] - calls[0] >= 0.4  # the pause was waited out


def test_a_retry_after_longer_than_the_cycle_defers_the_rest_and_carries_the_pause() -> None:
    async def scenario() -> tuple[HostRun, list[FetchResult | None], list[str]]:
        async with (
            serve(
                {
                    "/p0": status(503, **{"Retry-After": "120"}),
                    "/p1": text("one"),
                    "/p2": text("two"),
                }
            ) as srv,
            cycle_context(
                FetchSettings(host_concurrency=1, throttle=PLAIN), pause_window=5.0
            ) as ctx,
        ):
            run, results = host_run(srv, pages(srv, 3), ctx)
            await run.run()
            return run, results, srv.paths()

    run, results, seen = asyncio.run(scenario())
    assert seen == ["/p0"]
    assert (run.stop_outcome, run.stop_retry_after) == ("deferred", 120.0)
    assert run.stop_reason == "host throttled (HTTP 503)"
    first, *rest = results
    assert first is not None and first.sent and first.http_status == 503
    for r in rest:
        assert r is not None and (r.outcome, r.sent, r.http_status) == ("deferred", False, None)
        assert r.retry_after_s == 120.0 and r.error == "host throttled (HTTP 503)"


def test_a_host_whose_turn_comes_after_the_deadline_is_deferred_without_a_request() -> None:
    async def scenario() -> tuple[list[FetchResult | None], list[str]]:
        async with (
            serve({f"/p{i}": text("p") for i in range(3)}) as srv,
            cycle_context(FetchSettings(), deadline_in=0.0) as ctx,
        ):
            run, results = host_run(srv, pages(srv, 3), ctx)
            await run.run()
            return results, srv.paths()

    results, seen = asyncio.run(scenario())
    assert seen == []
    for r in results:
        assert r is not None and (r.outcome, r.sent) == ("deferred", False)
        assert r.error == TIME_LIMIT_REASON


def test_a_blocked_address_stops_the_host_after_one_attempt() -> None:
    async def scenario() -> tuple[HostRun, list[FetchResult | None], list[str]]:
        async with (
            serve({f"/p{i}": text("p") for i in range(4)}) as srv,
            # loopback is not on this allow-list: the guard refuses before connecting
            cycle_context(FetchSettings(host_concurrency=1), allow=()) as ctx,
        ):
            run, results = host_run(srv, pages(srv, 4), ctx)
            await run.run()
            return run, results, srv.paths()

    run, results, seen = asyncio.run(scenario())
    assert seen == []
    assert run.stop_outcome == "blocked" and "127.0.0.1" in (run.stop_reason or "")
    assert [(r.outcome, r.sent) for r in results if r] == [("blocked", False)] * 4
    assert {r.error for r in results if r} == {run.stop_reason}


def test_the_gap_counts_from_when_a_request_left_and_never_goes_back(monkeypatch) -> None:
    # the ledger is process-wide and a loopback port can come back in a later test of the same
    # worker: this test starts from an empty one (it failed once in CI on a reused port)
    monkeypatch.setattr(LEDGER, "_last", {})
    monkeypatch.setattr(LEDGER, "_held", {})

    async def scenario() -> None:
        async with serve({}) as srv, cycle_context(FetchSettings()) as ctx:
            run, _ = host_run(srv, pages(srv, 2), ctx)
            assert run.last_start is None and LEDGER.last_start(srv.host) is None
            first, second = Attempt(run), Attempt(run)
            first.sent_at = 100.0
            run.mark_sent(first)
            assert first.gap_s is None  # nothing left before it
            second.sent_at = 100.25
            run.mark_sent(second)
            assert second.gap_s == 0.25
            assert run.last_start == 100.25 and LEDGER.last_start(srv.host) == 100.25
            run.mark_started(99.0)  # a late stamp of an earlier moment moves nothing back
            assert run.last_start == 100.25 and LEDGER.last_start(srv.host) == 100.25
            # a new queue for the host (a later stage) starts from the ledger's moment
            again, _ = host_run(srv, pages(srv, 1), ctx)
            assert again.last_start == 100.25

    asyncio.run(scenario())
