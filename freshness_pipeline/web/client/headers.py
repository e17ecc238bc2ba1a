"""What a response's headers say: how long a Retry-After asks us to stay away, and how old
the content is by its Last-Modified, both measured against the response's own Date where it
has one and the cycle's ``now`` otherwise, so that no decision reads the wall clock (that
shared rule, and the shared cached date parsing, is why they live together); and a header's
text when the server sent bytes that are not UTF-8."""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from freshness_pipeline.science.retry_after import MAX_RETRY_AFTER_S

__all__ = [
    "MIN_CONTENT_AGE_S",
    "content_age_days",
    "header_text",
    "header_url",
    "parse_retry_after",
]

#: aiohttp hands a header's bytes that are not UTF-8 over as lone surrogates, which no table,
#: JSON or request can hold: one such byte in one ETag failed every host's results. Read as
#: Latin-1, what HTTP/1.1 headers were.
_STRAY_AS_LATIN1 = {0xDC00 + b: chr(b) for b in range(0x80, 0x100)}
_NON_ASCII_BYTE = re.compile(rb"[\x80-\xff]")


def header_text(value: str | None) -> str | None:
    """A header's text as it can be stored and sent back: any byte that was not UTF-8 read as
    Latin-1."""
    if value is None or value.isascii():
        return value
    return value.translate(_STRAY_AS_LATIN1)


def header_url(value: str | None) -> str | None:
    """A URL from a header (Location) with every byte that is not ASCII percent-encoded, as
    browsers send such a URL back: the server gets its own bytes again, UTF-8 or not."""
    if value is None or value.isascii():
        return value
    raw = value.encode("utf-8", "surrogateescape")
    return _NON_ASCII_BYTE.sub(lambda m: b"%%%02X" % m[0][0], raw).decode("ascii")


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


#: How far a Last-Modified may run ahead of its response's Date (two clocks of one server,
#: or of a server and the proxy that stamped the Date) before it is taken for a lie.
LAST_MODIFIED_SKEW_S = 60.0


def usable_last_modified(last_modified: str | None, date: str | None) -> str | None:
    """``last_modified``, or None when it is later than the response's own ``Date``: RFC 9110
    8.8.2.1 forbids that, and such a date (a placeholder 2100, a clock in the future) sent back
    as If-Modified-Since gets a 304 whatever the page has become, hiding its changes (found by
    an exploratory run). Without a parsable Date nothing is judged: the cycle's time may be a
    simulated one."""
    modified = _http_date(last_modified)
    served = _http_date(date) if date else None
    if modified is None or served is None:
        return last_modified
    if (modified - served).total_seconds() > LAST_MODIFIED_SKEW_S:
        return None
    return last_modified


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
