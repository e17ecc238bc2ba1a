"""Content fingerprints: "did the page change in a way anyone cares about?"

A digest of the raw bytes marks a page changed whenever an ad slot rotates, a clock ticks or a
session token is minted, and the rate estimator then learns that every page changes on every
visit. So the fingerprint hashes the extracted content (title plus main text, or configured
fields) after dropping the tokens that change without the content changing: dates, times,
counters, hex and base64 identifiers, UUIDs.

The fingerprint is only comparable to fingerprints made by the same extractor. Bump
:data:`FINGERPRINT_VERSION` whenever anything here changes the output for some page; the
pipeline then re-extracts (records the new fingerprint without calling it a change) instead of
reporting a wave of false changes.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Sequence

import xxhash
from selectolax.lexbor import LexborHTMLParser, LexborNode, SelectolaxError

__all__ = [
    "FINGERPRINT_VERSION",
    "content_fingerprint",
    "decode_body",
    "extract_content",
    "normalize_content",
]

FINGERPRINT_VERSION: int = 1

# ---------------------------------------------------------------------------------------------
# Decoding

_CT_CHARSET = re.compile(r"""charset\s*=\s*["']?\s*([A-Za-z0-9_:.+-]+)""", re.IGNORECASE)
_META_CHARSET = re.compile(
    rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_:.+-]+)""", re.IGNORECASE
)
# WHATWG Encoding: these labels mean windows-1252 on the web, and utf-7 is never honoured.
_LABEL_ALIASES = {
    "ascii": "cp1252",
    "us-ascii": "cp1252",
    "iso-8859-1": "cp1252",
    "iso8859-1": "cp1252",
    "iso_8859-1": "cp1252",
    "latin1": "cp1252",
    "latin-1": "cp1252",
    "l1": "cp1252",
    "windows-1252": "cp1252",
    "x-sjis": "shift_jis",
    "gb2312": "gb18030",
    "gbk": "gb18030",
}
_REFUSED = {"utf-7", "utf7", "x-user-defined", "replacement"}
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def _usable_encoding(label: str | None, *, from_meta: bool = False) -> str | None:
    """Python codec for a charset label, or None when it is unknown, unsafe or not a text codec."""
    if not label:
        return None
    label = label.strip().strip("\"'").lower()
    if label in _REFUSED:
        return None
    label = _LABEL_ALIASES.get(label, label)
    try:
        info = codecs.lookup(label)
    except (LookupError, ValueError):
        return None
    # bytes-to-bytes codecs (base64, zlib, rot13...) are not charsets
    if not getattr(info, "_is_text_encoding", True):
        return None
    # A meta tag that declares UTF-16/32 was necessarily read as ASCII: it is lying (HTML spec).
    if from_meta and info.name.startswith(("utf-16", "utf-32")):
        return "utf-8"
    return info.name


def _declared_encoding(body: bytes, content_type: str | None) -> str | None:
    if content_type:
        match = _CT_CHARSET.search(content_type)
        if match:
            enc = _usable_encoding(match.group(1))
            if enc:
                return enc
    match = _META_CHARSET.search(body[:2048])
    if match:
        return _usable_encoding(match.group(1).decode("ascii", "replace"), from_meta=True)
    return None


def decode_body(body: bytes, content_type: str | None) -> str:
    """Bytes to text the way a browser would, never raising.

    Order: byte-order mark, the Content-Type charset, ``<meta charset>``/``http-equiv`` in the
    first 2 KB, else UTF-8. A declaration that does not decode cleanly is tried against strict
    UTF-8 (a common lie), then decoded with replacement characters in the declared charset; an
    unknown or unsafe label falls back to UTF-8 with ``errors="replace"``.
    """
    try:
        data = bytes(body)
    except (TypeError, ValueError):
        return ""
    for bom, enc in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(enc, errors="replace")
    try:
        declared = _declared_encoding(data, content_type)
    except (TypeError, ValueError):
        declared = None
    if declared:
        try:
            return data.decode(declared)
        except (UnicodeDecodeError, ValueError, LookupError):
            pass
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    if declared:
        try:
            return data.decode(declared, errors="replace")
        except (UnicodeDecodeError, ValueError, LookupError):
            pass
    return data.decode("utf-8", errors="replace")


# ---------------------------------------------------------------------------------------------
# Extraction

_NOISE_TAGS = ["script", "style", "noscript", "template", "svg", "iframe", "object", "embed"]
_CHROME_TAGS = ["nav", "aside"]
_CONTENT_ROOTS = ("main", "article")


def _inside(node: LexborNode, tags: tuple[str, ...]) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.tag in tags or parent.attributes.get("role") == "main":
            return True
        parent = parent.parent
    return False


def _text(node: LexborNode | None) -> str:
    if node is None:
        return ""
    return node.text(deep=True, separator=" ", strip=True)


def _remove_chrome(tree: LexborHTMLParser) -> None:
    """Drop site chrome while keeping the parts of it that belong to the content.

    ``<header>``/``<footer>`` inside an article or main hold its headline and byline, so only
    page-level ones go. A ``<form>`` goes unless it wraps most of the page: ASP.NET WebForms
    pages put the whole body in one form, and deleting it would fingerprint an empty page.
    """
    root = tree.root
    if root is None:
        return
    root.strip_tags(_NOISE_TAGS)
    root.strip_tags(_CHROME_TAGS)
    for node in tree.css("header, footer"):
        # Nested chrome goes with its outer element; touching it again would use a freed node.
        if not _inside(node, (*_CONTENT_ROOTS, "header", "footer")):
            node.decompose()
    body_len = len(_text(tree.body)) or 1
    for node in tree.css("form"):
        if _inside(node, ("form",)):
            continue
        if len(_text(node)) * 2 >= body_len:
            node.unwrap()
        else:
            node.decompose()


def _main_text(tree: LexborHTMLParser) -> str:
    main = tree.css_first("main") or tree.css_first('[role="main"]')
    if main is not None:
        return _text(main)
    # A listing page has several articles: take them all, or a change in the second is missed.
    articles = [n for n in tree.css("article") if not _inside(n, ("article",))]
    if articles:
        return "\n".join(_text(n) for n in articles)
    return _text(tree.body or tree.root)


def extract_content(html: str, *, selectors: Sequence[str] = ()) -> str:
    """Title plus the text that carries the page's meaning, for change detection.

    With ``selectors`` (CSS), the text of every match of each selector, in selector order,
    replaces the main text; the title stays because a retitled page is a changed page. Invalid
    selectors raise :class:`ValueError` (a configuration error, not a property of the page);
    malformed HTML never raises.
    """
    if isinstance(selectors, str):
        selectors = [selectors]
    tree = LexborHTMLParser(html if isinstance(html, str) else str(html))
    title_node = tree.css_first("title")
    title = _text(title_node)
    if title_node is not None:
        title_node.decompose()  # the title is counted once, above
    _remove_chrome(tree)
    if selectors:
        parts = []
        for selector in selectors:
            try:
                nodes = tree.css(selector)
            except SelectolaxError as exc:
                raise ValueError(f"invalid CSS selector {selector!r}: {exc}") from None
            parts.extend(_text(n) for n in nodes)
        body = "\n".join(parts)
    else:
        body = _main_text(tree)
    return f"{title}\n{body}" if title else body


# ---------------------------------------------------------------------------------------------
# Normalization

_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_WEEKDAY = r"(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?,?\s*"
_TIME = r"\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:\s*[ap]\.?\s?m\.?(?![a-z]))?"
_ZONE = r"(?:\s*(?:z|gmt|utc|[+-]\d{2}:?\d{2}))?"

# Most of these start at a digit after a word boundary. Written as "a digit, then look back"
# (``\d(?<!\w\d)`` is exactly ``\b\d``: a digit is a word character), the pattern begins with a
# character class, which lets the regex engine skip to the next digit instead of trying the
# whole pattern at every position of the text.
_AT_DIGIT = r"\d(?<!\w\d)"
_TIME_AT_DIGIT = _AT_DIGIT + r"\d?" + _TIME.removeprefix(r"\d{1,2}")

_VOLATILE = [
    # UUIDs before anything that would eat their hex groups
    re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I),
    # ISO 8601 date or date-time
    re.compile(rf"{_AT_DIGIT}\d{{3}}-\d{{2}}-\d{{2}}(?:[t ]{_TIME}{_ZONE})?(?![\w])", re.I),
    # RFC 1123 / "30 Nov 2026" / "30. November 2026, 12:34"; a match starts with a weekday or
    # a digit, and the lookahead says so, so most positions fail on one character class
    re.compile(
        rf"(?=[mtwfs\d])(?:{_WEEKDAY})?\b\d{{1,2}}\.?\s+{_MONTH}\s+\d{{4}}"
        rf"(?:,?\s+{_TIME}{_ZONE})?",
        re.I,
    ),
    # "Nov 30, 2026" / "Monday, November 30 2026 12:34 pm"; starts with a weekday or a month
    re.compile(
        rf"(?=[mtwfsjaond])(?:{_WEEKDAY})?\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}"
        rf"(?:,?\s+(?:at\s+)?{_TIME}{_ZONE})?",
        re.I,
    ),
    # numeric dates: 11/30/2026, 30.11.2026, 2026/11/30, 30-11-26
    re.compile(rf"{_AT_DIGIT}\d{{0,3}}[/.-]\d{{1,2}}[/.-]\d{{2,4}}\b"),
    # clock times: 12:34, 12:34:56, 9:05 pm
    re.compile(rf"{_TIME_AT_DIGIT}{_ZONE}(?![\w])", re.I),
    # relative times: "5 minutes ago"
    re.compile(
        rf"{_AT_DIGIT}\d*\s+(?:seconds?|secs?|minutes?|mins?|hours?|hrs?|days?|weeks?|months?"
        r"|years?)\s+ago\b",
        re.I,
    ),
    # hex identifiers (hashes, session ids) of 8+ characters mixing digits and letters
    re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b", re.I),
]
# A cheap search that every match of the pattern beside it must contain (None: no such test):
# when it finds nothing the pattern cannot match and its scan is skipped. Each starts with a
# literal or a digit class, which the regex engine skips along to, where most of the patterns
# above must try every position. Most pages have no date in words, so the two costliest
# patterns mostly never run.
_GUARDS: list[re.Pattern[str] | None] = [
    re.compile(r"-[0-9a-f]{4}-", re.I),  # UUID: its middle groups
    re.compile(r"-\d{2}-"),  # ISO date: the month
    re.compile(rf"\d\.?\s+{_MONTH}\s+\d{{4}}", re.I),  # "30 Nov 2026" from its day's last digit
    re.compile(r"\d(?:st|nd|rd|th)?,?\s+\d{4}", re.I),  # "Nov 30, 2026" from the day's last digit
    None,
    re.compile(r":\d{2}"),  # clock time: the minutes
    None,
    None,
]
_TOKEN64 = re.compile(r"(?<![A-Za-z0-9+/_=-])[A-Za-z0-9+/_-]{16,}={0,2}(?![A-Za-z0-9+/_=-])")
_DIGITS = re.compile(r"\d{4,}")


def _drop_token64(match: re.Match[str]) -> str:
    token = match.group(0)
    kinds = (
        any(c.isdigit() for c in token)
        + any(c.isupper() for c in token)
        + any(c.islower() for c in token)
    )
    # Two character classes out of three: random tokens almost always qualify, long plain words
    # ("internationalization") and hyphenated slugs of plain words do not.
    return " " if kinds >= 2 else token


def normalize_content(text: str) -> str:
    """Text with the volatile tokens dropped, casefolded and whitespace-folded.

    Caveat by design: every run of four or more digits goes (counters, years, ids), so a change
    of a four-digit price is not a change of fingerprint.
    """
    for guard, pattern in zip(_GUARDS, _VOLATILE, strict=True):
        if guard is None or guard.search(text):
            text = pattern.sub(" ", text)
    text = _TOKEN64.sub(_drop_token64, text)
    text = _DIGITS.sub(" ", text)
    return " ".join(text.casefold().split())


# ---------------------------------------------------------------------------------------------
# Fingerprint

_HTML_TYPES = {"text/html", "application/xhtml+xml"}
_TEXT_TYPES = {
    "application/json",
    "application/ld+json",
    "application/xml",
    "application/javascript",
    "application/x-javascript",
    "application/ecmascript",
    "application/rss+xml",
    "application/atom+xml",
    "application/x-ndjson",
    "application/csv",
}
_UNKNOWN_TYPES = {"", "application/octet-stream", "binary/octet-stream", "unknown/unknown"}
_LOOKS_HTML = re.compile(
    rb"<(?:!doctype\s+html|html|head|body|title|meta|div|p|a|table|h[1-6])[\s>/]", re.I
)


def _kind(body: bytes, content_type: str | None) -> str:
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    if mime in _HTML_TYPES:
        return "html"
    if mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml")):
        return "text"
    if mime in _UNKNOWN_TYPES and _LOOKS_HTML.search(body[:1024]):
        return "html"
    return "binary"


def content_fingerprint(
    body: bytes, *, content_type: str | None, selectors: Sequence[str] = ()
) -> str:
    """16-hex-digit xxh3_64 of the content that matters; never raises on any bytes.

    HTML (declared, or undeclared but looking like HTML) is extracted then normalized; other
    text types (``text/*``, JSON, XML) are decoded then normalized; anything else is hashed as
    raw bytes, since there is no text to clean. Invalid ``selectors`` still raise ValueError.
    """
    try:
        data = bytes(body)
    except (TypeError, ValueError):
        data = b""
    kind = _kind(data, content_type)
    if kind == "binary":
        return xxhash.xxh3_64_hexdigest(data)
    text = decode_body(data, content_type)
    if kind == "html":
        text = extract_content(text, selectors=selectors)
    return xxhash.xxh3_64_hexdigest(normalize_content(text).encode("utf-8", "replace"))
