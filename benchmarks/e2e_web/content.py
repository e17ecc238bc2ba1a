"""What the benchmark web's hosts serve: pages, robots.txt, sitemaps and feeds.

A page is ordinary HTML: a head, navigation, the article and a footer. Its content version moves
only the article: each change edits one sentence (round robin over the article's sentences) and
the figures in it (a price, a count), so a content edit is always a visible change of text and
numbers. The volatile parts (a generation timestamp, a rotating advertisement, a CSRF token, a
view counter) move on every response and are not content. Sitemaps are written as the real web
writes them, including loc URLs with a bare ``&`` (not well-formed XML).
"""

from __future__ import annotations

import gzip
from datetime import datetime
from email.utils import format_datetime
from html import escape

import numpy as np
import polars as pl

from .hosts import HostProfile
from .truth import Truth, slug_words

_SUBJECTS = (
    "The council",
    "Our correspondent",
    "The committee",
    "A spokesperson",
    "The operator",
    "The research team",
    "Local residents",
    "The maintainers",
    "The board",
    "Analysts",
    "The editors",
    "Volunteers",
    "The harbour authority",
    "Engineers",
    "The organisers",
)
_VERBS = (
    "confirmed",
    "announced",
    "reported",
    "revised",
    "published",
    "questioned",
    "estimated",
    "postponed",
    "approved",
    "described",
    "measured",
    "extended",
    "corrected",
    "summarised",
)
_OBJECTS = (
    "the schedule for the northern line",
    "a new budget for the library",
    "the results of the survey",
    "plans for the river crossing",
    "the opening hours of the market",
    "a draft of the guidelines",
    "the figures for the last quarter",
    "changes to the parking rules",
    "the timetable for repairs",
    "the list of approved vendors",
    "an update to the safety manual",
    "the cost of the new roof",
    "the route of the festival parade",
    "the terms of the lease",
    "a review of the water supply",
)
_TAILS = (
    "after a long meeting on Tuesday.",
    "according to documents seen by this site.",
    "following complaints from readers.",
    "ahead of the winter season.",
    "in a statement released this morning.",
    "despite earlier objections.",
    "for the third time this year.",
    "pending a final vote next month.",
    "with support from neighbouring towns.",
    "in response to rising demand.",
)
_AD_PRODUCTS = (
    "noise-cancelling headphones",
    "a weekend in the mountains",
    "running shoes",
    "a coffee grinder",
    "cloud backup",
    "a language course",
    "garden furniture",
    "an electric bike",
    "a smart thermostat",
    "travel insurance",
    "winter tyres",
    "a standing desk",
)
_AD_BRANDS = ("Acme", "Northwind", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Soylent")


def http_date(moment: datetime) -> str:
    return format_datetime(moment.replace(microsecond=0), usegmt=True)


def w3c_date(moment: datetime) -> str:
    return moment.replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def _sentence(page_id: int, slot: int, revision: int) -> str:
    rng = np.random.default_rng([page_id, slot, revision, 31])
    return (
        f"{_SUBJECTS[rng.integers(len(_SUBJECTS))]} {_VERBS[rng.integers(len(_VERBS))]} "
        f"{_OBJECTS[rng.integers(len(_OBJECTS))]} {_TAILS[rng.integers(len(_TAILS))]}"
    )


def article_sentences(page_id: int, version: int) -> list[list[str]]:
    """The article's paragraphs at ``version``: change ``i`` rewrote sentence ``(i - 1) % S``."""
    rng = np.random.default_rng([page_id, 21])
    sizes = rng.integers(2, 5, size=int(rng.integers(3, 5)))
    n_slots = int(sizes.sum())
    out: list[list[str]] = []
    slot = 0
    for size in sizes:
        para = []
        for _ in range(int(size)):
            revision = (version - 1 - slot) // n_slots + 1 if version > slot else 0
            para.append(_sentence(page_id, slot, revision))
            slot += 1
        out.append(para)
    return out


def figures(host: HostProfile, page_id: int, version: int) -> str:
    """The numbers in the article; every version moves them."""
    price = 10 + ((page_id * 7919 + version * 104_729) % 50_000) / 100
    count = 3 + (page_id % 40) + 3 * version
    if host.section in ("product", "item", "quote", "listing"):
        return f"Price: ${price:,.2f}. {count} in stock."
    if host.section in ("job", "event"):
        return f"{count} applicants so far; fee ${price:,.2f}."
    return f"{count} comments. Figure quoted: {price:,.2f}."


def _ad(serial: int, page_id: int, tag: str) -> str:
    product = _AD_PRODUCTS[(serial + page_id) % len(_AD_PRODUCTS)]
    brand = _AD_BRANDS[(serial * 3 + page_id) % len(_AD_BRANDS)]
    pct = 5 + (serial * 7) % 45
    label = "Advertisement" if serial % 2 else "Sponsored:"
    return (
        f'<{tag} class="ad"><span class="ad-label">{label}</span> '
        f'<a rel="sponsored" href="https://ads.example.com/c?id={serial}">'
        f"Save {pct}% on {product} from {brand}</a></{tag}>"
    )


def render_page(
    truth: Truth,
    host_index: int,
    page_id: int,
    version: int,
    *,
    serial: int,
    now: datetime,
    base_url: str,
) -> str:
    """The page's HTML at content ``version``; ``serial`` moves the volatile parts."""
    host = truth.hosts[host_index]
    title = " ".join(w.capitalize() for w in slug_words(page_id))
    paragraphs = article_sentences(page_id, version)
    boiler = set(host.boilerplate)
    head = [
        '<meta charset="utf-8">',
        f"<title>{escape(title)} | {escape(host.name)}</title>",
        f'<link rel="canonical" href="{escape(base_url + truth.row(page_id)["path"])}">',
    ]
    if host.feed == "rss":
        head.append('<link rel="alternate" type="application/rss+xml" href="/feed.rss">')
    elif host.feed == "atom":
        head.append('<link rel="alternate" type="application/atom+xml" href="/atom.xml">')
    token = f"{int(np.random.default_rng([serial, page_id, 41]).integers(1 << 62)):016x}"
    if "csrf" in boiler:
        head.append(f'<meta name="csrf-token" content="{token}">')
    chrome = [f'<a class="brand" href="/">{escape(host.name)}</a>']
    if "view_counter" in boiler:
        chrome.append(
            f'<span class="views">Viewed {1200 + 17 * serial + page_id % 97:,} times</span>'
        )
    if "timestamp" in boiler:
        chrome.append(
            f'<span class="generated">Page generated {now.isoformat()} '
            f"in {0.011 + (serial % 89) / 1000:.3f} s</span>"
        )
    nav = (
        '<nav><ul><li><a href="/">Home</a></li>'
        f'<li><a href="/{host.section}/">{host.section.capitalize()}</a></li>'
        '<li><a href="/about.html">About</a></li><li><a href="/contact.html">Contact</a></li>'
        "</ul></nav>"
    )
    body = ["<body>"]
    if "ad_top" in boiler:
        body.append(_ad(serial, page_id, "div"))
    body.append(f"<header>{' '.join(chrome)}</header>")
    body.append(nav)
    body.append(f"<main><article><h1>{escape(title)}</h1>")
    body.append(f'<p class="figures">{escape(figures(host, page_id, version))}</p>')
    for i, para in enumerate(paragraphs):
        body.append(f"<p>{escape(' '.join(para))}</p>")
        if i == 0 and "ad_inline" in boiler:
            body.append(_ad(serial, page_id, "aside"))
    body.append("</article></main>")
    if "csrf" in boiler:
        body.append(
            '<form class="newsletter" method="post" action="/subscribe">'
            f'<input type="hidden" name="csrf_token" value="{token}">'
            '<input type="email" name="email"><button>Subscribe</button></form>'
        )
    body.append(
        f"<footer><p>&copy; 2026 {escape(host.name)}. 12 Example Street.</p>"
        '<p><a href="/privacy.html">Privacy</a> &middot; <a href="/terms.html">Terms</a></p></footer>'
    )
    body.append("</body>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head>'
        + "".join(head)
        + "</head>"
        + "\n".join(body)
        + "</html>\n"
    )


def robots_txt(host: HostProfile, base_url: str) -> str:
    lines = ["# robots.txt", "User-agent: BadBot", "Disallow: /", "", "User-agent: *"]
    if host.crawl_delay:
        lines.append(f"Crawl-delay: {host.crawl_delay:g}")
    lines += [f"Disallow: {prefix}" for prefix in host.disallow]
    lines.append("Allow: /")
    lines.append("")
    if host.sitemap_in_robots:
        if host.sitemap == "plain":
            lines.append(f"Sitemap: {base_url}/sitemap.xml")
        elif host.sitemap == "index_gz":
            lines.append(f"Sitemap: {base_url}/sitemap_index.xml")
    if host.feed == "rss":
        lines.append(f"Sitemap: {base_url}/feed.rss")
    elif host.feed == "atom":
        lines.append(f"Sitemap: {base_url}/atom.xml")
    return "\n".join(lines) + "\n"


def listed_pages(truth: Truth, host_index: int, t_s: float) -> pl.DataFrame:
    """The host's pages that exist at ``t_s``, with their last change (for lastmod)."""
    pages = truth.pages.filter(
        (pl.col("host") == host_index) & (pl.col("appear_s") <= t_s) & (pl.col("gone_s") > t_s)
    )
    last = (
        truth.events.filter(
            pl.col("page_id").is_in(pages["page_id"].implode()) & (pl.col("t_s") <= t_s)
        )
        .group_by("page_id")
        .agg(pl.col("t_s").max().alias("last_change_s"))
    )
    return (
        pages.join(last, on="page_id", how="left")
        .with_columns(pl.col("last_change_s").fill_null(pl.col("birth_s")))
        .sort("page_id")
    )


def _lastmod(host: HostProfile, row: dict, truth: Truth, t_s: float) -> str | None:
    if host.lastmod == "accurate":
        return w3c_date(truth.clock.at(row["last_change_s"]))
    if host.lastmod == "now":
        return w3c_date(truth.clock.at(t_s))
    if host.lastmod == "stale":
        return w3c_date(truth.clock.at(row["birth_s"]))
    return None


def _loc(base_url: str, path: str, host: HostProfile) -> str:
    # Query-URL hosts write their & bare, as many real sitemaps do; the file is then not XML.
    return base_url + path if host.query_urls else escape(base_url + path)


def urlset(
    truth: Truth, host_index: int, t_s: float, base_url: str, *, part: int | None = None
) -> bytes:
    """The host's urlset at ``t_s``; ``part`` 1 or 2 is one half (by page id parity)."""
    host = truth.hosts[host_index]
    rows = listed_pages(truth, host_index, t_s)
    if part is not None:
        rows = rows.filter(pl.col("page_id") % 2 == part - 1)
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">',
    ]
    for row in rows.iter_rows(named=True):
        entry = f"<url><loc>{_loc(base_url, row['sitemap_path'], host)}</loc>"
        lastmod = _lastmod(host, row, truth, t_s)
        if lastmod:
            entry += f"<lastmod>{lastmod}</lastmod>"
        out.append(entry + "</url>")
    out.append("</urlset>")
    return ("\n".join(out) + "\n").encode()


def sitemap_index(truth: Truth, t_s: float, base_url: str) -> bytes:
    stamp = w3c_date(truth.clock.at(t_s))
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        f"<sitemap><loc>{base_url}/sitemaps/pages-1.xml.gz</loc><lastmod>{stamp}</lastmod></sitemap>\n"
        f"<sitemap><loc>{base_url}/sitemaps/pages-2.xml</loc><lastmod>{stamp}</lastmod></sitemap>\n"
        "</sitemapindex>\n"
    ).encode()


def gzipped(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


FEED_ITEMS = 25


def feed(truth: Truth, host_index: int, t_s: float, base_url: str) -> bytes:
    """The newest pages of the host as RSS 2.0 or Atom (the host's ``feed``)."""
    host = truth.hosts[host_index]
    rows = (
        listed_pages(truth, host_index, t_s)
        .filter(~pl.col("disallowed"))
        .sort("appear_s", descending=True)
        .head(FEED_ITEMS)
    )
    if host.feed == "rss":
        items = [
            f"<item><title>{escape(' '.join(slug_words(r['page_id'])).title())}</title>"
            f"<link>{escape(base_url + r['path'])}</link>"
            f'<guid isPermaLink="true">{escape(base_url + r["path"])}</guid>'
            f"<pubDate>{http_date(truth.clock.at(r['appear_s']))}</pubDate></item>"
            for r in rows.iter_rows(named=True)
        ]
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n<rss version="2.0"><channel>'
            f"<title>{escape(host.name)}</title><link>{base_url}/</link>"
            f"<description>Latest from {escape(host.name)}</description>\n"
            + "\n".join(items)
            + "\n</channel></rss>\n"
        ).encode()
    entries = [
        f"<entry><title>{escape(' '.join(slug_words(r['page_id'])).title())}</title>"
        f'<link rel="alternate" href="{escape(base_url + r["path"])}"/>'
        f"<id>{escape(base_url + r['path'])}</id>"
        f"<updated>{w3c_date(truth.clock.at(r['appear_s']))}</updated></entry>"
        for r in rows.iter_rows(named=True)
    ]
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom">'
        f"<title>{escape(host.name)}</title><id>{base_url}/</id>"
        f"<updated>{w3c_date(truth.clock.at(t_s))}</updated>\n" + "\n".join(entries) + "\n</feed>\n"
    ).encode()
