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
    # what the page does not state is left out
    assert _ld(site) == {"name": "Acme Home Store"}
    assert _ld() == {}


def test_by_default_only_a_sold_items_values_are_read_under_names_left_free() -> None:
    """A class that says nothing of JSON-LD (and every URL of no class) reads a sold item's
    name, price and availability: a shop rendering its price from structured data alone had
    every price change called unchanged (found by an outside held-out web). A site's own
    WebSite or Organization item is no page's content, and a class's CSS field keeps its
    name."""
    site = '{"@type": "WebSite", "name": "Acme Home Store"}'
    product = '{"@type": "Product", "name": "Lamp", "offers": {"price": "30.00"}}'

    def tree(*scripts: str) -> LexborHTMLParser:
        head = "".join(f'<script type="application/ld+json">{s}</script>' for s in scripts)
        return LexborHTMLParser(f'<html><head>{head}</head><b class="price">29</b></html>')

    assert read_fields(tree(site, product), {}, None) == {"name": "Lamp", "price": "30.00"}
    assert read_fields(tree(site), {}, None) == {}
    assert read_fields(tree(site), {}, True) == {"name": "Acme Home Store"}
    assert read_fields(tree(site, product), {"price": ".price"}, None) == {
        "price": "29",
        "name": "Lamp",
    }
    assert read_fields(tree(site, product), {}, False) == {}


def test_a_list_of_offers_gives_its_lowest_price() -> None:
    """A product's variants are offers of their own: with the first offer's price alone, size
    L dropping from $49 to $29 while size S stayed at $49 was never seen (found by an
    exploratory run). The lowest price in the first offer's currency is the "from" price."""

    def product(*offers: str) -> str:
        return f'{{"@type": "Product", "name": "Tee", "offers": [{", ".join(offers)}]}}'

    def offer(price: str, currency: str = "USD") -> str:
        return f'{{"@type": "Offer", "price": {price}, "priceCurrency": "{currency}"}}'

    s, m, l_ = offer('"49.00"'), offer('"49.00"'), offer('"35.00"')
    assert _ld(product(s, m, l_))["price"] == "35.00"
    assert _ld(product(s, m, offer("29")))["price"] == "29"
    # another currency's offer is not compared; a price that is no plain number keeps the
    # first offer's, as before
    assert _ld(product(s, offer('"5.00"', "JPY")))["price"] == "49.00"
    assert _ld(product(s, offer('"1,299.00"')))["price"] == "49.00"
    assert _ld(product(s, offer('"NaN"')))["price"] == "49.00"
    assert _ld(product(s))["price"] == "49.00"
