"""What a host's sitemap walks remember of each file they asked for, and the order the next
walk asks in.

A walk is capped (files, time), and large sites list more files than one walk may read: a news
site's index names a file per day or per thousand articles, hundreds in all. Reading them in
the order listed reads the same first ones every cycle and never the rest; starting from a
place that moves with the clock reads each file many cycles in a row and takes weeks to get
round. So the walk remembers, per file, when it was last asked for and the ``<lastmod>`` its
index gave it then, and reads first the files it has never read or whose index says they
changed since (newest first: new pages are usually in the newest file), then the others, least
recently read first. Where an index's dates are honest the files that changed are read the
cycle they change; where they are absent or always "now", every file is read once before any
is read again.

The memory is kept in the host's robots row (``sitemap_reads``, a list of structs) between
cycles. Files an index stopped listing are forgotten after :data:`FORGET_AFTER`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

__all__ = ["FORGET_AFTER", "SitemapRead", "reading_order", "reads_from_row", "reads_to_row"]

#: A file no walk has seen listed for this long is dropped from the memory, which otherwise
#: grows with every file a site ever listed.
FORGET_AFTER = timedelta(days=30)


@dataclass(frozen=True)
class SitemapRead:
    """The last time a walk asked for ``url`` and the ``<lastmod>`` its index then gave it
    (None: none given, or the file was not read whole enough to count as seen at that date)."""

    url: str
    read_at: datetime
    listed_lastmod: datetime | None


def _changed_since_read(read: SitemapRead | None, lastmod: datetime | None) -> bool:
    if read is None:
        return True
    if lastmod is None:
        return False
    return lastmod > (read.listed_lastmod or read.read_at)


def reading_order(
    urls: Iterable[str],
    lastmods: Mapping[str, datetime],
    reads: Mapping[str, SitemapRead],
) -> list[str]:
    """``urls`` (an index's children, or robots.txt's sitemaps) in the order to read them:
    never read or changed since the last read first, then the rest; within each, the least
    recently read first, then the newest ``<lastmod>``, then the order listed."""

    def key(item: tuple[int, str]) -> tuple[bool, float, float, int]:
        position, url = item
        read = reads.get(url)
        lastmod = lastmods.get(url)
        return (
            not _changed_since_read(read, lastmod),
            read.read_at.timestamp() if read is not None else -math.inf,
            -lastmod.timestamp() if lastmod is not None else math.inf,
            position,
        )

    return [url for _, url in sorted(enumerate(urls), key=key)]


def reads_from_row(value: Iterable[Mapping[str, Any]] | None) -> dict[str, SitemapRead]:
    """The robots row's ``sitemap_reads`` as a mapping by URL (empty for a new host)."""
    reads: dict[str, SitemapRead] = {}
    for item in value or ():
        url, read_at = item.get("url"), item.get("read_at")
        if url and read_at is not None:
            reads[url] = SitemapRead(url, read_at, item.get("listed_lastmod"))
    return reads


def reads_to_row(
    reads: Mapping[str, SitemapRead], listed: Iterable[str], now: datetime
) -> list[dict[str, Any]]:
    """The memory to keep: every file listed this time (``listed``), and the others while
    they were read within :data:`FORGET_AFTER` of ``now``."""
    keep = set(listed)
    return [
        {"url": r.url, "read_at": r.read_at, "listed_lastmod": r.listed_lastmod}
        for r in sorted(reads.values(), key=lambda r: r.url)
        if r.url in keep or now - r.read_at < FORGET_AFTER
    ]
