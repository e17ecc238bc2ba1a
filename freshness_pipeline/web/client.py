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
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import json
import time
import zlib
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal, TypeVar
from urllib.parse import urljoin, urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver

from freshness_pipeline.archive import (
    ArchivedOriginal,
    ArchiveWriteError,
    ArchiveWriter,
    payload_digest,
)
from freshness_pipeline.science.fingerprint import ContentRecord, class_record
from freshness_pipeline.science.normalize import InvalidURL, url_authority
from freshness_pipeline.science.retry_after import MAX_RETRY_AFTER_S
from freshness_pipeline.web.archiving import archive_answer
from freshness_pipeline.web.netguard import (
    GuardedConnector,
    IPNetwork,
    allowed_networks,
    check_url_scheme,
    find_blocked_error,
)
from freshness_pipeline.web.politeness import LEDGER
from freshness_pipeline.web.throttle import Signal, ThrottlePolicy, Throttles, classify_status

__all__ = [
    "ACCEPT_ENCODING",
    "DEFAULT_USER_AGENT",
    "BodyDecodeError",
    "BodyRead",
    "BodyTooLarge",
    "FetchRequest",
    "FetchResult",
    "FetchSettings",
    "Fingerprinter",
    "Outcome",
    "TIME_LIMIT_REASON",
    "Throttles",
    "content_age_days",
    "fetch_all",
    "fetch_all_sync",
    "host_key",
    "open_session",
    "parse_retry_after",
    "read_limited",
    "run_sync",
]

T = TypeVar("T")

DEFAULT_USER_AGENT = "freshness-pipeline/0.1 (+https://example.invalid/freshness-pipeline)"
USER_AGENT_PREFIX = "freshness-pipeline/"

Outcome = Literal[
    "not_modified",
    "unchanged",
    "changed",
    "new",
    "gone",
    "error",
    "redirect",
    "blocked",
    "deferred",
]
Fingerprinter = Callable[[bytes, str | None], str]

try:  # pragma: no cover - brotli is optional and not installed in the reference environment
    import brotli as _brotli  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover
    try:
        import brotlicffi as _brotli  # type: ignore[import-not-found,no-redef]
    except ImportError:
        _brotli = None

# Only advertise what we can decode with a bounded output size.
ACCEPT_ENCODING = "gzip, deflate, br" if _brotli is not None else "gzip, deflate"
ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

_CHUNK = 64 * 1024
_ERROR_BODY_DRAIN = 64 * 1024  # read small error bodies so the connection can be reused
# Added to a crawl-delay gap for scheduling jitter between our clock and the server's, so the
# server never sees less than the delay robots.txt asked for. A gap that only AutoThrottle set is
# our own estimate, with no rule on the server's side to break: 5 ms on top of a sub-millisecond
# latency would cap a fast host at ~200 requests/s for nothing.
_GAP_SLACK_S = 0.005
_PROBE_POLL_S = 0.05  # how often a request waiting on a breaker's probe looks again
_THREAD_FINGERPRINT_BYTES = 512 * 1024  # bigger bodies are fingerprinted off the event loop
_THROTTLE_STATUSES = frozenset({429, 503})
_GONE_STATUSES = frozenset({404, 410})
_REDIRECT_STATUSES = frozenset({300, 301, 302, 303, 307, 308})
#: Why a planned fetch was deferred when the cycle, not the host, ran out: every other
#: deferral is the host's doing (its breaker, a Retry-After longer than the cycle).
TIME_LIMIT_REASON = "cycle time limit reached"


@dataclass(frozen=True)
class FetchSettings:
    """Knobs for one cycle's fetching; the defaults are polite for unknown public sites."""

    user_agent: str = DEFAULT_USER_AGENT
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    total_timeout: float = 60.0
    max_body_bytes: int = 10 * 1024 * 1024
    max_decompressed_bytes: int = 50 * 1024 * 1024
    global_concurrency: int = 16
    host_concurrency: int = 2
    cycle_time_limit_s: float | None = None
    # The fetch window the plan sized each host's share by (seconds). A 429/503 whose
    # Retry-After ends within it (or within the time limit, when there is one) pauses the host
    # and resumes it; only a longer one defers the host's remaining fetches to later cycles.
    fetch_window_s: float = 600.0
    # The longest Retry-After kept: the planner holds a host that long across cycles, so the
    # default is the planner's own limit (see science.retry_after for why one day).
    max_retry_after_s: float = MAX_RETRY_AFTER_S
    # The cycle's now (timezone-aware): the reference for a response's dates when it carries no
    # Date header (content age, an HTTP-date Retry-After), so that no decision reads the wall
    # clock. None only for callers outside a cycle.
    cycle_now: datetime | None = None
    # Unforgiven failures (transport errors, timeouts, 5xx, 429/503; each success forgives one)
    # after which a host's circuit breaker opens and the rest of its queue is deferred: a dead
    # host must not eat the cycle one timeout at a time. None disables the breaker.
    host_failure_limit: int | None = 3
    # Latency-aware pacing (see web/throttle.py). The gap between request starts to a host
    # follows latency / target concurrency, never below its Crawl-delay, never above
    # max_delay_s (unless the Crawl-delay is larger).
    autothrottle: bool = True
    autothrottle_target_concurrency: float = 1.0
    autothrottle_start_delay_s: float = 0.0
    max_delay_s: float = 60.0
    # Exponential back-off on failures: the gap becomes at least base * 2^(n-1) after n
    # unforgiven failures (and at least double the previous gap), raised by up to `jitter`.
    backoff_base_s: float = 1.0
    backoff_jitter: float = 0.25
    # How long an open breaker stays open before one probe is let through; matters only when a
    # Throttles object is reused across fetch_all calls (within one cycle, open means done).
    breaker_cooldown_s: float = 600.0
    # A host that has answered in this cycle and then fails ``host_failure_limit`` times is
    # flaky, not down: its breaker lets a probe through after this cool-down (doubling each
    # time, at most ``breaker_retries`` times) when that fits the fetch window.
    breaker_retry_s: float = 5.0
    breaker_retries: int = 3

    def __post_init__(self) -> None:
        if not self.user_agent.startswith(USER_AGENT_PREFIX):
            raise ValueError(f"user_agent must start with {USER_AGENT_PREFIX!r}")
        for name in ("connect_timeout", "read_timeout", "total_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        for name in (
            "max_body_bytes",
            "max_decompressed_bytes",
            "global_concurrency",
            "host_concurrency",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.cycle_time_limit_s is not None and self.cycle_time_limit_s < 0:
            raise ValueError("cycle_time_limit_s must not be negative")
        if not self.fetch_window_s > 0:
            raise ValueError("fetch_window_s must be positive")
        if self.max_retry_after_s < 0:
            raise ValueError("max_retry_after_s must not be negative")
        if self.cycle_now is not None and self.cycle_now.utcoffset() is None:
            raise ValueError("cycle_now must be timezone-aware")
        self.throttle_policy()  # validates the throttle knobs

    def throttle_policy(self) -> ThrottlePolicy:
        return ThrottlePolicy(
            autothrottle=self.autothrottle,
            target_concurrency=self.autothrottle_target_concurrency,
            start_delay_s=self.autothrottle_start_delay_s,
            max_delay_s=self.max_delay_s,
            backoff_base_s=self.backoff_base_s,
            backoff_jitter=self.backoff_jitter,
            failure_limit=self.host_failure_limit,
            breaker_cooldown_s=self.breaker_cooldown_s,
            breaker_retry_s=self.breaker_retry_s,
            breaker_retries=self.breaker_retries,
        )


@dataclass
class FetchRequest:
    """One planned page fetch with what we remember from last time."""

    url: str
    host: str = ""  # authority key (host[:port], lower-cased); derived from url when empty
    etag: str | None = None
    last_modified: str | None = None  # the server's Last-Modified string, sent back verbatim
    prev_fingerprint: str | None = None
    crawl_delay: float | None = None  # seconds between request starts to this host
    selectors: tuple[str, ...] = ()
    # What earlier cycles learned of the host (science.capacity): the gap between request
    # starts it takes without throttling, and how many requests it takes at once (None: the
    # settings' host_concurrency).
    min_gap_s: float | None = None
    concurrency: int | None = None
    # What the archive holds of the URL (its last original): a 304, or a body with the same
    # payload digest, is then a revisit record referring to it, and an identical body needs
    # no extraction.
    archived: ArchivedOriginal | None = None
    # The URL class's fields (name -> CSS selector) and whether its JSON-LD counts.
    fields: dict[str, str] | None = None
    json_ld: bool = False


@dataclass
class FetchResult:
    """What one planned fetch came to.

    ``sent`` is False when nothing went on the wire for the page (deferred, refused scheme,
    blocked address): such rows belong in ``fetch_results`` but not in ``fetch_log``. For a 304
    the validators and fingerprint fall back to the request's, since the stored copy is still the
    current one.
    """

    url: str
    host: str
    http_status: int | None
    outcome: Outcome
    fingerprint: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    content_type: str | None = None
    bytes: int = 0
    conditional: bool = False
    duration_ms: float = 0.0
    location: str | None = None
    retry_after_s: float | None = None
    error: str | None = None
    sent: bool = True
    # Which conditional header went out: "etag" (If-None-Match), "last_modified"
    # (If-Modified-Since) or None. Validator trust (science/validators.py) needs to know which
    # validator a 200 or 304 answered.
    validator: str | None = None
    # Days from the body's Last-Modified to the response's Date (see content_age_days).
    content_age_days: float | None = None
    # Where the archive put the request's record, and the payload's digest (None: nothing
    # archived); ``archived`` the URL's original to refer to next time (ArchivedOriginal JSON).
    warc_filename: str | None = None
    warc_offset: int | None = None
    warc_length: int | None = None
    payload_digest: str | None = None
    archived: str | None = None
    # A version worth keeping (new or changed content): what it says.
    title: str | None = None
    text: str | None = None
    fields: str | None = None  # JSON object


# --------------------------------------------------------------------------- body reading


class BodyTooLarge(Exception):
    """The body (raw or decompressed) went over its cap; reading stopped there. ``partial``
    holds what was decoded up to the cap (archived as a truncated record)."""

    def __init__(self, message: str, raw_bytes: int, partial: bytes = b"") -> None:
        super().__init__(message)
        self.raw_bytes = raw_bytes
        self.partial = partial


class BodyDecodeError(Exception):
    """The Content-Encoding was unsupported or its data corrupt."""

    def __init__(self, message: str, raw_bytes: int) -> None:
        super().__init__(message)
        self.raw_bytes = raw_bytes


class _OutputCap(Exception):
    pass


@dataclass
class BodyRead:
    body: bytes
    raw_bytes: int
    truncated: bool = False


class _Inflate:
    """Incremental gzip/zlib/raw-deflate whose total output is capped (bomb-proof).

    ``decompress(data, max_length)`` never returns more than asked for, so memory stays at the
    cap however large the stream claims to expand.
    """

    def __init__(self, kind: str, limit: int) -> None:
        self.kind = kind
        self.limit = limit
        self.produced = 0
        self._d: Any = None
        self._pending = b""
        self._done = False

    def _new(self, head: bytes) -> Any:
        if self.kind == "gzip":
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        # HTTP "deflate" is meant to be zlib-wrapped, but many servers send raw deflate.
        if len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0:
            return zlib.decompressobj(zlib.MAX_WBITS)
        return zlib.decompressobj(-zlib.MAX_WBITS)

    def feed(self, data: bytes) -> bytes:
        if self._done:
            return b""
        if self._d is None:
            self._pending += data
            if len(self._pending) < 2:
                return b""
            data, self._pending = self._pending, b""
            self._d = self._new(data)
        out = bytearray()
        while data:
            piece = self._d.decompress(data, self.limit - self.produced + 1)
            self._count(piece)
            out += piece
            data = self._d.unconsumed_tail
            if self._d.eof:
                rest = self._d.unused_data
                if self.kind == "gzip" and rest[:2] == b"\x1f\x8b":
                    self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)  # next gzip member
                    data = rest
                else:
                    self._done = True
                    break
        return bytes(out)

    def flush(self) -> bytes:
        if self._d is None:
            if not self._pending:
                return b""
            self._d = self._new(self._pending)
            data, self._pending = self._pending, b""
            return self.feed(data)
        if self._done:
            return b""
        out = self._d.flush(self.limit - self.produced + 1)
        self._count(out)
        return out

    def _count(self, piece: bytes) -> None:
        self.produced += len(piece)
        if self.produced > self.limit:
            raise _OutputCap


class _Brotli:  # pragma: no cover - exercised only where brotli is installed
    """Brotli fed in small slices: its API cannot bound output per call, small input can."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.produced = 0
        self._d = _brotli.Decompressor()

    def feed(self, data: bytes) -> bytes:
        out = bytearray()
        for i in range(0, len(data), 1024):
            piece = self._d.process(data[i : i + 1024])
            self.produced += len(piece)
            if self.produced > self.limit:
                raise _OutputCap
            out += piece
        return bytes(out)

    def flush(self) -> bytes:
        return b""


class _Decoder:
    """Undo a Content-Encoding chain, every stage's output capped at ``limit``."""

    def __init__(self, content_encoding: str | None, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.parts: list[bytes] = []
        self.stages: list[_Inflate | _Brotli] = []
        codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
        for coding in reversed(codings):  # the last coding applied is undone first
            if coding in ("identity", "none"):
                continue
            if coding in ("gzip", "x-gzip"):
                self.stages.append(_Inflate("gzip", limit))
            elif coding == "deflate":
                self.stages.append(_Inflate("deflate", limit))
            elif coding == "br" and _brotli is not None:  # pragma: no cover
                self.stages.append(_Brotli(limit))
            else:
                raise ValueError(f"unsupported content-encoding {coding!r}")

    def feed(self, data: bytes) -> None:
        for stage in self.stages:
            data = stage.feed(data)
        self._take(data)

    def finish(self) -> bytes:
        data = b""
        for stage in self.stages:
            data = (stage.feed(data) if data else b"") + stage.flush()
        self._take(data)
        return b"".join(self.parts)

    def partial(self) -> bytes:
        # A truncated compressed stream cannot be flushed cleanly; keep what was decoded.
        return b"".join(self.parts)[: self.limit]

    def _take(self, data: bytes) -> None:
        if data:
            self.size += len(data)
            self.parts.append(data)
            if self.size > self.limit:
                raise _OutputCap


async def read_limited(
    resp: aiohttp.ClientResponse,
    *,
    max_bytes: int,
    max_decompressed_bytes: int,
    truncate: bool = False,
) -> BodyRead:
    """Read a response body in chunks, decoding Content-Encoding ourselves, with both caps.

    The session runs with ``auto_decompress=False`` so a 1 MB gzip body cannot become 1 GB in
    memory. With ``truncate`` (robots.txt: "parse at least 500 KiB, ignore the rest") going over
    a cap ends the read with what fits; otherwise it raises :class:`BodyTooLarge`.
    """
    raw = 0
    try:
        decoder = _Decoder(resp.headers.get("Content-Encoding"), max_decompressed_bytes)
    except ValueError as exc:
        raise BodyDecodeError(str(exc), 0) from exc
    declared = resp.content_length
    if declared is not None and declared > max_bytes and not truncate:
        resp.close()
        raise BodyTooLarge(f"body exceeds {max_bytes} bytes (Content-Length {declared})", 0)
    try:
        async for chunk in resp.content.iter_chunked(_CHUNK):
            if raw + len(chunk) > max_bytes:
                if truncate:
                    chunk = chunk[: max_bytes - raw]
                    raw += len(chunk)
                    with contextlib.suppress(_OutputCap):
                        decoder.feed(chunk)
                    resp.close()
                    return BodyRead(decoder.partial(), raw, truncated=True)
                raw += len(chunk)
                resp.close()
                raise BodyTooLarge(f"body exceeds {max_bytes} bytes", raw, decoder.partial())
            raw += len(chunk)
            decoder.feed(chunk)
        return BodyRead(decoder.finish(), raw)
    except _OutputCap:
        resp.close()
        if truncate:
            return BodyRead(decoder.partial(), raw, truncated=True)
        raise BodyTooLarge(
            f"decompressed body exceeds {max_decompressed_bytes} bytes", raw, decoder.partial()
        ) from None
    except zlib.error as exc:
        resp.close()
        raise BodyDecodeError(
            f"corrupt {resp.headers.get('Content-Encoding')} content-encoding: {exc}", raw
        ) from exc


# --------------------------------------------------------------------------- helpers


def host_key(url: str) -> str:
    """The host partition key (lower-cased host[:port], default port dropped) of a URL; the raw
    authority for URLs the normalizer rejects, so that a bad URL still gets a queue."""
    try:
        return url_authority(url)
    except InvalidURL:
        return urlsplit(url).netloc.rsplit("@", 1)[-1].lower()


def parse_retry_after(
    value: str | None,
    *,
    date: str | None = None,
    cap: float = MAX_RETRY_AFTER_S,
    now: datetime | None = None,
) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date), within [0, cap].

    An HTTP-date is measured against the response's own ``Date`` header when there is one, so a
    skewed local clock does not matter; without it, against ``now``, the cycle's time, because
    the planner keeps the host away for these seconds from the cycle's ``now``. Only a caller
    outside a cycle (no ``now``) gets the real clock, for a real-time politeness wait.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    seconds: float | None
    try:
        seconds = float(text)
    except ValueError:
        seconds = None
    if seconds is None or seconds != seconds:  # NaN
        when = _http_date(text)
        if when is None:
            return None
        ref = _http_date(date) if date else None
        if ref is None:
            ref = now or datetime.now(UTC)
        seconds = (when - ref).total_seconds()
    return min(max(seconds, 0.0), float(cap))


#: A Last-Modified this close to the response's Date is taken for "generated now", which says
#: nothing about when the content changed.
MIN_CONTENT_AGE_S = 2.0


def content_age_days(
    last_modified: str | None, date: str | None, *, now: datetime | None = None
) -> float | None:
    """How long before the response its content last changed, by the server's own word.

    Measured against the response's ``Date`` (the server's clock on both sides, so a skewed local
    clock or a fetch late in the cycle does not matter); without one, against ``now``, the
    cycle's time: the age feeds rate estimates, a decision, so never the wall clock. None when
    Last-Modified is missing or unparsable, when there is neither a Date nor a ``now``, when
    Last-Modified lies in the future, and when it is within :data:`MIN_CONTENT_AGE_S` of the
    reference: dynamic pages stamp every response "now". Whether a host's Last-Modified deserves
    belief is judged elsewhere, from its track record.
    """
    modified = _http_date(last_modified)
    if modified is None:
        return None
    ref = (_http_date(date) if date else None) or now
    if ref is None:
        return None
    seconds = (ref - modified).total_seconds()
    if not seconds >= MIN_CONTENT_AGE_S:
        return None
    return seconds / 86_400.0


@functools.lru_cache(maxsize=4096)
def _http_date(text: str | None) -> datetime | None:
    """An HTTP date, or None. Cached: a host stamps the same Date on every answer of a second
    and the same Last-Modified on a page until it changes, and parsing was a tenth of the CPU
    of a 304."""
    if not text:
        return None
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when


# The attempt a page fetch is making, set by _fetch_one in its own task, so the connector can
# stamp the moment the request leaves. An aiohttp TraceConfig did this before, but a trace makes
# aiohttp build and await a signal for every stage of every request (a tenth of the client's
# CPU per request on a fast host), where only this one moment is needed.
_ATTEMPT: contextvars.ContextVar[_Attempt | None] = contextvars.ContextVar(
    "freshness_fetch_attempt", default=None
)


class _StampingConnector(GuardedConnector):
    """The guarded connector that notes when a page request gets its connection: after DNS,
    connect and the allow-list, right before the request line goes out on it."""

    async def connect(self, req: Any, traces: Any, timeout: Any) -> Any:
        conn = await super().connect(req, traces, timeout)
        attempt = _ATTEMPT.get()
        if attempt is not None:
            attempt.sent_at = time.monotonic()
            attempt.host.mark_sent(attempt)
        return conn


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
    connector = _StampingConnector(
        allow=nets,
        resolver=resolver,
        limit=settings.global_concurrency,
        limit_per_host=0,
        ttl_dns_cache=300,
    )
    return aiohttp.ClientSession(
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
    )


def _describe(exc: BaseException, settings: FetchSettings) -> str:
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return f"connect timeout after {settings.connect_timeout:g}s"
    if isinstance(exc, aiohttp.SocketTimeoutError):
        return f"read timeout after {settings.read_timeout:g}s"
    if isinstance(exc, asyncio.TimeoutError):
        return f"total timeout after {settings.total_timeout:g}s"
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return f"DNS lookup failed: {exc.os_error}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"connect failed: {exc.os_error}"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "server disconnected"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --------------------------------------------------------------------------- per-host queue


class _HostRun:
    """One host's queue: its own workers, throttle and stop flag, so hosts never wait on each
    other (a host waiting out its gap or back-off holds no global slot)."""

    def __init__(
        self,
        key: str,
        indices: list[int],
        requests: Sequence[FetchRequest],
        results: list[FetchResult | None],
        ctx: _CycleCtx,
    ) -> None:
        self.key = key
        self.queue = deque(indices)
        self.requests = requests
        self.results = results
        self.ctx = ctx
        # One host, one gap: the strictest crawl-delay among its requests wins, and so do the
        # longest learned gap and the smallest learned concurrency.
        mine = [requests[i] for i in indices]
        self.crawl_delay = max((r.crawl_delay or 0.0 for r in mine), default=0.0)
        limit = ctx.settings.host_concurrency
        learned = [r.concurrency for r in mine if r.concurrency is not None]
        self.concurrency = 1 if self.crawl_delay > 0 else max(1, min([limit, *learned]))
        self.throttle = ctx.throttles.for_host(key, floor=self.crawl_delay)
        self.throttle.learn_gap(max((r.min_gap_s or 0.0 for r in mine), default=0.0))
        self.last_start: float | None = LEDGER.last_start(key)
        self.last_sent: float | None = None
        self.lock = asyncio.Lock()
        self.stop_outcome: Outcome | None = None
        self.stop_reason: str | None = None
        self.stop_retry_after: float | None = None

    def mark_started(self, at: float) -> None:
        # The gap counts from when the request really left (after DNS and connect), which is
        # what the server sees; otherwise a slow first connect would shorten the next gap.
        if self.last_start is None or at > self.last_start:
            self.last_start = at
        LEDGER.note_start(self.key, at)

    def mark_sent(self, attempt: _Attempt) -> None:
        """The request is on the wire: note the gap since the previous one left, which is what
        a server that throttles bursts judges us by."""
        assert attempt.sent_at is not None
        if self.last_sent is not None:
            attempt.gap_s = attempt.sent_at - self.last_sent
        self.last_sent = attempt.sent_at
        self.mark_started(attempt.sent_at)

    async def run(self) -> None:
        workers = min(self.concurrency, len(self.queue))
        await asyncio.gather(*(self._worker(slot) for slot in range(workers)))

    def _skip(
        self, i: int, outcome: Outcome, reason: str, retry_after: float | None = None
    ) -> None:
        req = self.requests[i]
        self.results[i] = FetchResult(
            url=req.url,
            host=self.key,
            http_status=None,
            outcome=outcome,
            retry_after_s=retry_after,
            error=reason,
            sent=False,
            conditional=False,
        )

    def _stopped(self, i: int) -> bool:
        if self.stop_outcome is None:
            return False
        assert self.stop_reason is not None
        self._skip(i, self.stop_outcome, self.stop_reason, self.stop_retry_after)
        return True

    async def _wait_turn(self, i: int) -> bool:
        """Wait until the host's gap allows request ``i``; False when it was deferred instead.

        The gap is re-read after every sleep: a response that arrives meanwhile may have raised
        it (a failure) or opened the breaker, and that must hold for requests already waiting.
        """
        ctx, throttle = self.ctx, self.throttle
        while True:
            if self._stopped(i):
                return False
            now = time.monotonic()
            if not throttle.allows(now):
                # A flaky host's short cool-down (or a probe in flight) is waited for when it
                # ends within the window; a down host's breaker defers the rest at once.
                reopens = throttle.reopens_at()
                limit = ctx.pause_deadline if ctx.deadline is None else ctx.deadline
                soon = throttle.probing or throttle.retries_soon()
                if soon and reopens is not None and reopens < limit:
                    await asyncio.sleep(max(reopens - now, _PROBE_POLL_S))
                    continue
                self._skip(i, "deferred", throttle.breaker_reason())
                return False
            earliest = self._earliest(now)
            if ctx.deadline is not None and earliest >= ctx.deadline:
                self._skip(i, "deferred", TIME_LIMIT_REASON)
                return False
            if earliest <= now:
                return True
            await asyncio.sleep(earliest - now)

    def _earliest(self, now: float) -> float:
        throttle = self.throttle
        gap = throttle.delay
        if gap > 0 and self.last_start is not None:
            slack = _GAP_SLACK_S if throttle.floor > 0 else 0.0
            return max(now, self.last_start + gap + slack)
        return now

    def _still_clear(self, now: float) -> bool:
        return (
            self.stop_outcome is None and self.throttle.allows(now) and self._earliest(now) <= now
        )

    async def _worker(self, slot: int) -> None:
        ctx = self.ctx
        # a throttling answer lowers the host's concurrency for the rest of the cycle: the
        # workers above it finish their request in flight and stop taking new ones
        while self.queue and slot < self.concurrency:
            i = self.queue.popleft()
            if self._stopped(i):
                continue
            async with self.lock:
                while True:
                    if not await self._wait_turn(i):
                        break
                    await ctx.slots.acquire()
                    now = time.monotonic()
                    if ctx.deadline is not None and now >= ctx.deadline:
                        ctx.slots.release()
                        self._skip(i, "deferred", TIME_LIMIT_REASON)
                        break
                    # Waiting for a global slot may have taken a while: a response that came
                    # in meanwhile can have raised the gap, opened the breaker or stopped the
                    # host. Then give the slot back and wait (or defer) again.
                    if self._still_clear(now):
                        break
                    ctx.slots.release()
                if self.results[i] is not None:
                    continue  # deferred
                attempt = _Attempt(self)
                self.throttle.started(attempt.started_at)
                self.mark_started(attempt.started_at)
            try:
                result = await _fetch_one(ctx, attempt, self.requests[i])
            finally:
                ctx.slots.release()
            self.results[i] = result
            self._learn(result, attempt)

    def _learn(self, result: FetchResult, attempt: _Attempt) -> None:
        if result.outcome == "blocked":
            self.stop_outcome = "blocked"
            self.stop_reason = result.error or "blocked by the network allow-list"
            return
        if attempt.signal is not None:
            self.throttle.observe(
                attempt.signal,
                now=time.monotonic(),
                latency_s=attempt.latency_s,
                detail=result.error or f"HTTP {result.http_status}",
                retry_after_s=result.retry_after_s,
                gap_s=attempt.gap_s,
            )
        if result.http_status in _THROTTLE_STATUSES:
            self.concurrency = 1
            pause = result.retry_after_s
            if pause is not None and self.stop_outcome is None:
                if time.monotonic() + pause <= self.ctx.pause_deadline:
                    # The pause fits the cycle: the throttle's gap already holds the host
                    # until it ends (a Retry-After raises the gap to it); then carry on.
                    self.throttle.n_pauses += 1
                    return
                # The server asked for longer than the cycle has: the rest waits for a later
                # cycle, whatever the breaker says, and carries the server's Retry-After for
                # the planner.
                self.stop_outcome = "deferred"
                self.stop_reason = f"host throttled (HTTP {result.http_status})"
                self.stop_retry_after = pause


class _Attempt:
    """One request on the wire: its host, when it left, and what it taught the throttle."""

    __slots__ = ("gap_s", "host", "latency_s", "sent_at", "signal", "started_at")

    def __init__(self, host: _HostRun) -> None:
        self.host = host
        self.started_at = time.monotonic()
        self.sent_at: float | None = None
        self.gap_s: float | None = None  # since the host's previous request left
        self.latency_s: float | None = None
        self.signal: Signal | None = None

    def since_sent(self) -> float:
        return time.monotonic() - (self.sent_at if self.sent_at is not None else self.started_at)


@dataclass
class _CycleCtx:
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


async def _fetch_one(ctx: _CycleCtx, attempt: _Attempt, req: FetchRequest) -> FetchResult:
    settings = ctx.settings
    headers: dict[str, str] = {}
    validator: str | None = None
    if req.etag:
        headers["If-None-Match"] = req.etag
        validator = "etag"
    elif req.last_modified:
        headers["If-Modified-Since"] = req.last_modified
        validator = "last_modified"
    result = FetchResult(
        url=req.url,
        host=attempt.host.key,
        http_status=None,
        outcome="error",
        conditional=bool(headers),
        validator=validator,
    )
    t0 = time.perf_counter()
    token = _ATTEMPT.set(attempt)
    try:
        async with ctx.session.get(req.url, headers=headers, allow_redirects=False) as resp:
            # Latency as AutoThrottle measures it: request out to response headers in.
            attempt.latency_s = attempt.since_sent()
            # The crawl-delay also counts from the answer: the server saw the request before
            # this moment, so its own processing time can never shorten the gap it sees.
            attempt.host.mark_started(time.monotonic())
            attempt.signal = classify_status(resp.status)
            await _classify(ctx, req, resp, result)
    except (asyncio.CancelledError, ArchiveWriteError):
        raise  # a full disk fails the cycle: its tables stay as they were
    except BodyTooLarge as exc:
        # The page is hostile or huge, not the server sick: its latency still counts as served.
        result.outcome, result.error, result.bytes = "error", str(exc), exc.raw_bytes
    except BodyDecodeError as exc:
        result.outcome, result.error, result.bytes = "error", str(exc), exc.raw_bytes
    except Exception as exc:  # one page's failure must never sink the cycle
        blocked = find_blocked_error(exc)
        if blocked is not None:
            result.outcome, result.sent = "blocked", False
            result.error = f"blocked: {blocked}"
            attempt.signal = None
        elif isinstance(exc, aiohttp.InvalidURL | ValueError) and result.http_status is None:
            result.outcome, result.sent = "error", False
            result.error = f"invalid URL: {exc}"
            attempt.signal = None
        else:
            # Transport errors and timeouts, also mid-body: the host is failing or too slow,
            # and the time it took counts as its latency.
            result.outcome = "error"
            result.error = _describe(exc, settings)
            attempt.signal = "failure"
            attempt.latency_s = attempt.since_sent()
    finally:
        _ATTEMPT.reset(token)
    result.duration_ms = (time.perf_counter() - t0) * 1000.0
    if not result.sent:
        result.conditional, result.validator = False, None
    return result


async def _classify(
    ctx: _CycleCtx, req: FetchRequest, resp: aiohttp.ClientResponse, result: FetchResult
) -> None:
    settings = ctx.settings
    status = resp.status
    result.http_status = status
    result.etag = resp.headers.get("ETag")
    result.last_modified = resp.headers.get("Last-Modified")
    result.content_type = resp.headers.get("Content-Type")

    if status == 304:
        result.outcome = "not_modified"
        result.etag = result.etag or req.etag
        result.last_modified = result.last_modified or req.last_modified
        result.fingerprint = req.prev_fingerprint
        _archive(ctx, req, resp, result, b"")
        return

    if 200 <= status < 300:
        try:
            read = await read_limited(
                resp,
                max_bytes=settings.max_body_bytes,
                max_decompressed_bytes=settings.max_decompressed_bytes,
            )
        except BodyTooLarge as exc:
            result.outcome, result.error, result.bytes = "error", str(exc), exc.raw_bytes
            _archive(ctx, req, resp, result, exc.partial, truncated=True)
            return
        except BodyDecodeError as exc:
            result.outcome, result.error, result.bytes = "error", str(exc), exc.raw_bytes
            _archive(ctx, req, resp, result, b"", truncated=True)
            return
        result.bytes = read.raw_bytes
        result.content_age_days = content_age_days(
            result.last_modified, resp.headers.get("Date"), now=settings.cycle_now
        )
        archived = req.archived
        if (
            req.prev_fingerprint is not None
            and archived is not None
            and archived.payload_digest is not None
            and payload_digest(read.body) == archived.payload_digest
        ):
            # The very bytes archived last time: the same content, nothing to extract.
            result.fingerprint, result.outcome = req.prev_fingerprint, "unchanged"
            _archive(ctx, req, resp, result, read.body)
            return
        try:
            record = await _fingerprint(ctx, req, read.body, result.content_type)
        except Exception as exc:
            result.outcome = "error"
            result.error = f"fingerprint failed: {type(exc).__name__}: {exc}"
            _archive(ctx, req, resp, result, read.body)
            return
        result.fingerprint = record.fingerprint
        if req.prev_fingerprint is None:
            result.outcome = "new"
        elif record.fingerprint == req.prev_fingerprint:
            result.outcome = "unchanged"
        else:
            result.outcome = "changed"
        if result.outcome != "unchanged" and record.fields is not None:
            result.title, result.text = record.title, record.text
            result.fields = json.dumps(record.fields, ensure_ascii=False, sort_keys=True)
        _archive(ctx, req, resp, result, read.body)
        return

    # Anything else: read a small body of known length so the connection can be reused;
    # anything bigger or open-ended is dropped with the connection.
    length = resp.content_length
    drained_body, complete = b"", length == 0
    if length is not None and length <= _ERROR_BODY_DRAIN:
        with contextlib.suppress(Exception):
            drained = await read_limited(
                resp,
                max_bytes=_ERROR_BODY_DRAIN,
                max_decompressed_bytes=_ERROR_BODY_DRAIN,
                truncate=True,
            )
            result.bytes = drained.raw_bytes
            drained_body, complete = drained.body, not drained.truncated
    _archive(ctx, req, resp, result, drained_body, truncated=not complete)

    if status in _REDIRECT_STATUSES:
        loc = resp.headers.get("Location")
        if not loc:
            result.outcome, result.error = "error", f"HTTP {status} without Location"
            return
        target = urljoin(req.url, loc.strip())
        try:
            check_url_scheme(target)
        except ValueError as exc:
            result.outcome, result.error = "error", f"redirect refused: {exc}"
            result.location = target
            return
        result.outcome, result.location = "redirect", target
        return
    if status in _GONE_STATUSES:
        result.outcome = "gone"
        return
    result.outcome = "error"
    reason = f" {resp.reason}" if resp.reason else ""
    result.error = f"HTTP {status}{reason}"
    if status in _THROTTLE_STATUSES:
        result.retry_after_s = parse_retry_after(
            resp.headers.get("Retry-After"),
            date=resp.headers.get("Date"),
            cap=settings.max_retry_after_s,
            now=settings.cycle_now,
        )


async def _fingerprint(
    ctx: _CycleCtx, req: FetchRequest, body: bytes, content_type: str | None
) -> ContentRecord:
    injected, default = ctx.fingerprint, ctx.default_fp

    def compute() -> ContentRecord:
        if injected is not None:
            return ContentRecord(injected(body, content_type))
        assert default is not None
        return default(body, content_type, req)

    if len(body) > _THREAD_FINGERPRINT_BYTES:
        # Parsing megabytes of HTML would stall every other host's I/O on the event loop.
        return await asyncio.to_thread(compute)
    return compute()


def _default_fingerprinter() -> Callable[[bytes, str | None, FetchRequest], ContentRecord]:
    def fp(body: bytes, content_type: str | None, req: FetchRequest) -> ContentRecord:
        return class_record(req, body, content_type, previous=req.prev_fingerprint)

    return fp


def _archive(
    ctx: _CycleCtx,
    req: FetchRequest,
    resp: aiohttp.ClientResponse,
    result: FetchResult,
    body: bytes,
    *,
    truncated: bool = False,
) -> None:
    """Write the exchange to the cycle's archive (when there is one) and note where: a 304 or
    a body the archive already holds becomes a revisit record referring to the original."""
    try:
        record = archive_answer(
            ctx.archive,
            req.url,
            resp,
            body,
            fetched_at=ctx.settings.cycle_now,
            truncated=truncated,
            previous=req.archived,
        )
    except ValueError as exc:  # an exchange the archive cannot store as given: say so, go on
        result.error = result.error or f"not archived: {exc}"
        return
    if record is None:
        return
    result.warc_filename = record.warc_filename
    result.warc_offset = record.warc_offset
    result.warc_length = record.warc_length
    result.payload_digest = record.payload_digest
    original = record.original or req.archived
    result.archived = original.to_json() if original is not None else None


# --------------------------------------------------------------------------- entry points


async def fetch_all(
    requests: Sequence[FetchRequest],
    settings: FetchSettings,
    *,
    allow: Iterable[IPNetwork] | None = None,
    fingerprint: Fingerprinter | None = None,
    resolver: AbstractResolver | None = None,
    throttles: Throttles | None = None,
    archive: ArchiveWriter | None = None,
) -> list[FetchResult]:
    """Fetch a cycle's planned pages politely; one result per request, in request order.

    ``allow`` defaults to ``FRESHNESS_ALLOW_NETWORKS``; ``fingerprint(body, content_type)``
    defaults to the science module's extractor with each request's selectors; ``resolver``
    replaces DNS (tests). Robots rules are the caller's job: only planned URLs arrive here.
    ``throttles`` (default: fresh, built from ``settings``) holds what the per-host throttles
    learn; pass one to read host health afterwards or to carry it across calls. ``archive``:
    where every answer is recorded (the fetch stage's writer for the cycle); the results say
    where. A write the disk refuses (ArchiveWriteError) fails the call.
    """
    started = time.monotonic()
    policy = settings.throttle_policy()
    results: list[FetchResult | None] = [None] * len(requests)
    groups: dict[str, list[int]] = {}
    for i, req in enumerate(requests):
        key = req.host or host_key(req.url)
        try:
            check_url_scheme(req.url)
        except ValueError as exc:
            results[i] = FetchResult(
                url=req.url,
                host=key,
                http_status=None,
                outcome="error",
                error=str(exc),
                sent=False,
            )
            continue
        groups.setdefault(key, []).append(i)

    if groups:
        nets = allowed_networks() if allow is None else tuple(allow)
        limit = settings.cycle_time_limit_s
        async with open_session(settings, allow=nets, resolver=resolver) as session:
            ctx = _CycleCtx(
                session=session,
                settings=settings,
                slots=asyncio.Semaphore(settings.global_concurrency),
                deadline=None if limit is None else started + limit,
                pause_deadline=started + (settings.fetch_window_s if limit is None else limit),
                fingerprint=fingerprint,
                throttles=throttles if throttles is not None else Throttles(policy),
                default_fp=None if fingerprint is not None else _default_fingerprinter(),
                archive=archive,
            )
            runs = [_HostRun(key, idx, requests, results, ctx) for key, idx in groups.items()]
            await asyncio.gather(*(run.run() for run in runs))

    missing = [i for i, r in enumerate(results) if r is None]
    if missing:  # pragma: no cover - every path above fills its slot
        raise RuntimeError(f"fetch_all lost results for requests {missing[:5]}")
    return [r for r in results if r is not None]


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code (Dagster assets, the CLI).

    Inside an already running loop (a notebook, an async test) ``asyncio.run`` would refuse, so
    the coroutine then runs on a helper thread with its own loop.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def fetch_all_sync(
    requests: Sequence[FetchRequest],
    settings: FetchSettings,
    *,
    allow: Iterable[IPNetwork] | None = None,
    fingerprint: Fingerprinter | None = None,
    resolver: AbstractResolver | None = None,
    throttles: Throttles | None = None,
    archive: ArchiveWriter | None = None,
) -> list[FetchResult]:
    """:func:`fetch_all` for synchronous callers; see :func:`run_sync`."""
    return run_sync(
        fetch_all(
            requests,
            settings,
            allow=allow,
            fingerprint=fingerprint,
            resolver=resolver,
            throttles=throttles,
            archive=archive,
        )
    )
