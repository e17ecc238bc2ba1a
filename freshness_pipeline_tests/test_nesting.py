"""A page nested deeper than a browser nests it costs one fetch, not minutes of parsing: the
elements beyond the limit are flattened before the HTML parser sees them, their text kept
(found by an outside audit: 150,000 nested <div> held a cycle for a minute)."""

from __future__ import annotations

import pytest
from selectolax.lexbor import LexborHTMLParser

from freshness_pipeline.science.fingerprint import content_record
from freshness_pipeline.science.fingerprint.extraction import Extraction
from freshness_pipeline.science.fingerprint.nesting import (
    MAX_DEPTH,
    flatten_deep_nesting,
    nesting_bound,
)
from freshness_pipeline_tests import real_pages

HEAD = b"<!doctype html><html><head><title>Deep</title></head><body>"


def nested(depth: int, inner: bytes = b"<p>the words that matter</p>") -> bytes:
    return HEAD + b"<div>" * depth + inner + b"</div>" * depth + b"</body></html>"


def tree_depth(tree: LexborHTMLParser) -> int:
    """How deep the parsed tree nests, in one pass (a parent's depth is known first)."""
    depth = {tree.root.mem_id: 1}
    for node in tree.root.traverse(include_text=False):
        parent = node.parent
        if parent is not None and node.mem_id not in depth:
            depth[node.mem_id] = depth.get(parent.mem_id, 1) + 1
    return max(depth.values())


def test_a_page_nested_beyond_the_limit_is_parsed_no_deeper_than_it() -> None:
    page = nested(30_000)
    extraction = Extraction(page, ())
    assert tree_depth(extraction.tree) <= MAX_DEPTH + 5  # html, body and the inner <p>
    assert "the words that matter" in extraction.text


def test_the_text_beyond_the_limit_stays_and_reads_as_the_browser_shows_it() -> None:
    # elements Chromium would put beside the 512th: their text is still the page's
    deep = HEAD + b"<div>" * 2_000 + b"".join(b"<span>w%d</span>" % i for i in range(50))
    record = content_record(deep + b"</body></html>", content_type="text/html")
    assert record.text is not None
    assert all(f"w{i}" in record.text for i in range(50))


def test_deep_pages_with_the_same_words_have_one_fingerprint() -> None:
    """Flattening keeps what a reader sees: how far past the limit a page nests is no change."""
    fingerprints = {
        content_record(nested(depth), content_type="text/html").fingerprint
        for depth in (MAX_DEPTH + 100, 5_000, 40_000)
    }
    assert len(fingerprints) == 1


@pytest.mark.parametrize(
    "page",
    [
        nested(MAX_DEPTH - 10),
        # unclosed paragraphs, list items and cells close each other: no depth
        HEAD + b"<p>para" * 3_000 + b"<ul>" + b"<li>item" * 3_000 + b"</ul></body></html>",
        HEAD + b"<table>" + b"<tr><td>cell<td>cell" * 2_000 + b"</table></body></html>",
        # markup in a script's or a style's text is no markup
        HEAD + b"<script>" + b'html += "<div>";' * 5_000 + b"</script></body></html>",
        HEAD + b"<style>" + b"a<b{}" * 5_000 + b"</style>" + b"<br><img src=x>" * 3_000,
    ],
    ids=["within-limit", "optional-end-tags", "table-cells", "script-text", "style-and-voids"],
)
def test_pages_that_nest_no_deeper_than_the_limit_are_left_as_they_are(page: bytes) -> None:
    assert flatten_deep_nesting(page) is page
    text = page.decode()
    assert flatten_deep_nesting(text) is text


def test_stray_end_tags_of_other_elements_do_not_hide_depth() -> None:
    page = HEAD + b"<div></span></b>" * 3_000 + b"x" + b"</body></html>"
    assert nesting_bound(page) >= 3_000
    flat = flatten_deep_nesting(page)
    assert flat is not page
    assert tree_depth(LexborHTMLParser(flat)) <= MAX_DEPTH + 5


def test_unclosed_elements_are_flattened_too_and_text_pages_stay_text() -> None:
    page = (HEAD + b"<div>x" * 20_000).decode()
    flat = flatten_deep_nesting(page)
    assert isinstance(flat, str)
    assert flat.count("x") == 20_000
    # the limit counts <html> and <body> as a browser does
    assert flat.count("<div>") == MAX_DEPTH - 2


def test_real_pages_are_left_as_they_are() -> None:
    """The bound is tight enough that no page of the real-page corpus is walked tag by tag."""
    if (reason := real_pages.missing_reason()) is not None:
        pytest.skip(reason)
    for page in real_pages.load():
        assert nesting_bound(page.html) <= MAX_DEPTH, page.name
        assert flatten_deep_nesting(page.html) is page.html
