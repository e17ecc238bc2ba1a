"""The one aiohttp session a cycle uses, for pages, robots.txt and sitemaps alike: guarded by
the network allow-list, cookie-less, no proxies from the environment and no automatic
decompression (bodies are decoded within their caps). Its connector stamps the moment each
page request leaves, which is where the per-host gaps count from."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import aiohttp
import yarl
from aiohttp.abc import AbstractResolver

from freshness_pipeline.web.client.body import ACCEPT_ENCODING
from freshness_pipeline.web.client.context import CURRENT_ATTEMPT
from freshness_pipeline.web.client.settings import FetchSettings
from freshness_pipeline.web.netguard import GuardedConnector, IPNetwork, allowed_networks

__all__ = ["ACCEPT", "open_session"]

ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
#: hosts whose parsed form yarl keeps: every request builds a URL, and yarl's default cache of
#: 512 hosts misses on every request of a cycle that goes round thousands of hosts, parsing
#: the host (an IP literal through ``ipaddress``) again each time
URL_HOST_CACHE = 1 << 15


class _StampingConnector(GuardedConnector):
    """The guarded connector that notes when a page request gets its connection: after DNS,
    connect and the allow-list, right before the request line goes out on it."""

    async def connect(self, req: Any, traces: Any, timeout: Any) -> Any:
        conn = await super().connect(req, traces, timeout)
        attempt = CURRENT_ATTEMPT.get()
        if attempt is not None:
            attempt.sent_at = time.monotonic()
            attempt.request = req
            attempt.host.mark_sent(attempt)
        return conn

    async def _get(self, key: Any, traces: Any) -> Any:
        # where connect() looks for a kept-alive connection first: one found is a reuse
        conn = await super()._get(key, traces)
        attempt = CURRENT_ATTEMPT.get()
        if attempt is not None:
            attempt.reused = conn is not None
        return conn


#: header lines an answer may carry before it is refused as unreadable
MAX_HEADER_LINES = 1024


def open_session(
    settings: FetchSettings,
    *,
    allow: Iterable[IPNetwork] | None = None,
    resolver: AbstractResolver | None = None,
) -> aiohttp.ClientSession:
    """The one session a cycle uses (also for robots.txt and sitemaps): guarded, cookie-less,
    no proxies from the environment, no automatic decompression. Call inside a running loop.
    """
    nets = allowed_networks() if allow is None else tuple(allow)
    if yarl.cache_info()["encode_host"].maxsize != URL_HOST_CACHE:
        yarl.cache_configure(encode_host_size=URL_HOST_CACHE)
    connector = _StampingConnector(
        allow=nets,
        resolver=resolver,
        limit=settings.global_concurrency,
        limit_per_host=0,
        ttl_dns_cache=300,
    )
    session = aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(
            total=settings.total_timeout,
            sock_connect=settings.connect_timeout,
            sock_read=settings.read_timeout,
        ),
        headers={
            "User-Agent": settings.user_agent,
            "Accept-Encoding": ACCEPT_ENCODING,
            "Accept": ACCEPT,
        },
        auto_decompress=False,
        cookie_jar=aiohttp.DummyCookieJar(),
        trust_env=False,
        max_line_size=16 * 1024,
        max_field_size=32 * 1024,
        # aiohttp stops at 128 header lines; real answers carry more (a Set-Cookie per tracker,
        # Link preloads), and a browser or curl reads them all
        max_headers=MAX_HEADER_LINES,
    )
    # aiohttp sends an idempotent request a second time, at once, when its connection drops
    # before the answer: past the host's Crawl-delay, and without the row and record every
    # request sent has (found by a contract audit). The fetcher asks again itself, through
    # the host's gap, when a kept-alive connection was closed under a request
    # (outcomes.fetch_one); a private switch, so test_hostile_servers counts the requests a
    # dropping server receives.
    session._retry_connection = False
    return session
