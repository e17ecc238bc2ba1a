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


def test_a_configured_field_is_compared_as_it_reads_dates_and_all() -> None:
    """An event page's configured field `when` went from "Saturday 7 March 2026, 7:30 pm" to
    "Saturday 14 March 2026, 9:00 pm" and the fetch said unchanged: fields went through the
    text's rules, which drop dates and times (found by an exploratory run). The text keeps
    those rules: a page printing today's date is not a new page every day."""

    def event(when: str, stamp: str) -> bytes:
        return (
            "<html><head><title>Concert</title></head><body><main><h1>Concert</h1>"
            f'<p class="when">{when}</p><p>Doors open early. Printed {stamp}.</p>'
            "</main></body></html>"
        ).encode()

    fields = {"when": ".when"}
    first = content_record(
        event("Saturday 7 March 2026, 7:30 pm", "1 March 2026"),
        content_type="text/html",
        fields=fields,
    )
    moved = content_record(
        event("Saturday 14 March 2026, 9:00 pm", "1 March 2026"),
        content_type="text/html",
        fields=fields,
    )
    assert first.fields is not None and first.fields["when"] == "Saturday 7 March 2026, 7:30 pm"
    assert moved.fingerprint != first.fingerprint
    # the text's dates stay volatile, fields or not
    restamped = content_record(
        event("Saturday 7 March 2026, 7:30 pm", "2 March 2026"),
        content_type="text/html",
        fields=fields,
    )
    assert restamped.fingerprint == first.fingerprint
    # spacing in a field is no change
    spaced = content_record(
        event("Saturday  7 March 2026,\n 7:30 pm", "1 March 2026"),
        content_type="text/html",
        fields=fields,
    )
    assert spaced.fingerprint == first.fingerprint
    # without fields, the fingerprint is the text's alone, as before
    plain = content_record(
        event("Saturday 14 March 2026, 9:00 pm", "2 March 2026"), content_type="text/html"
    )
    assert plain.fingerprint == content_fingerprint(
        event("Saturday 7 March 2026, 7:30 pm", "1 March 2026"), content_type="text/html"
    )


def test_json_is_compared_as_data_not_as_its_printing() -> None:
    """An API answering the same data with its keys in random order, or pretty one time and
    compact the next, was a change on every fetch; JSON with no Content-Type was hashed as
    bytes (found by an exploratory run)."""
    shuffled = b'{"status": "open", "seats": [1, 2], "id": 7}'
    pretty = b'{\n  "id": 7,\n  "seats": [\n    1,\n    2\n  ],\n  "status": "open"\n}'
    closed = b'{"id": 7, "seats": [1, 2], "status": "closed"}'
    for content_type in ("application/json", "application/vnd.api+json", None):
        fps = [
            content_fingerprint(b, content_type=content_type) for b in (shuffled, pretty, closed)
        ]
        assert fps[0] == fps[1] != fps[2], content_type
    assert content_kind(closed, None) == "text"
    record = content_record(closed, content_type="application/json")
    assert record.text is not None and '"status": "closed"' in record.text.splitlines()
    # not JSON after all: read as the text it is
    broken = content_record(b'{"status": "open",', content_type="application/json")
    assert broken.text == '{"status": "open",'
    # undeclared bytes that are no text stay bytes
    assert content_kind(b"\x00\x01\x02binary", None) == "binary"
    assert content_kind("caf\u00e9 au lait".encode("latin-1"), None) == "binary"


def test_bytes_declared_as_text_are_bytes_and_a_page_with_stray_control_bytes_a_page() -> None:
    """50 KB of random bytes served as text/html became a version of 37,000 control
    characters, handed on by the export (found by an outside audit): control bytes and no
    markup in the first KB are bytes of no known format, hashed with no text. Markup says a
    page is one, stray control bytes and all, and UTF-16 is text."""
    import random

    noise = random.Random(7).randbytes(50_000)
    for declared in ("text/html", "text/html; charset=utf-8", "text/plain", "application/json"):
        assert content_kind(noise, declared) == "binary", declared
        record = content_record(noise, content_type=declared)
        assert record.text is None and record.title is None and record.fields == {}
    zstd = b"\x28\xb5\x2f\xfd" + b"a" * 100
    assert content_kind(zstd, "text/html") == "binary"
    stray = PAGE.replace(b"Warm", b"Warm\x00\x01")
    assert content_kind(stray, "text/html") == "html"
    assert content_record(stray, content_type="text/html").title == "Lamp"
    wide = PAGE.decode().encode("utf-16-le")
    assert content_kind(b"\xff\xfe" + wide, "text/html") == "html"
    assert content_kind(wide, "text/html; charset=utf-16le") == "html"
    assert content_kind(wide, "text/html") == "html"  # markup once its NULs are out
    assert content_kind(b"tab\tand\r\nescape \x1b[0m words", "text/plain") == "text"
    assert content_kind(b"plain words \x01\x02 then more", "text/plain") == "binary"
