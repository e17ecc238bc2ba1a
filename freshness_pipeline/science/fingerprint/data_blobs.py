"""The prose a page carries only in its inline data: a single-page application's server
answer is often an empty shell whose article sits in a JSON blob for its scripts (Next.js's
``__NEXT_DATA__``, ``application/json`` islands, JSON-LD). Its extracted text is empty, so
every edit of the article was unseen and the page looked static for ever. When a page's text
is empty, the prose of those blobs stands in for it.

Prose only: the strings of several words. Build ids, hashes, nonces, URLs and numbers in the
blobs are single tokens, which is what changes with every deploy without the content moving.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator

from selectolax.lexbor import LexborHTMLParser

from freshness_pipeline.science.fingerprint.dom import css

__all__ = ["DATA_BLOB_MARKERS", "MAX_BLOB_CHARS", "data_prose"]

#: What a page's source holds when it has a data blob (checked before parsing it again).
DATA_BLOB_MARKERS = ("application/json", "application/ld+json")
#: A blob bigger than this is not read (a state dump, not an article).
MAX_BLOB_CHARS = 2_000_000
_QUERY = 'script[type="application/json" i],script[type="application/ld+json" i]'
_TAG = re.compile(r"<[^>]{0,2000}>")
# at least three words: letters, then two more runs after whitespace
_PROSE = re.compile(r"\w[^\s]*\s+\S+\s+\S")


def _strings(value: object, depth: int = 0) -> Iterator[str]:
    if depth > 64:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, depth + 1)


def data_prose(document: str | bytes) -> str:
    """The prose strings of ``document``'s JSON data blobs, in document order, one per line,
    with HTML inside them reduced to its text. Empty when there is none or no blob parses."""
    lines: list[str] = []
    for node in css(LexborHTMLParser(document), _QUERY):
        raw = node.text(deep=True, separator="", strip=True)
        if not raw or len(raw) > MAX_BLOB_CHARS:
            continue
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        for text in _strings(data):
            if "<" in text:
                text = html.unescape(_TAG.sub(" ", text))
            text = " ".join(text.split())
            if _PROSE.match(text) and not text.startswith(("http://", "https://", "/")):
                lines.append(text)
    return "\n".join(lines)
