"""What a page says of its own address: the URL it names as its canonical one (``<link
rel=canonical>``) and the one a ``<meta http-equiv=refresh>`` sends a reader on to at once
(both relative to its ``<base href>`` when it has one); and the feeds it announces (``<link
rel=alternate type=application/rss+xml>``, Atom, JSON Feed), where a site lists its new pages
when its robots.txt names no feed.

Neither is content, so the fingerprint never hashes them. A page that refreshes to another
address in a moment has moved: taken as a page it is a version with no text, and the address
it moved to is never found. A canonical link names the address a site wants its content known
by: the crawl finds it there, and of two copies keeps fetching that one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from selectolax.lexbor import LexborHTMLParser

from freshness_pipeline.science.fingerprint.dom import css

__all__ = ["FEED_TYPES", "MOVE_REFRESH_MAX_S", "PageLinks", "page_links", "refresh_target"]

#: A refresh at most this many seconds after the page loads sends its reader on before they
#: have read it: the page has moved (search engines take an instant one for a redirect). A
#: slower refresh is a page that reloads or rotates, and it stays a page.
MOVE_REFRESH_MAX_S = 10

# Both belong in the head, which comes first: a page is searched for the words this far, and
# the query runs on the parsed head alone (a large page's body is most of its nodes).
_HEAD_CHARS = 256 * 1024

# A refresh inside <noscript> is a fallback for browsers without scripts ("this site needs
# JavaScript"), not a move of the page this crawler reads.
_QUERY = (
    'link[rel~="canonical" i][href],meta[http-equiv="refresh" i]:not(noscript *),'
    'link[rel~="alternate" i][type][href]'
)
#: the media types of a feed's alternate link (RSS, Atom, JSON Feed)
FEED_TYPES = frozenset(
    {"application/rss+xml", "application/atom+xml", "application/feed+json", "application/rdf+xml"}
)
#: the most feeds one page announces that are kept (a page per category or author is common)
MAX_PAGE_FEEDS = 4

# The HTML standard's "shared declarative refresh steps": seconds (digits; a fraction is read
# and ignored), then an optional ";" or ",", an optional "url=", and the URL, quoted or not.
_REFRESH = re.compile(
    r"""\s*(?P<s>\d*)(?P<frac>\.[\d.]*)?\s*(?:[;,]\s*)?(?:url\s*=\s*)?(?P<rest>.*)""",
    re.IGNORECASE | re.DOTALL,
)


@dataclass(frozen=True)
class PageLinks:
    """The canonical URL and the refresh target as the page writes them (relative or not:
    the caller knows the page's own URL to resolve them against); None when absent."""

    canonical: str | None = None
    refresh_to: str | None = None
    # The page's <base href> (the first), which both resolve against instead of the page's
    # own URL when they are relative (CMSs write root-relative links under a root base).
    base: str | None = None
    # The feeds the page announces, as written, in page order (at most MAX_PAGE_FEEDS).
    feeds: tuple[str, ...] = ()


def refresh_target(content: str) -> str | None:
    """The URL of a refresh's ``content`` attribute when it sends the reader on within
    :data:`MOVE_REFRESH_MAX_S` seconds; None for a slower one, one with no URL (the page
    reloads itself) and one that does not parse."""
    match = _REFRESH.fullmatch(content)
    if match is None or not (match["s"] or match["frac"]):
        return None
    if match["s"] and int(match["s"]) > MOVE_REFRESH_MAX_S:
        return None
    rest = match["rest"].strip()
    if rest[:1] in ("'", '"'):
        quote, rest = rest[0], rest[1:]
        rest = rest.split(quote, 1)[0]
    url = rest.strip()
    return url or None


def page_links(tree: LexborHTMLParser, source: str | bytes) -> PageLinks:
    """The page's :class:`PageLinks`, from its head. ``source`` is what ``tree`` was parsed
    from: a page whose start does not hold the words at all is not queried.

    Two canonical links that disagree name none (search engines ignore both, and so do we);
    of several refreshes the first counts, as in a browser."""
    lowered = source[:_HEAD_CHARS].lower()
    if isinstance(lowered, bytes):
        named = any(word in lowered for word in (b"canonical", b"refresh", b"alternate"))
    else:
        named = any(word in lowered for word in ("canonical", "refresh", "alternate"))
    if not named:
        return PageLinks()
    canonicals: set[str] = set()
    feeds: list[str] = []
    refresh_to: str | None = None
    refreshed = False
    for node in css(tree.head or tree, _QUERY):
        attrs = node.attrs
        if node.tag == "link":
            href = (attrs.get("href") or "").strip()
            rel = (attrs.get("rel") or "").lower().split()
            if not href:
                continue
            if "canonical" in rel:
                canonicals.add(href)
            elif _is_feed_type(attrs.get("type")) and href not in feeds:
                feeds.append(href)
        elif not refreshed:
            refreshed = True
            refresh_to = refresh_target(attrs.get("content") or "")
    canonical = canonicals.pop() if len(canonicals) == 1 else None
    base = None
    if canonical is not None or refresh_to is not None or feeds:
        for node in css(tree.head or tree, "base[href]")[:1]:
            base = (node.attrs.get("href") or "").strip() or None
    return PageLinks(canonical, refresh_to, base, tuple(feeds[:MAX_PAGE_FEEDS]))


def _is_feed_type(media_type: str | None) -> bool:
    return (media_type or "").split(";", 1)[0].strip().lower() in FEED_TYPES
