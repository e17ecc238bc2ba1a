"""robots.txt: RFC 9309 failure modes, our group, fractional delays, sitemaps, caching."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import ipaddress
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

from freshness_pipeline.web.client import FetchSettings, open_session
from freshness_pipeline.web.netguard import ALLOW_ENV, allowed_networks, refusal_lifted
from freshness_pipeline.web.robots import (
    PRODUCT_TOKEN,
    ROBOTS_ERROR_TTL,
    ROBOTS_TTL,
    RobotsRecord,
    allowed_mask,
    fetch_robots,
    needs_refresh,
    record_ttl,
    refused_by_allow_list,
    robots_policy,
    robots_url_for,
)

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"),)
NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
UA = FetchSettings().user_agent
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

ROBOTS = """\
User-agent: *
Disallow: /

User-agent: freshness-pipeline
Disallow: /private
Allow: /private/open
Crawl-delay: 0.25

Sitemap: https://example.com/sitemap.xml
Sitemap: /relative-sitemap.xml
"""


def record(status: int | None, body: str = "", error: str | None = None) -> RobotsRecord:
    return RobotsRecord(
        host="example.com",
        robots_url="https://example.com/robots.txt",
        http_status=status,
        body=body,
        error=error,
        fetched_at=NOW,
    )


@contextlib.asynccontextmanager
async def serve(routes: dict[str, Handler]) -> AsyncIterator[tuple[str, list[str]]]:
    seen: list[str] = []

    @web.middleware
    async def log(request: web.Request, handler: Handler) -> web.StreamResponse:
        seen.append(request.path)
        return await handler(request)

    app = web.Application(middlewares=[log])
    for path, handler in routes.items():
        app.router.add_get(path, handler)
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", seen
    finally:
        await runner.cleanup()


def reply(body: str | bytes = b"", code: int = 200, **headers: str) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        data = body.encode() if isinstance(body, str) else body
        return web.Response(body=data, status=code, headers=headers)

    return handler


# ------------------------------------------------------------------ policy (no network)


def test_parsed_policy_uses_our_group() -> None:
    policy = robots_policy(record(200, ROBOTS))
    assert policy.mode == "parsed"
    assert PRODUCT_TOKEN == "freshness-pipeline"
    assert policy.can_fetch("https://example.com/page")  # * disallows all, our group does not
    assert not policy.can_fetch("https://example.com/private/x")
    assert policy.can_fetch("https://example.com/private/open/y")  # longest match wins
    assert policy.crawl_delay == 0.25  # fractional seconds kept
    assert policy.sitemaps == [
        "https://example.com/sitemap.xml",
        "https://example.com/relative-sitemap.xml",
    ]
    urls = ["https://example.com/a", "https://example.com/private/b"]
    assert allowed_mask(policy, urls) == [True, False]


@pytest.mark.parametrize(
    ("line", "ours"),
    [
        ("User-agent: freshness-pipeline", True),
        ("user-agent: Freshness-Pipeline", True),
        # a site that pastes the whole user agent names us (RFC 9309's product token)
        ("User-agent: freshness-pipeline/0.1", True),
        ("User-Agent: freshness-pipeline/2.0 (+https://example.com/bot)", True),
        # another crawler whose name begins like ours does not
        ("User-agent: freshness", False),
        ("User-agent: fresh", False),
        ("User-agent: freshness-pipeline-next", False),
        ("User-agent: googlebot", False),
    ],
)
def test_a_group_is_ours_when_its_product_token_is_ours(line: str, ours: bool) -> None:
    """Protego found a group's name inside the crawler's from a word boundary: a group for
    'freshness-pipeline/0.1' was ignored (its Disallow: / with it) and one for 'freshness'
    taken as ours (the fifth exploratory run)."""
    body = f"{line}\nDisallow: /\nCrawl-delay: 2\n\nUser-agent: *\nAllow: /\n"
    policy = robots_policy(record(200, body))
    assert policy.can_fetch("https://example.com/page") is not ours
    assert policy.crawl_delay == (2.0 if ours else None)


def test_star_group_applies_when_ours_is_absent_and_request_rate_implies_delay() -> None:
    policy = robots_policy(record(200, "User-agent: *\nDisallow: /tmp\nRequest-rate: 1/2s\n"))
    assert not policy.can_fetch("https://example.com/tmp/x")
    assert policy.can_fetch("https://example.com/ok")
    assert policy.crawl_delay == 2.0
    empty = robots_policy(record(200, ""))
    assert empty.can_fetch("https://example.com/anything") and empty.crawl_delay is None
    garbage = robots_policy(record(200, "\x00\x01 not robots {{{"))
    assert garbage.can_fetch("https://example.com/x")


@pytest.mark.parametrize(
    ("status", "mode"),
    [
        (404, "allow_all"),
        (410, "allow_all"),
        (401, "allow_all"),
        (403, "allow_all"),
        (429, "disallow_all"),
        (500, "disallow_all"),
        (503, "disallow_all"),
        (None, "disallow_all"),
        (302, "allow_all"),  # redirects exhausted: "unavailable"
    ],
)
def test_failure_modes(status: int | None, mode: str) -> None:
    policy = robots_policy(record(status, error=None if status else "connect failed"))
    assert policy.mode == mode
    allowed = mode == "allow_all"
    assert policy.can_fetch("https://example.com/x") is allowed
    assert allowed_mask(policy, ["https://example.com/a"] * 3) == [allowed] * 3
    assert policy.crawl_delay is None and policy.sitemaps == []


def test_refresh_and_ttl() -> None:
    assert timedelta(hours=24) == ROBOTS_TTL
    assert needs_refresh(None, NOW)
    assert not needs_refresh(NOW - timedelta(hours=23), NOW)
    assert needs_refresh(NOW - timedelta(hours=24), NOW)
    assert needs_refresh(NOW + timedelta(hours=25), NOW)  # a record from a later cycle's now
    assert needs_refresh(NOW - timedelta(hours=2), NOW, ttl=ROBOTS_ERROR_TTL)
    assert record_ttl(record(200, ROBOTS)) == ROBOTS_TTL
    assert record_ttl(record(404)) == ROBOTS_TTL
    assert record_ttl(record(503)) == ROBOTS_ERROR_TTL
    assert record_ttl(record(None, error="timeout")) == ROBOTS_ERROR_TTL


def test_robots_url_for() -> None:
    assert robots_url_for("https://Example.com:8443/a/b?c") == "https://example.com:8443/robots.txt"
    with pytest.raises(ValueError):
        robots_url_for("ftp://example.com/")


# ------------------------------------------------------------------ fetching


def test_fetch_robots_outcomes() -> None:
    big = "User-agent: *\n" + "".join(f"Disallow: /p{i:06d}\n" for i in range(40_000))

    sites = {
        "ok": {"/robots.txt": reply(ROBOTS, **{"Content-Type": "text/plain"})},
        "missing": {"/robots.txt": reply(code=404)},
        "failing": {"/robots.txt": reply(code=503)},
        "moved": {
            "/robots.txt": reply(code=301, Location="/moved/1"),
            "/moved/1": reply(code=302, Location="/moved/2"),
            "/moved/2": reply("User-agent: *\nDisallow: /secret\nCrawl-delay: 1.5\n"),
        },
        "looping": {"/robots.txt": reply(code=302, Location="/robots.txt")},
        "gzipped": {
            "/robots.txt": reply(gzip.compress(ROBOTS.encode()), **{"Content-Encoding": "gzip"})
        },
        "huge": {"/robots.txt": reply(big)},
    }

    async def scenario() -> None:
        async with contextlib.AsyncExitStack() as stack:
            base: dict[str, str] = {}
            seen: dict[str, list[str]] = {}
            for name, routes in sites.items():
                base[name], seen[name] = await stack.enter_async_context(serve(routes))
            session = await stack.enter_async_context(open_session(FetchSettings(), allow=LOOPBACK))

            async def get(name: str, **kw: object) -> RobotsRecord:
                return await fetch_robots(
                    session, base[name] + "/some/page", now=NOW, user_agent=UA, timeout=5, **kw
                )

            rec = await get("ok")
            assert (rec.http_status, rec.error, rec.fetched_at) == (200, None, NOW)
            assert rec.body == ROBOTS and rec.robots_url == base["ok"] + "/robots.txt"
            assert rec.host == base["ok"].removeprefix("http://")
            assert seen["ok"] == ["/robots.txt"]
            policy = robots_policy(rec)
            assert policy.crawl_delay == 0.25
            assert not policy.can_fetch(base["ok"] + "/private/x")

            assert robots_policy(await get("missing")).mode == "allow_all"
            assert robots_policy(await get("failing")).mode == "disallow_all"

            moved_rec = await get("moved")
            moved_policy = robots_policy(moved_rec)
            assert moved_rec.http_status == 200 and moved_policy.crawl_delay == 1.5
            assert not moved_policy.can_fetch(base["moved"] + "/secret/1")

            loop_rec = await get("looping")
            assert "redirects" in (loop_rec.error or "") and len(seen["looping"]) == 6

            assert (await get("gzipped")).body == ROBOTS

            huge_rec = await get("huge", max_bytes=100_000)
            assert len(huge_rec.body.encode()) <= 100_000
            assert huge_rec.body.endswith("\n")  # the cut line is dropped, not half-kept
            assert robots_policy(huge_rec).can_fetch(base["huge"] + "/p039999")

    asyncio.run(scenario())


class StubResolver(AbstractResolver):
    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return [
            ResolveResult(
                hostname=host, host="10.0.0.1", port=port, family=socket.AF_INET, proto=0, flags=0
            )
        ]

    async def close(self) -> None:
        return None


def test_unreachable_and_blocked_robots_disallow_everything() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()

    async def scenario() -> tuple[RobotsRecord, RobotsRecord]:
        async with open_session(
            FetchSettings(), allow=LOOPBACK, resolver=StubResolver()
        ) as session:
            dead = await fetch_robots(
                session, f"http://127.0.0.1:{port}/", now=NOW, user_agent=UA, timeout=5
            )
            blocked = await fetch_robots(
                session, "http://intranet.test/", now=NOW, user_agent=UA, timeout=5
            )
            return dead, blocked

    dead, blocked = asyncio.run(scenario())
    assert dead.http_status is None and dead.error
    assert robots_policy(dead).mode == "disallow_all"
    assert blocked.http_status is None and "blocked" in (blocked.error or "")
    assert robots_policy(blocked).mode == "disallow_all"
    # a refusal by this machine's allow-list is asked again every cycle (nothing is sent
    # unless the allow-list changed); a host that did not answer waits an hour
    assert record_ttl(blocked) == timedelta(0) and record_ttl(dead) == ROBOTS_ERROR_TTL
    assert refused_by_allow_list(blocked) and not refused_by_allow_list(dead)
    # the address it named (intranet.test resolved to 10.0.0.1) is what an opened list admits
    assert refusal_lifted(blocked.error or "", allowed_networks({ALLOW_ENV: "10.0.0.0/8"}))
    assert not refusal_lifted(blocked.error or "", LOOPBACK)
