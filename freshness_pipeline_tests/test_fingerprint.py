import codecs
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from freshness_pipeline.science.fingerprint import (
    FINGERPRINT_VERSION,
    content_fingerprint,
    decode_body,
    extract_content,
    normalize_content,
)

PAGE = """<!doctype html>
<html><head><title>Widget Review</title><style>.x{{color:red}}</style>
<script>var t = Date.now();</script></head>
<body>
<!-- rendered in 12 ms by node-17 -->
<header>Site Name - Home - Login</header>
<nav><a href="/">Home</a> <a href="/news">News</a></nav>
<main>
  <article>
    <header><h1>Widget 3000 review</h1><p>Posted {date} at {time}</p></header>
    <p>The widget is sturdy and cheap.</p>
    <p>Views: {views}. Session {session}. Request {uuid}.</p>
    <footer>Tags: gadgets</footer>
  </article>
</main>
<aside>Related: other widgets {ad}</aside>
<form><input name="q"> Search the site</form>
<footer>Copyright {year} Example Ltd</footer>
<iframe src="/ad"></iframe><noscript>enable js</noscript>
</body></html>
"""


def _page(**overrides: str) -> str:
    values = {
        "date": "30 Nov 2026",
        "time": "12:34 pm",
        "views": "12345",
        "session": "3f2a9c1b7e",
        "uuid": "123e4567-e89b-12d3-a456-426614174000",
        "ad": "banner-A",
        "year": "2026",
    }
    values.update(overrides)
    return PAGE.format(**values)


def test_version_is_an_int() -> None:
    assert FINGERPRINT_VERSION == 1
    assert isinstance(FINGERPRINT_VERSION, int)


# ------------------------------------------------------------------------------ decode_body


def test_decode_uses_content_type_charset() -> None:
    body = "Grüße".encode("iso-8859-15")
    assert decode_body(body, "text/html; charset=ISO-8859-15") == "Grüße"
    assert decode_body(body, 'text/html; charset="iso-8859-15"') == "Grüße"


def test_decode_uses_meta_charset_and_http_equiv() -> None:
    body = '<meta charset="windows-1251"><p>Привет</p>'.encode("cp1251")
    assert "Привет" in decode_body(body, "text/html")
    body = (
        '<meta http-equiv="Content-Type" content="text/html; charset=shift_jis">'
        "<p>日本語</p>".encode("shift_jis")
    )
    assert "日本語" in decode_body(body, None)


def test_meta_beyond_two_kilobytes_is_ignored() -> None:
    body = b" " * 3000 + '<meta charset="cp1251">Привет'.encode("cp1251")
    text = decode_body(body, None)
    assert "Привет" not in text  # decoded as UTF-8 with replacement, not as cp1251
    assert "\ufffd" in text


def test_decode_header_wins_over_meta() -> None:
    body = '<meta charset="cp1251">é'.encode()
    assert decode_body(body, "text/html; charset=utf-8").endswith("é")


def test_decode_bom_wins() -> None:
    assert decode_body(codecs.BOM_UTF8 + "é".encode(), "text/html; charset=cp1251") == "é"
    assert decode_body(codecs.BOM_UTF16_LE + "hé".encode("utf-16-le"), None) == "hé"


def test_decode_defaults_to_utf8_and_falls_back_safely() -> None:
    assert decode_body("naïve".encode(), None) == "naïve"
    # unknown charset: UTF-8
    assert decode_body("naïve".encode(), "text/html; charset=klingon-8") == "naïve"
    # bytes-to-bytes codecs are not charsets
    assert decode_body(b"aGk=", "text/plain; charset=base64") == "aGk="
    # lying charset: says UTF-8, is cp1252; no exception, replacement character instead
    assert decode_body("café".encode("cp1252"), "text/html; charset=utf-8") == "caf\ufffd"
    # utf-7 is never honoured (WHATWG)
    assert decode_body(b"+AGEAYgBj-", "text/html; charset=utf-7") == "+AGEAYgBj-"


def test_latin1_label_means_windows_1252() -> None:
    assert decode_body(b"\x93quoted\x94", "text/html; charset=iso-8859-1") == "\u201cquoted\u201d"


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.binary(max_size=300),
    st.one_of(
        st.none(),
        st.text(max_size=40),
        st.sampled_from(
            ["text/html; charset=utf-16", "text/html; charset=shift_jis", "charset=rot13"]
        ),
    ),
)
def test_decode_never_raises(body: bytes, content_type: str | None) -> None:
    assert isinstance(decode_body(body, content_type), str)


# --------------------------------------------------------------------------- extract_content


def test_extract_keeps_title_and_main_text_only() -> None:
    text = extract_content(_page())
    assert text.startswith("Widget Review")
    assert "Widget 3000 review" in text  # the article's own header stays
    assert "sturdy and cheap" in text
    assert "Tags: gadgets" in text  # the article's own footer stays
    for chrome in ("Site Name", "Home", "Related", "Search the site", "Copyright"):
        assert chrome not in text
    for noise in ("Date.now", "color:red", "rendered in", "enable js"):
        assert noise not in text


def test_extract_falls_back_to_body_and_article() -> None:
    assert extract_content("<p>plain body</p>") == "plain body"
    two = "<body><article>first</article><article>second</article><p>x</p></body>"
    assert extract_content(two) == "first\nsecond"
    role = '<body><div role="main">the content</div><p>other</p></body>'
    assert extract_content(role) == "the content"


def test_extract_with_selectors() -> None:
    html = (
        "<title>Shop</title><body><div class=price>19.99</div><div class=stock>in stock</div>"
        "<div class=ad>buy now</div></body>"
    )
    assert extract_content(html, selectors=[".price", ".stock"]) == "Shop\n19.99\nin stock"
    assert extract_content(html, selectors=[".missing"]) == "Shop\n"
    with pytest.raises(ValueError):
        extract_content(html, selectors=["div[[["])


def test_extract_keeps_form_that_wraps_the_page() -> None:
    html = "<body><form id=aspnetForm><div>The whole page lives in a form</div></form></body>"
    assert extract_content(html) == "The whole page lives in a form"


@pytest.mark.parametrize(
    "html",
    ["", "<", "<<<>>>", "<html><body><div><p>unclosed", "\x00\x01", "<header><footer>x", "\ud800"],
)
def test_extract_malformed_html_never_raises(html: str) -> None:
    assert isinstance(extract_content(html), str)


# ------------------------------------------------------------------------- normalize_content


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Updated 2026-11-30T12:34:56Z", "Updated 2026-12-01T08:00:00+01:00"),
        ("Updated 2026-11-30", "Updated 2027-01-02"),
        ("Date: Mon, 30 Nov 2026 12:34:56 GMT", "Date: Tue, 01 Dec 2026 00:00:01 GMT"),
        ("on 30 Nov 2026 we", "on 1 December 2027 we"),
        ("on Nov 30, 2026 we", "on December 1, 2027 we"),
        ("on 11/30/2026 we", "on 12/01/2026 we"),
        ("on 30.11.2026 we", "on 01.12.2026 we"),
        ("at 12:34 today", "at 9:05 today"),
        ("at 12:34:56 today", "at 23:59:59 today"),
        ("at 12:34 pm today", "at 1:05 am today"),
        ("posted 5 minutes ago", "posted 2 hours ago"),
        ("views 12345", "views 12399"),
        ("commit 3f2a9c1b7e", "commit 9e8d7c6b5a4"),
        ("token aGVsbG8gd29ybGQhIQ12 end", "token Zm9vYmFyYmF6cXV4eHl6 end"),
        ("csrf Ab-3_xYz9Qw-Er7_Ty end", "csrf Zz-9_aAa1Bb-Cc2_Dd end"),
        (
            "req 123e4567-e89b-12d3-a456-426614174000",
            "req 00000000-0000-4000-8000-000000000000",
        ),
    ],
)
def test_volatile_tokens_do_not_matter(a: str, b: str) -> None:
    assert normalize_content(a) == normalize_content(b)


def test_normalize_keeps_content() -> None:
    assert normalize_content("  Hello\n\tWORLD  ") == "hello world"
    assert normalize_content("Straße") == "strasse"  # casefold, not lower
    assert normalize_content("price 19.99 for 3 items") == "price 19.99 for 3 items"
    assert normalize_content("internationalization") == "internationalization"
    assert normalize_content("a well-known-hyphenated-phrase here") == (
        "a well-known-hyphenated-phrase here"
    )
    assert normalize_content("deadbeef") == "deadbeef"  # plain word of hex letters stays
    assert normalize_content("price 19 -> 29") != normalize_content("price 19 -> 19")


# ------------------------------------------------------------------------ content_fingerprint


def test_fingerprint_shape() -> None:
    fp = content_fingerprint(_page().encode(), content_type="text/html")
    assert re.fullmatch(r"[0-9a-f]{16}", fp)


def test_fingerprint_ignores_volatile_parts_and_chrome() -> None:
    base = content_fingerprint(_page().encode(), content_type="text/html; charset=utf-8")
    noisy = _page(
        date="1 Dec 2026",
        time="9:05 am",
        views="99999",
        session="a1b2c3d4e5f6",
        uuid="00000000-0000-4000-8000-000000000000",
        ad="banner-B",
        year="2027",
    ).replace("var t = Date.now();", "var t = 42;")
    assert content_fingerprint(noisy.encode(), content_type="text/html") == base


def test_fingerprint_sees_real_changes() -> None:
    base = content_fingerprint(_page().encode(), content_type="text/html")
    edited = _page().replace("sturdy and cheap", "flimsy and expensive")
    assert content_fingerprint(edited.encode(), content_type="text/html") != base
    retitled = _page().replace("<title>Widget Review", "<title>Widget Review (updated)")
    assert content_fingerprint(retitled.encode(), content_type="text/html") != base


def test_fingerprint_selectors_restrict_what_counts() -> None:
    a = b"<title>T</title><div class=price>19</div><div class=body>one</div>"
    b = b"<title>T</title><div class=price>19</div><div class=body>two</div>"
    c = b"<title>T</title><div class=price>29</div><div class=body>one</div>"
    fp = [content_fingerprint(x, content_type="text/html", selectors=[".price"]) for x in (a, b, c)]
    assert fp[0] == fp[1]
    assert fp[0] != fp[2]


def test_fingerprint_unknown_type_that_looks_like_html_is_html() -> None:
    html = _page().encode()
    assert content_fingerprint(html, content_type=None) == content_fingerprint(
        html, content_type="text/html"
    )
    assert content_fingerprint(html, content_type="application/octet-stream") == (
        content_fingerprint(html, content_type="text/html")
    )


def test_fingerprint_text_and_json_are_normalized() -> None:
    a = b'{"price": 19.99, "fetched": "2026-11-30T12:00:00Z"}'
    b = b'{"price": 19.99, "fetched": "2026-12-01T08:30:00Z"}'
    c = b'{"price": 24.99, "fetched": "2026-12-01T08:30:00Z"}'
    fp = [content_fingerprint(x, content_type="application/json") for x in (a, b, c)]
    assert fp[0] == fp[1] != fp[2]
    t1 = content_fingerprint(b"Hello  World 12:00", content_type="text/plain")
    t2 = content_fingerprint(b"hello world 13:15", content_type="text/plain; charset=utf-8")
    assert t1 == t2


def test_fingerprint_binary_is_raw_bytes() -> None:
    a = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    b = a[:-1] + b"\x00"
    assert content_fingerprint(a, content_type="image/png") != content_fingerprint(
        b, content_type="image/png"
    )
    # raw bytes: whitespace is content for a PDF
    assert content_fingerprint(b"%PDF 1", content_type="application/pdf") != content_fingerprint(
        b"%PDF  1", content_type="application/pdf"
    )


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.one_of(
        st.binary(max_size=400),
        st.text(max_size=200).map(lambda s: ("<html><body>" + s).encode("utf-8", "replace")),
    ),
    st.one_of(st.none(), st.sampled_from(["text/html", "application/json", "image/gif", "x/y"])),
)
def test_fingerprint_never_raises(body: bytes, content_type: str | None) -> None:
    fp = content_fingerprint(body, content_type=content_type)
    assert re.fullmatch(r"[0-9a-f]{16}", fp)
    assert fp == content_fingerprint(body, content_type=content_type)
