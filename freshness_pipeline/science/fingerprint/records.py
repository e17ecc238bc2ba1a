"""A fetched body's fingerprint and the version worth keeping, by what the body is: HTML,
other text, or bytes."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import xxhash

from freshness_pipeline.science.fingerprint.decode import decode_body, reads_as_utf8
from freshness_pipeline.science.fingerprint.extraction import Extraction
from freshness_pipeline.science.fingerprint.links import PageLinks
from freshness_pipeline.science.fingerprint.normalize import normalize_content
from freshness_pipeline.science.fingerprint.whitespace import fold_lines, fold_spaces

__all__ = [
    "FIELD_RULES_VERSION",
    "FINGERPRINT_VERSION",
    "ClassExtraction",
    "ContentRecord",
    "class_record",
    "content_fingerprint",
    "content_kind",
    "content_record",
]

#: See the package docstring: bump it whenever the output changes for some page.
FINGERPRINT_VERSION: int = 15
#: How configured fields (and JSON-LD's) enter the fingerprint; bump it whenever that changes.
#: Only the classes that configure fields get another version from it (config.extractor_version),
#: so the pages of the others keep theirs and are not re-extracted. 2: compared as they read.
#: 3: a list of offers gives its lowest price. 4: a JSON-LD value the page does not state is
#: left out, not hashed as empty (FINGERPRINT_VERSION 14 reads them by default).
FIELD_RULES_VERSION: int = 4

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


#: How files that are never text begin (images, PDF, archives, audio and video, fonts): served
#: as text/html by a misconfigured server they were "extracted" into noise.
_BINARY_MAGIC = (
    b"\x89PNG\r\n\x1a\n",
    b"GIF87a",
    b"GIF89a",
    b"\xff\xd8\xff",
    b"%PDF-",
    b"PK\x03\x04",
    b"\x1f\x8b\x08",
    b"7z\xbc\xaf\x27\x1c",
    b"Rar!\x1a\x07",
    b"OggS",
    b"ID3\x02",
    b"ID3\x03",
    b"ID3\x04",
    b"fLaC",
    b"wOFF",
    b"wOF2",
    b"\x00\x01\x00\x00\x00",
    b"\x1a\x45\xdf\xa3",
    b"\x28\xb5\x2f\xfd",  # zstd
    b"\xfd7zXZ\x00",
    b"\x7fELF",
    b"\x00asm",
    b"SQLite format 3\x00",
    b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",  # OLE: old Office files
    b"II*\x00",
    b"MM\x00*",
)
#: The bytes no text holds (MIME Sniffing's "binary data bytes": C0 controls but tab, line
#: feed, form feed, carriage return and escape), looked for in a body's first KB.
_BINARY_DATA_BYTE = re.compile(rb"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f]")
_SNIFF_BYTES = 1024
_WIDE_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _is_binary(data: bytes) -> bool:
    if data.startswith(_BINARY_MAGIC):
        return True
    # RIFF containers (WebP, WAV, AVI) and ISO media (MP4, MOV, AVIF, HEIC)
    return (data[:4] == b"RIFF" and data[8:12] in (b"WEBP", b"WAVE", b"AVI ")) or data[
        4:8
    ] == b"ftyp"


def _declared_text_is_bytes(data: bytes, content_type: str | None) -> bool:
    """A body declared HTML or text that is bytes of no known format: control bytes no text
    holds in its first KB and no markup there. A browser shows such a "page" as noise; read
    as text, 50 KB of random bytes served as text/html became a version of 37,000 control
    characters, handed on by the export (found by an outside audit). A page with a stray
    control byte keeps its text: its markup says what it is. UTF-16 is text whose NULs are
    half its bytes: with a BOM, a declared charset, or markup once they are taken out."""
    head = data[:_SNIFF_BYTES]
    if not _BINARY_DATA_BYTE.search(head) or head.startswith(_WIDE_BOMS):
        return False
    declared = (content_type or "").lower()
    if "utf-16" in declared or "utf-32" in declared:
        return False
    return not _LOOKS_HTML.search(head) and not _LOOKS_HTML.search(head.replace(b"\x00", b""))


def _kind(body: bytes, content_type: str | None) -> str:
    if _is_binary(body):
        return "binary"
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    if mime in _HTML_TYPES:
        return "binary" if _declared_text_is_bytes(body, content_type) else "html"
    if mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml")):
        return "binary" if _declared_text_is_bytes(body, content_type) else "text"
    if mime in _UNKNOWN_TYPES:
        if _LOOKS_HTML.search(body[:1024]):
            return "html"
        if _is_text(body):
            return "text"
    return "binary"


def _is_text(data: bytes) -> bool:
    """Undeclared bytes that read as text: UTF-8 without NUL bytes (an API answering JSON
    with no Content-Type was hashed as bytes, its key order and all). Bytes of a binary format
    are almost never valid UTF-8 for long."""
    if not data or b"\x00" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


_JSON_TYPES = {"application/json", "application/ld+json", "text/json"}


def _is_json(data: bytes, content_type: str | None) -> bool:
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    if mime in _JSON_TYPES or mime.endswith("+json"):
        return True
    start = data.lstrip()[:1]
    return mime in _UNKNOWN_TYPES and start in (b"{", b"[")


def _text_of(data: bytes, content_type: str | None) -> str:
    """A text body's text. JSON is re-written canonically (keys sorted, one item a line), so
    that the same data with its keys in another order or printed compact is the same content,
    and a changed value is a changed line of the version's diff (an API answering its keys in
    random order was a change on every fetch; found by an exploratory run). JSON that does not
    parse is read as the text it is."""
    text = decode_body(data, content_type)
    if _is_json(data, content_type):
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            return text
        return json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False)
    return text


def _read(body: bytes, content_type: str | None) -> tuple[bytes, str]:
    """The body as bytes (anything that is not becomes empty: a fingerprint never raises) and
    what it reads as."""
    try:
        data = bytes(body)
    except (TypeError, ValueError):
        data = b""
    return data, _kind(data, content_type)


def _html_source(data: bytes, content_type: str | None) -> bytes | str:
    """What the HTML parser is given: the bytes when they are UTF-8 (it decodes them faster),
    else the text decoded by the declared or sniffed charset."""
    return data if reads_as_utf8(data, content_type) else decode_body(data, content_type)


def _digest(text: str) -> str:
    return xxhash.xxh3_64_hexdigest(normalize_content(text).encode("utf-8", "replace"))


def _html_digest(extraction: Extraction) -> str:
    """The fingerprint of an HTML page: its normalized text, then its fields as read."""
    hashed = normalize_content(extraction.text)
    if extraction.fields:
        hashed += _fields_as_read(extraction.fields)
    return xxhash.xxh3_64_hexdigest(hashed.encode("utf-8", "replace"))


def _fields_as_read(fields: Mapping[str, str | None]) -> str:
    """Configured fields for the fingerprint, whitespace folded and nothing else dropped: a
    field is what the class's owner said matters, and the text's rules for volatile tokens
    (dates and times gone) hid an event's new date or a timetable's new hours in the very
    field configured to watch them (found by an exploratory run). Separated from the text and
    from each other by characters folded text never holds."""
    return "".join(f"\x00{k}\x01{fold_spaces(v or '')}" for k, v in sorted(fields.items()))


def content_kind(body: bytes, content_type: str | None) -> str:
    """What :func:`content_record` reads a body as ("html", "text" or "binary"). Only an HTML
    body's fingerprint depends on a class's selectors and fields, so ``freshness reextract``
    leaves the others to their next fetch."""
    return _kind(body, content_type)


def content_fingerprint(
    body: bytes, *, content_type: str | None, selectors: Sequence[str] = ()
) -> str:
    """16-hex-digit xxh3_64 of the content that matters; never raises on any bytes.

    HTML (declared, or undeclared but looking like HTML) is extracted then normalized, with
    the JSON-LD values a page of no class has read beside it (:func:`content_record`'s
    fingerprint without configured fields); other text types (``text/*``, JSON, XML) are
    decoded then normalized; anything else is hashed as raw bytes, since there is no text to
    clean. Invalid ``selectors`` still raise ValueError.
    """
    data, kind = _read(body, content_type)
    if kind == "binary":
        return xxhash.xxh3_64_hexdigest(data)
    if kind == "html":
        return _html_digest(Extraction(_html_source(data, content_type), selectors))
    return _digest(_text_of(data, content_type))


@dataclass(frozen=True)
class ContentRecord:
    """What a fetched body says: its fingerprint and, for a version worth keeping (new, or
    another fingerprint than the one before), the title, the content's text line by line and
    its fields: the title and the text, and the configured ones beside them (so a change
    names every part that moved, a price and the text around it alike). ``links``: what an
    HTML page says of its own address, whatever its fingerprint."""

    fingerprint: str
    title: str | None = None
    text: str | None = None
    fields: dict[str, str | None] | None = None
    links: PageLinks = PageLinks()

    @property
    def fields_json(self) -> str | None:
        """The fields as page_versions stores them: a JSON object, keys sorted, text as is."""
        if self.fields is None:
            return None
        return json.dumps(self.fields, ensure_ascii=False, sort_keys=True)


def content_record(
    body: bytes,
    *,
    content_type: str | None,
    selectors: Sequence[str] = (),
    fields: Mapping[str, str] | None = None,
    json_ld: bool | None = None,
    previous: str | None = None,
) -> ContentRecord:
    """The fingerprint of :func:`content_fingerprint` (configured ``fields`` and JSON-LD's
    values, as ``json_ld`` says (:func:`.fields.read_fields`), count too, so a price that
    changed in the structured data alone is a change), and, unless it equals ``previous``,
    the version's title, text and fields from the same extraction: reading them costs a
    second walk over the content, which only a version worth keeping pays. Non-HTML text has
    its decoded text and no title; binary content only its fingerprint (versioned by its
    bytes)."""
    data, kind = _read(body, content_type)
    if kind == "binary":
        digest = xxhash.xxh3_64_hexdigest(data)
        return ContentRecord(digest, fields={} if digest != previous else None)
    if kind != "html":
        text = _text_of(data, content_type)
        digest = _digest(text)
        if digest == previous:
            return ContentRecord(digest)
        lines = fold_lines(text)
        return ContentRecord(digest, None, lines, {"text": lines})
    extraction = Extraction(_html_source(data, content_type), selectors, fields, json_ld)
    digest = _html_digest(extraction)
    if digest == previous:
        return ContentRecord(digest, links=extraction.links)
    title = extraction.title or None
    text = extraction.lines()
    named: dict[str, str | None] = {**extraction.fields, "title": title, "text": text}
    return ContentRecord(digest, title, text, named, extraction.links)


class ClassExtraction(Protocol):
    """What a URL class says to read from its pages (config.Extraction; a FetchRequest carries
    the same three)."""

    @property
    def selectors(self) -> Sequence[str]: ...
    @property
    def fields(self) -> Mapping[str, str] | None: ...
    @property
    def json_ld(self) -> bool | None: ...


def class_record(
    extraction: ClassExtraction,
    body: bytes,
    content_type: str | None,
    previous: str | None = None,
) -> ContentRecord:
    """:func:`content_record` under a URL class's settings: the fetcher and ``freshness
    reextract`` both call this, so a fingerprint re-derived from the archive is the one the
    next fetch of the same body computes and compares against."""
    return content_record(
        body,
        content_type=content_type,
        selectors=tuple(extraction.selectors),
        fields=extraction.fields,
        json_ld=extraction.json_ld,
        previous=previous,
    )
