"""science/fingerprint/decode.py: bytes to text as a browser would read them."""

from __future__ import annotations

from freshness_pipeline.science.fingerprint.decode import decode_body, reads_as_utf8

CAFE = "caf\u00e9"


def test_the_charset_comes_from_the_bom_the_header_or_the_meta_tag() -> None:
    latin1 = CAFE.encode("latin-1")
    assert decode_body(latin1, "text/html; charset=iso-8859-1") == CAFE
    meta = b'<meta charset="windows-1252"><p>' + latin1
    assert decode_body(meta, "text/html").endswith(CAFE)
    assert decode_body(b"\xef\xbb\xbf" + CAFE.encode(), "text/html; charset=iso-8859-1") == CAFE
    # no declaration at all: UTF-8
    assert decode_body(CAFE.encode(), None) == CAFE


def test_undecodable_bytes_never_raise() -> None:
    assert reads_as_utf8(CAFE.encode(), None)
    assert not reads_as_utf8(b"caf\xe9", None)
    assert decode_body(b"caf\xe9", None) == "caf\xe9"  # a stray byte read as windows-1252


# -------------------------------------------------- charset labels as the WHATWG table reads them


def _declared(label: str, text: str, codec: str) -> list[tuple[bytes, str | None]]:
    """``text`` in ``codec``, labelled ``label`` in the Content-Type header and in a meta tag."""
    body = f"<p>{text}</p>".encode(codec)
    return [
        (body, f"text/html; charset={label}"),
        (f'<meta charset="{label}">'.encode() + body, "text/html"),
    ]


def test_labels_python_does_not_know_are_read_by_the_whatwg_table() -> None:
    """Python's codecs know none of these labels: the pages were read as UTF-8 with their
    letters as windows-1252 (mojibake)."""
    pages = [
        ("windows-874", "ภาษาไทย", "cp874"),
        ("iso-8859-8-i", "עברית", "iso-8859-8"),
        ("x-cp1251", "Привет", "cp1251"),
        ("x-mac-cyrillic", "Привет", "mac-cyrillic"),
        ("windows-31j", "日本語①", "cp932"),
        ("windows-949", "똠방각하", "cp949"),
    ]
    for label, text, codec in pages:
        for body, content_type in _declared(label, text, codec):
            assert decode_body(body, content_type).endswith(f"<p>{text}</p>"), (label, body)
            assert not reads_as_utf8(body, content_type)


def test_latin_and_utf8_labels_of_the_table() -> None:
    # "Â£" in windows-1252 happens to be valid UTF-8 ("£"): only the label tells them apart
    body = "<p>Â£5</p>".encode("cp1252")
    assert decode_body(body, "text/html; charset=iso88591") == "<p>Â£5</p>"
    # as ISO-8859-1 means windows-1252, ISO-8859-9 means windows-1254: its C1 bytes are quotes
    body = "<p>“Günaydın”</p>".encode("cp1254")
    assert decode_body(body, "text/html; charset=iso-8859-9") == "<p>“Günaydın”</p>"
    # a UTF-8 label in the header wins over a meta tag that says otherwise
    body = '<meta charset="windows-1251"><p>é</p>'.encode()
    assert decode_body(body, "text/html; charset=unicode-1-1-utf-8").endswith("<p>é</p>")
    assert reads_as_utf8(body, "text/html; charset=unicode-1-1-utf-8")


def test_shift_jis_and_euc_kr_are_read_as_browsers_read_them() -> None:
    """Browsers read Shift_JIS as Windows-31J (with the NEC and IBM extensions: ①, Ⅰ, ㈱) and
    EUC-KR as Windows-949 (every Hangul syllable): the strict codecs made each such character
    a replacement character, and the byte after it leaked."""
    for label in ("Shift_JIS", "shift-jis", "sjis", "x-sjis", "ms_kanji"):
        for body, content_type in _declared(label, "①Ⅰ㈱の会社", "cp932"):
            assert decode_body(body, content_type).endswith("<p>①Ⅰ㈱の会社</p>"), label
    # and its punctuation as Windows maps it (the WHATWG index does too): 0x8160 is U+FF5E
    # FULLWIDTH TILDE, where strict Shift_JIS read U+301C WAVE DASH
    assert decode_body(b"10\x81\x6018", "text/plain; charset=shift_jis") == "10\uff5e18"
    for label in ("euc-kr", "EUC-KR", "ks_c_5601-1987", "korean"):
        for body, content_type in _declared(label, "똠방각하 한국어", "cp949"):
            assert decode_body(body, content_type).endswith("<p>똠방각하 한국어</p>"), label


def test_refused_labels_stay_refused() -> None:
    """UTF-7 is never honoured, by any of the names Python knows it by (``u7`` and
    ``unicode-1-1-utf-7`` were), nor x-user-defined, which the WHATWG table knows."""
    for label in ("x-user-defined", "utf-7", "unicode-1-1-utf-7", "u7", "replacement"):
        assert decode_body(b"<p>+AGE-</p>", f"text/html; charset={label}") == "<p>+AGE-</p>", label
    # a meta tag read as ASCII cannot be UTF-16 or UTF-32: it is lying
    for label in ("utf-16", "utf-16le", "utf-32"):
        body = f'<meta charset="{label}"><p>é</p>'.encode()
        assert decode_body(body, "text/html").endswith("<p>é</p>"), label


XML_RU = '<?xml version="1.0" encoding="windows-1251"?><doc>Привет</doc>'


def test_an_xml_declaration_names_the_charset_of_xml() -> None:
    body = XML_RU.encode("cp1251")
    for content_type in ("application/xml", "text/xml", "application/rss+xml", "image/svg+xml"):
        assert decode_body(body, content_type) == XML_RU, content_type
        assert not reads_as_utf8(body, content_type)
    xhtml = (
        "<?xml version='1.0' encoding='x-cp1251'?>\n"
        '<html xmlns="http://www.w3.org/1999/xhtml"><p>Привет</p></html>'
    )
    assert decode_body(xhtml.encode("cp1251"), "application/xhtml+xml") == xhtml
    # the XML parser reads the declaration, not a meta tag
    body = '<?xml version="1.0" encoding="windows-1251"?><meta charset="koi8-r"><p>Привет</p>'
    assert decode_body(body.encode("cp1251"), "application/xhtml+xml") == body
    # the header still wins, and a byte-order mark wins over both
    as_utf8 = XML_RU.encode()
    assert decode_body(as_utf8, "application/xml; charset=utf-8") == XML_RU
    assert decode_body(b"\xef\xbb\xbf" + as_utf8, "application/xml") == XML_RU
    # an HTML parser does not read XML declarations
    assert decode_body(as_utf8, "text/html") == XML_RU
    # a declaration read as ASCII that says UTF-16 is lying, as a meta tag would be
    utf16 = '<?xml version="1.0" encoding="UTF-16"?><doc>é</doc>'
    assert decode_body(utf16.encode(), "application/xml") == utf16


def test_a_meta_charset_late_in_the_head_is_honoured_and_one_in_the_body_is_not() -> None:
    """A <meta charset> after a 3 KB comment in the head was never read (only the first 2 KB
    were searched): a windows-1251 page was stored as mojibake (exploratory run). A browser
    decodes again by a meta it meets later in the head; one in the body names nothing."""
    text = "Привет мир"
    late = f"<html><head><!-- {'x' * 3000} --><meta charset=windows-1251><title>{text}</title>"
    page = (late + f"</head><body><p>{text}</p></body></html>").encode("cp1251")
    assert decode_body(page, "text/html").endswith(f"<p>{text}</p></body></html>")
    straddling = "<html><head><!--" + "x" * 2020 + "--><meta charset='windows-1251'></head>"
    assert decode_body((straddling + f"<p>{text}</p>").encode("cp1251"), "text/html").endswith(
        text + "</p>"
    )
    in_body = f"<html><head></head><body>{'y' * 3000}<meta charset=windows-1251>é</body>"
    assert decode_body(in_body.encode("cp1252"), "text/html").endswith("é</body>")
