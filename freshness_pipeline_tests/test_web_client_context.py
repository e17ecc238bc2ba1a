"""web/client/context.py: the attempt a page request is making, which the session's connector
stamps when the request leaves (through ``CURRENT_ATTEMPT``, set in the request's own task), and
the host that is told so. Real requests to a loopback server through the cycle's session."""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from freshness_pipeline.web.client.context import CURRENT_ATTEMPT, Attempt, AttemptHost
from freshness_pipeline.web.client.session import open_session
from freshness_pipeline.web.client.settings import FetchSettings
from freshness_pipeline_tests.test_client import LOOPBACK, serve, text


class Host:
    """An AttemptHost that writes down what it is told."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.started: list[float] = []
        self.sent: list[Attempt] = []

    def mark_started(self, at: float) -> None:
        self.started.append(at)

    def mark_sent(self, attempt: Attempt) -> None:
        self.sent.append(attempt)


async def get(session: aiohttp.ClientSession, url: str, attempt: Attempt | None) -> str:
    """A request as fetch_one makes it: the attempt set in the request's own task."""
    token = CURRENT_ATTEMPT.set(attempt)
    try:
        async with session.get(url) as resp:
            return await resp.text()
    finally:
        CURRENT_ATTEMPT.reset(token)


def test_an_attempt_is_measured_from_its_start_until_it_is_sent() -> None:
    host: AttemptHost = Host("h")
    attempt = Attempt(host)
    assert attempt.host is host and attempt.sent_at is None
    assert (attempt.gap_s, attempt.latency_s, attempt.signal) == (None, None, None)
    assert attempt.since_sent() >= 0.0
    attempt.started_at -= 100.0  # started long ago, not sent yet: counts from the start
    assert attempt.since_sent() >= 100.0
    attempt.sent_at = attempt.started_at + 99.0  # sent a second ago: counts from then
    assert 0.0 <= attempt.since_sent() < 100.0


def test_the_connector_stamps_each_request_of_the_attempt_in_its_task() -> None:
    async def scenario() -> None:
        async with (
            serve({"/a": text("a"), "/b": text("b")}) as srv,
            open_session(FetchSettings(), allow=LOOPBACK) as session,
        ):
            host = Host(srv.host)
            first = Attempt(host)
            assert await get(session, srv.url("/a"), first) == "a"
            assert host.sent == [first]
            assert first.sent_at is not None and first.sent_at >= first.started_at
            # the second request reuses the kept-alive connection and is stamped all the same
            second = Attempt(host)
            assert await get(session, srv.url("/b"), second) == "b"
            assert host.sent == [first, second]
            assert second.sent_at is not None and second.sent_at >= first.sent_at
            # robots.txt and sitemaps share the session without an attempt: nothing stamped
            assert CURRENT_ATTEMPT.get() is None
            assert await get(session, srv.url("/a"), None) == "a"
            assert host.sent == [first, second]

    asyncio.run(scenario())


def test_concurrent_requests_each_stamp_their_own_attempt() -> None:
    arrived = 0
    both = asyncio.Event()

    async def meet(request: web.Request) -> web.Response:
        nonlocal arrived
        arrived += 1
        if arrived == 2:
            both.set()
        await asyncio.wait_for(both.wait(), 5.0)  # both requests are in flight together
        return web.Response(text=request.path)

    async def scenario() -> None:
        async with (
            serve({"/x": meet, "/y": meet}) as srv,
            open_session(FetchSettings(), allow=LOOPBACK) as session,
        ):
            x_host, y_host = Host(srv.host + "#x"), Host(srv.host + "#y")
            x, y = Attempt(x_host), Attempt(y_host)
            answers = await asyncio.gather(
                get(session, srv.url("/x"), x), get(session, srv.url("/y"), y)
            )
            assert answers == ["/x", "/y"]
            assert x_host.sent == [x] and y_host.sent == [y]
            assert x.sent_at is not None and y.sent_at is not None

    asyncio.run(scenario())
