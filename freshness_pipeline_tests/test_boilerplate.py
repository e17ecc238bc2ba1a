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
