"""A host's sitemaps fetched over HTTP and walked breadth-first through their indexes, within
a request budget and the host's Crawl-delay, every answer archived: the only part of
sitemap handling that touches the network."""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urljoin

import aiohttp

from freshness_pipeline.warehouse.archive import ArchiveWriteError, ArchiveWriter, TruncatedReason
from freshness_pipeline.web.archiving import archive_answer
from freshness_pipeline.web.client.body import BodyDecodeError, BodyInterrupted, read_limited
from freshness_pipeline.web.client.fetches import host_key as url_host_key
from freshness_pipeline.web.netguard import BLOCKED_PREFIX, check_url_scheme, find_blocked_error
from freshness_pipeline.web.politeness import LEDGER
from freshness_pipeline.web.sitemaps.entries import (
    MAX_SITEMAP_BYTES,
    ProblemKind,
    SitemapEntry,
    SitemapFormat,
    SitemapProblem,
)
from freshness_pipeline.web.sitemaps.read import read_sitemap
from freshness_pipeline.web.sitemaps.reads import SitemapRead, reading_order

__all__ = [
    "SitemapFile",
    "SitemapWalk",
    "fetch_sitemap_entries",
]

_MAX_REDIRECTS = 5


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
) -> _Fetched:
    """GET with redirects followed by hand; every answer goes to ``archive`` when given."""
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
                headers={"User-Agent": user_agent},
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
                if not 200 <= status < 300:
                    _archive(archive, url, resp, b"", fetched_at, truncated="length")
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
                return _Fetched(read.body, status, note, made)
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
) -> None:
    """Note that ``url`` was asked for at ``at``. A file that gave no sitemap keeps the
    ``<lastmod>`` of its last good read, so a change its index announced is still news next
    time (behind the other such files, being the most recently asked for), and a file that
    always fails is asked for once a round."""
    if at is None:
        return
    before = walk.reads.get(url)
    listed = lastmod if read else (before.listed_lastmod if before is not None else None)
    walk.reads[url] = SitemapRead(url, at, listed)


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
    requests_made = 0
    dropped = 0
    entries = walk.entries
    delays = crawl_delays or {}
    timed_out = False
    while queue and requests_made < max_sitemaps and len(entries) < max_urls:
        if (
            deadline is not None
            and requests_made
            and time.monotonic() + delays.get(url_host_key(queue[0]), 0.0) > deadline
        ):
            timed_out = True
            break
        url = queue.popleft()
        got = await _fetch_body(
            session,
            url,
            user_agent=user_agent,
            timeout=timeout,
            budget=max_sitemaps - requests_made,
            crawl_delays=delays,
            archive=archive,
            fetched_at=fetched_at,
        )
        requests_made += got.requests
        if got.problem is not None:
            walk.problems.append(SitemapProblem(*got.problem, url, got.status))
        if got.body is None:
            walk.files.append(SitemapFile(url, got.status, None))
            _remember(walk, url, fetched_at, lastmods.get(url), read=False)
            continue
        parsed = read_sitemap(got.body, url, cut=got.problem is not None)
        _remember(walk, url, fetched_at, lastmods.get(url), read=parsed.format is not None)
        walk.problems.extend(parsed.problems)
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
        for entry in parsed.entries:
            at = index.get(entry.loc)
            if at is None:
                if len(entries) >= max_urls:
                    dropped += 1
                    continue
                index[entry.loc] = len(entries)
                entries.append(entry)
            else:
                old = entries[at]
                if entry.lastmod is not None and (
                    old.lastmod is None or entry.lastmod > old.lastmod
                ):
                    entries[at] = entry
                # listed by a sitemap as well as a feed: the sitemap's listing counts
                entries[at].from_feed = old.from_feed and entry.from_feed
        walk.listed.update(parsed.children)
        fresh = [child for child in parsed.children if child not in seen]
        seen.update(fresh)
        lastmods.update(parsed.child_lastmods)
        queue.extend(reading_order(fresh, parsed.child_lastmods, walk.reads))
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
