"""robots.txt per RFC 9309 for the product token ``freshness-pipeline``.

The record (what the server said, when, per the cycle's ``now``) is kept apart from the policy
(what we may do) so the pipeline can store records as data and rebuild policies without
refetching. Failure modes follow the RFC: a 4xx means "no robots.txt, crawl freely", a 5xx or an
unreachable host means "assume complete disallow" (a struggling site must not get more load).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal
from urllib.parse import urljoin, urlsplit

import aiohttp
from protego import Protego

from freshness_pipeline.science.retry_after import THROTTLE_STATUSES
from freshness_pipeline.warehouse.archive import ArchiveWriteError, ArchiveWriter, TruncatedReason
from freshness_pipeline.web.archiving import archive_answer
from freshness_pipeline.web.client.body import BodyDecodeError, BodyInterrupted, read_limited
from freshness_pipeline.web.client.fetches import host_key as url_host_key
from freshness_pipeline.web.netguard import (
    ALLOW_ENV,
    BLOCKED_PREFIX,
    check_url_scheme,
    find_blocked_error,
)
from freshness_pipeline.web.politeness import hold_for_answer

__all__ = [
    "ALLOW_LIST_REASON",
    "MAX_REDIRECTS",
    "PRODUCT_TOKEN",
    "ROBOTS_ERROR_TTL",
    "ROBOTS_TTL",
    "RobotsMode",
    "RobotsPolicy",
    "RobotsRecord",
    "allowed_mask",
    "refusal_reason",
    "fetch_robots",
    "needs_refresh",
    "record_ttl",
    "refused_by_allow_list",
    "robots_policy",
    "robots_url_for",
]

PRODUCT_TOKEN = "freshness-pipeline"
ROBOTS_TTL = timedelta(hours=24)
# An unreachable or failing robots.txt means "disallow all", so it is worth asking again sooner
# than a day; the RFC's 24 h is an upper bound for a good copy.
ROBOTS_ERROR_TTL = timedelta(hours=1)
MAX_REDIRECTS = 5

RobotsMode = Literal["parsed", "allow_all", "disallow_all"]


@dataclass
class RobotsRecord:
    """What fetching a host's robots.txt produced, as of the cycle's ``now``."""

    host: str
    robots_url: str
    http_status: int | None
    body: str
    error: str | None
    fetched_at: datetime


def robots_url_for(base_url: str) -> str:
    """``scheme://authority/robots.txt`` for any URL on the host."""
    check_url_scheme(base_url)
    parts = urlsplit(base_url)
    return f"{parts.scheme.lower()}://{parts.netloc.rsplit('@', 1)[-1].lower()}/robots.txt"


def _decode(body: bytes) -> str:
    text = body.decode("utf-8", errors="replace")
    return text.removeprefix("\ufeff")


def _cut_last_line(text: str) -> str:
    # A truncated last line could turn "Disallow: /private" into "Disallow: /pri": drop it.
    cut = max(text.rfind("\n"), text.rfind("\r"))
    return text[: cut + 1] if cut >= 0 else ""


async def fetch_robots(
    session: aiohttp.ClientSession,
    base_url: str,
    *,
    now: datetime,
    user_agent: str,
    max_bytes: int = 512_000,
    timeout: float = 30.0,
    archive: ArchiveWriter | None = None,
) -> RobotsRecord:
    """GET ``/robots.txt``, following up to five redirects by hand (RFC 9309 2.3.1.2).

    Redirects are followed manually so each hop goes through the same scheme check (and the
    session's guarded connector). Bodies past ``max_bytes`` are cut at the last full line (the
    RFC asks for at least 500 KiB to be parsed). Never raises for network trouble: the record
    carries the error, and :func:`robots_policy` turns it into "disallow all". Every answer
    (each redirect hop too) goes to ``archive`` when one is given.
    """
    first = robots_url_for(base_url)
    host = urlsplit(first).netloc
    url = first
    client_timeout = aiohttp.ClientTimeout(total=timeout)
    status: int | None = None
    try:
        for _hop in range(MAX_REDIRECTS + 1):
            async with session.get(
                url,
                headers={"User-Agent": user_agent, "Accept": "text/plain,*/*;q=0.5"},
                allow_redirects=False,
                timeout=client_timeout,
                auto_decompress=False,
            ) as resp:
                status = resp.status
                if status in THROTTLE_STATUSES:
                    # the pages' turn of this run waits for it too
                    hold_for_answer(url_host_key(url), resp.headers, now)
                if status in (301, 302, 303, 307, 308) and resp.headers.get("Location"):
                    _archive(archive, url, resp, b"", now, truncated="length")
                    url = urljoin(url, resp.headers["Location"].strip())
                    check_url_scheme(url)
                    continue
                if 200 <= status < 300:
                    try:
                        read = await read_limited(
                            resp,
                            max_bytes=max_bytes * 4,
                            max_decompressed_bytes=max_bytes,
                            truncate=True,
                        )
                    except BodyInterrupted as exc:
                        # Archived as cut; the rules are not read from it (a lost line could
                        # be a Disallow), so the host counts as unreachable.
                        _archive(archive, url, resp, exc.partial, now, truncated=exc.reason)
                        raise
                    _archive(archive, url, resp, read.body, now, truncated=read.cut_by)
                    text = _decode(read.body)
                    if read.truncated or len(read.body) >= max_bytes:
                        text = _cut_last_line(text)
                    return RobotsRecord(host, first, status, text, None, now)
                _archive(archive, url, resp, b"", now, truncated="length")
                return RobotsRecord(host, first, status, "", None, now)
        return RobotsRecord(host, first, status, "", f"more than {MAX_REDIRECTS} redirects", now)
    except ArchiveWriteError:
        raise  # a full disk fails the cycle
    except BodyDecodeError as exc:
        return RobotsRecord(host, first, None, "", str(exc), now)
    except ValueError as exc:  # a redirect to a non-http(s) or malformed URL
        return RobotsRecord(host, first, None, "", f"bad redirect: {exc}", now)
    except Exception as exc:
        blocked = find_blocked_error(exc)
        message = f"{BLOCKED_PREFIX}{blocked}" if blocked else _describe(exc)
        return RobotsRecord(host, first, None, "", message, now)


def _archive(
    writer: ArchiveWriter | None,
    url: str,
    resp: aiohttp.ClientResponse,
    body: bytes,
    now: datetime,
    *,
    truncated: TruncatedReason | None,
) -> None:
    with contextlib.suppress(ValueError):  # an answer the archive cannot store: robots go on
        archive_answer(writer, url, resp, body, kind="robots", fetched_at=now, truncated=truncated)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timeout"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass
class RobotsPolicy:
    """What a robots record lets us do; build it with :func:`robots_policy`."""

    mode: RobotsMode
    record: RobotsRecord | None = None
    _parser: Protego | None = field(default=None, repr=False)

    def can_fetch(self, url: str) -> bool:
        if self.mode == "allow_all":
            return True
        if self.mode == "disallow_all":
            return False
        assert self._parser is not None
        return self._parser.can_fetch(url, PRODUCT_TOKEN)

    @property
    def crawl_delay(self) -> float | None:
        """Seconds between requests for our group: Crawl-delay, or the gap a Request-rate implies.

        Fractions are kept (``Crawl-delay: 0.5`` means half a second).
        """
        if self._parser is None:
            return None
        delay = self._parser.crawl_delay(PRODUCT_TOKEN)
        rate = self._parser.request_rate(PRODUCT_TOKEN)
        if rate is not None and rate.requests > 0:
            implied = rate.seconds / rate.requests
            delay = implied if delay is None else max(delay, implied)
        return None if delay is None else float(delay)

    @property
    def sitemaps(self) -> list[str]:
        """Sitemap URLs named in the file (they apply to every group)."""
        if self._parser is None:
            return []
        base = self.record.robots_url if self.record is not None else None
        found: list[str] = []
        for raw in self._parser.sitemaps:
            loc = urljoin(base, raw.strip()) if base else raw.strip()
            try:
                check_url_scheme(loc)
            except ValueError:
                continue
            if loc not in found:
                found.append(loc)
        return found


def robots_policy(record: RobotsRecord) -> RobotsPolicy:
    """Turn a record into a policy per RFC 9309 section 2.3.1.

    2xx: parse. 3xx left over (too many redirects) and 4xx: "unavailable", allow all -- except
    429, which is the server asking for less load and is treated as unreachable. 5xx and
    network errors: "unreachable", disallow all.
    """
    status = record.http_status
    if status is None:
        return RobotsPolicy("disallow_all", record)
    if 200 <= status < 300:
        try:
            parser = Protego.parse(_by_product_token(record.body))
        except Exception:  # RFC 9309: unparseable lines are ignored, so garbage allows all
            parser = Protego.parse("")
        return RobotsPolicy("parsed", record, parser)
    if status == 429:
        return RobotsPolicy("disallow_all", record)
    if 300 <= status < 500:
        return RobotsPolicy("allow_all", record)
    return RobotsPolicy("disallow_all", record)


#: a group's User-agent line; its value up to the end of the line or a comment
_USER_AGENT_LINE = re.compile(r"(?im)^([ \t]*user-?agent[ \t]*:[ \t]*)([^\r\n#]*)")
#: the product token a User-agent value starts with (RFC 9309 2.2.1: letters, "_" and "-")
_PRODUCT = re.compile(r"[A-Za-z_-]+")


def _by_product_token(body: str) -> str:
    """``body`` with each User-agent line's value cut to its product token, as RFC 9309 and
    Google's parser match groups: a site that pastes the whole user agent
    (``freshness-pipeline/0.1``) names this crawler, and one that names another crawler whose
    token begins like ours (``freshness``) does not. Protego looks for the line's value inside
    the crawler's name from a word boundary, which got both wrong."""

    def token(match: re.Match[str]) -> str:
        value = match[2].strip()
        product = _PRODUCT.match(value)
        if value == "*" or product is None:
            return match[0]
        name = product.group()
        if name.lower() == PRODUCT_TOKEN:
            name = PRODUCT_TOKEN
        elif PRODUCT_TOKEN.startswith(name.lower()):
            name = f"-{name}"  # another crawler: a name ours does not start with
        return match[1] + name

    return _USER_AGENT_LINE.sub(token, body)


#: how a refusal by the network allow-list begins, where a URL's reason is given: the site
#: said nothing, so url_state keeps what the URL was (stages.state)
ALLOW_LIST_REASON = "address not allowed"


def refusal_reason(policy: RobotsPolicy) -> str:
    """Why ``policy`` refuses a URL, in the words a user can act on: the robots.txt rules, or
    the robots.txt fetch that could not be made (the network allow-list refused the address,
    the host did not answer, it answered an error)."""
    if policy.mode == "parsed":
        return "robots.txt disallows"
    record = policy.record
    if record is not None and refused_by_allow_list(record):
        return f"{ALLOW_LIST_REASON} ({ALLOW_ENV})"
    if record is None or record.http_status is None:
        return "robots.txt unreachable"
    return f"robots.txt answered HTTP {record.http_status}"


def refused_by_allow_list(record: RobotsRecord) -> bool:
    """The robots.txt request was never sent: the network allow-list refused its address."""
    return (record.error or "").startswith(BLOCKED_PREFIX)


def allowed_mask(policy: RobotsPolicy, urls: Sequence[str]) -> list[bool]:
    """``can_fetch`` over many URLs, for filtering a polars column in one go."""
    if policy.mode == "allow_all":
        return [True] * len(urls)
    if policy.mode == "disallow_all":
        return [False] * len(urls)
    return [policy.can_fetch(u) for u in urls]


def record_ttl(record: RobotsRecord) -> timedelta:
    """How long a record may be trusted: a day for an answer, an hour for a failure, not at
    all for a request the network allow-list refused: that says nothing of the host, only of
    this machine's settings, and asking again sends nothing unless they changed."""
    if refused_by_allow_list(record):
        return timedelta(0)
    status = record.http_status
    if status is None or status == 429 or status >= 500 or record.error:
        return ROBOTS_ERROR_TTL
    return ROBOTS_TTL


def needs_refresh(
    record_fetched_at: datetime | None, now: datetime, *, ttl: timedelta = ROBOTS_TTL
) -> bool:
    """Whether a cached record is too old (or too far in the future) for the cycle at ``now``.

    Distance is taken both ways so a record written by a cycle run with a later ``now`` (a
    backfill, a mistaken ``--now``) does not stay pinned until that date.
    """
    if record_fetched_at is None:
        return True
    return abs(now - record_fetched_at) >= ttl
