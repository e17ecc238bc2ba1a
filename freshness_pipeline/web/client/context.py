"""The state a cycle's fetching shares between its parts: the cycle's context (session,
settings, global slots, deadlines, fingerprinter, archive), which the per-host scheduler and
the classification of answers both read, and the attempt each request on the wire is making,
which the session's connector stamps when the request leaves. It sits below all three so that
none of them imports another for it."""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import aiohttp

from freshness_pipeline.science.fingerprint import ContentRecord
from freshness_pipeline.science.normalize import normalize_url
from freshness_pipeline.warehouse.archive import ArchiveWriter
from freshness_pipeline.web.client.fetches import FetchRequest, Fingerprinter
from freshness_pipeline.web.client.settings import FetchSettings
from freshness_pipeline.web.netguard import IPNetwork
from freshness_pipeline.web.throttle import Signal, Throttles

__all__ = ["CURRENT_ATTEMPT", "Attempt", "AttemptHost", "CycleContext"]


class AttemptHost(Protocol):
    """The host's side of an attempt, as the request and the connector use it (the per-host
    scheduler's ``HostRun`` is the one there is); named here so that this module needs no
    import of the scheduler."""

    key: str

    def mark_started(self, at: float) -> None: ...

    def mark_sent(self, attempt: Attempt) -> None: ...

    async def wait_for_gap(self) -> None: ...


class Attempt:
    """One request on the wire: its host, when it left, and what it taught the throttle."""

    __slots__ = (
        "gap_s",
        "host",
        "latency_s",
        "request",
        "reused",
        "sent_at",
        "signal",
        "started_at",
    )

    def __init__(self, host: AttemptHost) -> None:
        self.host = host
        self.started_at = time.monotonic()
        self.sent_at: float | None = None
        self.gap_s: float | None = None  # since the host's previous request left
        self.latency_s: float | None = None
        self.signal: Signal | None = None
        # the request that got its connection (aiohttp's ClientRequest): what went on the
        # wire, for the archive when no answer comes back
        self.request: aiohttp.ClientRequest | None = None
        # whether that request went out on a kept-alive connection, which the server may have
        # closed on its own clock as the request arrived
        self.reused = False

    def since_sent(self) -> float:
        return time.monotonic() - (self.sent_at if self.sent_at is not None else self.started_at)


@dataclass
class CycleContext:
    session: aiohttp.ClientSession
    settings: FetchSettings
    slots: asyncio.Semaphore
    deadline: float | None
    fingerprint: Fingerprinter | None
    throttles: Throttles
    # until when a Retry-After is waited out instead of deferring the host (monotonic seconds)
    pause_deadline: float
    default_fp: Callable[[bytes, str | None, FetchRequest], ContentRecord] | None = None
    archive: ArchiveWriter | None = None
    # whether robots.txt lets a URL the plan did not name be fetched (a redirect's other
    # spelling of a planned page); None: no such URL is
    robots_allow: Callable[[str], bool] | None = None
    # a URL's key as the candidates make it (the host's own strip_params included), to tell a
    # redirect to another spelling of the page from a move
    url_key: Callable[[str], str] = normalize_url
    # the networks the allow-list admits (the session's own), to refuse a redirect to an
    # address no request may go to before it becomes a URL of the crawl
    allow: tuple[IPNetwork, ...] = ()
    # Big bodies fingerprinted at once. Reading a page into a tree and its text takes about
    # eleven times its size, so sixteen 10 MB pages in flight took gigabytes; the work holds
    # the GIL, so more than two at a time are no faster, only bigger.
    big_fingerprints: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(2))


# The attempt a page fetch is making, set by fetch_one in its own task, so the connector can
# stamp the moment the request leaves. An aiohttp TraceConfig did this before, but a trace makes
# aiohttp build and await a signal for every stage of every request (a tenth of the client's
# CPU per request on a fast host), where only this one moment is needed.
CURRENT_ATTEMPT: contextvars.ContextVar[Attempt | None] = contextvars.ContextVar(
    "freshness_fetch_attempt", default=None
)
