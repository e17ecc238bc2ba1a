"""Every answer a cycle gets, archived as it arrives: pages by the fetcher, robots.txt and
sitemaps by discovery, all through one place so that every record is built from the response
the same way."""

from __future__ import annotations

from datetime import datetime

import aiohttp

from freshness_pipeline.warehouse.archive import (
    ArchivedOriginal,
    ArchivedRecord,
    ArchiveWriter,
    FetchKind,
    HttpExchange,
    TruncatedReason,
)
from freshness_pipeline.warehouse.archive.records import unchecked

__all__ = ["archive_answer"]


def archive_answer(
    writer: ArchiveWriter | None,
    url: str,
    resp: aiohttp.ClientResponse,
    body: bytes,
    *,
    kind: FetchKind = "page",
    fetched_at: datetime | None = None,
    truncated: TruncatedReason | None = None,
    previous: ArchivedOriginal | None = None,
) -> ArchivedRecord | None:
    """Write one answer (its request, status, headers as received and the body as the client
    read it: decoded, which the stored headers then say) to ``writer``; None without a writer.

    A 304, or a body whose digest equals ``previous``'s, becomes a revisit record referring to
    it. An exchange the archive cannot store as given raises ValueError (the caller notes it
    and goes on); a write the disk refuses raises ArchiveWriteError, which fails the cycle.
    """
    if writer is None:
        return None
    version = resp.version
    # Every field given and then the constructor's own checks: a frozen dataclass's __init__
    # sets its twelve fields one object.__setattr__ at a time, on every answer a cycle gets.
    exchange = unchecked(
        HttpExchange,
        url=url,
        status=resp.status,
        reason=resp.reason or "",
        request_headers=tuple(resp.request_info.headers.items()),
        response_headers=resp.raw_headers,
        body=body,
        method="GET",
        http_version=f"{version.major}.{version.minor}" if version else "1.1",
        body_decoded=bool(resp.headers.get("Content-Encoding")),
        truncated=truncated,
        fetched_at=fetched_at,
        ip_address=None,
    )
    exchange.__post_init__()
    return writer.write_exchange(exchange, previous=previous, kind=kind)
