"""What FINGERPRINT_VERSION 4 sees that 3 did not (each found by an exploratory run): the
article of a single-page application's empty shell, in its JSON data; a Latin-1 page labelled
UTF-8 whose accented letters were all one replacement character; an image or PDF served as
text/html, which was "extracted" as text."""

from __future__ import annotations

import json

import xxhash

from freshness_pipeline.science.fingerprint import content_fingerprint, content_record
from freshness_pipeline.science.fingerprint.data_blobs import data_prose


def shell(article: str, build: str = "b1", extra: str = "") -> bytes:
    data = {
        "props": {"pageProps": {"article": {"slug": "rivers", "body": article, "views": 12}}},
        "buildId": build,
        "page": "/news/[slug]",
    }
    return (
        "<html><head><title>News</title></head><body><div id=__next>Loading</div>"
        f"<script id=__NEXT_DATA__ type=application/json>{json.dumps(data)}</script>{extra}"
        "</body></html>"
    ).encode()


def fp(body: bytes, content_type: str | None = "text/html") -> str:
    return content_fingerprint(body, content_type=content_type)


def test_an_empty_shell_is_read_from_its_data() -> None:
    first = shell("<p>The river rose by a metre overnight.</p>")
    edited = shell("<p>The river rose by two metres overnight.</p>")
    redeployed = shell("<p>The river rose by a metre overnight.</p>", build="b2")
    assert fp(first) != fp(edited)  # the article's edit is a change
    assert fp(first) == fp(redeployed)  # a new build id is not
    record = content_record(first, content_type="text/html")
    # what the shell shows comes first: a short page's own words count beside its data
    assert record.text == "Loading\nThe river rose by a metre overnight."
    assert record.title == "News"


def test_a_page_with_text_ignores_its_data() -> None:
    text = "<main><p>" + "A page with its article in the HTML itself. " * 3 + "</p></main>"
    with_data = shell("<p>The river rose by a metre overnight.</p>", extra=text)
    other_data = shell("<p>Something else entirely in the data.</p>", extra=text)
    assert fp(with_data) == fp(other_data)


def test_data_prose_keeps_sentences_not_tokens() -> None:
    doc = (
        '<script type="application/ld+json">{"@type": "Article", "headline": "Rivers rise '
        'again", "url": "https://e.test/a b c", "id": "9f8e7d", "n": 3}</script>'
        '<script type="application/json">not json at all</script>'
        "<script>var x = 'a script, not data, even with words in it';</script>"
    )
    assert data_prose(doc) == "Rivers rise again"
    assert data_prose("<p>no blobs</p>") == ""


def test_latin1_labelled_utf8_keeps_its_letters() -> None:
    def page(word: str) -> bytes:
        return f"<html><body><p>Le caf{word} est ouvert tous les jours.</p></body></html>".encode(
            "cp1252"
        )

    utf8 = "text/html; charset=utf-8"
    assert fp(page("é"), utf8) != fp(page("è"), utf8)  # both were U+FFFD
    record = content_record(page("é"), content_type=utf8)
    assert record.text is not None and "café" in record.text
    # valid UTF-8 around a stray byte stays UTF-8
    mixed = "<p>Straße und Café</p>".encode() + b"<p>\xe9t\xe9</p>"
    text = content_record(mixed, content_type=utf8).text
    assert text is not None and "Straße und Café" in text and "été" in text


def test_a_binary_file_served_as_text_is_hashed_as_bytes() -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    pdf = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj << /Type /Catalog >> endobj\n"
    for body in (png, pdf):
        assert fp(body, "text/html") == xxhash.xxh3_64_hexdigest(body)
        assert content_record(body, content_type="text/html").text is None
    # a change anywhere in the file is a change (as text, most bytes were noise)
    assert fp(png, "text/html") != fp(png[:-1] + b"\x00", "text/html")
