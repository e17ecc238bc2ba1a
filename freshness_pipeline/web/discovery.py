"""Per-host discovery for the inventory: robots.txt (from cache when fresh) and the sitemaps it
names, for many hosts at once over one guarded session.

Sitemap and robots fetches do not count against the page budget, but they are bounded: a few
hosts at a time, a cap on sitemap files and URLs per host.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from freshness_pipeline.web.client import FetchSettings, open_session, run_sync
from freshness_pipeline.web.netguard import IPNetwork
from freshness_pipeline.web.politeness import LEDGER
from freshness_pipeline.web.robots import (
    RobotsRecord,
    fetch_robots,
    needs_refresh,
    record_ttl,
    robots_policy,
)
from freshness_pipeline.web.sitemaps import SitemapEntry, fetch_sitemap_entries

HOSTS_AT_ONCE = 8


@dataclass
class DiscoveryTarget:
    host: str
    base_url: str  # scheme://authority
    cached: dict[str, Any] | None = None  # the host's last robots row, if any


@dataclass
class HostDiscovery:
    host: str
    robots_row: dict[str, Any]
    entries: list[SitemapEntry] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


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


async def _discover_one(
    session, target: DiscoveryTarget, now: datetime, settings: FetchSettings
) -> HostDiscovery:
    record = cached_record(target.cached, now)
    if record is None:
        known_delay = (target.cached or {}).get("crawl_delay")
        await LEDGER.wait_turn(target.host, known_delay)
        record = await fetch_robots(
            session,
            target.base_url,
            now=now,
            user_agent=settings.user_agent,
            timeout=settings.total_timeout,
        )
        LEDGER.note_start(target.host)  # the gap also counts from the answer
    result = HostDiscovery(host=target.host, robots_row=robots_row(record, target.host))
    if record.error:
        result.errors.append(f"robots.txt: {record.error}")
    policy = robots_policy(record)
    if policy.mode == "disallow_all":
        return result
    sitemaps = policy.sitemaps or [f"{target.base_url}/sitemap.xml"]
    delay = policy.crawl_delay
    entries, errors = await fetch_sitemap_entries(
        session,
        sitemaps,
        user_agent=settings.user_agent,
        timeout=settings.total_timeout,
        crawl_delays={target.host: delay} if delay else None,
    )
    result.entries = entries
    result.errors.extend(f"sitemap: {e}" for e in errors)
    return result


async def discover_hosts_async(
    targets: Sequence[DiscoveryTarget],
    *,
    now: datetime,
    settings: FetchSettings,
    allow: Iterable[IPNetwork] | None = None,
) -> list[HostDiscovery]:
    gate = asyncio.Semaphore(HOSTS_AT_ONCE)
    async with open_session(settings, allow=allow) as session:

        async def bounded(target: DiscoveryTarget) -> HostDiscovery:
            async with gate:
                return await _discover_one(session, target, now, settings)

        return list(await asyncio.gather(*(bounded(t) for t in targets)))


def discover_hosts(
    targets: Sequence[DiscoveryTarget],
    *,
    now: datetime,
    settings: FetchSettings,
    allow: Iterable[IPNetwork] | None = None,
) -> list[HostDiscovery]:
    """Robots and sitemap entries for every target, in target order."""
    if not targets:
        return []
    return run_sync(discover_hosts_async(targets, now=now, settings=settings, allow=allow))
