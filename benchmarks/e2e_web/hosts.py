"""The hosts of the benchmark web: what each one serves and how it misbehaves.

Every behaviour a crawler meets on the real web and that can cost it freshness or politeness is
on at least one host, and most hosts mix several, so that no single trick (trusting validators,
trusting sitemaps, ignoring boilerplate) is right everywhere. The profiles are data; the truth
(truth.py) draws pages and change times from them and the server (server.py) acts them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

#: change patterns a page can follow (truth.py draws the events)
PATTERNS = ("poisson", "daily", "few_hours", "bursty", "static")

#: what a host does with HTTP validators
VALIDATOR_MODES = (
    "honest",  # ETag and Last-Modified, 304 when unchanged
    "last_modified_only",  # honest Last-Modified, no ETag
    "none",  # neither: every request is a full 200
    "etag_per_response",  # a new ETag on every response (never matches)
    "last_modified_now",  # Last-Modified is always the response time
    "stuck_304",  # ETag and Last-Modified never move: 304 although the content changed
)

#: volatile parts of a page that are not content
BOILERPLATE_KINDS = ("timestamp", "ad_top", "ad_inline", "csrf", "view_counter")

#: where the host lists its pages
SITEMAP_KINDS = (
    "none",  # /sitemap.xml answers 404
    "plain",  # /sitemap.xml, a urlset
    "index_gz",  # /sitemap_index.xml naming a gzipped and a plain child urlset
)

#: what a sitemap's <lastmod> says
LASTMOD_MODES = (
    "accurate",  # the time of the page's last change
    "missing",  # no <lastmod>
    "now",  # always the time the sitemap was served
    "stale",  # the page's first publication, never moved
)

FEED_KINDS = ("rss", "atom")

MIX_DEFAULT = {"poisson": 0.45, "daily": 0.15, "few_hours": 0.10, "bursty": 0.15, "static": 0.15}
MIX_NEWS = {"poisson": 0.50, "daily": 0.05, "few_hours": 0.20, "bursty": 0.20, "static": 0.05}
MIX_SHOP = {"poisson": 0.35, "daily": 0.35, "few_hours": 0.05, "bursty": 0.10, "static": 0.15}
MIX_STATIC = {"poisson": 0.35, "daily": 0.05, "few_hours": 0.0, "bursty": 0.10, "static": 0.50}
MIX_FORUM = {"poisson": 0.40, "daily": 0.0, "few_hours": 0.05, "bursty": 0.40, "static": 0.15}
MIX_GOV = {"poisson": 0.25, "daily": 0.30, "few_hours": 0.0, "bursty": 0.05, "static": 0.40}


@dataclass(frozen=True)
class HostProfile:
    """One host of the web. ``n_pages`` is the full-size count; the quick web scales it."""

    name: str
    n_pages: int
    section: str  # the path prefix of its pages, e.g. "news" -> /news/<slug>-<id>.html
    query_urls: bool = False  # pages at /<section>.php?id=<id>&cat=<c> instead of a path
    validators: str = "honest"
    boilerplate: tuple[str, ...] = ()
    mix: dict[str, float] = field(default_factory=lambda: dict(MIX_DEFAULT))
    rate_shift: float = 0.0  # log10 shift of the Poisson rates (fast news, slow archives)
    daily_hour: float = 5.0  # UTC hour around which the daily pages update
    # robots.txt
    robots_missing: bool = False  # robots.txt answers 404 (everything allowed)
    crawl_delay: float | None = None
    disallow: tuple[str, ...] = ()  # path prefixes; also listed in the sitemap
    disallowed_share: float = 0.0  # share of its pages placed under disallow[0]
    # discovery
    sitemap: str = "none"
    sitemap_in_robots: bool = True
    lastmod: str = "missing"
    sitemap_tracking_param: bool = False  # sitemap URLs carry utm_source=sitemap
    feed: str | None = None
    new_per_day: float = 0.0  # new pages, listed in the sitemap/feed from when they appear
    # failures and pacing
    burst_min_gap_s: float | None = None  # 429 + Retry-After when requests come closer
    retry_after_s: int = 2
    latency_s: float = 0.0
    error_share: float = 0.0  # share of page requests answered 5xx
    gone_share: float = 0.0  # share of its starting pages that go during the run
    gone_status: int = 404

    def __post_init__(self) -> None:
        if self.validators not in VALIDATOR_MODES:
            raise ValueError(f"host {self.name}: unknown validators {self.validators!r}")
        if self.sitemap not in SITEMAP_KINDS:
            raise ValueError(f"host {self.name}: unknown sitemap {self.sitemap!r}")
        if self.lastmod not in LASTMOD_MODES:
            raise ValueError(f"host {self.name}: unknown lastmod {self.lastmod!r}")
        if self.feed is not None and self.feed not in FEED_KINDS:
            raise ValueError(f"host {self.name}: unknown feed {self.feed!r}")
        unknown = set(self.boilerplate) - set(BOILERPLATE_KINDS)
        if unknown:
            raise ValueError(f"host {self.name}: unknown boilerplate {sorted(unknown)}")
        if set(self.mix) - set(PATTERNS) or abs(sum(self.mix.values()) - 1.0) > 1e-9:
            raise ValueError(f"host {self.name}: mix must weigh {PATTERNS} to 1")
        if self.new_per_day > 0 and not self.lists_pages:
            raise ValueError(f"host {self.name}: new pages need a sitemap or a feed")
        if self.disallowed_share > 0 and not self.disallow:
            raise ValueError(f"host {self.name}: disallowed pages need a Disallow rule")

    @property
    def lists_pages(self) -> bool:
        """Whether a crawler can learn of its pages other than from the seeds."""
        return self.sitemap != "none" or self.feed is not None

    def describe(self) -> str:
        """A short, human-readable list of the host's behaviours for the report tables."""
        parts = [self.validators.replace("_", " ")]
        if self.query_urls:
            parts.append("query URLs")
        parts += [b.replace("_", " ") for b in self.boilerplate]
        if self.robots_missing:
            parts.append("no robots.txt")
        if self.crawl_delay:
            parts.append(f"Crawl-delay {self.crawl_delay:g}")
        if self.disallow:
            parts.append("Disallow " + " ".join(self.disallow))
        if self.sitemap != "none":
            where = "" if self.sitemap_in_robots else " (not in robots)"
            amp = " bare &" if self.query_urls else ""
            kind = "gz index" if self.sitemap == "index_gz" else "sitemap"
            parts.append(f"{kind}{where}{amp} lastmod {self.lastmod}")
        else:
            parts.append("no sitemap")
        if self.feed:
            parts.append(f"{self.feed} feed")
        if self.new_per_day:
            parts.append(f"{self.new_per_day:g} new/day")
        if self.burst_min_gap_s:
            parts.append(f"429 under {self.burst_min_gap_s:g}s gaps")
        if self.latency_s:
            parts.append(f"{self.latency_s * 1000:.0f} ms latency")
        if self.error_share:
            parts.append(f"{self.error_share:.0%} 5xx")
        if self.gone_share:
            parts.append(f"{self.gone_share:.0%} go ({self.gone_status})")
        return ", ".join(parts)


HOSTS: tuple[HostProfile, ...] = (
    HostProfile(
        "news-wire",
        200,
        "news",
        boilerplate=("timestamp", "ad_top"),
        mix=MIX_NEWS,
        rate_shift=0.5,
        sitemap="plain",
        lastmod="accurate",
        feed="rss",
        new_per_day=4.0,
        gone_share=0.03,
    ),
    HostProfile(
        "shop-amp",
        200,
        "product",
        query_urls=True,
        boilerplate=("ad_inline",),
        mix=MIX_SHOP,
        daily_hour=4.0,
        sitemap="plain",
        lastmod="accurate",
        new_per_day=2.0,
    ),
    HostProfile(
        "shop-lm",
        150,
        "item",
        query_urls=True,
        validators="last_modified_only",
        boilerplate=("csrf",),
        mix=MIX_SHOP,
        daily_hour=7.0,
        sitemap="plain",
        lastmod="missing",
        sitemap_tracking_param=True,
        new_per_day=2.0,
    ),
    HostProfile(
        "blog-quiet",
        150,
        "blog",
        validators="last_modified_only",
        mix=MIX_STATIC,
        rate_shift=-0.7,
        sitemap_in_robots=False,
        gone_share=0.05,
        gone_status=404,
    ),
    HostProfile(
        "docs-lastmod-now",
        150,
        "docs",
        validators="none",
        boilerplate=("view_counter",),
        sitemap="plain",
        sitemap_in_robots=False,
        lastmod="now",
    ),
    HostProfile(
        "forum-disallow",
        180,
        "thread",
        validators="none",
        boilerplate=("ad_top", "timestamp"),
        mix=MIX_FORUM,
        disallow=("/user/", "/search"),
        disallowed_share=0.06,
        sitemap="plain",
        lastmod="accurate",
    ),
    HostProfile(
        "gov-delay1",
        60,
        "notice",
        mix=MIX_GOV,
        crawl_delay=1.0,
        disallow=("/private/",),
        disallowed_share=0.08,
        sitemap="plain",
        lastmod="accurate",
        daily_hour=9.0,
    ),
    HostProfile(
        "wiki-gz-delay",
        120,
        "wiki",
        crawl_delay=0.5,
        sitemap="index_gz",
        lastmod="accurate",
        new_per_day=1.0,
    ),
    HostProfile(
        "etag-rotating",
        150,
        "story",
        validators="etag_per_response",
        boilerplate=("csrf",),
        sitemap="plain",
        lastmod="missing",
    ),
    HostProfile(
        "lm-is-now",
        150,
        "page",
        validators="last_modified_now",
        boilerplate=("timestamp",),
        sitemap="plain",
        lastmod="missing",
    ),
    HostProfile(
        "stuck-304",
        120,
        "article",
        validators="stuck_304",
        sitemap="plain",
        lastmod="stale",
    ),
    HostProfile(
        "burst-429",
        150,
        "listing",
        burst_min_gap_s=0.4,
        retry_after_s=2,
        sitemap="plain",
        lastmod="accurate",
    ),
    HostProfile(
        "slow-300ms",
        150,
        "report",
        latency_s=0.3,
        boilerplate=("view_counter",),
        sitemap="plain",
        lastmod="missing",
    ),
    HostProfile(
        "flaky-5xx",
        150,
        "entry",
        validators="last_modified_only",
        error_share=0.15,
        sitemap="plain",
        lastmod="accurate",
    ),
    HostProfile(
        "market-daily",
        150,
        "quote",
        mix=MIX_SHOP,
        daily_hour=5.5,
        boilerplate=("ad_inline",),
        sitemap="plain",
        lastmod="stale",
    ),
    HostProfile(
        "events-delay",
        90,
        "event",
        validators="none",
        boilerplate=("csrf", "timestamp"),
        crawl_delay=0.75,
        sitemap="plain",
        lastmod="accurate",
        gone_share=0.10,
        gone_status=410,
    ),
    HostProfile(
        "jobs-churn",
        200,
        "job",
        sitemap="plain",
        lastmod="accurate",
        new_per_day=3.0,
        gone_share=0.10,
        gone_status=410,
    ),
    HostProfile(
        "archive-norobots",
        180,
        "archive",
        validators="last_modified_only",
        mix=MIX_STATIC,
        rate_shift=-0.5,
        robots_missing=True,
        sitemap="plain",
        lastmod="missing",
    ),
    HostProfile(
        "atom-feed",
        150,
        "post",
        boilerplate=("timestamp",),
        mix=MIX_NEWS,
        feed="atom",
        new_per_day=2.0,
    ),
    HostProfile(
        "mixed-nomap",
        150,
        "node",
        validators="none",
        boilerplate=("ad_inline", "view_counter"),
        gone_share=0.05,
        gone_status=404,
    ),
)


def scaled_hosts(scale: float, *, min_pages: int = 12) -> tuple[HostProfile, ...]:
    """The same hosts with ``scale`` times the pages (the quick web). New pages keep their rate
    per day, so a short run still sees enough of them to measure discovery."""
    if scale == 1.0:
        return HOSTS
    return tuple(replace(h, n_pages=max(min_pages, round(h.n_pages * scale))) for h in HOSTS)
