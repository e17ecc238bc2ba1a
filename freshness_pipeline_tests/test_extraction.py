"""science/fingerprint/extraction.py: the title and content text a fingerprint hashes."""

from __future__ import annotations

from freshness_pipeline.science.fingerprint.extraction import Extraction, extract, extract_content

PAGE = """<html><head><title>Lamp</title></head><body>
<nav>Home</nav>
<main><h2>Desk lamp</h2><p>Warm light.</p><p class="price">30 EUR</p></main>
</body></html>"""


def test_the_content_is_the_title_and_main_text_without_chrome() -> None:
    text = extract_content(PAGE)
    assert "Lamp" in text and "Warm light." in text and "Home" not in text
    assert extract(PAGE.encode(), ()) == extract(PAGE, ()) == text
    assert extract(PAGE, [".price"]) != text
    assert "30 EUR" in extract(PAGE, [".price"])


def test_fields_are_read_from_the_page_as_served() -> None:
    page = Extraction(PAGE, (), fields={"price": ".price", "missing": ".nope"})
    assert page.title == "Lamp"
    assert page.fields == {"price": "30 EUR", "missing": None}
