"""science/fingerprint/fields.py: configured fields by CSS selector, and JSON-LD values."""

from __future__ import annotations

import pytest
from selectolax.lexbor import LexborHTMLParser

from freshness_pipeline.science.fingerprint.fields import read_fields

PAGE = """<html><head><script type="application/ld+json">
{"@type": "Product", "name": "Desk lamp", "offers": {"price": "30.00", "priceCurrency": "EUR"}}
</script></head><body><span class="price"> 30
EUR </span></body></html>"""


def test_a_field_is_its_first_match_whitespace_folded_or_none() -> None:
    tree = LexborHTMLParser(PAGE)
    assert read_fields(tree, {"price": ".price", "sku": ".sku"}, False) == {
        "price": "30 EUR",
        "sku": None,
    }
    with pytest.raises(ValueError, match="field 'bad'"):
        read_fields(tree, {"bad": "span["}, False)


def test_json_ld_values_join_the_fields() -> None:
    values = read_fields(LexborHTMLParser(PAGE), {}, True)
    assert "30.00" in values.values()


def _ld(*scripts: str) -> dict[str, str | None]:
    head = "".join(f'<script type="application/ld+json">{s}</script>' for s in scripts)
    return read_fields(LexborHTMLParser(f"<html><head>{head}</head></html>"), {}, True)


def test_json_ld_fields_come_from_the_item_the_page_is_about() -> None:
    """Shops that put their WebSite or Organization first gave every product the shop's name,
    and an AggregateOffer no price (found by an exploratory run)."""
    site = '{"@type": "WebSite", "name": "Acme Home Store", "url": "https://acme.test/"}'
    product = (
        '{"@type": "Product", "name": "Brass Lamp", "offers": {"@type": "Offer", '
        '"price": "19.99", "availability": "https://schema.org/InStock"}}'
    )
    expected = {
        "name": "Brass Lamp",
        "price": "19.99",
        "availability": "https://schema.org/InStock",
    }
    assert _ld(f'{{"@context": "https://schema.org", "@graph": [{site}, {product}]}}') == expected
    assert _ld(site.replace("WebSite", "Organization"), product) == expected
    aggregate = (
        '{"@type": ["Product"], "name": "Brass Lamp", "offers": {"@type": "AggregateOffer", '
        '"lowPrice": 14.5, "highPrice": 22, "offers": [{"availability": "InStock"}]}}'
    )
    assert _ld(aggregate) == {"name": "Brass Lamp", "price": "14.5", "availability": "InStock"}
    # an event without offers is what its page is about; a page of only the site: the site
    event = '{"@type": "Event", "name": "Concert"}'
    assert _ld(site, event)["name"] == "Concert"
    assert _ld(site) == {"name": "Acme Home Store", "price": None, "availability": None}
    assert _ld() == {"name": None, "price": None, "availability": None}
