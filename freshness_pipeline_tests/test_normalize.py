import re

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from freshness_pipeline.science.normalize import (
    TRACKING_PARAMS,
    InvalidURL,
    normalize_url,
    normalize_url_column,
    url_authority,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("HTTP://Example.COM/", "http://example.com/"),
        ("  http://example.com/a \n", "http://example.com/a"),
        ("http://example.com", "http://example.com/"),
        ("http://example.com:80/x", "http://example.com/x"),
        ("https://example.com:443/x", "https://example.com/x"),
        ("http://example.com:443/x", "http://example.com:443/x"),
        ("https://example.com:8443/x", "https://example.com:8443/x"),
        ("http://example.com:080/x", "http://example.com/x"),
        ("http://example.com/a#section-2", "http://example.com/a"),
        ("http://example.com/?b=2&a=1", "http://example.com/?a=1&b=2"),
        ("http://example.com/a/./b/../c", "http://example.com/a/c"),
        ("http://example.com/a b", "http://example.com/a%20b"),
        ("http://example.com/%7euser", "http://example.com/~user"),
        ("http://example.com/p?", "http://example.com/p"),
        ("http://example.com/Case/Path", "http://example.com/Case/Path"),
        ("http://bücher.example/ä", "http://xn--bcher-kva.example/%C3%A4"),
        ("http://EXAMPLE.com./", "http://example.com/"),
        ("http://[2001:DB8:0:0::1]:80/", "http://[2001:db8::1]/"),
        ("http://[::1]:8080/x", "http://[::1]:8080/x"),
        ("http://127.0.0.1:8000/x", "http://127.0.0.1:8000/x"),
        ("http://my_host.example/", "http://my_host.example/"),
        # a visit's session id is not the page: query and servlet path parameter alike
        ("http://example.com/cart;jsessionid=A1B2?b=1", "http://example.com/cart?b=1"),
        ("http://example.com/a;JSESSIONID=x/b;v=1", "http://example.com/a/b;v=1"),
        ("http://example.com/p?PHPSESSID=9f&id=3", "http://example.com/p?id=3"),
        ("http://example.com/p?ASPSESSIONIDQSTD=K&CFID=1&CFTOKEN=2", "http://example.com/p"),
        ("http://example.com/p?osCsid=1&zenid=2&sid=7", "http://example.com/p?sid=7"),
        # a host ending in a number is an IPv4 address, in any of the WHATWG spellings
        ("http://2130707721/d", "http://127.0.5.9/d"),
        ("http://0x7f.0.5.9/h", "http://127.0.5.9/h"),
        ("http://0177.0.0.1:8080/o", "http://127.0.0.1:8080/o"),
        ("http://127.1/", "http://127.0.0.1/"),
        ("http://ex.4ample/", "http://ex.4ample/"),
    ],
)
def test_normalize_examples(raw: str, expected: str) -> None:
    assert normalize_url(raw) == expected


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("ftp://example.com/file", "unsupported scheme 'ftp'"),
        ("javascript:alert(1)", "unsupported scheme 'javascript'"),
        ("example.com/page", "missing scheme"),
        ("http:///path", "missing host"),
        ("http://", "missing host"),
        ("", "empty URL"),
        ("   ", "empty URL"),
        ("http://user:secret@example.com/", "credentials"),
        ("http://@example.com/", "credentials"),
        ("http://exa mple.com/", "space in host"),
        ("http://exa\x00mple.com/", "control character"),
        ("http://example.com:99999/", "out of range"),
        ("http://example.com:0/", "out of range"),
        ("http://example.com:http/", "invalid port"),
        ("http://[not-an-ip]/", "IPv6"),
        ("http://[::1/", "IPv6"),
        ("http://a..b.com/", "empty label"),
        ("http://exa<mple.com/", "invalid character"),
        ("http://" + "a" * 64 + ".com/", "invalid host label"),
        ("http://example.com/" + "a" * 2100, "longer than 2048"),
        ("http://1.2.3.4.5/", "ends in a number but is not an IPv4 address"),
        ("http://256.0.0.1/", "out of the IPv4 range"),
        ("http://09.1.1.1/", "not an octal number"),
    ],
)
def test_invalid_urls_say_why(raw: str, reason: str) -> None:
    with pytest.raises(InvalidURL) as info:
        normalize_url(raw)
    assert reason in str(info.value)
    assert isinstance(info.value, ValueError)


def test_tracking_parameters_are_removed_and_content_parameters_kept() -> None:
    raw = (
        "https://shop.example/item?id=7&utm_source=news&UTM_Campaign=x&utm_whatever=1"
        "&fbclid=a&gclid=b&msclkid=c&mc_eid=d&_ga=1&_gl=2&igshid=3&spm=4&ref=main&page=2"
    )
    assert normalize_url(raw) == "https://shop.example/item?id=7&page=2&ref=main"
    assert normalize_url("http://a.example/?utm_source=x") == "http://a.example/"


def test_tracking_params_documented() -> None:
    for name in ("utm_*", "fbclid", "gclid", "dclid", "gbraid", "wbraid", "msclkid", "yclid"):
        assert name in TRACKING_PARAMS
    for name in ("mc_cid", "mc_eid", "_ga", "_gl", "igshid", "ref_src", "spm", "_hsenc"):
        assert name in TRACKING_PARAMS
    for name in ("_hsmi", "mkt_tok", "oly_anon_id", "oly_enc_id", "vero_id"):
        assert name in TRACKING_PARAMS


def test_strip_params_can_be_customised() -> None:
    raw = "http://a.example/?utm_source=x&session=1&q=2"
    assert normalize_url(raw, strip_params=None) == "http://a.example/?q=2&session=1&utm_source=x"
    assert normalize_url(raw, strip_params={"session"}) == "http://a.example/?q=2&utm_source=x"
    pattern = re.compile(r"(?i)utm_.*|session")
    assert normalize_url(raw, strip_params=pattern) == "http://a.example/?q=2"


@pytest.mark.parametrize(
    ("raw", "authority"),
    [
        ("http://Example.COM/x", "example.com"),
        ("http://example.com:80/x", "example.com"),
        ("https://example.com:443/x", "example.com"),
        ("http://example.com:443/x", "example.com:443"),
        ("https://example.com:8443", "example.com:8443"),
        ("http://[2001:db8::1]:80/", "[2001:db8::1]"),
        ("http://[::1]:8080/", "[::1]:8080"),
        ("http://müller.example/", "xn--mller-kva.example"),
    ],
)
def test_url_authority(raw: str, authority: str) -> None:
    assert url_authority(raw) == authority
    assert url_authority(normalize_url(raw)) == authority


def test_url_authority_rejects_bad_input() -> None:
    with pytest.raises(InvalidURL):
        url_authority("mailto:someone@example.com")
    with pytest.raises(InvalidURL):
        url_authority("http://user@example.com/")


def test_normalize_url_column_keeps_order_and_reports_errors() -> None:
    urls = pl.Series(
        ["http://B.example/2", None, "ftp://x.example/", "http://b.example:80/2", "nonsense"]
    )
    out = normalize_url_column(urls)
    assert out.columns == ["url", "host", "error"]
    assert out.height == urls.len()
    assert out["url"].to_list() == [
        "http://b.example/2",
        None,
        None,
        "http://b.example/2",
        None,
    ]
    assert out["host"].to_list() == ["b.example", None, None, "b.example", None]
    errors = out["error"].to_list()
    assert errors[0] is None and errors[3] is None
    assert errors[2] == "unsupported scheme 'ftp'"
    assert errors[1] and errors[4]


def test_normalize_url_column_empty() -> None:
    out = normalize_url_column(pl.Series("u", [], dtype=pl.String))
    assert out.height == 0
    assert out.schema == pl.Schema({"url": pl.String, "host": pl.String, "error": pl.String})


_PIECES = st.sampled_from(
    list("aZ09.-_~:/?#[]@!$&'()*+,;=% \t\né€ß\u200b\x00\x7f")
    + ["%2F", "%41", "%zz", "..", "[::1]", ":80", ":443", "utm_a=1", "&", "xn--", "?a=1"]
)
_URLISH = st.builds(
    lambda prefix, rest: prefix + rest,
    st.sampled_from(["http://", "https://", "HTTP://Ex.com", "http://ex.com/", "ftp://", ""]),
    st.lists(_PIECES, max_size=25).map("".join),
)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(_URLISH, st.text(max_size=80)))
def test_normalize_is_idempotent_and_only_raises_invalid_url(raw: str) -> None:
    try:
        once = normalize_url(raw)
    except InvalidURL:
        return
    assert normalize_url(once) == once
    assert url_authority(once) == url_authority(raw)
    assert once.startswith(("http://", "https://"))
    assert "#" not in once
    assert len(once) <= 2048
