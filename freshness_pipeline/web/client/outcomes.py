"""One page request made and its answer turned into a :class:`FetchResult`: the conditional
header sent, the status classified (304; 2xx, read within its caps and fingerprinted; redirect;
gone; throttled, with its Retry-After; error), the exchange archived, and a failure put in
words. When a request may go out is not decided here but by the per-host scheduler."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import replace
from urllib.parse import parse_qsl, urldefrag, urljoin, urlsplit

import aiohttp
from aiohttp.http_exceptions import HttpProcessingError

from freshness_pipeline.science.fingerprint import ContentRecord, class_record
from freshness_pipeline.science.fingerprint.error_pages import ErrorPageKind, error_page_kind
from freshness_pipeline.science.normalize import InvalidURL
from freshness_pipeline.warehouse.archive import (
    ArchiveClosedError,
    ArchiveWriteError,
    TruncatedReason,
    payload_digest,
)
from freshness_pipeline.web.archiving import archive_answer
from freshness_pipeline.web.client.body import (
    BodyDecodeError,
    BodyInterrupted,
    BodyTooLarge,
    read_limited,
)
from freshness_pipeline.web.client.context import CURRENT_ATTEMPT, Attempt, CycleContext
from freshness_pipeline.web.client.fetches import (
    TIME_LIMIT_REASON,
    FetchRequest,
    FetchResult,
    host_key,
)
from freshness_pipeline.web.client.headers import (
    content_age_days,
    header_text,
    header_url,
    parse_retry_after,
    usable_last_modified,
)
from freshness_pipeline.web.client.settings import FetchSettings
from freshness_pipeline.web.netguard import (
    BLOCKED_PREFIX,
    check_url_scheme,
    find_blocked_error,
    literal_refusal,
)
from freshness_pipeline.web.sitemaps.read import is_listing
from freshness_pipeline.web.throttle import Signal, classify_status

__all__ = ["THROTTLE_STATUSES", "default_fingerprinter", "fetch_one"]

_ERROR_BODY_DRAIN = 64 * 1024  # read small error bodies so the connection can be reused
_THREAD_FINGERPRINT_BYTES = 512 * 1024  # bigger bodies are fingerprinted off the event loop
THROTTLE_STATUSES = frozenset({429, 503})
_GONE_STATUSES = frozenset({404, 410})
_REDIRECT_STATUSES = frozenset({300, 301, 302, 303, 307, 308})
#: redirects to another spelling of the page a fetch follows before it calls them a loop
_SAME_PAGE_HOPS = 4
#: outcomes of a 2xx whose body is the page's copy (a 304's revisit names that copy)
_COPY_OUTCOMES = frozenset({"new", "changed", "unchanged"})
#: what an error page served with 200 tells the host's pacing: a failing server backs off like
#: a 5xx, a rate limit or bot challenge like a 429, a missing or refused page says nothing of
#: the host
_ERROR_PAGE_SIGNALS: dict[ErrorPageKind, Signal] = {
    "unavailable": "failure",
    "throttled": "throttled",
    "not_found": "other",
    "denied": "other",
}


async def fetch_one(ctx: CycleContext, attempt: Attempt, req: FetchRequest) -> FetchResult:
    settings = ctx.settings
    headers: dict[str, str] = {}
    validator: str | None = None
    if req.etag:
        headers["If-None-Match"] = req.etag
        validator = "etag"
    elif req.last_modified:
        headers["If-Modified-Since"] = req.last_modified
        validator = "last_modified"

    def fresh_result() -> FetchResult:
        return FetchResult(
            url=req.url,
            host=attempt.host.key,
            http_status=None,
            outcome="error",
            conditional=bool(headers),
            validator=validator,
        )

    result = fresh_result()
    t0 = time.perf_counter()
    followed: list[FetchResult] = []
    token = CURRENT_ATTEMPT.set(attempt)
    sent_as = replace(req, url=req.request_url) if req.request_url else req
    asked_again = False
    try:
        for hop in range(_SAME_PAGE_HOPS + 1):
            if hop:
                # each request its own row and duration (the gap between them is no one's)
                result.duration_ms = (time.perf_counter() - t0) * 1000.0
                followed.append(result)
                await attempt.host.wait_for_gap()
                t0 = time.perf_counter()
                result = fresh_result()
            attempt.request, attempt.reused = None, False
            try:
                async with ctx.session.get(
                    sent_as.url, headers=headers, allow_redirects=False, timeout=_timeouts(ctx)
                ) as resp:
                    # Latency as AutoThrottle measures it, request out to response headers in;
                    # a body read extends it (_classify).
                    attempt.latency_s = attempt.since_sent()
                    # The crawl-delay also counts from the answer: the server saw the request
                    # before this moment, so its own processing time can never shorten the gap.
                    attempt.host.mark_started(time.monotonic())
                    attempt.signal = classify_status(resp.status)
                    moved_to = await _classify(ctx, attempt, sent_as, resp, result)
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                if asked_again or hop == _SAME_PAGE_HOPS or not _closed_under(attempt, result, exc):
                    raise
                # A server closes an idle kept-alive connection on its own clock (many after
                # 5 s), and a request that arrives as it does is lost unread: asked again on a
                # new connection, once, after the host's gap, each request with its own row.
                asked_again = True
                attempt.host.mark_started(time.monotonic())
                result.error = f"{_describe(exc, settings)} on a kept-alive connection: sent again"
                _archive_unanswered(ctx, attempt, sent_as.url, result)
                continue
            spelling = result.location
            if (
                not _the_page_itself(req.url, moved_to)
                or spelling is None
                or ctx.robots_allow is None
            ):
                break
            if not ctx.robots_allow(spelling):
                result.outcome = "error"
                result.error = f"redirect to {spelling}, which robots.txt disallows"
                break
            # The server's own spelling of the page the key names (another parameter order,
            # a session or tracking parameter, another case, a parameter added): the page is
            # there, asked for as the server writes it. Left a redirect, its target normalizes
            # back to the key and the page is never fetched, or one more URL of the same page
            # enters the crawl on every answer (a session id minted per request).
            sent_as = replace(req, url=spelling)
        else:
            result.outcome = "error"
            result.error = f"redirected {_SAME_PAGE_HOPS + 1} times between spellings of the page"
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
            result.error = f"{BLOCKED_PREFIX}{blocked}"
            attempt.signal = None
        elif isinstance(exc, aiohttp.InvalidURL | ValueError) and result.http_status is None:
            result.outcome, result.sent = "error", False
            result.error = f"invalid URL: {exc}"
            attempt.signal = None
        elif _unreadable_head(exc):
            # The host answered at once, with a head this client cannot read (not HTTP, a line
            # or more header lines than it takes): one page's problem, not a failing host, so
            # it must not open the host's breaker and defer the pages that answer well.
            result.outcome = "error"
            result.error = f"unreadable response: {_head_problem(exc)}"
            attempt.signal = "other"
            attempt.latency_s = attempt.since_sent()
        elif isinstance(exc, asyncio.TimeoutError) and _past_deadline(ctx):
            # The cycle's time limit ran out under the request: the host is none the worse.
            result.outcome = "error"
            result.error = f"{TIME_LIMIT_REASON} during the request"
            attempt.signal = None
        else:
            # Transport errors and timeouts, also mid-body: the host is failing or too slow,
            # and the time it took counts as its latency.
            result.outcome = "error"
            result.error = _describe(exc, settings)
            attempt.signal = "failure"
            attempt.latency_s = attempt.since_sent()
    finally:
        CURRENT_ATTEMPT.reset(token)
    if result.sent:
        _archive_unanswered(ctx, attempt, sent_as.url, result)
    result.duration_ms = (time.perf_counter() - t0) * 1000.0
    if not result.sent:
        result.conditional, result.validator = False, None
    if followed:
        result.hops = followed
    return result


def _timeouts(ctx: CycleContext) -> aiohttp.ClientTimeout:
    """The session's timeouts, cut to what is left of the cycle's time limit when that is
    shorter: a request in flight at the limit ran on to its own timeout (a minute), and a
    cycle given ten seconds took seventy (found by an outside audit)."""
    timeouts = ctx.session.timeout
    if ctx.deadline is None:
        return timeouts
    settings = ctx.settings
    left = max(ctx.deadline - time.monotonic(), 0.001)
    if left >= settings.total_timeout:
        return timeouts
    return aiohttp.ClientTimeout(
        total=left,
        sock_connect=min(settings.connect_timeout, left),
        sock_read=min(settings.read_timeout, left),
    )


def _past_deadline(ctx: CycleContext) -> bool:
    return ctx.deadline is not None and time.monotonic() >= ctx.deadline - 0.01


def _the_page_itself(key: str, moved_to: str | None) -> bool:
    """Whether a redirect from the page ``key`` to ``moved_to`` (keyed) is the page itself:
    the same key, or the same path with query parameters added to the page's own (``/a`` to
    ``/a?sid=9d6e``, ``/a?id=1`` to ``/a?id=1&lang=en``). What a reader of ``key`` sees is
    what is there; a minted session parameter taken for a move added a URL a cycle, each
    fetched again every cycle after (found by an exploratory run)."""
    if moved_to is None:
        return False
    if moved_to == key:
        return True
    page, there = urlsplit(key), urlsplit(moved_to)
    if (page.scheme, page.netloc, page.path) != (there.scheme, there.netloc, there.path):
        return False
    own = parse_qsl(page.query, keep_blank_values=True)
    added = parse_qsl(there.query, keep_blank_values=True)
    if len(added) <= len(own):
        return False
    left = list(added)
    for pair in own:
        if pair not in left:
            return False
        left.remove(pair)
    return True


async def _classify(
    ctx: CycleContext,
    attempt: Attempt,
    req: FetchRequest,
    resp: aiohttp.ClientResponse,
    result: FetchResult,
) -> str | None:
    """Fill ``result`` from the answer; for a redirect (HTTP or a meta refresh), return where
    it sends the reader, normalized as a key (None otherwise, or when that does not
    normalize), so that a redirect to another spelling of the page is known without
    normalizing its target twice."""
    settings = ctx.settings
    status = resp.status
    result.http_status = status
    result.etag = header_text(resp.headers.get("ETag"))
    said_last_modified = header_text(resp.headers.get("Last-Modified"))
    result.last_modified = usable_last_modified(said_last_modified, resp.headers.get("Date"))
    result.content_type = header_text(resp.headers.get("Content-Type"))

    refused = _not_a_revalidation(result, req) if status == 304 else None
    if refused is not None:
        # Taken at its word such a 304 hid a page's every change (found by an exploratory
        # run); the next fetch of a page whose last answer was this goes without validators.
        result.outcome, result.error = "error", refused
        _archive(ctx, req, resp, result, b"")
        return None
    if status == 304:
        result.outcome = "not_modified"
        result.etag = result.etag or req.etag
        if said_last_modified is None:  # a 304 need not repeat it; one it refused is gone
            result.last_modified = req.last_modified
        result.fingerprint = req.prev_fingerprint
        _archive(ctx, req, resp, result, b"")
        return None

    if 200 <= status < 300 and (status != 206 or _whole_range(resp.headers.get("Content-Range"))):
        try:
            read = await read_limited(
                resp,
                max_bytes=settings.max_body_bytes,
                max_decompressed_bytes=settings.max_decompressed_bytes,
                keep_prefix=True,
            )
        except BodyTooLarge as exc:
            result.outcome, result.error, result.bytes = "error", str(exc), exc.raw_bytes
            _archive(ctx, req, resp, result, exc.partial, truncated="length")
            return None
        except BodyDecodeError as exc:
            result.outcome, result.error, result.bytes = "error", str(exc), exc.raw_bytes
            _archive(ctx, req, resp, result, b"", truncated="length")
            return None
        except BodyInterrupted as exc:
            # What arrived is kept, marked as cut (as Heritrix does), so that every request
            # sent has its records; the fetch then fails as the transport did.
            result.bytes = exc.raw_bytes
            _archive(ctx, req, resp, result, exc.partial, truncated=exc.reason)
            raise exc.transport_error from exc
        # The host's time runs until its body is in: a request holds its slot that long, and
        # a host that trickles its bodies (6 s a page) but sends headers at once was paced and
        # planned as a fast one (found by an exploratory run). Taken before the extraction,
        # which is this process's time, not the host's.
        attempt.latency_s = attempt.since_sent()
        result.bytes = read.raw_bytes
        if read.truncated:
            # A page over the cap is its first part (archived as cut): as an error, it kept
            # the copy it had before it grew for good, and one too big from the start never
            # had one. A change past the cap goes unseen.
            result.error = f"body over {settings.max_body_bytes} bytes: read to there"
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
            _archive(ctx, req, resp, result, read.body, truncated=read.cut_by)
            return None
        try:
            record = await _fingerprint(ctx, req, read.body, result.content_type)
        except Exception as exc:
            result.outcome = "error"
            result.error = f"fingerprint failed: {type(exc).__name__}: {exc}"
            _archive(ctx, req, resp, result, read.body, truncated=read.cut_by)
            return None
        if (
            not read.body.strip()
            and req.prev_fingerprint is not None
            and record.fingerprint != req.prev_fingerprint
        ):
            # A page that had content answering 200 with nothing is a broken deploy or a
            # cache glitch far more often than a page emptied on purpose: keep the last
            # version (no change, no new version, validators untouched) and look again.
            result.outcome, result.error = "error", "empty body where the page had content"
            _archive(ctx, req, resp, result, read.body, truncated=read.cut_by)
            return None
        links = record.links
        moved_to = _page_link(req.url, links.refresh_to, links.base)
        if moved_to is not None:
            # A page that sends its reader on at once (a meta refresh) has moved: taken as a
            # page it was a version with no text, and where it went was never found.
            result.outcome, result.location = "redirect", moved_to
            _archive(ctx, req, resp, result, read.body, truncated=read.cut_by)
            try:
                return ctx.url_key(moved_to)
            except InvalidURL:
                return None
        result.canonical = _page_link(req.url, links.canonical, links.base) or (
            _link_header_canonical(req.url, resp)
        )
        result.feeds = _announced_feeds(req.url, links.feeds, links.base, attempt.host.key) or (
            [req.url] if is_listing(result.content_type, read.body) else None
        )
        error_page = (
            error_page_kind(record.title, record.text)
            if record.fingerprint != req.prev_fingerprint
            else None
        )
        if error_page is not None:
            # A maintenance notice, a bot challenge or a "not found" served with 200 is not a
            # version of the page: taken as one it is a false change now and another when the
            # page is back. Keep the last version and look again, paced as the kind says; a
            # "soft 404" is the page gone, as a 404 would have said.
            result.outcome = "gone" if error_page == "not_found" else "error"
            result.error = f"error page ({error_page}) with HTTP {status}: {record.title!r}"
            attempt.signal = _ERROR_PAGE_SIGNALS[error_page]
            _archive(ctx, req, resp, result, read.body, truncated=read.cut_by)
            return None
        result.fingerprint = record.fingerprint
        if req.prev_fingerprint is None:
            result.outcome = "new"
        elif record.fingerprint == req.prev_fingerprint:
            result.outcome = "unchanged"
        else:
            result.outcome = "changed"
        if result.outcome != "unchanged":
            result.keep_version(record)
        _archive(ctx, req, resp, result, read.body, truncated=read.cut_by)
        return None

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
    _archive(ctx, req, resp, result, drained_body, truncated=None if complete else "length")

    if status in _REDIRECT_STATUSES:
        loc = header_url(resp.headers.get("Location"))
        if not loc:
            result.outcome, result.error = "error", f"HTTP {status} without Location"
            return None
        target = loc.strip()
        try:
            target = urljoin(req.url, target)
            check_url_scheme(target)
            # a target no crawl can hold (a bad port, an unclosed IPv6 bracket, too long) is
            # a failure of this URL: taken as a move, the URL was fetched again every cycle
            # and its target never
            moved_key = ctx.url_key(target)
        except ValueError as exc:
            result.outcome, result.error = "error", f"redirect refused: {exc}"
            result.location = target
            return None
        refusal = literal_refusal(host_key(moved_key), ctx.allow)
        if refusal is not None:
            # An address no request may go to (an IP literal in any spelling, localhost):
            # taken as a move, the target became a host of the crawl, held back every cycle
            # (found by an outside audit). A name that resolves there is judged when fetched.
            result.outcome, result.error = "error", f"redirect refused: {refusal}"
            result.location = target
            return None
        if urldefrag(target).url == urldefrag(req.url).url:
            # A page that sends us back to itself (most often setting a cookie we do not
            # keep: a cookie wall) can never be fetched: an error, not a page that moved.
            result.outcome, result.location = "error", target
            result.error = f"HTTP {status} redirect to itself (a cookie wall or a loop)"
            return None
        result.outcome, result.location = "redirect", target
        return moved_key
    if status in _GONE_STATUSES:
        result.outcome = "gone"
        return None
    result.outcome = "error"
    reason = f" {header_text(resp.reason)}" if resp.reason else ""
    result.error = f"HTTP {status}{reason}"
    if status == 206:
        # a part of the page to a request that asked for all of it (no Range is ever sent):
        # taken as a version, a fragment was kept as the page and its next whole copy read
        # as a change
        result.error += " to a request for the whole page"
    if status in THROTTLE_STATUSES:
        result.retry_after_s = parse_retry_after(
            resp.headers.get("Retry-After"),
            date=resp.headers.get("Date"),
            cap=settings.max_retry_after_s,
            now=settings.cycle_now,
        )
    return None


async def _fingerprint(
    ctx: CycleContext, req: FetchRequest, body: bytes, content_type: str | None
) -> ContentRecord:
    injected, default = ctx.fingerprint, ctx.default_fp

    def compute() -> ContentRecord:
        if injected is not None:
            return ContentRecord(injected(body, content_type))
        assert default is not None
        return default(body, content_type, req)

    if len(body) > _THREAD_FINGERPRINT_BYTES:
        # Parsing megabytes of HTML would stall every other host's I/O on the event loop; a
        # few at a time, as their memory, not the cores, is what more of them would take.
        async with ctx.big_fingerprints:
            return await asyncio.to_thread(compute)
    return compute()


def default_fingerprinter() -> Callable[[bytes, str | None, FetchRequest], ContentRecord]:
    def fp(body: bytes, content_type: str | None, req: FetchRequest) -> ContentRecord:
        return class_record(req, body, content_type, previous=req.prev_fingerprint)

    return fp


def _archive(
    ctx: CycleContext,
    req: FetchRequest,
    resp: aiohttp.ClientResponse,
    result: FetchResult,
    body: bytes,
    *,
    truncated: TruncatedReason | None = None,
) -> None:
    """Write the exchange to the cycle's archive (when there is one) and note where: a 304 or
    a body the archive already holds becomes a revisit record referring to the original.

    Only a 2xx the page's copy is taken from becomes the URL's original (whole, or the first
    part of a page over the cap, which is then the copy): a 304 later validates that copy, not
    an error page, a redirect or a body the network cut, archived since."""
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
    status = result.http_status
    is_copy = status is not None and 200 <= status < 300 and result.outcome in _COPY_OUTCOMES
    original = (record.original if is_copy else None) or req.archived
    if original is not None and original is req.archived and req.archived_json is not None:
        result.archived = req.archived_json  # the plan's own text of it (a 304, most often)
    else:
        result.archived = original.to_json() if original is not None else None


def _archive_unanswered(ctx: CycleContext, attempt: Attempt, url: str, result: FetchResult) -> None:
    """Archive the request record of a request that left and got no answer the archive holds
    (a timeout or a reset before the headers, a head refused as unreadable, an answer the
    archive could not store as given): every request sent has its record, and fetch_log's row
    points at it. Nothing when the connection was
    never made (nothing went out) or the answer was archived already (a body cut mid-way)."""
    sent = attempt.request
    if ctx.archive is None or sent is None or result.warc_filename is not None:
        return  # no archive, nothing went out, or the answer is archived already
    version = sent.version
    try:
        record = ctx.archive.write_unanswered_request(
            url,
            tuple(sent.headers.items()),
            fetched_at=ctx.settings.cycle_now,
            http_version=f"{version.major}.{version.minor}",
        )
    except (ValueError, ArchiveClosedError) as exc:  # cannot store it, or the cycle is ending
        result.error = f"{result.error}; not archived: {exc}"
        return
    result.warc_filename = record.warc_filename
    result.warc_offset = record.warc_offset
    result.warc_length = record.warc_length


_CONTENT_RANGE = re.compile(r"\s*bytes\s+0-(\d+)/(\d+)\s*", re.IGNORECASE)


def _whole_range(content_range: str | None) -> bool:
    """A 206 whose Content-Range is the whole representation (``bytes 0-4999/5000``), as some
    caches send, is the page."""
    match = _CONTENT_RANGE.fullmatch(content_range or "")
    return match is not None and int(match[1]) + 1 == int(match[2])


def _page_link(page_url: str, href: str | None, base: str | None = None) -> str | None:
    """``href`` as written on the page at ``page_url``, made absolute (against the page's
    ``base`` href when it has one, as a browser does); None when it names the page itself
    (fragments aside), is not http(s) or does not parse."""
    if not href:
        return None
    try:
        target = urljoin(urljoin(page_url, base) if base else page_url, href)
        check_url_scheme(target)
    except ValueError:
        return None
    return None if urldefrag(target).url == urldefrag(page_url).url else target


def _announced_feeds(
    page_url: str, hrefs: tuple[str, ...], base: str | None, host: str
) -> list[str] | None:
    """The feeds a page announces, made absolute, that are on its own host (a feed elsewhere
    is that host's to list); None when there are none."""
    feeds = []
    for href in hrefs:
        url = _page_link(page_url, href, base)
        if url is not None and host_key(url) == host and url not in feeds:
            feeds.append(url)
    return feeds or None


_LINK_VALUE = re.compile(r"<([^>]*)>([^<]*)")
_LINK_REL = re.compile(r';\s*rel\s*=\s*(?:"([^"]*)"|([^\s;,"]+))', re.IGNORECASE)


def _link_header_canonical(page_url: str, resp: aiohttp.ClientResponse) -> str | None:
    """A canonical named by an HTTP ``Link`` header (how a PDF or a feed names one): the first
    link whose rel holds ``canonical`` (RFC 8288), its bytes that are not ASCII
    percent-encoded as a Location's are (aiohttp's own parser dropped them, naming another
    URL)."""
    for value in resp.headers.getall("Link", ()):
        for link in _LINK_VALUE.finditer(header_url(value) or ""):
            rel = _LINK_REL.search(link[2])
            if rel and "canonical" in (rel[1] or rel[2] or "").lower().split():
                return _page_link(page_url, link[1].strip())
    return None


def _not_a_revalidation(result: FetchResult, req: FetchRequest) -> str | None:
    """Why a 304 validates nothing of our copy, or None when it does: nothing was asked to be
    validated (a cache answered someone else's question), or the answer names another version
    than the one sent (RFC 9111 4.3.4; weak comparison, W/ aside)."""
    if not result.conditional:
        return "HTTP 304 to a request that sent no validator"
    answered, sent = result.etag, req.etag
    if answered and sent and answered.strip().removeprefix("W/") != sent.strip().removeprefix("W/"):
        return f"HTTP 304 with ETag {answered} to If-None-Match {sent}"
    return None


def _closed_under(attempt: Attempt, result: FetchResult, exc: BaseException) -> bool:
    """The kept-alive connection a request went out on closed before any answer came back."""
    return (
        attempt.reused
        and attempt.request is not None
        and result.http_status is None
        and not isinstance(exc, aiohttp.ClientConnectorError)
    )


def _unreadable_head(exc: BaseException) -> bool:
    """aiohttp's parser refused the answer's status line or headers (it reports that as a 400
    of its own, wrapping the parser's error)."""
    return isinstance(exc, aiohttp.ClientResponseError) and isinstance(
        exc.__cause__, HttpProcessingError
    )


def _head_problem(exc: BaseException) -> str:
    cause = exc.__cause__
    message = getattr(cause, "message", "") or str(cause)
    return str(message).strip() or type(cause).__name__


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
