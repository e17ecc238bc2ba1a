"""A planned fetch and what it came to, in the words the rest of the pipeline uses: the request
the planner hands the client, the result the fetch stage stores, the outcomes a result can
have, and the host key requests are queued by. The scheduler, the classification of answers and
the fetch stage all build or read these, so they belong to none of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from freshness_pipeline.science.fingerprint import ContentRecord
from freshness_pipeline.science.normalize import InvalidURL, url_authority
from freshness_pipeline.warehouse.archive import ArchivedOriginal

__all__ = [
    "TIME_LIMIT_REASON",
    "FetchRequest",
    "FetchResult",
    "Fingerprinter",
    "Outcome",
    "host_key",
]

Outcome = Literal[
    "not_modified",
    "unchanged",
    "changed",
    "new",
    "gone",
    "error",
    "redirect",
    "blocked",
    "deferred",
]
Fingerprinter = Callable[[bytes, str | None], str]


#: Why a planned fetch was deferred when the cycle, not the host, ran out: every other
#: deferral is the host's doing (its breaker, a Retry-After longer than the cycle).
TIME_LIMIT_REASON = "cycle time limit reached"


@dataclass
class FetchRequest:
    """One planned page fetch with what we remember from last time."""

    url: str
    host: str = ""  # authority key (host[:port], lower-cased); derived from url when empty
    etag: str | None = None
    last_modified: str | None = None  # the server's Last-Modified string, sent back verbatim
    prev_fingerprint: str | None = None
    crawl_delay: float | None = None  # seconds between request starts to this host
    selectors: tuple[str, ...] = ()
    # What earlier cycles learned of the host (science.capacity): the gap between request
    # starts it takes without throttling, and how many requests it takes at once (None: the
    # settings' host_concurrency).
    min_gap_s: float | None = None
    concurrency: int | None = None
    # What the archive holds of the URL (its last original): a 304, or a body with the same
    # payload digest, is then a revisit record referring to it, and an identical body needs
    # no extraction.
    archived: ArchivedOriginal | None = None
    # ``archived`` as the plan's text (ArchivedOriginal JSON, which url_state took from
    # ``to_json``): what a 304 keeps for the URL, without formatting it again.
    archived_json: str | None = None
    # The URL class's fields (name -> CSS selector) and its json_ld (config.Extraction).
    fields: dict[str, str] | None = None
    json_ld: bool | None = None
    # What to ask the server for when it is not ``url`` (the key): the site's own spelling of
    # the page (stages.candidates.with_request_spellings). Results stay under ``url``.
    request_url: str | None = None


@dataclass
class FetchResult:
    """What one planned fetch came to.

    ``sent`` is False when nothing went on the wire for the page (deferred, refused scheme,
    blocked address): such rows belong in ``fetch_results`` but not in ``fetch_log``. For a 304
    the validators and fingerprint fall back to the request's, since the stored copy is still the
    current one.
    """

    url: str
    host: str
    http_status: int | None
    outcome: Outcome
    fingerprint: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    content_type: str | None = None
    bytes: int = 0
    conditional: bool = False
    duration_ms: float = 0.0
    location: str | None = None
    # The URL the page names as its canonical one (link element or Link header), when it is
    # another than the page's own: the inventory finds it, and of two copies that one stays.
    canonical: str | None = None
    # Feeds of the page's host that the page announces, or the page itself when it is a feed
    # or a sitemap (a listing the user seeded): the next cycle's discovery reads them
    # (web.discovery).
    feeds: list[str] | None = None
    retry_after_s: float | None = None
    error: str | None = None
    sent: bool = True
    # Which conditional header went out: "etag" (If-None-Match), "last_modified"
    # (If-Modified-Since) or None. Validator trust (science/validators.py) needs to know which
    # validator a 200 or 304 answered.
    validator: str | None = None
    # Days from the body's Last-Modified to the response's Date (see content_age_days).
    content_age_days: float | None = None
    # Where the archive put the request's record, and the payload's digest (None: nothing
    # archived); ``archived`` the URL's original to refer to next time (ArchivedOriginal JSON).
    warc_filename: str | None = None
    warc_offset: int | None = None
    warc_length: int | None = None
    payload_digest: str | None = None
    archived: str | None = None
    # A version worth keeping (new or changed content): what it says.
    title: str | None = None
    text: str | None = None
    fields: str | None = None  # JSON object
    # The answers before this one, in order, when the fetch followed redirects to other
    # spellings of the page (outcomes.fetch_one): each a request sent, so each a fetch_log row
    # of its own; fetch_results and url_state read only the last answer.
    hops: list[FetchResult] | None = None

    def keep_version(self, record: ContentRecord) -> None:
        """Take what a version worth keeping says (its title, text and fields as JSON), when
        ``record`` has it (an unchanged body's record has only its fingerprint)."""
        if record.fields is not None:
            self.title, self.text, self.fields = record.title, record.text, record.fields_json

    @classmethod
    def unsent(
        cls, url: str, host: str, outcome: Outcome, error: str, retry_after_s: float | None = None
    ) -> FetchResult:
        """A planned page nothing went on the wire for, and why."""
        return cls(url, host, None, outcome, retry_after_s=retry_after_s, error=error, sent=False)


def host_key(url: str) -> str:
    """The host partition key (lower-cased host[:port], default port dropped) of a URL; the raw
    authority for URLs the normalizer rejects, so that a bad URL still gets a queue."""
    try:
        return url_authority(url)
    except InvalidURL:
        return urlsplit(url).netloc.rsplit("@", 1)[-1].lower()
