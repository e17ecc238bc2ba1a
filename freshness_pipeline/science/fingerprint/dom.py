"""The parsed page as the extraction reads it: CSS queries on one shared engine, an element's
text, and removal of matched elements."""

from __future__ import annotations

import re
import threading

from selectolax.lexbor import LexborCSSSelector, LexborHTMLParser, LexborNode, SelectolaxError

__all__ = [
    "css",
    "css_first",
    "css_selector_error",
    "drop_nodes",
    "node_text",
    "open_shadow_roots",
    "place_streamed_segments",
]


def node_text(node: LexborNode | None) -> str:
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


def css(tree: LexborHTMLParser | LexborNode, query: str) -> list[LexborNode]:
    """``tree.css(query)`` on the thread's shared CSS engine."""
    root = tree.root if isinstance(tree, LexborHTMLParser) else tree
    return [] if root is None else _engine().find(query, root)


def css_first(tree: LexborHTMLParser | LexborNode, query: str) -> LexborNode | None:
    root = tree.root if isinstance(tree, LexborHTMLParser) else tree
    # find_first is in the extension but not in its type stub
    found = [] if root is None else _engine().find_first(query, root)  # type: ignore[attr-defined]
    return found[0] if found else None


def css_selector_error(selector: str) -> str | None:
    """Why lexbor refuses ``selector``, or None when it compiles: a configuration is checked
    with the engine the extraction uses, since a selector it cannot parse would otherwise fail
    every fetch of its URL class, one error at a time."""
    try:
        css(LexborHTMLParser(""), selector)
    except SelectolaxError as exc:
        return str(exc).rstrip(".") or "lexbor cannot parse it"
    return None


def drop_nodes(nodes: list[LexborNode]) -> None:
    """Remove the matches of one query. A query lists a node once per selector it matches and
    an ancestor before its descendants, so each goes once, innermost first, and none is
    touched after an ancestor's removal freed it."""
    seen: set[int] = set()
    for node in reversed(nodes):
        if node.mem_id not in seen:
            seen.add(node.mem_id)
            node.decompose()


_TEMPLATE_TAGS = re.compile(rb"<template\b[^>]*>|</template\s*>", re.I)
_SHADOW_ROOT = re.compile(rb"\sshadowroot(?:mode)?\s*=", re.I)


def open_shadow_roots(document: bytes) -> bytes:
    """``document`` with each declarative shadow root (``<template shadowrootmode=open>``, as
    web components render on the server) made a ``<div>``: a browser shows its content in
    place, and as a template, never visible text, the page's whole content was dropped (found by
    an exploratory run). Other templates stay templates; nested ones are matched by depth."""
    out: list[bytes] = []
    opened: list[bool] = []
    last = 0
    for tag in _TEMPLATE_TAGS.finditer(document):
        text = tag.group()
        if text.startswith(b"</"):
            if opened and opened.pop():
                out += (document[last : tag.start()], b"</div>")
                last = tag.end()
        elif _SHADOW_ROOT.search(text):
            opened.append(True)
            out += (document[last : tag.start()], b"<div data-shadow-root>")
            last = tag.end()
        else:
            opened.append(False)
    return b"".join([*out, document[last:]])


def place_streamed_segments(tree: LexborHTMLParser) -> None:
    """React's streamed server rendering sends a Suspense boundary's content late, as
    ``<div hidden id="S:0">``, which a script puts in place of the boundary's ``<template
    id="B:0">`` and its fallback (a "Loading..." skeleton, up to the ``<!--/$-->`` comment) at
    once. Put there: dropped as hidden, a product's price was never seen, and a page whose data
    came before or after the shell flushed (content in place, or streamed at the end) read as
    changed (found by an exploratory run)."""
    for segment in css(tree, 'div[hidden][id^="S:"]'):
        key = (segment.attributes.get("id") or "")[2:]
        holder = css_first(tree, f'template[id="B:{key}"]') if key else None
        if holder is None:
            continue
        after = holder.next
        while after is not None and not (after.tag == "-comment" and after.html == "<!--/$-->"):
            following = after.next
            after.decompose()
            after = following
        del segment.attrs["hidden"]
        holder.insert_before(segment)
        holder.decompose()
        segment.decompose()
