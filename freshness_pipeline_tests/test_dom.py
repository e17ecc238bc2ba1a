"""science/fingerprint/dom.py: CSS queries on lexbor, the selector check, node removal."""

from __future__ import annotations

from selectolax.lexbor import LexborHTMLParser

from freshness_pipeline.science.fingerprint.dom import (
    css,
    css_first,
    css_selector_error,
    drop_nodes,
    node_text,
)

PAGE = "<html><body><div class=a><p>one</p><div class=a><p>two</p></div></div><p>three</p></body></html>"


def test_nested_matches_are_dropped_once_and_the_rest_stays() -> None:
    tree = LexborHTMLParser(PAGE)
    assert [node_text(p) for p in css(tree, "p")] == ["one", "two", "three"]
    drop_nodes(css(tree, "div.a"))  # an ancestor and its descendant, both matched
    assert node_text(css_first(tree, "body")) == "three"
    assert css_first(tree, "div") is None and node_text(None) == ""


def test_a_selector_lexbor_cannot_parse_is_named() -> None:
    assert css_selector_error("div.price > span") is None
    assert css_selector_error("div[") is not None
