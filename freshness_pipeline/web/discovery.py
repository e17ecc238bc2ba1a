"""Per-host discovery for the inventory: robots.txt (from cache when fresh) and the sitemaps it
names, for many hosts at once over one guarded session.

Sitemap and robots fetches do not count against the page budget, but they are bounded: a few
hosts at a time, a cap on sitemap files and URLs per host.

Each host's robots row also remembers when each of its sitemap files was last read
(:mod:`~freshness_pipeline.web.sitemaps.reads`), so that a walk cut by its caps reads next
time what it has not read, or what changed, first.

A host whose robots.txt names no sitemap is asked for ``/sitemap.xml`` at most once per
:func:`~freshness_pipeline.web.robots.record_ttl` of the last answer (a day for an answer, an
hour for a failure), and every cycle while that answer is a sitemap, so it is then read like a
named one. The answer is kept in the host's robots row between cycles. A guess that is not there
(404, 410, or no sitemap at that address) is the host's right, not a problem: it is a note, not a
warning; a missing sitemap that robots.txt names is a problem.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import aiohttp

from freshness_pipeline.warehouse.archive import ArchiveWriter
from freshness_pipeline.web.client.cycle import blocking
from freshness_pipeline.web.client.session import open_session
from freshness_pipeline.web.client.settings import FetchSettings
from freshness_pipeline.web.netguard import IPNetwork
from freshness_pipeline.web.politeness import LEDGER
from freshness_pipeline.web.robots import (
    RobotsRecord,
    fetch_robots,
    needs_refresh,
    record_ttl,
    robots_policy,
)
from freshness_pipeline.web.sitemaps.entries import PROBLEM_KINDS, SitemapEntry, SitemapProblem
from freshness_pipeline.web.sitemaps.reads import reads_from_row, reads_to_row
from freshness_pipeline.web.sitemaps.walk import MAX_FEED_PAGES, SitemapWalk, fetch_sitemap_entries

HOSTS_AT_ONCE = 8
GUESSED_SITEMAP_PATH = "/sitemap.xml"
# Answers at a guessed address that mean "no sitemap here" rather than "something is wrong".
_ABSENT_STATUSES = frozenset({404, 410})

# The robots row's columns that carry sitemap state from cycle to cycle (tables.ROBOTS).
SITEMAP_STATE_COLUMNS = (
    "sitemap_probed_at",
    "sitemap_probe_status",
    "sitemap_probe_found",
    "sitemaps_read_at",
    "sitemaps_read_entries",
    "sitemaps_shrunk_reads",
    "sitemap_reads",
    "feeds",
)

# What discovery counts per host (HostDiscovery.counts); a run's metadata sums them.
COUNT_KEYS = (
    "robots_errors",
    "sitemap_files",
    "sitemap_files_read",
    # files that answered 304 to the validators of their last complete read
    "sitemap_files_unchanged",
    "sitemap_files_recovered",
    "sitemap_entries",
    "sitemap_entries_recovered",
    "sitemap_probes",
    "sitemap_probes_found",
    "sitemap_hosts_read_completely",
    # feeds the host's pages announced (or pages that were feeds), read beside its sitemaps
    "announced_feeds_read",
    # entries a host's sitemaps listed for other hosts, dropped (the inventory counts them)
    "sitemap_entries_of_other_hosts",
    *(f"sitemap_problems_{kind}" for kind in PROBLEM_KINDS),
)


@dataclass
class DiscoveryTarget:
    host: str
    base_url: str  # scheme://authority
    cached: dict[str, Any] | None = None  # the host's last robots row, if any
    # the gap between requests the host has taught us (science.capacity): robots.txt and
    # sitemap requests keep it too, since a host that throttles bursts counts them all
    min_gap_s: float | None = None
    # feeds the host's pages announced at their last fetch (or pages that were feeds)
    feeds: tuple[str, ...] = ()
    # the sitemap and feed files that listed URLs the inventory holds (None: not known, all):
    # only those may answer 304 for their last read (web.sitemaps.walk)
    listing_files: frozenset[str] | None = None


@dataclass
class HostDiscovery:
    """One host's robots row (with its sitemap state), entries, problems and notes."""

    host: str
    robots_row: dict[str, Any]
    entries: list[SitemapEntry] = field(default_factory=list)
    walk: SitemapWalk | None = None  # None when no sitemap was asked for this cycle
    robots_error: str | None = None
    problems: list[SitemapProblem] = field(default_factory=list)  # warnings
    notes: list[str] = field(default_factory=list)  # worth an info line, not a warning
    probed: bool = False  # /sitemap.xml was asked for because robots.txt names none
    feeds_read: int = 0  # announced feeds read (web.discovery._read_feeds)
    #: sitemap and feed files that answered 304: what they listed at their last complete read
    #: is listed still (the inventory takes it from its rows that file listed)
    unchanged: list[str] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        """What was read and what was wrong, under COUNT_KEYS."""
        counts = dict.fromkeys(COUNT_KEYS, 0)
        counts["robots_errors"] = int(self.robots_error is not None)
        walk = self.walk
        if walk is not None:
            counts["sitemap_files"] = len(walk.files)
            counts["sitemap_files_read"] = sum(f.format is not None for f in walk.files)
            counts["sitemap_files_unchanged"] = sum(f.unchanged for f in walk.files)
            counts["sitemap_files_recovered"] = walk.files_recovered
            counts["sitemap_entries"] = len(walk.entries)
            counts["sitemap_entries_recovered"] = walk.entries_recovered
            counts["sitemap_hosts_read_completely"] = int(
                walk.complete and not any(p.kind == "shrunk" for p in self.problems)
            )
        counts["sitemap_probes"] = int(self.probed)
        counts["announced_feeds_read"] = self.feeds_read
        counts["sitemap_probes_found"] = int(
            self.probed and bool(self.robots_row.get("sitemap_probe_found"))
        )
        for kind, n in Counter(p.kind for p in self.problems).items():
            counts[f"sitemap_problems_{kind}"] = n
        return counts


#: The robots row's columns :func:`record_from_row` reads: readers of robots.txt's rules
#: read these alone (the sitemap memory beside them can hold thousands of files per host).
RECORD_COLUMNS = ("host", "robots_url", "http_status", "body", "error", "fetched_at")


def record_from_row(row: dict[str, Any]) -> RobotsRecord:
    return RobotsRecord(
        host=row["host"],
        robots_url=row["robots_url"],
        http_status=row["http_status"],
        body=row["body"] or "",
        error=row["error"],
        fetched_at=row["fetched_at"],
    )


def robots_row(record: RobotsRecord, host: str) -> dict[str, Any]:
    """The robots table row: the raw answer plus what it means, so SQL can see both."""
    policy = robots_policy(record)
    return {
        "host": host,
        "robots_url": record.robots_url,
        "http_status": record.http_status,
        "mode": policy.mode,
        "crawl_delay": policy.crawl_delay,
        "sitemaps": policy.sitemaps,
        "body": record.body,
        "error": record.error,
        "fetched_at": record.fetched_at,
    }


def cached_record(row: dict[str, Any] | None, now: datetime) -> RobotsRecord | None:
    """The cached record if it is still good at ``now`` (a day for answers, an hour for failures)."""
    if row is None:
        return None
    record = record_from_row(row)
    if needs_refresh(record.fetched_at, now, ttl=record_ttl(record)):
        return None
    return record


def probe_due(row: dict[str, Any] | None, host: str, now: datetime) -> bool:
    """Whether ``/sitemap.xml`` is to be asked for at ``now``: never asked, a sitemap last time
    (read each cycle like a named one), or its last answer as old as robots.txt's would be."""
    probed_at = (row or {}).get("sitemap_probed_at")
    if probed_at is None or (row or {}).get("sitemap_probe_found"):
        return True
    assert row is not None
    answer = RobotsRecord(host, "", row.get("sitemap_probe_status"), "", None, probed_at)
    return needs_refresh(probed_at, now, ttl=record_ttl(answer))


def _absent(problem: SitemapProblem, guessed: str) -> bool:
    """A guessed address that answered "nothing here"."""
    if problem.sitemap_url != guessed:
        return False
    return problem.http_status in _ABSENT_STATUSES or problem.kind == "not_sitemap"


async def _discover_one(
    session: aiohttp.ClientSession,
    target: DiscoveryTarget,
    now: datetime,
    settings: FetchSettings,
    archive: ArchiveWriter | None = None,
) -> HostDiscovery:
    deadline = time.monotonic() + settings.discovery_window_s
    record = cached_record(target.cached, now)
    learned = target.min_gap_s or 0.0
    if record is None:
        known_delay = (target.cached or {}).get("crawl_delay")
        await LEDGER.wait_turn(target.host, max(known_delay or 0.0, learned))
        record = await fetch_robots(
            session,
            target.base_url,
            now=now,
            user_agent=settings.user_agent,
            timeout=settings.total_timeout,
            archive=archive,
        )
        LEDGER.note_start(target.host)  # the gap also counts from the answer
    state = {column: (target.cached or {}).get(column) for column in SITEMAP_STATE_COLUMNS}
    row = {**robots_row(record, target.host), **state}
    result = HostDiscovery(host=target.host, robots_row=row, robots_error=record.error)
    policy = robots_policy(record)
    if policy.mode == "disallow_all":
        return result
    sitemaps = policy.sitemaps
    guessed = f"{target.base_url}{GUESSED_SITEMAP_PATH}"
    delay = max(policy.crawl_delay or 0.0, learned)
    # robots.txt's rules hold for a feed a page announced (a site's `Disallow: /feed/`); the
    # sitemaps robots.txt names itself are its own invitation
    feeds = [
        f
        for f in announced_feeds(row.get("feeds"), target.feeds)
        if f not in sitemaps and policy.can_fetch(f)
    ]
    if not sitemaps:
        if not probe_due(target.cached, target.host, now):
            # its last answer stands; saying so every cycle would be noise
            await _read_feeds(
                session,
                feeds,
                row,
                result,
                settings,
                delay,
                now,
                deadline,
                archive,
                target.listing_files,
            )
            return result
        sitemaps = [guessed]
        result.probed = True
    walk = await fetch_sitemap_entries(
        session,
        sitemaps,
        user_agent=settings.user_agent,
        timeout=settings.total_timeout,
        max_sitemaps=settings.max_sitemap_files,
        crawl_delays={target.host: delay} if delay else None,
        archive=archive,
        fetched_at=now,
        deadline=deadline,
        reads=reads_from_row(row.get("sitemap_reads")),
        standing=target.listing_files,
    )
    row["sitemap_reads"] = reads_to_row(walk.reads, walk.listed, now)
    result.walk = walk
    result.entries = walk.entries
    result.unchanged.extend(walk.unchanged)
    for problem in walk.problems:
        if result.probed and _absent(problem, guessed):
            result.notes.append(f"robots.txt names no sitemap and {problem}")
        else:
            result.problems.append(problem)
    if result.probed and walk.files:
        first = walk.files[0]
        row.update(
            sitemap_probed_at=now,
            sitemap_probe_status=first.http_status,
            sitemap_probe_found=first.format is not None,
        )
    await _read_feeds(
        session, feeds, row, result, settings, delay, now, deadline, archive, target.listing_files
    )
    if walk.complete:
        row.update(
            sitemaps_read_at=now,
            # the URLs listed: those read now and those unchanged files listed at their last read
            sitemaps_read_entries=len(walk.entries)
            + sum(f.entries for f in walk.files if f.unchanged),
            sitemaps_shrunk_reads=0,
        )
    elif any(p.kind == "shrunk" for p in walk.problems):
        row["sitemaps_shrunk_reads"] = max(
            (r.complete.shrunk_reads for r in walk.reads.values() if r.complete is not None),
            default=0,
        )
    return result


#: the most feeds a host's pages may announce that are read each cycle (the newest kept)
MAX_HOST_FEEDS = 8
#: a feed that answered one of these, or was no feed, is forgotten (its page announces it again
#: if it comes back)
_FEED_GONE_STATUSES = frozenset({404, 410})


def announced_feeds(kept: Iterable[str] | None, announced: Iterable[str]) -> list[str]:
    """The host's feeds to read: those its pages announced at their last fetch first, then
    those kept from before, at most MAX_HOST_FEEDS."""
    feeds: list[str] = []
    for url in [*announced, *(kept or [])]:
        if url not in feeds:
            feeds.append(url)
    return feeds[:MAX_HOST_FEEDS]


async def _read_feeds(
    session: aiohttp.ClientSession,
    feeds: list[str],
    row: dict[str, Any],
    result: HostDiscovery,
    settings: FetchSettings,
    delay: float,
    now: datetime,
    deadline: float,
    archive: ArchiveWriter | None,
    standing: frozenset[str] | None = None,
) -> None:
    """Read the feeds the host's pages announced, beside its sitemaps: many sites list their
    new pages in a feed their pages link to (``<link rel=alternate>``) and nowhere else, and a
    feed given as a seed was read as a page, its items never crawled (found by an exploratory
    run). Apart from the sitemap walk, so that a feed that fails leaves the sitemaps' reading
    complete; items that leave a feed say nothing (a feed keeps its newest only). A feed that
    is gone or no feed is forgotten, with a note, not a warning each cycle.

    A seeded page that was a sitemap is read here too, as a sitemap: its index's children
    within the host's file cap, and its entries a sitemap's, so that a page leaving it is
    news as it is for a sitemap robots.txt names."""
    if not feeds:
        row["feeds"] = row.get("feeds") or None
        return
    # the feeds' validators live beside the sitemaps' (one memory of files per host)
    memory = reads_from_row(row.get("sitemap_reads"))
    walk = await fetch_sitemap_entries(
        session,
        feeds,
        user_agent=settings.user_agent,
        timeout=settings.total_timeout,
        # a paged feed's first read follows its pages (its later reads take the first); a
        # seeded sitemap index, its children
        max_sitemaps=max(len(feeds) * MAX_FEED_PAGES, settings.max_sitemap_files),
        crawl_delays={result.host: delay} if delay else None,
        archive=archive,
        fetched_at=now,
        deadline=deadline,
        reads=memory,
        standing=standing,
    )
    row["sitemap_reads"] = reads_to_row(walk.reads, {*memory, *feeds}, now) or None
    result.unchanged.extend(walk.unchanged)
    dropped = {
        p.sitemap_url
        for p in walk.problems
        if p.kind == "not_sitemap" or p.http_status in _FEED_GONE_STATUSES
    }
    for problem in walk.problems:
        if problem.sitemap_url in dropped:
            result.notes.append(f"announced feed forgotten: {problem}")
        else:
            result.problems.append(problem)
    result.entries.extend(walk.entries)
    result.feeds_read = sum(f.format is not None for f in walk.files)
    row["feeds"] = [f for f in feeds if f not in dropped] or None


async def discover_hosts_async(
    targets: Sequence[DiscoveryTarget],
    *,
    now: datetime,
    settings: FetchSettings,
    allow: Iterable[IPNetwork] | None = None,
    archive: ArchiveWriter | None = None,
) -> list[HostDiscovery]:
    """Robots, sitemap entries, counts and problems for every target, in target order; every
    answer archived (kind robots or sitemap) when ``archive`` is given."""
    if not targets:
        return []
    gate = asyncio.Semaphore(HOSTS_AT_ONCE)
    async with open_session(settings, allow=allow) as session:

        async def bounded(target: DiscoveryTarget) -> HostDiscovery:
            async with gate:
                return await _discover_one(session, target, now, settings, archive)

        return list(await asyncio.gather(*(bounded(t) for t in targets)))


#: :func:`discover_hosts_async` for synchronous callers (the inventory stage).
discover_hosts = blocking(discover_hosts_async)
