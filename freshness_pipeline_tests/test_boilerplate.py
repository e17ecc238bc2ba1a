"""science/fingerprint/boilerplate.py: site chrome and ads dropped, the content kept."""

from __future__ import annotations

from selectolax.lexbor import LexborHTMLParser

from freshness_pipeline.science.fingerprint.boilerplate import remove_boilerplate, selected
from freshness_pipeline.science.fingerprint.dom import node_text

PAGE = """<html><body>
<nav>Home | Shop</nav>
<h1>Storm over the bay</h1>
<div class="ad-banner">Buy now</div>
<article><p>The storm reached the coast at noon.</p><span class="price">12 EUR</span></article>
<footer>Copyright</footer>
</body></html>"""


def test_chrome_and_ads_go_and_the_headline_is_returned() -> None:
    tree = LexborHTMLParser(PAGE)
    assert remove_boilerplate(tree) == ["Storm over the bay"]
    text = node_text(tree.body)
    assert "The storm reached the coast at noon." in text
    for chrome in ("Home | Shop", "Buy now", "Copyright"):
        assert chrome not in text


def test_configured_selectors_pick_their_matches_in_order() -> None:
    tree = LexborHTMLParser(PAGE)
    assert [node_text(n) for n in selected(tree, [".price", "h1"])] == [
        "12 EUR",
        "Storm over the bay",
    ]


def test_page_level_blocks_whose_id_names_a_footer_or_header_go() -> None:
    """phpBB, vBulletin and Magento themes name their chrome by id words (div#page-footer,
    div#site-header): a footer's "Page generated in 234 ms on app-14" and a header's weather
    line were a change on every fetch (found by a run over real pages the project had not
    seen). A header that holds the headline stays, and so do an article's own."""
    page = """<html><body>
    <div id="site-header"><a href="/">Logo</a> <span>Minsk 3 C</span></div>
    <div id="page-header-main"><h1>Conference 2026</h1><p>Held in May.</p></div>
    <div class="content"><p>The annual conference takes place in May.</p>
    <div id="post-footer">Filed under radio</div></div>
    <article><p>An article's text.</p><div id="article-footer">Written by A. Author</div></article>
    <div id="pageFooter"><div class="copyright">Page generated in 234.716 ms on app-14</div></div>
    <div id="subheaders">Kept: no word "header" of its own</div>
    </body></html>"""
    tree = LexborHTMLParser(page)
    remove_boilerplate(tree)
    text = node_text(tree.body)
    for chrome in ("Minsk 3 C", "Page generated", "Filed under radio"):
        assert chrome not in text
    for content in ("Held in May.", "takes place in May", "Written by A. Author", "Kept:"):
        assert content in text
