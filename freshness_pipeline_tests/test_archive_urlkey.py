"""The CDXJ index's URL key is exactly ``surt.surt``'s, also where url_key keys a plain URL
itself: pywb looks every record up by the key its own indexer would have written."""

from __future__ import annotations

import pytest
import surt  # type: ignore[import-untyped]
from hypothesis import given, settings
from hypothesis import strategies as st

from freshness_pipeline.warehouse.archive.index import _plain_key, url_key


def _surt_or_given(url: str) -> str:
    """What the index keyed every URL by before: surt's key, or the URL where surt fails."""
    try:
        return str(surt.surt(url))
    except Exception:
        return url


CASES = [
    "http://127.0.0.11:8080/h01/p00001.html",
    "https://www.Example.com/A/b/?z=1&a=2&A",
    "http://example.com",
    "http://example.com/",
    "http://example.com/?",
    "http://ex.com/x?&",
    "http://ex.com/x?&&b",
    "http://ex.com/x?b&a=1&a&a=",
    "http://ex.com/x?a=b=c&a=b",
    "http://ex.com/x?q?r",
    "http://ex.com/a//b",
    "http://ex.com/a/./b",
    "http://ex.com/a/../b",
    "http://ex.com/a/..",
    "http://ex.com/.well-known/x",
    "http://ex.com/a%20b",
    "http://ex.com/a%2541",
    "http://ex.com/a#frag",
    "http://ex.com/a b",
    "http://ex.com/ä",
    "http://EX.com:80/Q",
    "https://ex.com:443/",
    "http://ex.com:443/",
    "https://ex.com:80/",
    "http://ex.com:0/a",
    "http://ex.com:99999/a",
    "http://ex.com:/a",
    "http://www2.ex.com/",
    "http://www.www.ex.com/",
    "http://wwwex.com/",
    "http://www/",
    "http://www./",
    "http://ex.com./a",
    "http://ex..com/a",
    "http://-/a",
    "http://1234/x",
    "http://10.1/x",
    "http://0177.0.0.1/x",
    "http://[::1]/x",
    "http://user:pw@ex.com/x",
    "HTTP://EX.COM/X",
    "ftp://ex.com/x",
    "http://http://ex.com/x",
    "http://https/order",
    "http://ex.com/Default.ASPX",
    "http://ex.com/(S(abcdefghijklmnopqrstuvwx))/default.aspx",
    "http://ex.com/x?JSESSIONID=0123456789abcdef0123456789abcdef&a=1",
    "http://ex.com/x?phpsessid=0123456789abcdef0123456789abcdef",
    "http://ex.com/x?sid=0123456789abcdef0123456789abcdef&b",
    "http://ex.com/x?cfid=1&cftoken=2&z",
    "http://ex.com/x?ASPSESSIONIDabcdefgh=abcdefghijklmnopqrstuvwx",
    "http://ex.com/x?sid=short&a",
    "http://ex.com/a/b/",
    "http://ex.com/A/B/?",
    "http://ex.com/~user/!$&'()*+,;=:@[]^_`{|}\"\\<>",
]


@pytest.mark.parametrize("url", CASES)
def test_key_is_surts(url: str) -> None:
    assert url_key(url) == _surt_or_given(url)


def test_plain_urls_take_the_fast_way() -> None:
    # the point of the fast way: it must key the URLs a crawl mostly has
    assert _plain_key("http://127.0.0.11:8080/h01/p00001.html") is not None
    assert _plain_key("https://www.example.com/news/2024/story?id=5&ref=x") is not None
    assert _plain_key("http://ex.com/a%20b") is None


_HOSTS = st.sampled_from(
    ["ex.com", "EX.com", "www.ex.com", "www1.Ex.org", "127.0.0.1", "10.1", "1234", "a-b.c.",
     "www", "xn--bcher-kva.ch", "0177.1", "-", "a..b"]
)  # fmt: skip
_PORTS = st.sampled_from(["", ":80", ":443", ":8080", ":0", ":65535", ":99999", ":"])
# pieces a plain URL is made of (drawn more often), and the ones that send a URL to surt whole
_PLAIN = ["/", "a", "B", "z", "0", "?", "&", "=", "-", "~", "_", ";", "(", ")", ".", "aspx", "Sid"]
_SPECIAL = ["..", "//", "%", "%41", "%2F", "#", " ", ".aspx", "sid=", "SessionID", "cfid=", "é",
            "\t", "@"]  # fmt: skip
_PIECES = st.sampled_from(_PLAIN * 4 + _SPECIAL)


@settings(max_examples=3000, deadline=None)
@given(
    scheme=st.sampled_from(["http", "https", "HTTP", "ftp"]),
    host=_HOSTS,
    port=_PORTS,
    lead=st.sampled_from(["/", "/", "/", ""]),
    rest=st.lists(_PIECES, max_size=14).map("".join),
)
def test_any_url_keys_as_surt_keys_it(
    scheme: str, host: str, port: str, lead: str, rest: str
) -> None:
    url = f"{scheme}://{host}{port}{lead}{rest}"
    assert url_key(url) == _surt_or_given(url)


@settings(max_examples=2000, deadline=None)
@given(
    scheme=st.sampled_from(["http", "https"]),
    host=_HOSTS,
    port=_PORTS,
    rest=st.lists(st.sampled_from([p for p in _PLAIN if p != "."]), max_size=20).map("".join),
)
def test_plain_urls_key_as_surt_keys_them(scheme: str, host: str, port: str, rest: str) -> None:
    url = f"{scheme}://{host}{port}/{rest}"
    assert url_key(url) == _surt_or_given(url)
