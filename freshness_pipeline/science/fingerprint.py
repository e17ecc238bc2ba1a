"""Content fingerprints: "did the page change in a way anyone cares about?"

A digest of the raw bytes marks a page changed whenever an ad slot rotates, a clock ticks or a
session token is minted, and the rate estimator then learns that every page changes on every
visit. So the fingerprint hashes the extracted content (title plus main text, or configured
fields): the page's marked main content, without site chrome, hidden elements, consent banners
and promotional blocks (found by their class or id words, ``rel=sponsored`` links and visible
"Sponsored"/"Advertisement" labels, since a rotating ad with visible text is the commonest
false change), and then without the tokens that change while the content does not: dates,
times, relative times, view and like counters, hex and base64 identifiers, UUIDs. Other
numbers are content: a changed price or count is a changed page.

The fingerprint is only comparable to fingerprints made by the same extractor. Bump
:data:`FINGERPRINT_VERSION` whenever anything here changes the output for some page; the
pipeline then re-extracts (records the new fingerprint without calling it a change) instead of
reporting a wave of false changes.
"""

from __future__ import annotations

import codecs
import functools
import json
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import xxhash
from selectolax.lexbor import LexborCSSSelector, LexborHTMLParser, LexborNode, SelectolaxError

__all__ = [
    "FINGERPRINT_VERSION",
    "JSON_LD_FIELDS",
    "ContentRecord",
    "content_record",
    "class_record",
    "content_kind",
    "content_fingerprint",
    "css_selector_error",
    "decode_body",
    "extract_content",
    "normalize_content",
]

FINGERPRINT_VERSION: int = 2

# ---------------------------------------------------------------------------------------------
# Decoding

_CT_CHARSET = re.compile(r"""charset\s*=\s*["']?\s*([A-Za-z0-9_:.+-]+)""", re.IGNORECASE)
_META_CHARSET = re.compile(
    rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_:.+-]+)""", re.IGNORECASE
)
# WHATWG Encoding: these labels mean windows-1252 on the web, and utf-7 is never honoured.
_LABEL_ALIASES = {
    "ascii": "cp1252",
    "us-ascii": "cp1252",
    "iso-8859-1": "cp1252",
    "iso8859-1": "cp1252",
    "iso_8859-1": "cp1252",
    "latin1": "cp1252",
    "latin-1": "cp1252",
    "l1": "cp1252",
    "windows-1252": "cp1252",
    "x-sjis": "shift_jis",
    "gb2312": "gb18030",
    "gbk": "gb18030",
}
_REFUSED = {"utf-7", "utf7", "x-user-defined", "replacement"}
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


_BOM_PREFIXES = tuple(bom for bom, _ in _BOMS)


def _usable_encoding(label: str | None, *, from_meta: bool = False) -> str | None:
    """Python codec for a charset label, or None when it is unknown, unsafe or not a text codec."""
    if not label:
        return None
    label = label.strip().strip("\"'").lower()
    if label in _REFUSED:
        return None
    label = _LABEL_ALIASES.get(label, label)
    try:
        info = codecs.lookup(label)
    except (LookupError, ValueError):
        return None
    # bytes-to-bytes codecs (base64, zlib, rot13...) are not charsets
    if not getattr(info, "_is_text_encoding", True):
        return None
    # A meta tag that declares UTF-16/32 was necessarily read as ASCII: it is lying (HTML spec).
    if from_meta and info.name.startswith(("utf-16", "utf-32")):
        return "utf-8"
    return info.name


def _declared_encoding(body: bytes, content_type: str | None) -> str | None:
    if content_type:
        match = _CT_CHARSET.search(content_type)
        if match:
            enc = _usable_encoding(match.group(1))
            if enc:
                return enc
    meta = _META_CHARSET.search(body[:2048])
    if meta:
        return _usable_encoding(meta.group(1).decode("ascii", "replace"), from_meta=True)
    return None


def decode_body(body: bytes, content_type: str | None) -> str:
    """Bytes to text the way a browser would, never raising.

    Order: byte-order mark, the Content-Type charset, ``<meta charset>``/``http-equiv`` in the
    first 2 KB, else UTF-8. A declaration that does not decode cleanly is tried against strict
    UTF-8 (a common lie), then decoded with replacement characters in the declared charset; an
    unknown or unsafe label falls back to UTF-8 with ``errors="replace"``.
    """
    try:
        data = bytes(body)
    except (TypeError, ValueError):
        return ""
    for bom, enc in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(enc, errors="replace")
    try:
        declared = _declared_encoding(data, content_type)
    except (TypeError, ValueError):
        declared = None
    if declared:
        try:
            return data.decode(declared)
        except (UnicodeDecodeError, ValueError, LookupError):
            pass
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    if declared:
        try:
            return data.decode(declared, errors="replace")
        except (UnicodeDecodeError, ValueError, LookupError):
            pass
    return data.decode("utf-8", errors="replace")


# ---------------------------------------------------------------------------------------------
# Extraction
#
# Everything to drop is first marked with an attribute, then the outermost marked elements are
# removed at once: removing nested matches one by one would touch elements that an ancestor's
# removal has already freed. Lexbor tests every selector of a query on every element, so the
# queries are few and broad and Python sorts out the matches.

_DROP = "data-freshness-fingerprint-drop"
_KEEP = "data-freshness-fingerprint-keep"
_OUTERMOST_DROPS = f"[{_DROP}]:not([{_DROP}] *)"

# Markup that is never visible text, or whose text is machine-made: <time> holds a date by
# definition, buttons and selects are controls, a <dialog> is a pop-up over the page.
_NOISE_TAGS = [
    "script", "style", "noscript", "template", "svg", "iframe", "frame", "object", "embed",
    "canvas", "video", "audio", "button", "select", "textarea", "dialog", "marquee", "time",
]  # fmt: skip
_NOISE = ", ".join(_NOISE_TAGS)

# Site chrome by landmark. A <header>/<footer> inside an article or main holds its headline
# and byline, so only page-level ones go; ARIA roles are read in Python from one [role].
_PAGE_LEVEL = ":not(main *):not(article *):not([role=main i] *):not(header *):not(footer *)"
_CHROME = f"nav, aside, header{_PAGE_LEVEL}, footer{_PAGE_LEVEL}, [role], form:not(form *), h1"
_CHROME_ROLES = frozenset(
    ["navigation", "banner", "contentinfo", "complementary", "search", "dialog", "alertdialog",
     "timer", "marquee"]
)  # fmt: skip
_CONTENT_ROOTS = 'main, [role="main" i], article, [itemprop~="articleBody" i]'
_GUARDED_CONTENT = f"{_CONTENT_ROOTS}, h1"

# Class and id words (whole words, or parts split at "-", "_", digits and camelCase humps) that
# name a promotional, consent or counter block. The query only pre-selects elements whose class
# or id contains a stem; the word test decides, so "header", "shadow", "download" and
# "loading" are not ads. The same query brings the hidden elements and the links with a rel.
_AD_WORDS = frozenset(
    ["ad", "ads", "advert", "adverts", "advertisement", "advertisements", "advertising",
     "advertorial", "adsense", "adsbygoogle", "adslot", "adunit", "adbox", "adcontainer",
     "adwrapper", "adzone", "dfp", "sponsor", "sponsors", "sponsored", "sponsorship", "promo",
     "promos", "promoted", "promotional", "banner", "banners", "outbrain", "taboola"]
)  # fmt: skip
_CONSENT_WORDS = frozenset(
    ["cookie", "cookies", "cookiebanner", "cookiebar", "cookienotice", "cookieconsent",
     "cookielaw", "cookiebot", "consent", "gdpr", "onetrust"]
)  # fmt: skip
_COUNTER_WORDS = frozenset(
    ["count", "counter", "counts", "views", "viewcount", "pageviews", "likes", "sharecount"]
)  # fmt: skip
# A block named for its price is content even when it is also a "promo".
_CONTENT_WORDS = frozenset(("price", "prices", "pricing"))
_CANDIDATES = ", ".join(
    [
        *(
            f'[{attr}*="{stem}" i]'
            for stem in ("ad", "sponsor", "banner", "cookie", "consent")
            for attr in ("class", "id")
        ),
        '[class*="promo" i]',
        '[class*="count" i]',
        '[class*="views" i]',
        '[class*="likes" i]',
        '[class*="outbrain" i]',
        '[id*="taboola" i]',
        "[hidden]",
        "[aria-hidden]",
        "[style]",
        "a[rel]",
    ]
)
_INVISIBLE_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)
_WORD_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_AD, _CONSENT, _COUNTER = "ad", "consent", "counter"
_COUNTER_MAX_CHARS = 48  # a counter is a number and a word; a longer block is not one
# rel=sponsored links go with the containers that hold nothing but them (or a lead-in such as
# "Read more:" besides), this many levels up.
_CONTAINER_CLIMB = 4
_LEAD_IN_MAX_CHARS = 24

# Visible labels of a promotional block: the label, then nothing or a separator ("Sponsored:
# ...", "Advertisement", "Anzeige"); a sentence that merely starts with such a word stays.
# Each stem costs a search of every page's text, so only the common labels have one.
_LABEL_STEMS = (
    "sponsor",
    "advert",
    "promoted",
    "anzeige",
    "publicit",
    "реклама",
    "広告",
    "广告",
    "광고",
)
_LABEL = re.compile(
    # words that start no sentence of content: a label whatever follows
    r"\W*(?:advertisements?|anzeige|реклама|広告|广告|광고)(?:\W|$)"
    # words that may: a label when alone or before a separator
    r"|\W*(?:sponsored(?:\s+(?:by|content|post|story|stories|links?|listings?))?|sponsor"
    r"|advertising|advertorial|advertentie|promoted(?:\s+(?:by|content|stories))?"
    r"|publicit[ée]|sponsoris[ée]e?)\s*(?:$|[:|·•\-–—(\[/]|by\s)",
    re.I,
)
# A labelled block is the smallest ancestor of the label with other text, within this size;
# a bare label in the content labels the element after it, if that is this short.
_LABELLED_BLOCK_MAX_CHARS = 600
_LABELLED_SIBLING_MAX_CHARS = 200
# Marked content holding less than this share of the cleaned body is not the content (a
# teaser <article> in a sidebar), and the whole body counts instead.
_MIN_ROOT_SHARE = 0.15


# The ASCII characters str.split() and str.splitlines() break on, other than space and
# newline. An ASCII text (most pages' text) is folded with a few C-level searches and replaces
# instead: splitting a page's text into words, or into lines and each line into words, only
# to join them again made a third of a fingerprint's cost.
_ASCII_SPACES = "".join(
    chr(c) for c in range(128) if chr(c).isspace() and len(f"a{chr(c)}b".splitlines()) == 1
).replace(" ", "")
_ASCII_BREAKS = "".join(
    chr(c) for c in range(128) if chr(c).isspace() and len(f"a{chr(c)}b".splitlines()) == 2
).replace("\n", "")


def _fold_spaces(text: str) -> str:
    """``" ".join(text.split())``: whitespace runs as one space, none at the ends."""
    if not text.isascii():
        return " ".join(text.split())
    for char in _ASCII_SPACES + _ASCII_BREAKS + "\n":
        if char in text:
            text = text.replace(char, " ")
    while "  " in text:
        text = text.replace("  ", " ")
    return text.strip(" ")


def _fold_lines(text: str) -> str:
    """The non-empty lines of ``text`` (str.splitlines), each whitespace-folded as by
    :func:`_fold_spaces`, joined by newlines."""
    if not text.isascii():
        return "\n".join(folded for line in text.splitlines() if (folded := " ".join(line.split())))
    for char in _ASCII_SPACES:
        if char in text:
            text = text.replace(char, " ")
    for char in _ASCII_BREAKS:  # "\r\n" becomes an empty line, which goes below
        if char in text:
            text = text.replace(char, "\n")
    while "  " in text:
        text = text.replace("  ", " ")
    text = text.replace(" \n", "\n").replace("\n ", "\n")
    while "\n\n" in text:
        text = text.replace("\n\n", "\n")
    return text.strip(" \n")


def _text(node: LexborNode | None) -> str:
    if node is None:
        return ""
    return node.text(deep=True, separator=" ", strip=True)


# One CSS engine per thread, shared by every page: selectolax creates one per document on its
# first query, and on a small page that costs as much as parsing the page.
_ENGINES = threading.local()


def _engine() -> LexborCSSSelector:
    engine = getattr(_ENGINES, "engine", None)
    if engine is None:
        engine = _ENGINES.engine = LexborCSSSelector()
    return engine


def _css(tree: LexborHTMLParser | LexborNode, query: str) -> list[LexborNode]:
    """``tree.css(query)`` on the thread's shared CSS engine."""
    root = tree.root if isinstance(tree, LexborHTMLParser) else tree
    return [] if root is None else _engine().find(query, root)


def _css_first(tree: LexborHTMLParser | LexborNode, query: str) -> LexborNode | None:
    root = tree.root if isinstance(tree, LexborHTMLParser) else tree
    # find_first is in the extension but not in its type stub
    found = [] if root is None else _engine().find_first(query, root)  # type: ignore[attr-defined]
    return found[0] if found else None


def css_selector_error(selector: str) -> str | None:
    """Why lexbor refuses ``selector``, or None when it compiles: a configuration is checked
    with the engine the extraction uses, since a selector it cannot parse would otherwise fail
    every fetch of its URL class, one error at a time."""
    try:
        _css(LexborHTMLParser(""), selector)
    except SelectolaxError as exc:
        return str(exc).rstrip(".") or "lexbor cannot parse it"
    return None


# A stem at the start of a word part: without one, a class or id names nothing of ours and
# the full word split is skipped.
_WORD_START_STEM = re.compile(
    r"(?<![A-Za-z])(?i:ad|sponsor|banner|cookie|consent|promo|count|views|likes|outbrain"
    r"|taboola|dfp|gdpr|onetrust|viewcount|pageviews|sharecount)"
    r"|(?<=[a-z])(?:A[Dd]|Sponsor|Banner|Promo|Count|Views|Likes)"
)


@functools.lru_cache(maxsize=8192)
def _block_kind(class_: str | None, id_: str | None) -> str | None:
    """What a class and id name: an ad, a consent banner, a counter, or nothing."""
    names = f"{class_ or ''} {id_ or ''}"
    if not _WORD_START_STEM.search(names):
        return None
    words = {w.lower() for w in _WORD_PART.findall(names)}
    if words & _CONTENT_WORDS:
        return None
    if words & _AD_WORDS:
        return _AD
    if words & _CONSENT_WORDS:
        return _CONSENT
    if words & _COUNTER_WORDS:
        return _COUNTER
    return None


def _hidden(attrs: dict[str, str | None]) -> bool:
    if "hidden" in attrs or (attrs.get("aria-hidden") or "").strip().lower() == "true":
        return True
    style = attrs.get("style")
    return bool(style and _INVISIBLE_STYLE.search(style))


def _drop_nodes(nodes: list[LexborNode]) -> None:
    """Remove the matches of one query. A query lists a node once per selector it matches and
    an ancestor before its descendants, so each goes once, innermost first, and none is
    touched after an ancestor's removal freed it."""
    seen: set[int] = set()
    for node in reversed(nodes):
        if node.mem_id not in seen:
            seen.add(node.mem_id)
            node.decompose()


class _Marker:
    """Marks elements to drop, refusing any that holds the page's content: a content root or
    headline, or half the body's text. Both are measured once, and only if needed."""

    def __init__(self, tree: LexborHTMLParser) -> None:
        self.tree = tree
        self._body_text: str | None = None
        self._holders: set[int] | None = None

    @property
    def body_text(self) -> str:
        if self._body_text is None:
            self._body_text = _text(self.tree.body or self.tree.root)
        return self._body_text

    def _content_holders(self) -> set[int]:
        """The content roots, the headlines, and every ancestor of one."""
        if self._holders is None:
            self._holders = set()
            for node in _css(self.tree, _GUARDED_CONTENT):
                at: LexborNode | None = node
                while at is not None and at.mem_id not in self._holders:
                    self._holders.add(at.mem_id)
                    at = at.parent
        return self._holders

    def holds_content(self, node: LexborNode) -> bool:
        if node.tag in ("body", "html") or node.mem_id in self._content_holders():
            return True
        return len(_text(node)) * 2 > len(self.body_text)

    @staticmethod
    def mark(node: LexborNode) -> None:
        node.attrs[_DROP] = ""

    def mark_guarded(self, node: LexborNode) -> None:
        if not self.holds_content(node):
            node.attrs[_DROP] = ""


def _mark_ads(tree: LexborHTMLParser, marker: _Marker) -> None:
    """Hidden elements, blocks whose class or id names an ad, a consent banner or a counter,
    and rel=sponsored links with the containers that hold nothing but them."""
    for node in _css(tree, _CANDIDATES):
        attrs = node.attributes
        if node.tag == "a" and "sponsored" in (attrs.get("rel") or "").lower():
            block, length = node, len(_text(node))
            for _ in range(_CONTAINER_CLIMB):
                parent = block.parent
                if (
                    parent is None
                    or len(_text(parent)) > length + _LEAD_IN_MAX_CHARS
                    or marker.holds_content(parent)
                ):
                    break
                block = parent
            marker.mark(block)
            continue
        kind = _block_kind(attrs.get("class"), attrs.get("id"))
        if kind == _COUNTER:
            if len(_text(node)) <= _COUNTER_MAX_CHARS:
                marker.mark(node)
        elif kind is not None or _hidden(attrs):
            marker.mark_guarded(node)


def _first_own_text(node: LexborNode) -> str:
    """The first non-blank text directly in ``node``: where a label would stand."""
    child = node.first_child
    while child is not None:
        if child.is_text_node:
            text = (child.text_content or "").strip()
            if text:
                return text
        child = child.next
    return ""


def _mark_labelled_blocks(tree: LexborHTMLParser, marker: _Marker) -> None:
    """A block whose visible label says it is an ad: from the label up to the smallest
    ancestor that has other text, unless that is too big to be an ad; a bare label standing
    in the content takes the short element after it along. Lexbor's text search is slow, so
    it runs only for the label words the page's visible text contains."""
    visible = marker.body_text.casefold()
    stems = [stem for stem in _LABEL_STEMS if stem in visible]
    if not stems:
        return
    for node in _css(tree, ", ".join(f':lexbor-contains("{stem}" i)' for stem in stems)):
        if not _LABEL.match(_first_own_text(node)):
            continue
        block, in_content = node, False
        while not _LABEL.sub("", _text(block), count=1).strip():  # the label alone, so far
            parent = block.parent
            if parent is None or marker.holds_content(parent):
                in_content = True
                break
            if len(_text(parent)) > _LABELLED_BLOCK_MAX_CHARS:
                break
            block = parent
        if marker.holds_content(block):
            continue
        marker.mark(block)
        if in_content and block is node:
            after = block.next
            while after is not None and not after.is_element_node:
                after = after.next
            if (
                after is not None
                and len(_text(after)) <= _LABELLED_SIBLING_MAX_CHARS
                and not marker.holds_content(after)
            ):
                marker.mark(after)


def _inside_drop(node: LexborNode | None) -> bool:
    while node is not None and node.is_element_node:
        if _DROP in node.attrs:
            return True
        node = node.parent
    return False


def _mark_chrome(tree: LexborHTMLParser, marker: _Marker) -> list[str]:
    """Landmarks of site chrome, and forms (unless one wraps most of the page: ASP.NET
    WebForms pages put the whole body in one form, and deleting it would fingerprint an empty
    page). Returns the visible headlines, read before a page header holding one goes."""
    nodes = _css(tree, _CHROME)
    headlines = [_text(n) for n in nodes if n.tag == "h1" and not _inside_drop(n)]
    for node in nodes:
        tag = node.tag
        if tag == "form":
            if len(_text(node)) * 2 < len(marker.body_text):
                marker.mark(node)
        elif tag in ("nav", "aside", "header", "footer") or (
            tag != "h1" and (node.attrs.get("role") or "").strip().lower() in _CHROME_ROLES
        ):
            marker.mark(node)
    return [h for h in headlines if h]


def _remove_boilerplate(tree: LexborHTMLParser, *, protect: bool = False) -> list[str]:
    """Drop everything but the content; returns the visible headlines (``<h1>``)."""
    if tree.root is None:
        return []
    marker = _Marker(tree)
    _mark_ads(tree, marker)
    _mark_labelled_blocks(tree, marker)
    headlines = _mark_chrome(tree, marker)
    if protect:
        # Configured selectors win: nothing that is or holds a selected element goes.
        for node in _css(tree, f"[{_DROP}]"):
            if _css_first(node, f"[{_KEEP}]") is not None:
                del node.attrs[_DROP]
    _drop_nodes(_css(tree, _OUTERMOST_DROPS))
    return headlines


def _main_text(
    tree: LexborHTMLParser, headlines: list[str]
) -> tuple[str, list[LexborNode], list[str]]:
    """The content's text, the nodes it was read from and the headlines put before it."""
    mains, articles, bodies = [], [], []
    for node in _css(
        tree,
        'main, [role="main" i], article:not(article *),'
        ' [itemprop~="articleBody" i]:not([itemprop~="articleBody" i] *)',
    ):
        if node.tag == "main" or (node.attrs.get("role") or "").strip().lower() == "main":
            mains.append(node)
        elif node.tag == "article":
            articles.append(node)
        else:
            bodies.append(node)
    # A listing page has several articles: take them all, or a change in the second is
    # missed. Nested ones are already in their outer one's text.
    roots = mains[:1] or articles or bodies
    text = "\n".join(_text(n) for n in roots)
    body = tree.body or tree.root
    body_text = _text(body)
    if not roots or len(text) < _MIN_ROOT_SHARE * len(body_text):
        text = body_text
        roots = [body] if body is not None else []
    # The headline often sits outside the marked content (a page header, a hero banner).
    # Compared with whitespace folded (a page's spacing is not its content), which is only
    # worth its cost when the plain test fails.
    lead = [" ".join(h.split()) for h in headlines if h.strip() not in text]
    if lead:
        folded = " ".join(text.split())
        lead = [h for h in lead if h not in folded]
    return ("\n".join([*lead, text]) if lead else text), roots, lead


def extract_content(html: str, *, selectors: Sequence[str] = ()) -> str:
    """Title plus the text that carries the page's meaning, for change detection.

    The content is the page's marked main content (``<main>``, ``role=main``, its articles, a
    schema.org ``articleBody``) or, when none is marked or the mark holds little of the page's
    text, the whole body; in both, after dropping site chrome (nav, aside, page-level header and
    footer, their ARIA roles), hidden elements, iframes, cookie and consent banners, and ads:
    blocks whose class or id names them (ad, sponsor, promo, banner, ... as whole words or
    word parts), ``rel=sponsored`` links, and blocks labelled "Sponsored", "Advertisement",
    "Anzeige" and the like. A visible ``<h1>`` outside the content is kept with it.

    With ``selectors`` (CSS), the text of every match of each selector, in selector order,
    replaces the main text; a match counts even where the rules above would drop it, and only
    what they drop inside it goes. The title stays because a retitled page is a changed page.
    Invalid selectors raise :class:`ValueError` (a configuration error, not a property of the
    page); malformed HTML never raises.
    """
    return _extract(html if isinstance(html, str) else str(html), selectors)


def _extract(document: str | bytes, selectors: Sequence[str]) -> str:
    """:func:`extract_content` of a text, or of UTF-8 bytes, which lexbor reads directly."""
    return _Extraction(document, selectors).text


# Elements after which a reader starts a new line: the content's text is kept line by line so
# that what changed between two versions can be told by line.
_BLOCKS = (
    "p, div, li, dt, dd, h1, h2, h3, h4, h5, h6, tr, br, blockquote, pre, section, figcaption,"
    " caption, table, ul, ol, dl, hr, address, details, summary"
)


class _Extraction:
    """One page's extraction: the text the fingerprint hashes, and on demand (for a new or
    changed version only) the same content as lines a person reads and configured fields."""

    def __init__(
        self,
        document: str | bytes,
        selectors: Sequence[str],
        fields: Mapping[str, str] | None = None,
        json_ld: bool = False,
    ) -> None:
        if isinstance(selectors, str):
            selectors = [selectors]
        tree = self.tree = LexborHTMLParser(document)
        # Fields and structured data are read from the page as served: a price may sit in a
        # block the content rules drop, and JSON-LD is a script.
        self.fields = _read_fields(tree, fields or {}, json_ld)
        title_node = _css_first(tree, "title")
        self.title = title = _text(title_node)
        if title_node is not None:
            title_node.decompose()  # the title is counted once, above
        self.lead: list[str] = []
        if not selectors:
            _drop_nodes(_css(tree, _NOISE))
            body, self.roots, self.lead = _main_text(tree, _remove_boilerplate(tree))
        else:
            self.roots = _selected(tree, selectors)
            body = "\n".join(_text(n) for n in self.roots)
        self.text = f"{title}\n{body}" if title else body

    def lines(self) -> str:
        """The content as the page lays it out: a line per block, whitespace folded, empty
        lines dropped (the headlines put before it first)."""
        out = list(self.lead)
        for root in self.roots:
            for node in _css(root, _BLOCKS):
                node.insert_after("\n")
            folded = _fold_lines(root.text(deep=True, separator="", strip=False))
            if folded:
                out.append(folded)
        return "\n".join(out)


def _selected(tree: LexborHTMLParser, selectors: Sequence[str]) -> list[LexborNode]:
    """The configured selectors' matches, in selector order, everything else the rules drop
    removed around them."""
    matches: list[LexborNode] = []
    for selector in selectors:
        try:
            matches.extend(_css(tree, selector))
        except SelectolaxError as exc:
            raise ValueError(f"invalid CSS selector {selector!r}: {exc}") from None
    for node in matches:
        node.attrs[_KEEP] = ""
    for node in _css(tree, _NOISE):
        node.attrs[_DROP] = ""
    _remove_boilerplate(tree, protect=True)
    return matches


#: The schema.org values read from JSON-LD when a URL class asks for structured data, by the
#: field name they are stored under.
JSON_LD_FIELDS = {
    "name": ("name",),
    "price": ("offers", "price"),
    "availability": ("offers", "availability"),
}


def _read_fields(
    tree: LexborHTMLParser, fields: Mapping[str, str], json_ld: bool
) -> dict[str, str | None]:
    """Each configured field's text (the first match of its CSS selector, whitespace folded;
    None without a match), and with ``json_ld`` the schema.org values of
    :data:`JSON_LD_FIELDS` from the page's first JSON-LD item that has them."""
    values: dict[str, str | None] = {}
    for name, selector in fields.items():
        try:
            node = _css_first(tree, selector)
        except SelectolaxError as exc:
            raise ValueError(
                f"invalid CSS selector {selector!r} for field {name!r}: {exc}"
            ) from None
        values[name] = " ".join(_text(node).split()) if node is not None else None
    if json_ld:
        items = [
            item
            for script in _css(tree, 'script[type="application/ld+json" i]')
            for item in _json_ld_items(script.text(deep=True))
        ]
        for name, path in JSON_LD_FIELDS.items():
            values[name] = next(
                (v for v in (_json_path(item, path) for item in items) if v is not None), None
            )
    return values


def _json_ld_items(text: str) -> list[dict]:
    """The objects of one JSON-LD script (a list, an ``@graph``, or one object); nothing
    from a script that does not parse."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return []
    found: list[dict] = []
    stack = [data]
    while stack and len(found) < 100:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            found.append(item)
            graph = item.get("@graph")
            if isinstance(graph, list):
                stack.extend(reversed(graph))
    return found


def _json_path(item: dict, path: tuple[str, ...]) -> str | None:
    """A value along ``path`` (through the first of a list at each step) as text."""
    value: object = item
    for key in path:
        if isinstance(value, list):
            value = value[0] if value else None
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    if isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, bool) or value is None or isinstance(value, dict):
        return None
    return " ".join(str(value).split()) or None


# ---------------------------------------------------------------------------------------------
# Normalization
#
# Numbers are content (a price, a count, a score, a year in a sentence, a phone number), so only
# the ones known to move by themselves go: dates, clock times, relative times, view and like
# counters, copyright years, and identifiers (hex and base64 tokens, UUIDs, runs of 10+ digits:
# ids, epoch timestamps, cache busters).
#
# Speed: Python's regex engine skips quickly only to the characters a pattern can start with.
# So every pattern here starts at a digit (or, for identifiers, an upper-case letter), which
# ordinary prose has few of, and the rare forms that begin with a word ("Nov 30", "Views: 12",
# "© 2026", "Monday, ...") are found from their digit, with look-behinds or a look back in
# Python at the few matches.

_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
    r"|januar|februar|märz|mai|juni|juli|oktober|dezember"
    r"|janvier|février|mars|avril|juin|juillet|août|septembre|octobre|novembre|décembre"
    r"|enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|octubre|noviembre|diciembre)"
    r"\.?(?![^\W\d_])"
)
_WEEKDAY = (
    r"(?:mon(?:day)?|tue(?:s(?:day)?)?|wed(?:nesday)?|thu(?:r(?:s(?:day)?)?)?|fri(?:day)?"
    r"|sat(?:urday)?|sun(?:day)?)\.?|montag|dienstag|mittwoch|donnerstag|freitag|samstag"
    r"|sonntag|lundi|mardi|mercredi|jeudi|vendredi|samedi|dimanche"
)
_TIME = r"\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:\s*[ap]\.?\s*m\.?(?![a-z])|\s*uhr\b)?"
_ZONE = (
    r"(?:\s*(?:z|gmt|utc|[ecmp][sd]?t|cet|cest|bst|ist|jst|kst|aest|[+-]\d{2}:?\d{2})(?![a-z]))?"
)
_UNITS = (
    r"(?:s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?|w|wks?|weeks?|mo|mos|months?"
    r"|y|yrs?|years?)"
)
_FOREIGN_UNITS = (
    r"(?:sekunden|minuten|stunden|tagen|wochen|monaten|jahren|segundos|minutos|horas|días|dias"
    r"|semanas|meses|años|secondes|minutes|heures|jours|semaines|mois|ans)"
)
_COUNTED = (
    r"(?:views?|likes?|comments?|reads?|plays?|listens?|followers?|subscribers?|retweets?"
    r"|reposts?|reactions?|upvotes?|replies|reply|visits|hits|aufrufe|kommentare|vues"
    r"|visualizaciones)"
)


def _after(words: Sequence[str]) -> str:
    """Look-behinds for "one of ``words``, then the digit just matched", grouped by length (a
    look-behind must have one width)."""
    by_width: dict[int, list[str]] = {}
    for word in words:
        by_width.setdefault(len(word), []).append(re.escape(word))
    return "|".join(rf"(?<=(?:{'|'.join(group)})\d)" for _, group in sorted(by_width.items()))


_COUNTER_LABELS = [
    f"{label}{sep}"
    for label in ("views", "view count", "pageviews", "page views", "viewed", "hits", "visits", "likes",
                  "comments", "reads", "plays", "aufrufe", "vues")
    for sep in (" ", ": ", ":", " : ")
]  # fmt: skip
_COPYRIGHT_LABELS = ["© ", "©", "(c) ", "copyright ", "copyright © ", "copyright (c) "]
_RELATIVE_LEADS = ["vor ", "hace ", "il y a ", "há ", "fa "]
# How long the server took, which some pages print: "generated in 0.12 s", "took 37 ms".
_TIMING_LEADS = [
    f"{verb} in " for verb in ("generated", "rendered", "served", "loaded", "processed")
]
_TIMING_LEADS += ["took "]
# The last characters of a month name and a space: a number after one may be a month-first
# date ("nov 30", "november 30, 2026"); the look back in Python confirms the month.
_MONTH_ENDS = [
    f"{end}{sep}"
    for end in ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                "dec", "ary", "rch", "ril", "une", "uly", "ust", "ber", "ept", "mai", "rz")
    for sep in (" ", ". ")
]  # fmt: skip

_DIGIT_LED = re.compile(
    # a digit; one that starts a number (\b\d, written so the pattern begins with a digit
    # class) may start a date, time or counter
    r"\d(?:(?<!\w\d)(?:"
    # dates: ISO 8601 (with a time), numeric, CJK and Korean, day-first with a month name
    rf"(?P<date>\d{{3}}-\d{{2}}-\d{{2}}(?:[t ]{_TIME}{_ZONE})?(?!\w)"
    r"|\d{0,3}[/.-]\d{1,2}[/.-]\d{2,4}(?!\d)"
    r"|\d{0,3}\s*년\s*\d{1,2}\s*월\s*\d{1,2}\s*일|\d{0,3}\s*年\s*\d{1,2}\s*月(?:\s*\d{1,2}\s*日)?"
    r"|\d{3}\.\s\d{1,2}\.\s\d{1,2}\.?"
    rf"|\d?(?:st|nd|rd|th|er)?\.?(?:\s+de)?\s+{_MONTH}(?:\s+de)?(?:,?\s+\d{{4}})?"
    rf"(?:,?\s+(?:at\s+|um\s+|à\s+)?{_TIME}{_ZONE})?)"
    # clock times: 12:34, 12:34:56, 9:05 pm, 5pm
    rf"|(?P<time>\d?:\d{{2}}(?::\d{{2}}(?:[.,]\d+)?)?(?:\s*[ap]\.?\s*m\.?(?![a-z])|\s*uhr\b)?"
    rf"{_ZONE}(?!\w)"
    r"|\d?\s*[ap]\.?m\.?(?![a-z])(?!\w))"
    # relative times and counters: "5 minutes ago", "5m ago", "vor 5 minuten", "1.2k views"
    rf"|(?P<relative>\d*\s*{_UNITS}\s+ago(?![a-z])"
    rf"|(?:{_after(_RELATIVE_LEADS)})\d*\s+{_FOREIGN_UNITS}(?!\w))"
    rf"|(?P<counter>[\d.,]*\s*[km]?\+?\s*{_COUNTED}(?![a-z])"
    rf"|(?:{_after(_COUNTER_LABELS)})[\d.,]*[km]?(?![\w.,])"
    rf"|(?:{_after(_COPYRIGHT_LABELS)})\d{{3}}(?:\s*[-–]\s*\d{{4}})?(?!\w)"
    rf"|(?:{_after(_TIMING_LEADS)})[\d.,]*\s*(?:ms|milliseconds?|s|secs?|seconds?)(?![a-z]))"
    # a day after what may be a month: "nov 30", "november 30, 2026 12:34" (a month and a
    # year alone, "may 2026", is what a text says, not when it was served)
    rf"|(?P<month_first>(?:{_after(_MONTH_ENDS)})\d?(?!\d)(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?"
    rf"(?:,?\s+(?:at\s+)?{_TIME}{_ZONE})?(?!\w))"
    r")"
    # or the digit is part of an identifier: it touches a letter, or 9 more digits follow
    r"|(?P<mixed>(?<=[a-z]\d)|(?=[a-z])|(?=\d{9})))",
    re.I,
)
# Ending where a digit-led date starts: the month of a month-first date (required), or the
# weekday of any date or time (optional, "monday, 30 november"), so they go with it.
_MONTH_BEFORE = re.compile(rf"(?:\b(?:{_WEEKDAY}),?\s+)?\b{_MONTH}\s*\Z", re.I)
_WEEKDAY_BEFORE = re.compile(rf"\b(?:{_WEEKDAY}),?\s+\Z", re.I)
_LOOK_BACK = 32  # characters: a weekday and a month name with their separators
_RELATIVE_WORDS = re.compile(
    rf"\b(?:an?|one|a\s+few|few|several)\s+{_UNITS}\s+ago\b|\bjust\s+now\b|\bmoments?\s+ago\b"
)

# Identifiers: a token (letters, digits and + / = _ -) that mixes character classes. Those
# with a digit are found by _DIGIT_LED; the rest by an upper-case letter after a lower-case
# one (random base64 has many, words have few).
_CASE_HINT = re.compile(r"[A-Z](?<=[a-z0-9][A-Z])")
_RUN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-")
_RUN = re.compile(r"[A-Za-z0-9+/=_-]+")
_RUN_PART = re.compile(r"[A-Za-z0-9]+")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_HEX_ID = re.compile(r"(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{8,}", re.I)


def _character_classes(token: str) -> int:
    return (
        any(c.isdigit() for c in token)
        + any(c.isupper() for c in token)
        + any(c.islower() for c in token)
    )


def _drop_identifier(run: str) -> str:
    """``run`` without its random parts; the whole run goes when it looks random itself."""
    # 16+ characters from two of three classes: random tokens almost always qualify, long
    # plain words ("internationalization") and hyphenated slugs of plain words do not; a
    # token without digits must also be a quarter upper case, which random base64 is and a
    # CamelCase name ("PricewaterhouseCoopers") is not.
    if _UUID.fullmatch(run):
        return " "
    if (
        len(run) >= 16
        and _character_classes(run) >= 2
        and (any(c.isdigit() for c in run) or sum(c.isupper() for c in run) * 4 >= len(run))
    ):
        return " "
    return _RUN_PART.sub(
        lambda m: " " if _HEX_ID.fullmatch(m[0]) or (len(m[0]) >= 10 and m[0].isdigit()) else m[0],
        run,
    )


class _Rewriter:
    """Builds the text with spans replaced, left to right; a span found inside one already
    replaced is skipped."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pieces: list[str] = []
        self.last = 0  # end of the text emitted so far
        self.scanned = 0  # end of the last identifier run looked at

    def replace(self, start: int, end: int, with_: str = " ") -> None:
        self.pieces += (self.text[self.last : start], with_)
        self.last = end

    def identifier_at(self, at: int) -> None:
        """Look at the run of token characters around ``at``, once."""
        if at < self.scanned:
            return
        text, start = self.text, at
        while start > max(self.scanned, self.last) and text[start - 1] in _RUN_CHARS:
            start -= 1
        run = _RUN.match(text, start)
        if run is None:  # pragma: no cover - the hint is a run character
            return
        self.scanned = run.end()
        cleaned = _drop_identifier(run[0])
        if cleaned != run[0]:
            self.replace(start, self.scanned, cleaned)

    def result(self) -> str:
        if not self.pieces:
            return self.text
        return "".join([*self.pieces, self.text[self.last :]])


# An ASCII text's characters as the case hints see them: a lower-case letter or digit ("l"),
# an upper-case letter ("U"), anything else (".").
_CASE_CLASSES = (
    bytes(
        ord("l")
        if chr(c).islower() or chr(c).isdigit()
        else ord("U")
        if chr(c).isupper()
        else ord(".")
        for c in range(128)
    )
    + b"." * 128
)


def _digit_led_matches(text: str) -> Iterator[re.Match[str]]:
    """``_DIGIT_LED.finditer(text)``. The pattern can only start at a digit, and a regex scan
    for one costs about 10 ns a character while ``str.find`` skips to each of ten ASCII digits
    in a fraction of that; so an ASCII text is matched only where its digits are, left to
    right, skipping those inside a match (what finditer does)."""
    if not text.isascii():
        yield from _DIGIT_LED.finditer(text)
        return
    starts: list[int] = []
    for digit in "0123456789":
        at = text.find(digit)
        while at >= 0:
            starts.append(at)
            at = text.find(digit, at + 1)
    end = 0
    for at in sorted(starts):
        if at < end:
            continue
        match = _DIGIT_LED.match(text, at)
        if match is not None:
            end = match.end()
            yield match


def _case_hints(text: str) -> list[int]:
    """Where ``_CASE_HINT`` matches (an upper-case letter after a lower-case one or a digit),
    found in an ASCII text by translating it to character classes and searching for the
    pair, for the same reason as :func:`_digit_led_matches`."""
    if not text.isascii():
        return [match.start() for match in _CASE_HINT.finditer(text)]
    classes = text.encode("ascii").translate(_CASE_CLASSES)
    hints, at = [], classes.find(b"lU")
    while at >= 0:
        hints.append(at + 1)
        at = classes.find(b"lU", at + 1)
    return hints


def _drop_volatile(text: str) -> str:
    """Identifiers, dates, times and counters: one pass over the digits, one over the
    upper-case letters that follow a lower-case one."""
    out = _Rewriter(text)
    for match in _digit_led_matches(text):
        kind, start = match.lastgroup, match.start()
        if kind == "mixed":
            out.identifier_at(start)
            continue
        if start < out.last:
            continue
        if kind == "month_first":
            lead = _MONTH_BEFORE.search(text, max(out.last, start - _LOOK_BACK), start)
            if lead is None:
                continue  # "number 30", "must 5": not a date
            start = lead.start()
        elif kind in ("date", "time"):
            lead = _WEEKDAY_BEFORE.search(text, max(out.last, start - _LOOK_BACK), start)
            if lead is not None:
                start = lead.start()
        out.replace(start, match.end())
    text = out.result()
    out = _Rewriter(text)
    for at in _case_hints(text):
        out.identifier_at(at)
    return out.result()


def normalize_content(text: str) -> str:
    """Text with the volatile tokens dropped, casefolded and whitespace-folded.

    Numbers stay unless they are dates, times, relative times, counters ("1.2k views",
    "Views: 12"), copyright years or identifiers; so a changed price, count, score or year in
    a sentence is a changed fingerprint.
    """
    text = _drop_volatile(text).casefold()  # case tells random tokens from words
    if "ago" in text or "just now" in text:
        text = _RELATIVE_WORDS.sub(" ", text)
    return _fold_spaces(text)


# ---------------------------------------------------------------------------------------------
# Fingerprint

_HTML_TYPES = {"text/html", "application/xhtml+xml"}
_TEXT_TYPES = {
    "application/json",
    "application/ld+json",
    "application/xml",
    "application/javascript",
    "application/x-javascript",
    "application/ecmascript",
    "application/rss+xml",
    "application/atom+xml",
    "application/x-ndjson",
    "application/csv",
}
_UNKNOWN_TYPES = {"", "application/octet-stream", "binary/octet-stream", "unknown/unknown"}
_LOOKS_HTML = re.compile(
    rb"<(?:!doctype\s+html|html|head|body|title|meta|div|p|a|table|h[1-6])[\s>/]", re.I
)


def _kind(body: bytes, content_type: str | None) -> str:
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    if mime in _HTML_TYPES:
        return "html"
    if mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml")):
        return "text"
    if mime in _UNKNOWN_TYPES and _LOOKS_HTML.search(body[:1024]):
        return "html"
    return "binary"


def content_kind(body: bytes, content_type: str | None) -> str:
    """What :func:`content_record` reads a body as ("html", "text" or "binary"). Only an HTML
    body's fingerprint depends on a class's selectors and fields, so ``freshness reextract``
    leaves the others to their next fetch."""
    return _kind(body, content_type)


def _reads_as_utf8(body: bytes, content_type: str | None) -> bool:
    """Whether :func:`decode_body` would decode ``body`` as UTF-8 without a replacement, so
    lexbor may be given the bytes themselves: decoding a large page in Python and encoding it
    again for lexbor cost more than parsing it. Invalid UTF-8 goes the decoded way: lexbor
    replaces bad bytes differently from Python's decoder, and the fingerprint must not depend
    on which way a body went."""
    if body.startswith(_BOM_PREFIXES):
        return False
    try:
        declared = _declared_encoding(body, content_type)
    except (TypeError, ValueError):
        declared = None
    if declared not in (None, "utf-8"):
        return False
    if body.isascii():  # ASCII is UTF-8, and the check costs less than a decode
        return True
    try:
        body.decode("utf-8")  # a validity check, in C: microseconds for a page
    except UnicodeDecodeError:
        return False
    return True


def content_fingerprint(
    body: bytes, *, content_type: str | None, selectors: Sequence[str] = ()
) -> str:
    """16-hex-digit xxh3_64 of the content that matters; never raises on any bytes.

    HTML (declared, or undeclared but looking like HTML) is extracted then normalized; other
    text types (``text/*``, JSON, XML) are decoded then normalized; anything else is hashed as
    raw bytes, since there is no text to clean. Invalid ``selectors`` still raise ValueError.
    """
    try:
        data = bytes(body)
    except (TypeError, ValueError):
        data = b""
    kind = _kind(data, content_type)
    if kind == "binary":
        return xxhash.xxh3_64_hexdigest(data)
    if kind == "html":
        text = _extract(
            data if _reads_as_utf8(data, content_type) else decode_body(data, content_type),
            selectors,
        )
    else:
        text = decode_body(data, content_type)
    return xxhash.xxh3_64_hexdigest(normalize_content(text).encode("utf-8", "replace"))


@dataclass(frozen=True)
class ContentRecord:
    """What a fetched body says: its fingerprint and, for a version worth keeping (new, or
    another fingerprint than the one before), the title, the content's text line by line and
    its fields: the title and the text, and the configured ones beside them (so a change
    names every part that moved, a price and the text around it alike)."""

    fingerprint: str
    title: str | None = None
    text: str | None = None
    fields: dict[str, str | None] | None = None


def content_record(
    body: bytes,
    *,
    content_type: str | None,
    selectors: Sequence[str] = (),
    fields: Mapping[str, str] | None = None,
    json_ld: bool = False,
    previous: str | None = None,
) -> ContentRecord:
    """The fingerprint of :func:`content_fingerprint` (with configured ``fields`` or
    ``json_ld`` their values count too, so a price that changed in the structured data alone
    is a change), and, unless it equals ``previous``, the version's title, text and fields from
    the same extraction: reading them costs a second walk over the content, which only a
    version worth keeping pays. Non-HTML text has its decoded text and no title; binary
    content only its fingerprint (versioned by its bytes)."""
    try:
        data = bytes(body)
    except (TypeError, ValueError):
        data = b""
    kind = _kind(data, content_type)
    if kind == "binary":
        digest = xxhash.xxh3_64_hexdigest(data)
        return ContentRecord(digest, fields={} if digest != previous else None)
    if kind != "html":
        text = decode_body(data, content_type)
        digest = xxhash.xxh3_64_hexdigest(normalize_content(text).encode("utf-8", "replace"))
        if digest == previous:
            return ContentRecord(digest)
        lines = _fold_lines(text)
        return ContentRecord(digest, None, lines, {"text": lines})
    extraction = _Extraction(
        data if _reads_as_utf8(data, content_type) else decode_body(data, content_type),
        selectors,
        fields,
        json_ld,
    )
    hashed = extraction.text
    if extraction.fields:
        hashed += "".join(f"\n{k}\t{v or ''}" for k, v in sorted(extraction.fields.items()))
    digest = xxhash.xxh3_64_hexdigest(normalize_content(hashed).encode("utf-8", "replace"))
    if digest == previous:
        return ContentRecord(digest)
    title = extraction.title or None
    text = extraction.lines()
    return ContentRecord(digest, title, text, {**extraction.fields, "title": title, "text": text})


class ClassExtraction(Protocol):
    """What a URL class says to read from its pages (config.Extraction; a FetchRequest carries
    the same three)."""

    @property
    def selectors(self) -> Sequence[str]: ...
    @property
    def fields(self) -> Mapping[str, str] | None: ...
    @property
    def json_ld(self) -> bool: ...


def class_record(
    extraction: ClassExtraction,
    body: bytes,
    content_type: str | None,
    previous: str | None = None,
) -> ContentRecord:
    """:func:`content_record` under a URL class's settings: the fetcher and ``freshness
    reextract`` both call this, so a fingerprint re-derived from the archive is the one the
    next fetch of the same body computes and compares against."""
    return content_record(
        body,
        content_type=content_type,
        selectors=tuple(extraction.selectors),
        fields=extraction.fields,
        json_ld=extraction.json_ld,
        previous=previous,
    )
