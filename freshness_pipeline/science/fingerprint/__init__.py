"""Content fingerprints: "did the page change in a way anyone cares about?"

A digest of the raw bytes marks a page changed whenever an ad slot rotates, a clock ticks or a
session token is minted, and the rate estimator then learns that every page changes on every
visit. So the fingerprint hashes the extracted content (title plus main text, or configured
fields): the page's marked main content, without site chrome, hidden elements, consent banners
and promotional blocks (found by their class or id words, ``rel=sponsored`` links and visible
"Sponsored"/"Advertisement" labels, since a rotating ad with visible text is the commonest
false change), and then without the tokens that change while the content does not: dates,
times, relative times, view and like counters, hex and base64 identifiers, UUIDs. Other
numbers are content: a changed price or count is a changed page. A page with no content in
its HTML (a single-page application's shell) is read from the prose of its JSON data blobs.
Configured fields are hashed as they read, dates and all: a class's owner configures a field
because it matters; so are the name, price and availability a page's JSON-LD states for the
item it sells (by default: a shop may render its price from structured data alone).

The fingerprint is only comparable to fingerprints made by the same extractor. Bump
:data:`FINGERPRINT_VERSION` whenever anything here changes the output for some page; the
pipeline then re-extracts (records the new fingerprint without calling it a change) instead of
reporting a wave of false changes.

The modules, from the bottom up: :mod:`.decode` (bytes to text), :mod:`.whitespace`
(whitespace folding), :mod:`.dom` (CSS queries, an element's text, removal), :mod:`.boilerplate`
(what the extraction drops), :mod:`.fields` (configured fields and JSON-LD), :mod:`.links` (a
page's canonical link and meta refresh), :mod:`.data_blobs` (the prose of inline JSON),
:mod:`.extraction` (the title and main content), :mod:`.normalize` (the volatile tokens) and
:mod:`.records` (a body's fingerprint and the version worth keeping).
"""

from __future__ import annotations

from freshness_pipeline.science.fingerprint.decode import decode_body
from freshness_pipeline.science.fingerprint.dom import css_selector_error
from freshness_pipeline.science.fingerprint.extraction import extract_content
from freshness_pipeline.science.fingerprint.fields import JSON_LD_FIELDS
from freshness_pipeline.science.fingerprint.links import PageLinks
from freshness_pipeline.science.fingerprint.normalize import normalize_content
from freshness_pipeline.science.fingerprint.records import (
    FIELD_RULES_VERSION,
    FINGERPRINT_VERSION,
    ContentRecord,
    class_record,
    content_fingerprint,
    content_kind,
    content_record,
)

__all__ = [
    "FIELD_RULES_VERSION",
    "FINGERPRINT_VERSION",
    "JSON_LD_FIELDS",
    "ContentRecord",
    "PageLinks",
    "class_record",
    "content_fingerprint",
    "content_kind",
    "content_record",
    "css_selector_error",
    "decode_body",
    "extract_content",
    "normalize_content",
]
