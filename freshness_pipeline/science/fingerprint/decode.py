"""Bytes to text the way a browser reads them."""

from __future__ import annotations

import codecs
import functools
import re

import webencodings  # type: ignore[import-untyped]
from charset_normalizer import from_bytes

__all__ = ["decode_body", "reads_as_utf8"]

_CT_CHARSET = re.compile(r"""charset\s*=\s*["']?\s*([A-Za-z0-9_:.+-]+)""", re.IGNORECASE)
_META_CHARSET = re.compile(
    rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_:.+-]+)""", re.IGNORECASE
)
#: An XML parser reads the charset from the declaration that opens the document, never from a
#: meta tag; an HTML parser ignores the declaration.
_XML_DECLARATION = re.compile(rb"""<\?xml\s[^>]*?encoding\s*=\s*["']\s*([A-Za-z0-9_:.+-]+)""")
_XML_TYPES = {"application/xml", "text/xml"}
#: how far into a page a <meta charset> past the first 2 KB is still looked for (in the head)
_LATE_META_BYTES = 64 * 1024
#: WHATWG encodings that browsers decode as a superset of the Python codec of the same name:
#: Shift_JIS is Windows-31J (the NEC and IBM extensions: ①, Ⅰ, ㈱), EUC-KR is Windows-949
#: (every Hangul syllable, not only KS X 1001's) and GBK is GB18030. The strict codecs made each
#: such character a replacement character and let the byte after it leak.
_BROWSER_CODECS = {"shift_jis": "cp932", "euc-kr": "cp949", "gbk": "gb18030"}
#: Labels read by a codec of their own before the WHATWG table is asked: a Latin-1 label means
#: windows-1252 on the web however it is spelt, and the table's Big5 (read by Python's big5,
#: which lacks the HKSCS characters) would lose characters of a page that says big5-hkscs.
_OWN_CODECS = {"latin-1": "cp1252", "big5-hkscs": "big5hkscs"}
#: Never honoured: UTF-7 (by any of the names Python knows it by) hides markup from filters,
#: x-user-defined is no charset, and the WHATWG "replacement" is not one either.
_REFUSED = {"utf-7", "x-user-defined", "replacement"}
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


_BOM_PREFIXES = tuple(bom for bom, _ in _BOMS)
#: A byte that is not UTF-8 in a UTF-8 page, read as windows-1252 (the five bytes it leaves
#: undefined as Latin-1): a Latin-1 page labelled UTF-8 then keeps its letters. With
#: replacement characters every such letter was the same one, and an edit from one accented
#: letter to another could not be seen. The decoder marks such bytes as lone surrogates
#: (``surrogateescape``) and one ``str.translate`` turns them into letters, both in C: an error
#: handler called per bad byte cost milliseconds on a page full of them.
_STRAY_AS_CP1252 = {
    0xDC00 + b: (chr(b) if b in (0x81, 0x8D, 0x8F, 0x90, 0x9D) else bytes([b]).decode("cp1252"))
    for b in range(0x80, 0x100)
}


#: An undeclared page that is not UTF-8 and has this share of bytes >= 0x80 is in a script of
#: its own (Cyrillic, Greek, CJK, Thai, Hebrew, Arabic: every letter one such byte or two),
#: not in a Latin charset (a French or German page in windows-1252 has 1-3 %). Its charset is
#: detected, as browsers do (Firefox's chardetng, Chrome's CED): read as windows-1252 its title
#: and text were mojibake in the copy, the diffs and the notifications.
_LEGACY_SCRIPT_HIGH_SHARE = 0.08
#: and at least this many such bytes: a detector given a word or two guesses
_LEGACY_SCRIPT_MIN_HIGH = 32
_DETECT_BYTES = 64 * 1024
#: the legacy charsets of those scripts; Latin ones are left out: on a page of Latin text a
#: detector confuses windows-1250 and -1252, which the stray-byte reading gets right
_LEGACY_SCRIPT_CHARSETS = [
    "cp1251", "koi8_r", "cp932", "euc_jp", "cp949", "gb18030", "big5", "cp1253", "cp1255",
    "cp1256", "cp874",
]  # fmt: skip
_HIGH_BYTES = bytes(range(0x80, 0x100))


def _detected_script_charset(data: bytes) -> str | None:
    """The legacy charset of an undeclared, non-UTF-8 page in a non-Latin script, if a
    detector finds one."""
    sample = data[:_DETECT_BYTES]
    high = len(sample) - len(sample.translate(None, _HIGH_BYTES))
    if high < max(_LEGACY_SCRIPT_MIN_HIGH, _LEGACY_SCRIPT_HIGH_SHARE * len(sample)):
        return None
    try:
        best = from_bytes(sample, cp_isolation=_LEGACY_SCRIPT_CHARSETS).best()
    except Exception:  # noqa: BLE001 - a detector's failure is "not detected", never a crash
        return None
    return None if best is None else best.encoding


def _utf8_with_stray_bytes(data: bytes) -> str:
    return data.decode("utf-8", errors="surrogateescape").translate(_STRAY_AS_CP1252)


@functools.lru_cache(maxsize=1024)
def _codec(label: str) -> str | None:
    """The Python codec a browser's reading of a charset label needs, None when it is unknown,
    unsafe or not a text codec. A label the WHATWG Encoding table knows is read by that table
    (``windows-874``, ``x-cp1251``, ``iso-8859-8-i``, ``windows-31j`` are no Python codec
    names, and ``iso-8859-1`` or ``ascii`` mean windows-1252 there); any other one by Python's
    codecs, as before the table (``cp932``, ``utf-32``). Cached: a crawl meets few labels, each
    on many pages."""
    label = label.strip().strip("\"'").lower()
    whatwg = None if label in _OWN_CODECS else webencodings.lookup(label)
    if whatwg is not None:
        if whatwg.name in _REFUSED:
            return None
        name: str = _BROWSER_CODECS.get(whatwg.name, whatwg.codec_info.name)
    else:
        name = _OWN_CODECS.get(label, label)
    try:
        info = codecs.lookup(name)
    except (LookupError, ValueError):
        return None
    # bytes-to-bytes codecs (base64, zlib, rot13...) are not charsets
    if not getattr(info, "_is_text_encoding", True) or info.name in _REFUSED:
        return None
    return info.name


def _usable_encoding(label: str | None, *, in_document: bool = False) -> str | None:
    """Python codec for a charset label, or None when it is unknown, unsafe or not a text codec.
    ``in_document``: the label was read from the bytes themselves (a meta tag, an XML
    declaration), which were necessarily read as ASCII: one that declares UTF-16/32 is lying
    (HTML spec, and XML's: UTF-16 begins with a byte-order mark), and means UTF-8."""
    if not label:
        return None
    encoding = _codec(label)
    if in_document and encoding is not None and encoding.startswith(("utf-16", "utf-32")):
        return "utf-8"
    return encoding


def _is_xml(content_type: str) -> bool:
    mime = content_type.split(";", 1)[0].strip().lower()
    return mime in _XML_TYPES or mime.endswith("+xml")


def _declared_encoding(body: bytes, content_type: str | None) -> str | None:
    if content_type:
        match = _CT_CHARSET.search(content_type)
        if match:
            enc = _usable_encoding(match.group(1))
            if enc:
                return enc
        if _is_xml(content_type):
            declaration = _XML_DECLARATION.match(body, 0, 1024)
            if declaration:
                enc = _usable_encoding(declaration.group(1).decode("ascii"), in_document=True)
                if enc:
                    return enc
    meta = _META_CHARSET.search(body, 0, 2048)
    if meta:
        return _usable_encoding(meta.group(1).decode("ascii", "replace"), in_document=True)
    return None


def _late_meta_encoding(body: bytes) -> str | None:
    """A ``<meta charset>`` past the first 2 KB but still in the head (after a long comment,
    scripts or styles): a browser that meets it decodes the page again by it. Asked only of a
    page that is not UTF-8 and declared nothing earlier, the only one it can change."""
    end = body.find(b"</head", 0, _LATE_META_BYTES)
    meta = _META_CHARSET.search(body, 2048 - 64, _LATE_META_BYTES if end < 0 else end)
    if meta is None:
        return None
    return _usable_encoding(meta.group(1).decode("ascii", "replace"), in_document=True)


def decode_body(body: bytes, content_type: str | None) -> str:
    """Bytes to text the way a browser would, never raising.

    Order: byte-order mark, the Content-Type charset, for XML and XHTML the XML declaration's
    encoding, ``<meta charset>``/``http-equiv`` in the first 2 KB, else UTF-8, else (a page
    that is not UTF-8) a meta later in the head; labels are read by the WHATWG Encoding table,
    as browsers read them. A declaration that does not decode
    cleanly is tried against strict UTF-8 (a common lie), then decoded with replacement
    characters in the declared charset. An undeclared page that is not UTF-8 and is mostly
    bytes past ASCII is in a non-Latin script: its legacy charset is detected. Any other page
    read as UTF-8 (declared, undeclared, or an unknown or unsafe label) that is not UTF-8
    throughout has its stray bytes read as windows-1252, the commonest origin of such bytes.
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
    if not declared and len(data) > 2048:
        declared = _late_meta_encoding(data)
        if declared:
            try:
                return data.decode(declared)
            except (UnicodeDecodeError, ValueError, LookupError):
                pass
    if declared and declared != "utf-8":
        try:
            return data.decode(declared, errors="replace")
        except (UnicodeDecodeError, ValueError, LookupError):
            pass
    if not declared:
        detected = _detected_script_charset(data)
        if detected:
            return data.decode(detected, errors="replace")
    return _utf8_with_stray_bytes(data)


def reads_as_utf8(body: bytes, content_type: str | None) -> bool:
    """Whether :func:`decode_body` would decode ``body`` as UTF-8 without a replacement, so
    lexbor may be given the bytes themselves: decoding a large page in Python and encoding it
    again for lexbor cost more than parsing it. Invalid UTF-8 goes the decoded way: lexbor
    replaces bad bytes differently from Python's decoder, and the fingerprint must not depend
    on which way a body went."""
    if body.startswith(_BOM_PREFIXES):
        return False
    try:
        declared = _declared_encoding(body, content_type)
    except (TypeError, ValueError):
        declared = None
    if declared not in (None, "utf-8"):
        return False
    if body.isascii():  # ASCII is UTF-8, and the check costs less than a decode
        return True
    try:
        body.decode("utf-8")  # a validity check, in C: microseconds for a page
    except UnicodeDecodeError:
        return False
    return True
