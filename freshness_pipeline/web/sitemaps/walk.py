"""A host's sitemaps fetched over HTTP and walked breadth-first through their indexes, within
a request budget and the host's Crawl-delay, every answer archived: the only part of
sitemap handling that touches the network."""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from urllib.parse import urljoin

import aiohttp

from freshness_pipeline.science.retry_after import THROTTLE_STATUSES
from freshness_pipeline.warehouse.archive import ArchiveWriteError, ArchiveWriter, TruncatedReason
from freshness_pipeline.web.archiving import archive_answer
from freshness_pipeline.web.client.body import BodyDecodeError, BodyInterrupted, read_limited
from freshness_pipeline.web.client.fetches import host_key as url_host_key
from freshness_pipeline.web.netguard import BLOCKED_PREFIX, check_url_scheme, find_blocked_error
from freshness_pipeline.web.politeness import LEDGER, hold_for_answer
from freshness_pipeline.web.sitemaps.entries import (
    MAX_SITEMAP_BYTES,
    ProblemKind,
    SitemapEntry,
    SitemapFormat,
    SitemapProblem,
)
from freshness_pipeline.web.sitemaps.read import read_sitemap
from freshness_pipeline.web.sitemaps.reads import (
    SHRINK_ACCEPTED_AFTER,
    CompleteRead,
    SitemapRead,
    reading_order,
    shrunk,
)

__all__ = [
    "SitemapFile",
    "SitemapWalk",
    "fetch_sitemap_entries",
]

_MAX_REDIRECTS = 5
#: Pages of a paged feed read when the feed is read for the first time, its first included.
MAX_FEED_PAGES = 10


@dataclass
class SitemapFile:
    """One sitemap URL the walk asked for (its redirects included) and what it gave."""

    url: str
    http_status: int | None  # the final answer's; None when there was none
    format: SitemapFormat | None  # None: nothing fetched, or not a sitemap
    entries: int = 0
    children: int = 0
    recovered: bool = False
    complete: bool = False
    #: answered 304 to the validators of its last complete read, which it stands for again
    unchanged: bool = False


@dataclass
class SitemapWalk:
    """A walk over a host's sitemaps: the entries, every file asked for, and every problem."""

    entries: list[SitemapEntry] = field(default_factory=list)
    files: list[SitemapFile] = field(default_factory=list)
    problems: list[SitemapProblem] = field(default_factory=list)
    #: what the next walk is to remember of each file (the ``reads`` it was given, updated
    #: with every file asked for this time)
    reads: dict[str, SitemapRead] = field(default_factory=dict)
    #: every sitemap URL this walk saw listed (by robots.txt or by an index it read)
    listed: set[str] = field(default_factory=set)
    #: files (not indexes) that answered 304: the URLs their last complete read listed are
    #: listed still (the inventory has them, with the file that listed them)
    unchanged: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Every file asked for was read to its end and nothing failed, was refused or cut."""
        return (
            bool(self.files)
            and all(f.complete for f in self.files)
            and all(p.kind == "malformed" for p in self.problems)
        )

    @property
    def files_recovered(self) -> int:
        return sum(f.recovered for f in self.files)

    @property
    def entries_recovered(self) -> int:
        """URLs (entries and child sitemaps, before de-duplication) from files that needed
        recovery: what a strict parser would have put at risk."""
        return sum(f.entries + f.children for f in self.files if f.recovered)


@dataclass
class _Fetched:
    body: bytes | None
    status: int | None
    problem: tuple[ProblemKind, str] | None
    requests: int
    #: the answer's ETag and Last-Modified (a 2xx or a 304)
    etag: str | None = None
    last_modified: str | None = None


def _archive(
    writer: ArchiveWriter | None,
    url: str,
    resp: aiohttp.ClientResponse,
    body: bytes,
    at: datetime | None,
    *,
    truncated: TruncatedReason | None,
) -> None:
    with contextlib.suppress(ValueError):  # an answer the archive cannot store: the walk goes on
        archive_answer(writer, url, resp, body, kind="sitemap", fetched_at=at, truncated=truncated)


async def _fetch_body(
    session: aiohttp.ClientSession,
    url: str,
    *,
    user_agent: str,
    timeout: float,
    budget: int,
    crawl_delays: Mapping[str, float],
    archive: ArchiveWriter | None = None,
    fetched_at: datetime | None = None,
    conditional: Mapping[str, str] | None = None,
) -> _Fetched:
    """GET with redirects followed by hand; every answer goes to ``archive`` when given.
    ``conditional``: If-None-Match / If-Modified-Since, sent on every hop (a redirect answers
    the same whatever they say); a 304 comes back with no body and no problem."""
    made = 0
    status: int | None = None
    try:
        for _ in range(_MAX_REDIRECTS + 1):
            if made >= budget:
                return _Fetched(
                    None,
                    status,
                    ("file_cap", "sitemap fetch budget exhausted while following redirects"),
                    made,
                )
            made += 1
            host = url_host_key(url)
            await LEDGER.wait_turn(host, crawl_delays.get(host))
            async with session.get(
                url,
                headers={"User-Agent": user_agent, **(conditional or {})},
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=timeout),
                auto_decompress=False,
            ) as resp:
                # Count the gap from the answer too: the server saw the request before this.
                LEDGER.note_start(host)
                status = resp.status
                location = resp.headers.get("Location")
                if status in (301, 302, 303, 307, 308) and location:
                    _archive(archive, url, resp, b"", fetched_at, truncated="length")
                    url = urljoin(url, location.strip())
                    check_url_scheme(url)
                    continue
                etag, modified = resp.headers.get("ETag"), resp.headers.get("Last-Modified")
                if status == 304 and conditional:
                    _archive(archive, url, resp, b"", fetched_at, truncated=None)
                    return _Fetched(None, status, None, made, etag, modified)
                if not 200 <= status < 300:
                    _archive(archive, url, resp, b"", fetched_at, truncated="length")
                    if status in THROTTLE_STATUSES:
                        hold_for_answer(host, resp.headers, fetched_at)
                    return _Fetched(None, status, ("http", f"HTTP {status}"), made)
                try:
                    read = await read_limited(
                        resp,
                        max_bytes=MAX_SITEMAP_BYTES,
                        max_decompressed_bytes=MAX_SITEMAP_BYTES,
                        truncate=True,
                    )
                except BodyInterrupted as exc:
                    # A file the network cut keeps the records that ended before the cut.
                    _archive(archive, url, resp, exc.partial, fetched_at, truncated=exc.reason)
                    return _Fetched(exc.partial or None, status, ("http", str(exc)), made)
                _archive(archive, url, resp, read.body, fetched_at, truncated=read.cut_by)
                note: tuple[ProblemKind, str] | None = (
                    ("size_cap", f"truncated at {MAX_SITEMAP_BYTES} bytes")
                    if read.truncated
                    else None
                )
                return _Fetched(read.body, status, note, made, etag, modified)
        return _Fetched(None, status, ("http", f"more than {_MAX_REDIRECTS} redirects"), made)
    except ArchiveWriteError:
        raise  # a full disk fails the cycle
    except BodyDecodeError as exc:
        return _Fetched(None, status, ("gzip", str(exc)), made)
    except ValueError as exc:
        return _Fetched(None, status, ("http", f"bad URL: {exc}"), made)
    except Exception as exc:
        blocked = find_blocked_error(exc)
        if blocked is not None:
            return _Fetched(None, status, ("http", f"{BLOCKED_PREFIX}{blocked}"), made)
        if isinstance(exc, TimeoutError):
            return _Fetched(None, status, ("http", f"timeout after {timeout:g}s"), made)
        return _Fetched(None, status, ("http", f"{type(exc).__name__}: {exc}"), made)


def _remember(
    walk: SitemapWalk,
    url: str,
    at: datetime | None,
    lastmod: datetime | None,
    *,
    read: bool,
    complete: CompleteRead | None = None,
) -> None:
    """Note that ``url`` was asked for at ``at``. A file that gave no sitemap keeps the
    ``<lastmod>`` of its last good read, so a change its index announced is still news next
    time (behind the other such files, being the most recently asked for), and a file that
    always fails is asked for once a round. ``complete``: its complete read as of now (None:
    the one remembered stands)."""
    if at is None:
        return
    before = walk.reads.get(url)
    listed = lastmod if read else (before.listed_lastmod if before is not None else None)
    kept = complete or (before.complete if before is not None else None)
    walk.reads[url] = SitemapRead(url, at, listed, kept)


def _complete_read(
    walk: SitemapWalk,
    url: str,
    got: _Fetched,
    listed: int,
    children: list[str] | None,
    at: datetime | None,
    *,
    whole_listing: bool,
) -> CompleteRead | None:
    """The file's complete read as of this one, read to its end and listing ``listed`` URLs
    (an index: ``children``): this read, or, when it lists under half of the last one's, the
    last one still, with the shrunk read counted and a problem noted (so the walk is not
    complete either). Only a file that lists a site (``whole_listing``: a urlset, an index,
    a text sitemap) is judged so: a feed keeps its newest items, however many. None when the
    walk keeps no memory (``at`` None)."""
    if at is None:
        return None
    before = walk.reads.get(url)
    prior = before.complete if before is not None else None
    reads = shrunk(prior, listed) if whole_listing else 0
    if reads:
        assert prior is not None  # shrunk() says 0 without one
        walk.problems.append(
            SitemapProblem(
                "shrunk",
                f"lists {listed} URLs, {prior.entries} at its last complete read: not taken as "
                f"complete (the URLs it no longer lists are not checked early) unless "
                f"{SHRINK_ACCEPTED_AFTER - reads} more reads list as few",
                url,
                got.status,
            )
        )
        return replace(prior, shrunk_reads=reads)
    return CompleteRead(
        at,
        got.etag,
        got.last_modified,
        listed,
        None if children is None else tuple(children),
    )


def _queue_children(
    walk: SitemapWalk,
    children: list[str],
    child_lastmods: Mapping[str, datetime],
    seen: set[str],
    lastmods: dict[str, datetime],
    queue: deque[str],
) -> None:
    """An index's ``children`` (read now, or remembered for a 304) into the walk: listed, and
    those not seen yet queued in :func:`reading_order` by the dates the index gave them."""
    walk.listed.update(children)
    fresh = [child for child in children if child not in seen]
    seen.update(fresh)
    lastmods.update(child_lastmods)
    queue.extend(reading_order(fresh, child_lastmods, walk.reads))


def _listed_twice(old: SitemapEntry, entry: SitemapEntry) -> SitemapEntry:
    """One URL that two files of a walk list: the newest lastmod, and as its file the one a
    later read can speak for. A file of the site's pages owns the URL before a list of recent
    items (a feed, a news sitemap) whatever the dates: the URL leaves the latter in a day or
    two, and a 304 of the former lists it again; between two files alike, the newer listing's."""
    newer = entry.lastmod is not None and (old.lastmod is None or entry.lastmod > old.lastmod)
    kept = entry if newer else old
    owner = kept if old.from_feed == entry.from_feed else (entry if old.from_feed else old)
    return SitemapEntry(
        entry.loc, kept.lastmod, owner.source_url, from_feed=old.from_feed and entry.from_feed
    )


async def fetch_sitemap_entries(
    session: aiohttp.ClientSession,
    sitemap_urls: Iterable[str],
    *,
    user_agent: str,
    max_sitemaps: int = 50,
    max_urls: int = 50_000,
    timeout: float = 30.0,
    crawl_delays: Mapping[str, float] | None = None,
    archive: ArchiveWriter | None = None,
    fetched_at: datetime | None = None,
    deadline: float | None = None,
    reads: Mapping[str, SitemapRead] | None = None,
    standing: Container[str] | None = None,
) -> SitemapWalk:
    """Walk sitemaps and sitemap indexes breadth-first (every answer to ``archive`` when
    given, dated ``fetched_at``, the cycle's now).

    ``deadline`` (``time.monotonic()``): no request is started that its host's Crawl-delay
    would begin after it (the first file is always read). Page fetches wait for discovery,
    so a host with a long Crawl-delay and many sitemap files would otherwise hold up every
    host's fetches.

    ``reads``: what the host's earlier walks remember of each file (:mod:`.reads`). The files
    robots.txt names, and the children of each index, are read in :func:`reading_order`, so
    that walks cut by a limit read the files that changed first and every file over a few
    cycles; ``walk.reads`` is that memory with this walk's files in it (dated ``fetched_at``,
    required with ``reads``).

    A file whose last complete read ``reads`` remembers is asked for with its validators, and a
    304 stands for that read (:mod:`.reads`): an index walks on to its remembered children, a
    file of URLs goes to ``walk.unchanged``. ``standing``: the files whose URLs the caller still
    holds (None: all of them); another with URLs is asked for whole, since a 304 could not
    give its URLs back.

    ``crawl_delays`` (host key to seconds) keeps each host's Crawl-delay between these
    requests and the cycle's other requests to it.

    Never more than ``max_sitemaps`` HTTP requests (redirect hops count) nor ``max_urls``
    entries. A URL listed twice keeps its newest ``lastmod``. Every file asked for is in
    ``files`` and every problem in ``problems``; hitting a limit is a problem too, so a cut
    walk is never mistaken for a complete one.
    """
    walk = SitemapWalk(reads=dict(reads or {}))
    if reads is not None and fetched_at is None:
        raise ValueError("a walk that remembers its reads needs fetched_at")
    queue: deque[str] = deque()
    seen: set[str] = set()
    lastmods: dict[str, datetime] = {}  # what an index said of each child queued
    top: list[str] = []
    for raw in sitemap_urls:
        url = raw.strip()
        try:
            check_url_scheme(url)
        except ValueError as exc:
            walk.problems.append(SitemapProblem("http", str(exc), raw))
            walk.files.append(SitemapFile(raw, None, None))
            continue
        if url not in seen:
            seen.add(url)
            top.append(url)
    queue.extend(reading_order(top, {}, walk.reads))
    walk.listed.update(top)

    index: dict[str, int] = {}
    feed_pages: dict[str, int] = {}  # a paged feed's pages queued: which page each is
    requests_made = 0
    dropped = 0
    entries = walk.entries
    delays = crawl_delays or {}
    timed_out = False
    while queue and requests_made < max_sitemaps and len(entries) < max_urls:
        if (
            deadline is not None
            and requests_made
            and max(
                time.monotonic() + delays.get(host := url_host_key(queue[0]), 0.0),
                LEDGER.held_until(host) or 0.0,  # a Retry-After the host gave this run
            )
            > deadline
        ):
            timed_out = True
            break
        url = queue.popleft()
        remembered = walk.reads.get(url)
        prior = remembered.complete if remembered is not None else None
        if (
            prior is not None
            and prior.children is None
            and prior.entries
            and standing is not None
            and url not in standing
        ):
            prior = None
        got = await _fetch_body(
            session,
            url,
            user_agent=user_agent,
            timeout=timeout,
            budget=max_sitemaps - requests_made,
            crawl_delays=delays,
            archive=archive,
            fetched_at=fetched_at,
            conditional=prior.validators if prior is not None else None,
        )
        requests_made += got.requests
        if got.problem is not None:
            walk.problems.append(SitemapProblem(*got.problem, url, got.status))
        if got.status == 304 and got.problem is None and prior is not None:
            # unchanged since its last complete read, which it stands for again
            kids = list(prior.children) if prior.children is not None else None
            walk.files.append(
                SitemapFile(
                    url,
                    304,
                    None,
                    0 if kids is not None else prior.entries,
                    len(kids or ()),
                    complete=True,
                    unchanged=True,
                )
            )
            again = replace(
                prior,
                at=fetched_at or prior.at,
                etag=got.etag or prior.etag,
                last_modified=got.last_modified or prior.last_modified,
            )
            _remember(walk, url, fetched_at, lastmods.get(url), read=True, complete=again)
            if kids is None:
                walk.unchanged.append(url)
                continue
            # an unchanged index gives its children the dates it gave them before
            said = {
                child: r.listed_lastmod
                for child in kids
                if (r := walk.reads.get(child)) is not None and r.listed_lastmod is not None
            }
            _queue_children(walk, kids, said, seen, lastmods, queue)
            continue
        if got.body is None:
            walk.files.append(SitemapFile(url, got.status, None))
            _remember(walk, url, fetched_at, lastmods.get(url), read=False)
            continue
        parsed = read_sitemap(got.body, url, cut=got.problem is not None)
        walk.problems.extend(parsed.problems)
        dropped_before = dropped
        for entry in parsed.entries:
            at = index.get(entry.loc)
            if at is None:
                if len(entries) >= max_urls:
                    dropped += 1
                    continue
                index[entry.loc] = len(entries)
                entries.append(entry)
            else:
                entries[at] = _listed_twice(entries[at], entry)
        # a file whose URLs the walk's cap cut is not whole: a 304 would stand for URLs never taken
        whole = (
            parsed.format is not None
            and parsed.complete
            and got.problem is None
            and dropped == dropped_before
        )
        is_index = parsed.format == "sitemapindex"
        _remember(
            walk,
            url,
            fetched_at,
            lastmods.get(url),
            read=parsed.format is not None,
            complete=(
                _complete_read(
                    walk,
                    url,
                    got,
                    len(parsed.children) if is_index else len(parsed.entries),
                    parsed.children if is_index else None,
                    fetched_at,
                    whole_listing=parsed.format in ("urlset", "sitemapindex", "text"),
                )
                if whole
                else None
            ),
        )
        walk.files.append(
            SitemapFile(
                url,
                got.status,
                parsed.format,
                len(parsed.entries),
                len(parsed.children),
                parsed.recovered,
                parsed.complete,
            )
        )
        _queue_children(walk, parsed.children, parsed.child_lastmods, seen, lastmods, queue)
        following = parsed.next_page
        if following is not None and remembered is None and following not in seen:
            # A paged feed read for the first time: its older pages hold pages no sitemap may
            # list (74 of a feed's 78 older items were never found, an exploratory web); later
            # reads of its first page see what is new
            depth = feed_pages.get(url, 1)
            if depth < MAX_FEED_PAGES and url_host_key(following) == url_host_key(url):
                seen.add(following)
                feed_pages[following] = depth + 1
                queue.append(following)
    if timed_out:
        walk.problems.append(
            SitemapProblem("time_cap", f"{len(queue)} sitemap(s) not read in the time allowed")
        )
    elif len(entries) >= max_urls and (queue or dropped):
        walk.problems.append(
            SitemapProblem(
                "url_cap",
                f"URL limit {max_urls} reached; {dropped} URL(s) dropped, "
                f"{len(queue)} sitemap(s) not read",
            )
        )
    elif queue:
        walk.problems.append(
            SitemapProblem(
                "file_cap",
                f"sitemap limit {max_sitemaps} reached; {len(queue)} sitemap(s) not read",
            )
        )
    return walk
