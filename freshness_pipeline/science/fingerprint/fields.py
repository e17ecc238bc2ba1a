"""Configured fields and structured data: values a URL class asks for by name, read from the
page as served."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

from selectolax.lexbor import LexborHTMLParser, SelectolaxError

from freshness_pipeline.science.fingerprint.dom import css, css_first, node_text

__all__ = ["JSON_LD_FIELDS", "read_fields"]

#: The schema.org values read from a page's JSON-LD (:func:`read_fields`), by the field name
#: they are stored under: the paths tried in turn, in the page's main item. An
#: AggregateOffer (a marketplace's price range) gives its lowest price and its first offer's
#: availability; a list of offers (a product's variants) its lowest price
#: (:func:`_lowest_offer_price`) and its first offer's availability.
JSON_LD_FIELDS: dict[str, tuple[tuple[str, ...], ...]] = {
    "name": (("name",),),
    "price": (("offers", "price"), ("offers", "lowPrice")),
    "availability": (("offers", "availability"), ("offers", "offers", "availability")),
}
#: What a page is about when its JSON-LD also describes the site, its publisher or its
#: breadcrumbs: a thing that is sold (has offers), else one of these types.
_MAIN_TYPES = frozenset(
    ("product", "productgroup", "book", "event", "service", "vehicle", "softwareapplication",
     "course", "hotel", "offer", "individualproduct", "productmodel")
)  # fmt: skip


def read_fields(
    tree: LexborHTMLParser, fields: Mapping[str, str], json_ld: bool | None
) -> dict[str, str | None]:
    """Each configured field's text (the first match of its CSS selector, whitespace folded;
    None without a match), and the schema.org values of :data:`JSON_LD_FIELDS` the page's
    JSON-LD states.

    ``json_ld``: True (a class that asks for them) reads them from the page's main item
    (:func:`_main_item`); None (a class that does not say, and every URL of no class) from an
    item that is sold or of a main type only, under the names the class's own fields leave
    free; False reads none. A shop that renders its price and stock from structured data
    alone changed nothing in its text when they moved: a price monitor's page called
    unchanged at every price change (found by an outside held-out web), so the default reads
    them. A value the page does not state is left out, not null: a news page carries no
    price, and three empty names on every version of it would say nothing."""
    values: dict[str, str | None] = {}
    for name, selector in fields.items():
        try:
            node = css_first(tree, selector)
        except SelectolaxError as exc:
            raise ValueError(
                f"invalid CSS selector {selector!r} for field {name!r}: {exc}"
            ) from None
        values[name] = " ".join(node_text(node).split()) if node is not None else None
    if json_ld is False:
        return values
    items = [
        item
        for script in css(tree, 'script[type="application/ld+json" i]')
        for item in _json_ld_items(script.text(deep=True))
    ]
    main = _main_item(items, any_item=json_ld is True)
    if main is None:
        return values
    stated = {
        name: next((v for v in (_json_path(main, p) for p in paths) if v), None)
        for name, paths in JSON_LD_FIELDS.items()
    }
    stated["price"] = _lowest_offer_price(main) or stated["price"]
    for name, value in stated.items():
        if value is not None and name not in fields:
            values[name] = value
    return values


def _lowest_offer_price(item: dict) -> str | None:
    """The lowest price of a list of offers in the first offer's currency, as served (None:
    no list, or a price that is no plain number). A product's variants are offers of their
    own, and the first one's price alone left every price change of the others unseen (size
    L dropped from $49 to $29 twice, with only size S's $49 read; found by an exploratory
    run); the lowest is the "from" price, as an AggregateOffer's ``lowPrice`` is."""
    offers = item.get("offers")
    if not isinstance(offers, list) or len(offers) < 2:
        return None
    listed = [o for o in offers if isinstance(o, dict)]
    currency = listed[0].get("priceCurrency") if listed else None
    priced: list[tuple[float, str]] = []
    for offer in listed:
        if offer.get("priceCurrency") != currency:
            continue
        value = offer.get("price")
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            continue
        text = " ".join(str(value).split())
        try:
            number = float(text)
        except ValueError:
            return None
        if not math.isfinite(number):
            return None
        priced.append((number, text))
    return min(priced)[1] if priced else None


def _types(item: dict) -> set[str]:
    kind = item.get("@type")
    kinds = kind if isinstance(kind, list) else [kind]
    return {k.rsplit("/", 1)[-1].lower() for k in kinds if isinstance(k, str)}


def _main_item(items: list[dict], *, any_item: bool = True) -> dict | None:
    """The item the page is about: the first with offers, else the first of a main type, else
    (``any_item``) the first. Shops put their WebSite or Organization first (Yoast,
    WooCommerce, Shopify themes), and a name taken from the first item that had one made every
    product's name the shop's (found by an exploratory run); all fields come from the one
    item."""
    for item in items:
        if isinstance(item.get("offers"), dict | list):
            return item
    for item in items:
        if _types(item) & _MAIN_TYPES:
            return item
    return items[0] if items and any_item else None


def _json_ld_items(text: str) -> list[dict]:
    """The objects of one JSON-LD script (a list, an ``@graph``, or one object); nothing
    from a script that does not parse."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return []
    found: list[dict] = []
    stack = [data]
    while stack and len(found) < 100:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            found.append(item)
            graph = item.get("@graph")
            if isinstance(graph, list):
                stack.extend(reversed(graph))
    return found


def _json_path(item: dict, path: tuple[str, ...]) -> str | None:
    """A value along ``path`` (through the first of a list at each step) as text."""
    value: object = item
    for key in path:
        if isinstance(value, list):
            value = value[0] if value else None
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    if isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, bool) or value is None or isinstance(value, dict):
        return None
    return " ".join(str(value).split()) or None
