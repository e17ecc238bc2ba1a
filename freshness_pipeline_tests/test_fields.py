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
