"""The page fetcher: one polite, bounded aiohttp session per cycle.

Everything here exists to make a cycle's fetching cheap for the sites and safe for us:
conditional GETs so unchanged pages cost a 304, per-host queues with crawl-delay and small
concurrency so no site is hammered and one slow site cannot stall the rest, a latency-aware
throttle per host (:mod:`freshness_pipeline.web.throttle`) that slows down for slow or failing
sites and gives up on dead ones without eating the cycle, hard caps on bytes
(on the wire and after decompression) so a hostile page cannot exhaust memory, and the network
allow-list on every connection. Redirects are *not* followed: the pipeline records the target as
a discovery so the inventory learns the new URL instead of silently fetching it forever.

No decision here reads the wall clock; real time is used only for politeness gaps, timeouts and
durations. The cycle's ``now`` belongs to the caller.

The modules, from the bottom up: :mod:`.settings` (what a cycle's fetching may do),
:mod:`.fetches` (a planned fetch and what it came to: requests, results, outcomes, the host key),
:mod:`.body` (reading and decoding a body within its caps), :mod:`.headers` (what a response's
Retry-After and Last-Modified say, measured against its Date), :mod:`.context` (the state the
parts of a cycle share), :mod:`.session` (the guarded aiohttp session), :mod:`.outcomes` (one
request and its answer classified), :mod:`.hosts` (the per-host scheduler: gaps, slots,
breakers, Retry-After holds) and :mod:`.cycle` (the entry points).
"""

from __future__ import annotations

from freshness_pipeline.web.client.body import ACCEPT_ENCODING, BodyDecodeError, read_limited
from freshness_pipeline.web.client.cycle import fetch_all, fetch_all_sync, run_sync
from freshness_pipeline.web.client.fetches import (
    TIME_LIMIT_REASON,
    FetchRequest,
    FetchResult,
    host_key,
)
from freshness_pipeline.web.client.headers import (
    content_age_days,
    header_text,
    parse_retry_after,
)
from freshness_pipeline.web.client.session import open_session
from freshness_pipeline.web.client.settings import DEFAULT_USER_AGENT, FetchSettings

__all__ = [
    "header_text",
    "ACCEPT_ENCODING",
    "DEFAULT_USER_AGENT",
    "TIME_LIMIT_REASON",
    "BodyDecodeError",
    "FetchRequest",
    "FetchResult",
    "FetchSettings",
    "content_age_days",
    "fetch_all",
    "fetch_all_sync",
    "host_key",
    "open_session",
    "parse_retry_after",
    "read_limited",
    "run_sync",
]
