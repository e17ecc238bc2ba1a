"""Our client against a real nginx serving static files: the conditional-GET semantics that
most of the web actually implements (ETag = mtime-size, exact If-Modified-Since, weak ETags
under gzip), with the project's own fingerprinter deciding unchanged versus changed."""

from __future__ import annotations

import ipaddress
import re

import pytest

from freshness_pipeline.web.client import FetchRequest, FetchResult, FetchSettings, fetch_all_sync
from freshness_pipeline_tests.nginx_server import NginxServer

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"),)
IMF_FIXDATE = re.compile(
    r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$"
)
T0 = 1_700_000_000.0  # a fixed mtime: nginx validators come from whole-second mtimes

PAGE = (
    "<html><head><title>Widget</title></head><body><main>Blue widget, 12 EUR.</main></body></html>"
)
PAGE_V2 = "<html><head><title>Widget</title></head><body><main>Blue widget, now 15 EUR!</main></body></html>"


def fetch(*requests: FetchRequest) -> list[FetchResult]:
    return fetch_all_sync(list(requests), FetchSettings(), allow=LOOPBACK)


def again(
    srv: NginxServer, first: FetchResult, *, etag: bool = True, lm: bool = True
) -> FetchRequest:
    """The request the pipeline builds next time from what ``first`` stored."""
    return FetchRequest(
        url=first.url,
        host=srv.host,
        etag=first.etag if etag else None,
        last_modified=first.last_modified if lm else None,
        prev_fingerprint=first.fingerprint,
    )


def first_fetch(srv: NginxServer, name: str = "page.html") -> FetchResult:
    (result,) = fetch(FetchRequest(url=srv.url(name), host=srv.host))
    return result


def test_first_fetch_captures_both_validators(nginx: NginxServer) -> None:
    nginx.write("page.html", PAGE, mtime=T0)
    first = first_fetch(nginx)
    assert (first.http_status, first.outcome, first.conditional) == (200, "new", False)
    assert first.validator is None and first.bytes == len(PAGE)
    # nginx: ETag "<hex mtime>-<hex size>", Last-Modified from the same mtime.
    assert first.etag == f'"{int(T0):x}-{len(PAGE):x}"'
    assert first.last_modified == "Tue, 14 Nov 2023 22:13:20 GMT"
    assert first.fingerprint and first.content_type == "text/html"
    (logged,) = nginx.access_log(at_least=1)
    assert logged.if_none_match is None and logged.if_modified_since is None
    assert (logged.user_agent or "").startswith("freshness-pipeline/")


def test_refetch_with_etag_is_a_304(nginx: NginxServer) -> None:
    nginx.write("page.html", PAGE, mtime=T0)
    first = first_fetch(nginx)
    (second,) = fetch(again(nginx, first))
    assert (second.http_status, second.outcome) == (304, "not_modified")
    assert second.conditional and second.validator == "etag"
    assert second.bytes == 0
    # The stored copy stays current: validators and fingerprint carry over.
    assert (second.etag, second.last_modified) == (first.etag, first.last_modified)
    assert second.fingerprint == first.fingerprint
    logged = nginx.access_log(at_least=2)[-1]
    assert logged.status == 304 and logged.if_none_match == first.etag
    assert logged.if_modified_since is None  # If-None-Match alone when an ETag is known


def test_refetch_with_last_modified_only_sends_if_modified_since(nginx: NginxServer) -> None:
    nginx.write("page.html", PAGE, mtime=T0)
    first = first_fetch(nginx)
    (second,) = fetch(again(nginx, first, etag=False))
    assert (second.http_status, second.outcome) == (304, "not_modified")
    assert second.conditional and second.validator == "last_modified"
    logged = nginx.access_log(at_least=2)[-1]
    assert logged.if_none_match is None
    assert logged.if_modified_since == first.last_modified
    assert IMF_FIXDATE.match(logged.if_modified_since or ""), logged.if_modified_since


def test_rewritten_file_is_changed(nginx: NginxServer) -> None:
    nginx.write("page.html", PAGE, mtime=T0)
    first = first_fetch(nginx)
    nginx.write("page.html", PAGE_V2, mtime=T0 + 3600)
    by_etag, by_date = fetch(again(nginx, first), again(nginx, first, etag=False))
    for result in (by_etag, by_date):
        assert (result.http_status, result.outcome, result.conditional) == (200, "changed", True)
        assert result.fingerprint != first.fingerprint
        assert result.etag == f'"{int(T0 + 3600):x}-{len(PAGE_V2):x}"' != first.etag
        assert result.last_modified == "Tue, 14 Nov 2023 23:13:20 GMT"
        assert result.bytes == len(PAGE_V2)


def test_touched_file_is_unchanged_by_fingerprint(nginx: NginxServer) -> None:
    nginx.write("page.html", PAGE, mtime=T0)
    first = first_fetch(nginx)
    nginx.touch("page.html", T0 + 60)  # same bytes, new mtime: new ETag and Last-Modified
    by_etag, by_date = fetch(again(nginx, first), again(nginx, first, etag=False))
    for result in (by_etag, by_date):
        # The validators say "modified", so the body comes back; the content fingerprint is
        # what tells us nothing changed.
        assert (result.http_status, result.outcome, result.conditional) == (200, "unchanged", True)
        assert result.fingerprint == first.fingerprint
        assert result.etag != first.etag and result.last_modified != first.last_modified


def test_deleted_file_is_gone(nginx: NginxServer) -> None:
    nginx.write("page.html", PAGE, mtime=T0)
    first = first_fetch(nginx)
    nginx.remove("page.html")
    conditional, plain = fetch(
        again(nginx, first), FetchRequest(url=nginx.url("page.html"), host=nginx.host)
    )
    for result in (conditional, plain):
        assert (result.http_status, result.outcome) == (404, "gone")
        assert result.fingerprint is None and result.error is None


def test_gzip_gives_a_weak_etag_that_still_validates(nginx: NginxServer) -> None:
    body = "<html><title>Long</title><body>" + "compressible words " * 400 + "</body></html>"
    nginx.write("gz/long.html", body, mtime=T0)
    first = first_fetch(nginx, "gz/long.html")
    assert first.outcome == "new" and first.etag and first.etag.startswith('W/"')
    assert 0 < first.bytes < len(body)  # compressed on the wire, decoded by us
    plain = nginx.access_log(at_least=1)[-1]
    assert "gzip" in (plain.accept_encoding or "")
    (second,) = fetch(again(nginx, first))
    assert (second.http_status, second.outcome) == (304, "not_modified")


def test_directory_without_slash_is_a_recorded_redirect(nginx: NginxServer) -> None:
    nginx.write("docs/index.html", PAGE, mtime=T0)
    (result,) = fetch(FetchRequest(url=nginx.url("docs"), host=nginx.host))
    assert (result.http_status, result.outcome) == (301, "redirect")
    assert result.location == nginx.url("docs/")
    assert len(nginx.access_log(at_least=1)) == 1  # recorded, not followed


def test_a_batch_of_pages_in_one_cycle(nginx: NginxServer) -> None:
    for i in range(6):
        nginx.write(f"p{i}.html", PAGE.replace("12", str(i)), mtime=T0)
    firsts = fetch(*(FetchRequest(url=nginx.url(f"p{i}.html"), host=nginx.host) for i in range(6)))
    assert [r.outcome for r in firsts] == ["new"] * 6
    nginx.write("p0.html", PAGE_V2, mtime=T0 + 10)
    nginx.touch("p1.html", T0 + 10)
    nginx.remove("p2.html")
    seconds = fetch(*(again(nginx, r) for r in firsts))
    assert [r.outcome for r in seconds] == [
        "changed",
        "unchanged",
        "gone",
        "not_modified",
        "not_modified",
        "not_modified",
    ]
    assert all(r.conditional and r.sent for r in seconds)


@pytest.mark.parametrize("name", ["../outside.html", "/../../etc/passwd"])
def test_the_helper_refuses_paths_outside_the_root(nginx: NginxServer, name: str) -> None:
    with pytest.raises(ValueError):
        nginx.write(name, "x")
