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
