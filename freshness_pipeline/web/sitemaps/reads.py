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

Each file's last complete read is remembered too: when, its validators, how many URLs (or,
for an index, which children) it listed. The next walk asks for it conditionally, and a 304
stands for that read again: the file costs one short answer, and the URLs it listed are still
listed (the inventory takes them from its last read); a large site's sitemaps run to many
megabytes a read, every cycle. Completeness is per file so that a URL leaving one file is news
when that file is read whole again, whatever the host's other files did (one failing child, or
a walk cut by its caps, hid every delisting of the host; found by an exploratory run).

The memory is kept in the host's robots row (``sitemap_reads``, a list of structs) between
cycles. Files an index stopped listing are forgotten after :data:`FORGET_AFTER`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

__all__ = [
    "FORGET_AFTER",
    "SHRINK_ACCEPTED_AFTER",
    "SHRINK_MIN_LOST",
    "CompleteRead",
    "SitemapRead",
    "reading_order",
    "reads_from_row",
    "reads_to_row",
    "shrunk",
]

#: A file no walk has seen listed for this long is dropped from the memory, which otherwise
#: grows with every file a site ever listed.
FORGET_AFTER = timedelta(days=30)


@dataclass(frozen=True)
class CompleteRead:
    """A file's last read to its end (or a 304 that stood for one): when, the validators its
    answer carried (``etag``, ``last_modified``: sent back as If-None-Match and
    If-Modified-Since), how many URLs it listed (an index: children) and, for an index, which
    children (a 304 for an index walks on to them). ``shrunk_reads``: complete reads in a row
    since that listed under half as many (:func:`shrunk`)."""

    at: datetime
    etag: str | None = None
    last_modified: str | None = None
    entries: int = 0
    children: tuple[str, ...] | None = None
    shrunk_reads: int = 0

    @property
    def validators(self) -> dict[str, str]:
        """The conditional request headers this read allows (none: a full read)."""
        headers = {}
        if self.etag:
            headers["If-None-Match"] = self.etag
        if self.last_modified:
            headers["If-Modified-Since"] = self.last_modified
        return headers


@dataclass(frozen=True)
class SitemapRead:
    """The last time a walk asked for ``url`` and the ``<lastmod>`` its index then gave it
    (None: none given, or the file was not read whole enough to count as seen at that date),
    and the file's last complete read (None: never read whole)."""

    url: str
    read_at: datetime
    listed_lastmod: datetime | None
    complete: CompleteRead | None = None


#: a complete read listing under half the URLs of the file's last one, and this many fewer, is
#: taken as broken until this many reads in a row list as few
SHRINK_MIN_LOST = 10
SHRINK_ACCEPTED_AFTER = 3


def shrunk(before: CompleteRead | None, listed: int) -> int:
    """0 when a complete read listing ``listed`` URLs stands as the file's complete read; else
    how many reads in a row, this one included, listed under half of ``before``'s (and
    :data:`SHRINK_MIN_LOST` fewer). A valid but empty or gutted file (a generator that failed
    half way, a CDN serving a stub) taken as complete made every page it stopped listing an
    early check, silently (found by an exploratory run); a listing that stays small is the
    site's, and is taken on the :data:`SHRINK_ACCEPTED_AFTER`-th read."""
    if before is None or listed * 2 >= before.entries or before.entries - listed < SHRINK_MIN_LOST:
        return 0
    reads = before.shrunk_reads + 1
    return 0 if reads >= SHRINK_ACCEPTED_AFTER else reads


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
            at = item.get("complete_at")
            children = item.get("children")
            complete = (
                None
                if at is None
                else CompleteRead(
                    at,
                    item.get("etag"),
                    item.get("last_modified"),
                    int(item.get("entries") or 0),
                    None if children is None else tuple(children),
                    int(item.get("shrunk_reads") or 0),
                )
            )
            reads[url] = SitemapRead(url, read_at, item.get("listed_lastmod"), complete)
    return reads


def reads_to_row(
    reads: Mapping[str, SitemapRead], listed: Iterable[str], now: datetime
) -> list[dict[str, Any]]:
    """The memory to keep: every file listed this time (``listed``), and the others while
    they were read within :data:`FORGET_AFTER` of ``now``."""
    keep = set(listed)
    return [
        {"url": r.url, "read_at": r.read_at, "listed_lastmod": r.listed_lastmod}
        | _complete_to_row(r.complete)
        for r in sorted(reads.values(), key=lambda r: r.url)
        if r.url in keep or now - r.read_at < FORGET_AFTER
    ]


def _complete_to_row(c: CompleteRead | None) -> dict[str, Any]:
    if c is None:
        return dict.fromkeys(
            ("complete_at", "etag", "last_modified", "entries", "children", "shrunk_reads")
        )
    return {
        "complete_at": c.at,
        "etag": c.etag,
        "last_modified": c.last_modified,
        "entries": c.entries,
        "children": None if c.children is None else list(c.children),
        "shrunk_reads": c.shrunk_reads,
    }
