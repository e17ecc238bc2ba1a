"""The parsed page as the extraction reads it: CSS queries on one shared engine, an element's
text, and removal of matched elements."""

from __future__ import annotations

import threading

from selectolax.lexbor import LexborCSSSelector, LexborHTMLParser, LexborNode, SelectolaxError

__all__ = ["css", "css_first", "css_selector_error", "drop_nodes", "node_text"]


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
