"""A deterministic synthetic web: sites, pages, their true change processes and their HTML.

Everything here is a pure function of the seed and a simulated time, so the HTTP server, the
ground-truth scorer and any benchmark that skips HTTP all see exactly the same web. Nothing in
this module touches the network, the disk or the wall clock.

Times are float seconds since the Unix epoch internally (whole seconds for change, birth and
death times, so that HTTP's one-second `Last-Modified` resolution never hides a change);
`datetime` objects are accepted at the edges and naive ones are read as UTC.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from functools import lru_cache
from html import escape
from urllib.parse import urlsplit

import numpy as np

BEHAVIOURS: tuple[str, ...] = (
    "honest",  # strong ETag + Last-Modified, correct 304s
    "lastmod_only",  # Last-Modified only, 304 on If-Modified-Since
    "no_validators",  # neither header, always 200
    "volatile",  # boilerplate changes per request, random ETag, never 304
    "polite",  # honest validators + Crawl-delay + Disallow: /private/
    "stale_lastmod",  # Last-Modified frozen at birth while content changes, never 304
)
URL_CLASSES: tuple[str, ...] = ("article", "listing", "static")
# Pages of this class (a hand-built world's; build_world draws only URL_CLASSES) are shop
# pages: a price in the text and in schema.org JSON-LD, for configured fields to read.
PRODUCT_CLASS = "product"
DAY = 86_400.0
DEFAULT_START = datetime(2025, 1, 6, tzinfo=UTC)
WARMUP_DAYS = 30.0  # changes are simulated this long before `start` so pages have a history

# The cho2000 preset (after Cho & Garcia-Molina, VLDB 2000): (share, low rate, high rate) per day.
CHO2000_BANDS: tuple[tuple[float, float, float], ...] = (
    (0.05, 4.0, 96.0),
    (0.18, 1.0, 4.0),
    (0.15, 1 / 7, 1.0),
    (0.16, 1 / 30, 1 / 7),
    (0.16, 1 / 120, 1 / 30),
    (0.30, 1 / 3650, 1 / 120),
)
# P(url_class | band). The overall rate mix stays exactly cho2000, but the class carries
# information (listings are fast, static pages slow) so a per-class prior has something to learn.
_CLASS_GIVEN_BAND: tuple[tuple[float, float, float], ...] = (
    (0.30, 0.70, 0.00),
    (0.60, 0.40, 0.00),
    (0.80, 0.10, 0.10),
    (0.70, 0.00, 0.30),
    (0.50, 0.00, 0.50),
    (0.35, 0.00, 0.65),
)
_PATH_TEMPLATES = {
    "article": "/articles/{}",
    "listing": "/listing/{}",
    "static": "/static/about-{}",
}
BORN_LATE_SHARE = 0.10
DIE_SHARE = 0.03
ZIPF_EXPONENT = 0.9


def to_ts(t: datetime | float | int) -> float:
    """Seconds since the epoch; naive datetimes are UTC because every decision here is UTC."""
    if isinstance(t, datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=UTC)
        return t.timestamp()
    return float(t)


def to_dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


def http_date(ts: float) -> str:
    """IMF-fixdate, floored to the second as HTTP requires."""
    return format_datetime(to_dt(math.floor(ts)), usegmt=True)


@dataclass(frozen=True)
class SiteSpec:
    """One simulated site. `behaviour` decides how honest its HTTP validators are."""

    name: str
    behaviour: str
    n_pages: int
    crawl_delay: float | None = None
    disallow: tuple[str, ...] = ()
    # Pages placed under /private/ (counted in n_pages). They are listed in the sitemap on
    # purpose, so a test can prove robots.txt wins over the sitemap.
    n_private: int = 0
    # robots.txt points to /sitemap_index.xml whose children are gzip files, as large sites do.
    sitemap_index: bool = False
    # Page bodies are gzip-encoded when the client accepts it, so byte counts differ from sizes.
    gzip_pages: bool = False

    def __post_init__(self) -> None:
        if self.behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {self.behaviour!r}; expected one of {BEHAVIOURS}")
        if self.n_pages < 1 or not 0 <= self.n_private <= self.n_pages:
            raise ValueError(f"site {self.name!r}: bad n_pages/n_private")
        if self.n_private and not any("/private/".startswith(d) for d in self.disallow):
            raise ValueError(
                f"site {self.name!r}: private pages need a Disallow covering /private/"
            )


def default_sites() -> list[SiteSpec]:
    """One site per interesting behaviour, ~400 pages: big enough to rank, small enough to demo."""
    return [
        SiteSpec("honest", "honest", 100, sitemap_index=True, gzip_pages=True),
        SiteSpec("lastmod", "lastmod_only", 80),
        SiteSpec("novalid", "no_validators", 70),
        SiteSpec("volatile", "volatile", 70),
        SiteSpec("polite", "polite", 80, crawl_delay=0.05, disallow=("/private/",), n_private=6),
    ]


@dataclass(frozen=True, eq=False)
class Page:
    """A page and its whole true history; the crawler must never see these fields."""

    page_id: int
    site: str
    path: str
    url_class: str
    value: float
    rate: float  # true changes per day
    change_times: np.ndarray = field(repr=False)  # sorted, unique, whole seconds
    born_at: float
    dies_at: float  # math.inf when the page never dies
    death_status: int  # 404 or 410 once dead
    disallowed: bool

    def version_at(self, t: datetime | float) -> int:
        """Content version = number of changes at or before t (a change at t is already live)."""
        return int(np.searchsorted(self.change_times, to_ts(t), side="right"))

    def is_alive(self, t: datetime | float) -> bool:
        ts = to_ts(t)
        return self.born_at <= ts < self.dies_at

    def last_modified_at(self, t: datetime | float) -> float:
        """Time of the latest change at or before t, else birth: what an honest server reports."""
        v = self.version_at(t)
        return float(self.change_times[v - 1]) if v else self.born_at


@dataclass(eq=False)
class World:
    seed: int
    start: datetime
    horizon_days: float
    sites: list[SiteSpec]
    pages: list[Page]
    _by_site: dict[str, dict[str, Page]] = field(init=False, repr=False)
    _site_specs: dict[str, SiteSpec] = field(init=False, repr=False)
    _links: dict[str, tuple[str, ...]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._site_specs = {s.name: s for s in self.sites}
        self._by_site = {s.name: {} for s in self.sites}
        for p in self.pages:
            self._by_site[p.site][p.path] = p
        # Listings link to a fixed pool of the site's articles (stable, so cheap to cache).
        self._links = {
            name: tuple(p.path for p in pages.values() if p.url_class == "article")[:40]
            for name, pages in self._by_site.items()
        }

    # ------------------------------------------------------------------ lookup
    @property
    def start_ts(self) -> float:
        return to_ts(self.start)

    @property
    def end(self) -> datetime:
        """Changes stop here: a page asked about later stays at its last version."""
        return self.start + timedelta(days=self.horizon_days)

    def site(self, name: str) -> SiteSpec:
        return self._site_specs[name]

    def pages_of(self, site: str) -> list[Page]:
        return list(self._by_site[site].values())

    def page_at(self, site: str, path: str) -> Page | None:
        return self._by_site[site].get(path)

    def page_by_id(self, page_id: int) -> Page | None:
        if 0 <= page_id < len(self.pages):
            return self.pages[page_id]
        return None

    def live_pages(self, site: str, t: datetime | float) -> list[Page]:
        ts = to_ts(t)
        return [p for p in self._by_site[site].values() if p.born_at <= ts < p.dies_at]

    # ------------------------------------------------------------------ validators
    def etag(self, page: Page, t: datetime | float) -> str:
        """Strong ETag that changes exactly when the content version does."""
        digest = hashlib.sha1(f"{self.seed}:{page.page_id}:{page.version_at(t)}".encode())
        return f'"{digest.hexdigest()[:20]}"'

    # ------------------------------------------------------------------ robots, sitemaps
    def robots_txt(self, site: str, base_url: str) -> str:
        spec = self.site(site)
        sitemap = "/sitemap_index.xml" if spec.sitemap_index else "/sitemap.xml"
        lines = [
            # A group for somebody else, so a parser that merges groups is caught out.
            "User-agent: BadBot",
            "Disallow: /",
            "",
            "User-agent: *",
        ]
        lines += [f"Disallow: {d}" for d in spec.disallow]
        if not spec.disallow:
            lines.append("Disallow:")
        if spec.crawl_delay is not None:
            lines.append(f"Crawl-delay: {spec.crawl_delay:g}")
        lines += ["", f"Sitemap: {base_url.rstrip('/')}{sitemap}", ""]
        return "\n".join(lines)

    def _sitemap_pages(self, site: str, t: datetime | float) -> list[Page]:
        return sorted(self.live_pages(site, t), key=lambda p: p.page_id)

    @staticmethod
    def _urlset(pages: Sequence[Page], base: str, ts: float) -> str:
        out = [
            '<?xml version="1.0" encoding="UTF-8"?>',
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">',
        ]
        for p in pages:
            lastmod = to_dt(p.last_modified_at(ts)).strftime("%Y-%m-%dT%H:%M:%SZ")
            out.append(
                f"  <url><loc>{escape(base + p.path)}</loc><lastmod>{lastmod}</lastmod></url>"
            )
        out.append("</urlset>\n")
        return "\n".join(out)

    def sitemap_xml(self, site: str, base_url: str, t: datetime | float) -> str:
        """All pages live at t with truthful <lastmod> (including /private/ ones on purpose)."""
        return self._urlset(self._sitemap_pages(site, t), base_url.rstrip("/"), to_ts(t))

    SITEMAP_CHUNK = 50

    def sitemap_chunks(self, site: str, t: datetime | float) -> list[list[Page]]:
        pages = self._sitemap_pages(site, t)
        n = self.SITEMAP_CHUNK
        return [pages[i : i + n] for i in range(0, len(pages), n)] or [[]]

    def sitemap_index_xml(self, site: str, base_url: str, t: datetime | float) -> str:
        base, ts = base_url.rstrip("/"), to_ts(t)
        out = [
            '<?xml version="1.0" encoding="UTF-8"?>',
            '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">',
        ]
        for i, chunk in enumerate(self.sitemap_chunks(site, t), start=1):
            newest = max((p.last_modified_at(ts) for p in chunk), default=self.start_ts)
            lastmod = to_dt(newest).strftime("%Y-%m-%dT%H:%M:%SZ")
            out.append(
                f"  <sitemap><loc>{base}/sitemap-{i}.xml.gz</loc><lastmod>{lastmod}</lastmod></sitemap>"
            )
        out.append("</sitemapindex>\n")
        return "\n".join(out)

    def sitemap_chunk_xml(
        self, site: str, base_url: str, t: datetime | float, i: int
    ) -> str | None:
        chunks = self.sitemap_chunks(site, t)
        if not 1 <= i <= len(chunks):
            return None
        return self._urlset(chunks[i - 1], base_url.rstrip("/"), to_ts(t))

    # ------------------------------------------------------------------ HTML
    def article_html(self, page: Page, version: int) -> str:
        """The <article> element: the only part a good extractor should fingerprint."""
        return _article_html(
            self.seed, page.page_id, page.url_class, version, _title(page), self._links[page.site]
        )

    def price(self, page: Page, version: int) -> str | None:
        """What a product page asks at a content version (None for other pages)."""
        if page.url_class != PRODUCT_CLASS:
            return None
        return _price(self.seed, page.page_id, version)

    def render(
        self,
        page: Page,
        t: datetime | float,
        *,
        volatile: Mapping[str, str] | None = None,
    ) -> str:
        """Full HTML for `page` as of t. `volatile` carries per-request noise (nonce, counter, ad)
        so this stays pure; the server makes the noise up for the volatile site."""
        ts = to_ts(t)
        version = page.version_at(ts)
        article = self.article_html(page, version)
        title = escape(_title(page))
        head_extra = _product_json_ld(page, self.price(page, version))
        top = ""
        aside = ""
        if volatile is not None:
            nonce = escape(volatile.get("nonce", ""))
            head_extra += f'\n<meta name="csrf-token" content="{nonce}">'
            top = (
                f'<div class="banner">Page generated {to_dt(ts).isoformat()} '
                f"(request {nonce})</div>\n"
                f'<script>window.__NONCE__ = "{nonce}";</script>\n'
            )
            aside = (
                f'<aside class="ad"><a href="/ads/{escape(volatile.get("ad_id", "0"))}">'
                f"{escape(volatile.get('ad', ''))}</a></aside>\n"
                f'<div class="visitors">You are visitor number {escape(volatile.get("counter", "0"))}'
                "</div>\n"
            )
        return (
            "<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            f"<title>{title}</title>{head_extra}</head>\n<body>\n"
            f'<header><nav><a href="/">{escape(page.site)}</a> | <a href="/sitemap.xml">Sitemap</a>'
            "</nav></header>\n"
            f"{top}<main>\n{article}\n</main>\n{aside}"
            f"<footer><p>&copy; {escape(page.site)} synthetic press. All rights reserved.</p>"
            "</footer>\n</body></html>\n"
        )

    def home_html(self, site: str, t: datetime | float) -> str:
        links = "".join(
            f'<li><a href="{p.path}">{escape(_title(p))}</a></li>'
            for p in self._sitemap_pages(site, t)[:30]
        )
        return (
            f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{escape(site)}</title>'
            f"</head><body><h1>{escape(site)}</h1><ul>{links}</ul></body></html>\n"
        )

    # ------------------------------------------------------------------ URL variants
    def variant_urls(
        self, base_urls: Mapping[str, str], per_kind: int = 1
    ) -> list[tuple[str, str]]:
        """(variant, canonical) pairs that a URL normalizer should collapse.

        They are all fetchable and serve the same page. Host case and default-port variants are
        impossible on loopback IPs with ephemeral ports, so an upper-case scheme stands in.
        """
        start = self.start_ts
        candidates = [
            p
            for p in self.pages
            if not p.disallowed and p.site in base_urls and p.born_at <= start < p.dies_at
        ]
        rng = random.Random(f"{self.seed}:variants")
        rng.shuffle(candidates)
        kinds = ("utm", "fragment", "scheme_case", "dot_segment", "empty_query")
        out: list[tuple[str, str]] = []
        for k, kind in enumerate(kinds):
            for p in candidates[k * per_kind : (k + 1) * per_kind]:
                base = base_urls[p.site].rstrip("/")
                canonical = base + p.path
                if kind == "utm":
                    variant = canonical + "?utm_source=x&utm_medium=email"
                elif kind == "fragment":
                    variant = canonical + "#comments"
                elif kind == "scheme_case":
                    parts = urlsplit(canonical)
                    variant = f"HTTP://{parts.netloc.upper()}{parts.path}"
                elif kind == "dot_segment":
                    variant = base + "/static/.." + p.path
                else:
                    variant = canonical + "?"
                out.append((variant, canonical))
        return out

    def redirect_aliases(self, base_urls: Mapping[str, str], n: int = 2) -> list[tuple[str, str]]:
        """(old URL, canonical) pairs: /p/<id> answers 301 to the page, like a moved article."""
        start = self.start_ts
        candidates = [
            p
            for p in self.pages
            if not p.disallowed and p.site in base_urls and p.born_at <= start < p.dies_at
        ]
        rng = random.Random(f"{self.seed}:aliases")
        picked = rng.sample(candidates, min(n, len(candidates)))
        return [
            (
                f"{base_urls[p.site].rstrip('/')}/p/{p.page_id}",
                f"{base_urls[p.site].rstrip('/')}{p.path}",
            )
            for p in picked
        ]


# ---------------------------------------------------------------------- construction
def build_world(
    seed: int = 0,
    *,
    start: datetime = DEFAULT_START,
    horizon_days: float = 30,
    sites: list[SiteSpec] | None = None,
) -> World:
    """The same seed always gives the same web, so a benchmark is repeatable and paired."""
    sites = default_sites() if sites is None else list(sites)
    if len({s.name for s in sites}) != len(sites):
        raise ValueError("site names must be unique")
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    rng = np.random.default_rng(seed)
    n = sum(s.n_pages for s in sites)
    start_ts = float(math.floor(start.timestamp()))
    end_ts = start_ts + horizon_days * DAY
    warm_ts = start_ts - WARMUP_DAYS * DAY

    # Importance: Zipf over a random permutation, mean 1 so "value" reads as "times average".
    ranks = rng.permutation(n) + 1
    values = ranks.astype(float) ** -ZIPF_EXPONENT
    values /= values.mean()

    shares = np.array([b[0] for b in CHO2000_BANDS])
    bands = rng.choice(len(CHO2000_BANDS), size=n, p=shares / shares.sum())
    lo = np.log([CHO2000_BANDS[b][1] for b in bands])
    hi = np.log([CHO2000_BANDS[b][2] for b in bands])
    rates = np.exp(rng.uniform(lo, hi))
    class_u = rng.random(n)

    late = rng.random(n) < BORN_LATE_SHARE
    born = np.where(
        late,
        start_ts + rng.uniform(0.0, horizon_days * DAY, n),
        start_ts - rng.uniform(WARMUP_DAYS * DAY, 720 * DAY, n),
    )
    born = np.floor(born)
    dies = rng.random(n) < DIE_SHARE
    die_lo = np.maximum(born + 3600.0, start_ts)
    dies_at = np.where(
        dies & (die_lo < end_ts), np.floor(die_lo + rng.random(n) * (end_ts - die_lo)), np.inf
    )
    death_status = np.where(rng.random(n) < 0.5, 404, 410)

    pages: list[Page] = []
    pid = 0
    for spec in sites:
        counters = dict.fromkeys(URL_CLASSES, 0)
        for j in range(spec.n_pages):
            b = int(bands[pid])
            cum = np.cumsum(_CLASS_GIVEN_BAND[b])
            url_class = URL_CLASSES[int(np.searchsorted(cum, class_u[pid] * cum[-1], side="right"))]
            first_private = spec.n_pages - spec.n_private
            if j >= first_private:
                path = f"/private/report-{j - first_private + 1}"
            else:
                counters[url_class] += 1
                path = _PATH_TEMPLATES[url_class].format(counters[url_class])
            t0 = max(float(born[pid]), warm_ts)
            count = rng.poisson(rates[pid] * max(end_ts - t0, 0.0) / DAY)
            times = np.unique(np.ceil(rng.uniform(t0, end_ts, count)))
            times = times[times > born[pid]]
            pages.append(
                Page(
                    page_id=pid,
                    site=spec.name,
                    path=path,
                    url_class=url_class,
                    value=float(values[pid]),
                    rate=float(rates[pid]),
                    change_times=times,
                    born_at=float(born[pid]),
                    dies_at=float(dies_at[pid]),
                    death_status=int(death_status[pid]),
                    disallowed=any(path.startswith(d) for d in spec.disallow),
                )
            )
            pid += 1
    return World(
        seed=seed, start=to_dt(start_ts), horizon_days=horizon_days, sites=sites, pages=pages
    )


# ---------------------------------------------------------------------- text generation
_WORDS = [
    "market",
    "river",
    "council",
    "station",
    "museum",
    "harbor",
    "winter",
    "garden",
    "engine",
    "report",
    "season",
    "budget",
    "bridge",
    "festival",
    "library",
    "storm",
    "election",
    "village",
    "factory",
    "research",
    "vaccine",
    "orbit",
    "planet",
    "ocean",
    "summit",
    "treaty",
    "school",
    "policy",
    "railway",
    "airport",
    "forest",
    "desert",
    "harvest",
    "theatre",
    "stadium",
    "journal",
    "archive",
    "signal",
    "network",
    "protocol",
    "server",
    "harbour",
    "valley",
    "mountain",
    "island",
    "canal",
    "tower",
    "castle",
    "crowd",
    "artist",
    "driver",
    "doctor",
    "mayor",
    "teacher",
    "farmer",
    "writer",
    "pilot",
    "engineer",
    "announced",
    "reported",
    "confirmed",
    "delayed",
    "opened",
    "closed",
    "expanded",
    "reduced",
    "approved",
    "rejected",
    "quietly",
    "sharply",
    "briefly",
    "finally",
    "again",
    "today",
    "yesterday",
    "recently",
    "officially",
    "unexpectedly",
    "new",
    "old",
    "large",
    "small",
    "local",
    "national",
    "regional",
    "annual",
    "weekly",
    "historic",
    "modern",
    "rural",
    "urban",
]


def _title(page: Page) -> str:
    label = {
        "article": "Article",
        "listing": "Latest news",
        "static": "About us",
        PRODUCT_CLASS: "Product",
    }[page.url_class]
    if page.path.startswith("/private/"):
        label = "Internal report"
    return f"{label} {page.path.rsplit('-', 1)[-1].rsplit('/', 1)[-1]} - {page.site}"


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 16))]
    words[0] = words[0].capitalize()
    return " ".join(words) + "."


def _price(seed: int, page_id: int, version: int) -> str:
    """A price that moves at every content version, as a shop's edits mostly do: a base
    price of the page, up or down by whole percents (at least 5 cents), never the same in
    two consecutive versions (7 v mod 31 differs from 7 (v+1) mod 31)."""
    base = random.Random(f"{seed}:{page_id}:price").randint(500, 50_000)  # cents
    cents = base * (100 + (7 * version) % 31 - 15) // 100
    return f"{cents // 100}.{cents % 100:02d}"


def _product_json_ld(page: Page, price: str | None) -> str:
    """A product page's schema.org Product, in the head as shops put it."""
    if price is None:
        return ""
    item = {
        "@context": "https://schema.org",
        "@type": "Product",
        "name": _title(page).rsplit(" - ", 1)[0],
        "offers": {
            "@type": "Offer",
            "price": price,
            "priceCurrency": "USD",
            "availability": "https://schema.org/InStock",
        },
    }
    return f'\n<script type="application/ld+json">{json.dumps(item)}</script>'


@lru_cache(maxsize=8192)
def _article_html(
    seed: int,
    page_id: int,
    url_class: str,
    version: int,
    title: str,
    link_pool: tuple[str, ...],
) -> str:
    # A stable lead paragraph (same in every version) plus version-specific paragraphs: an
    # edit changes part of the text, as real edits do, and any two versions differ.
    lead_rng = random.Random(f"{seed}:{page_id}:lead")
    ver_rng = random.Random(f"{seed}:{page_id}:v{version}")
    lead = " ".join(_sentence(lead_rng) for _ in range(3))
    body = [
        " ".join(_sentence(ver_rng) for _ in range(ver_rng.randint(2, 4)))
        for _ in range(ver_rng.randint(2, 4))
    ]
    parts = [f"<article>\n<h1>{escape(title)}</h1>", f"<p>{lead}</p>"]
    if url_class == PRODUCT_CLASS:
        price = _price(seed, page_id, version)
        parts.append(f'<div class="price-box">Price: <span class="price">${price}</span></div>')
    parts += [f"<p>{p}</p>" for p in body]
    if url_class == "listing" and link_pool:
        links = ver_rng.sample(link_pool, min(5, len(link_pool)))
        parts.append(
            "<ul>"
            + "".join(
                f'<li><a href="{escape(x)}">{escape(_sentence(ver_rng))}</a></li>' for x in links
            )
            + "</ul>"
        )
    parts.append(f'<p class="revision">Revision {version}.</p>\n</article>')
    return "\n".join(parts)
