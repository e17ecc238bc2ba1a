"""The text that carries a page's meaning: its title and marked main content (or its body),
what :mod:`.boilerplate` drops removed, and on demand the same content line by line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from selectolax.lexbor import LexborHTMLParser, LexborNode

from freshness_pipeline.science.fingerprint.boilerplate import (
    NOISE_TAGS,
    remove_boilerplate,
    selected,
)
from freshness_pipeline.science.fingerprint.data_blobs import DATA_BLOB_MARKERS, data_prose
from freshness_pipeline.science.fingerprint.dom import (
    css,
    node_text,
    open_shadow_roots,
    place_streamed_segments,
)
from freshness_pipeline.science.fingerprint.fields import read_fields
from freshness_pipeline.science.fingerprint.links import page_links
from freshness_pipeline.science.fingerprint.nesting import flatten_deep_nesting
from freshness_pipeline.science.fingerprint.whitespace import fold_lines

__all__ = ["Extraction", "extract", "extract_content"]

# Marked content holding less than this share of the cleaned body is not the content (a
# teaser <article> in a sidebar), and the whole body counts instead.
_MIN_ROOT_SHARE = 0.15
# ... unless it is the page's <main> and says this much: a news brief of two sentences is
# short by nature, and beside a 30-headline rail outside <main> it fell to the whole body, the
# rail's rotation a change on every fetch (found by an exploratory run)
_MIN_MAIN_CHARS = 100


def _main_text(
    tree: LexborHTMLParser, headlines: list[str]
) -> tuple[str, list[LexborNode], list[str]]:
    """The content's text, the nodes it was read from and the headlines put before it."""
    mains, articles, bodies = [], [], []
    for node in css(
        tree,
        'main,[role="main" i],article:not(article *),'
        '[itemprop~="articleBody" i]:not([itemprop~="articleBody" i] *)',
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
    text = "\n".join(node_text(n) for n in roots)
    body = tree.body or tree.root
    body_text = node_text(body)
    trusted = bool(mains) and len(text) >= _MIN_MAIN_CHARS
    if not roots or (not trusted and len(text) < _MIN_ROOT_SHARE * len(body_text)):
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
    text (a ``<main>`` saying 100 characters or more always counts), the whole body; in both, after dropping site chrome (nav, aside, page-level header and
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
    return extract(html if isinstance(html, str) else str(html), selectors)


def extract(document: str | bytes, selectors: Sequence[str]) -> str:
    """:func:`extract_content` of a text, or of UTF-8 bytes, which lexbor reads directly."""
    return Extraction(document, selectors, json_ld=False).text


def _with_open_shadow_roots(document: str | bytes) -> str | bytes:
    """:func:`.dom.open_shadow_roots` where the page has a declarative shadow root (one search
    of the source otherwise)."""
    if isinstance(document, bytes):
        return open_shadow_roots(document) if b"shadowroot" in document else document
    if "shadowroot" not in document:
        return document
    return open_shadow_roots(document.encode("utf-8", "surrogatepass")).decode(
        "utf-8", "surrogatepass"
    )


# A page whose content holds fewer characters than this (its title aside) is a shell: a
# single-page application's text comes from its data blobs, if it has any, after what little
# the page shows ("Loading your news...", or a short page's one line: "Sold out"), which still
# counts. Read instead of it, a short page's own words were lost to the site's JSON-LD, and a
# spinner longer than a few words turned the blob off (found by an exploratory run).
_SHELL_CHARS = 80


def _has_blob(document: str | bytes) -> bool:
    lowered = document.lower()
    if isinstance(lowered, bytes):
        return any(m.encode() in lowered for m in DATA_BLOB_MARKERS)
    return any(m in lowered for m in DATA_BLOB_MARKERS)


# Elements a reader sees on lines of their own: the content's text is kept line by line so
# that what changed between two versions can be told by line. They are found by walking the
# content in Python: a selector of as many types costs more to parse than the walk. A table's
# cells are words apart on their row's line: glued, the row 2024 | 1.250 | 310 read
# "20241.250310", and a digit moved from one cell to the next changed nothing a reader saw.
_BLOCKS = frozenset(
    ["p", "div", "li", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "br", "blockquote",
     "pre", "section", "figcaption", "caption", "table", "ul", "ol", "dl", "hr", "address",
     "details", "summary"]
)  # fmt: skip
_CELLS = frozenset(("td", "th"))


class Extraction:
    """One page's extraction: the text the fingerprint hashes, and on demand (for a new or
    changed version only) the same content as lines a person reads and configured fields."""

    def __init__(
        self,
        document: str | bytes,
        selectors: Sequence[str],
        fields: Mapping[str, str] | None = None,
        json_ld: bool | None = None,
    ) -> None:
        if isinstance(selectors, str):
            selectors = [selectors]
        document = flatten_deep_nesting(_with_open_shadow_roots(document))
        tree = self.tree = LexborHTMLParser(document)
        streamed = '"S:' in document if isinstance(document, str) else b'"S:' in document
        if streamed:
            place_streamed_segments(tree)  # React's streamed Suspense content, where it shows
        # Fields and structured data are read from the page as served: a price may sit in a
        # block the content rules drop, and JSON-LD is a script.
        self.fields = read_fields(tree, fields or {}, json_ld)
        self.links = page_links(tree, document)
        titles = tree.tags("title")  # tag lookups parse no selector
        title_node = titles[0] if titles else None
        self.title = title = node_text(title_node)
        if title_node is not None:
            title_node.decompose()  # the title is counted once, above
        self.lead: list[str] = []
        self.data_text: str | None = None
        if not selectors:
            # detached rather than freed, so one nested in another is safe to remove after it
            tree.strip_tags(NOISE_TAGS)
            body, self.roots, self.lead = _main_text(tree, remove_boilerplate(tree))
            if len(body.strip()) < _SHELL_CHARS and _has_blob(document):
                # the scripts are gone from this tree: the blobs are read from the source
                prose = data_prose(document)
                if prose:
                    shown = body.strip()
                    body = f"{shown}\n{prose}" if shown else prose
                    self.roots, self.lead, self.data_text = [], [], body
        else:
            self.roots = selected(tree, selectors)
            body = "\n".join(node_text(n) for n in self.roots)
        self.text = f"{title}\n{body}" if title else body

    def lines(self) -> str:
        """The content as the page lays it out: a line per block, whitespace folded, empty
        lines dropped (the headlines put before it first)."""
        if self.data_text is not None:
            return fold_lines(self.data_text)
        out = list(self.lead)
        for root in self.roots:
            for node in list(root.traverse()):
                tag = node.tag
                if tag in _BLOCKS:
                    # before as well: text right before a block ("<span>Label</span><p>...")
                    # is not the block's first line
                    node.insert_before("\n")
                    node.insert_after("\n")
                elif tag in _CELLS:
                    node.insert_after(" ")
            folded = fold_lines(root.text(deep=True, separator="", strip=False))
            if folded:
                out.append(folded)
        return "\n".join(out)
