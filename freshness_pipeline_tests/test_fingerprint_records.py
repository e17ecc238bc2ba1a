"""science/fingerprint/records.py: what a body is read as, and its fingerprint and record."""

from __future__ import annotations

from freshness_pipeline.science.fingerprint.records import (
    content_fingerprint,
    content_kind,
    content_record,
)

PAGE = b"<html><head><title>Lamp</title></head><body><main><p>Warm light.</p></main></body></html>"


def test_kinds_follow_the_content_type_and_the_bytes() -> None:
    assert content_kind(PAGE, "text/html") == "html"
    assert content_kind(PAGE, None) == "html"
    assert content_kind(b"plain words", "text/plain") == "text"
    assert content_kind(b"\x89PNG\r\n\x1a\n\x00\x00", "image/png") == "binary"


def test_markup_and_spacing_do_not_change_the_fingerprint_and_text_does() -> None:
    fp = content_fingerprint(PAGE, content_type="text/html")
    assert len(fp) == 16 and int(fp, 16) >= 0
    respaced = PAGE.replace(b"<p>", b"<p>\n   ").replace(b"<main>", b'<main class="x">')
    assert content_fingerprint(respaced, content_type="text/html") == fp
    changed = PAGE.replace(b"Warm", b"Cold")
    assert content_fingerprint(changed, content_type="text/html") != fp
    record = content_record(PAGE, content_type="text/html")
    assert record.fingerprint == fp and record.title == "Lamp"
    assert record.text is not None and "Warm light." in record.text
