"""Hostile servers over raw TCP on loopback: huge headers, a reset mid-body, a body that
trickles in, invalid HTTP. Each costs one 'error' outcome; the other fetches of the batch
complete."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from freshness_pipeline.web.client import FetchRequest, FetchResult, FetchSettings, fetch_all_sync
from freshness_pipeline.web.netguard import allowed_networks
from freshness_pipeline.web.throttle import ThrottlePolicy
from freshness_pipeline_tests.support import LoopThread

_ANSWERS_TO_COPY: list[bytes] = []


# This server answers one request per connection: it says so, or a client reusing the
# connection races the close (a reset, under load).
_CLOSE = b"Connection: close\r\n\r\n"


async def hostile(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    request = await reader.readuntil(b"\r\n\r\n")
    path = request.split(b" ", 2)[1]
    try:
        if path == b"/huge-headers":
            writer.write(b"HTTP/1.1 200 OK\r\nX-Junk: " + b"a" * 200_000 + b"\r\n\r\nhello")
        elif path == b"/reset":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 1000)
            await writer.drain()
            writer.transport.abort()
            return
        elif path == b"/trickle":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            for _ in range(100):
                writer.write(b"x")
                await writer.drain()
                await asyncio.sleep(0.3)
        elif path == b"/copy":
            # a page's life: a copy (ETag "v1"), a server error, then 304s to that copy
            _ANSWERS_TO_COPY.append(path)
            served = len(_ANSWERS_TO_COPY)
            if served == 1:
                body = b"<html><head><title>copy</title></head><body><p>the copy</p></body></html>"
                writer.write(
                    b'HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nETag: "v1"\r\n'
                    b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                )
            elif served == 2:
                body = b"<html><body>Internal error</body></html>"
                writer.write(
                    b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/html\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                )
            else:
                writer.write(b'HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\n\r\n')
        elif path == b"/latin1-location":
            # old IIS and Apache setups send a Location in Latin-1
            writer.write(
                b"HTTP/1.1 301 Moved\r\nLocation: /caf\xe9\r\nContent-Length: 0\r\n" + _CLOSE
            )
        elif path == b"/latin1-heads":
            body = b"<html><body><article>latin-1 heads</article></body></html>"
            writer.write(
                b'HTTP/1.1 200 OK\r\nETag: "caf\xe9"\r\nLast-Modified: Mon, 01 D\xe9c 2025\r\n'
                b'Link: <https://cdn.test/a.css>; rel=preload, </caf\xe9>; rel="canonical"\r\n'
                b"Content-Type: text/html; name=caf\xe9\r\nContent-Length: %d\r\n%s%s"
                % (len(body), _CLOSE, body)
            )
        elif path == b"/latin1-reason":
            writer.write(b"HTTP/1.1 403 Acc\xe8s interdit\r\nContent-Length: 0\r\n" + _CLOSE)
        elif path == b"/silent":
            # takes the request and never answers (the client's read timeout ends it)
            await asyncio.sleep(30)
            return
        elif path == b"/garbage":
            writer.write(b"\x00\xffNOT HTTP AT ALL\r\n\r\n")
        elif path.startswith((b"/cookies", b"/headers-")):
            # a page with a Set-Cookie per tracker: 300 header lines (aiohttp took 128), or far
            # more than any client reads
            lines = 300 if path.startswith(b"/cookies") else 5000
            body = b"<html><body><article>cookie jar</article></body></html>"
            head = b"".join(b"Set-Cookie: t%d=1; Path=/\r\n" % i for i in range(lines))
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n%sContent-Length: %d\r\n\r\n%s"
                % (head, len(body), body)
            )
        else:
            body = b"<html><body><article>fine page</article></body></html>"
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s"
                % (len(body), body)
            )
        await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


def impatient(host_concurrency: int, *, read_timeout: float, total_timeout: float) -> FetchSettings:
    """Settings that give up on a hostile server soon, with no latency-driven pacing."""
    return FetchSettings(
        read_timeout=read_timeout,
        total_timeout=total_timeout,
        host_concurrency=host_concurrency,
        throttle=ThrottlePolicy(autothrottle=False),
    )


def fetch_from(
    handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
    requests: Callable[[str], list[FetchRequest]],
    settings: FetchSettings,
) -> list[FetchResult]:
    """Serve ``handler`` on a loopback port of its own, fetch ``requests(origin)`` from it."""
    loop = LoopThread()
    try:
        srv = loop.run(asyncio.start_server(handler, "127.0.0.1", 0))
        origin = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}"
        results = fetch_all_sync(
            requests(origin),
            settings,
            allow=allowed_networks({"FRESHNESS_ALLOW_NETWORKS": "127.0.0.0/8"}),
        )
        loop.loop.call_soon_threadsafe(srv.close)
    finally:
        loop.close()
    return results


@pytest.fixture(scope="module")
def server():
    async def start() -> list[asyncio.Server]:
        # Two hosts: the hostile one trips its own circuit breaker, the other must not care.
        return [await asyncio.start_server(hostile, "127.0.0.1", 0) for _ in range(2)]

    loop = LoopThread()
    servers = loop.run(start())
    yield [f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}" for srv in servers]
    for srv in servers:
        loop.loop.call_soon_threadsafe(srv.close)
    loop.close()  # also cancels the handler still trickling


def test_each_hostile_answer_costs_one_error_and_the_good_page_still_arrives(server):
    hostile_host, other_host = server
    paths = ["/huge-headers", "/reset", "/trickle", "/garbage", "/fine"]
    settings = impatient(4, read_timeout=1.0, total_timeout=4.0)
    started = time.monotonic()
    results = fetch_all_sync(
        [FetchRequest(url=(other_host if p == "/fine" else hostile_host) + p) for p in paths],
        settings,
        allow=allowed_networks({"FRESHNESS_ALLOW_NETWORKS": "127.0.0.0/8"}),
    )
    elapsed = time.monotonic() - started
    outcomes = {p: r.outcome for p, r in zip(paths, results, strict=True)}
    errors = {p: r.error for p, r in zip(paths, results, strict=True)}
    assert outcomes == {
        "/huge-headers": "error",
        "/reset": "error",
        "/trickle": "error",
        "/garbage": "error",
        "/fine": "new",
    }, outcomes
    assert all(errors[p] for p in paths[:-1]), errors
    assert elapsed < 15, elapsed


def test_header_bytes_that_are_not_utf8_are_read_as_latin1_and_fail_no_one(server):
    """One Latin-1 byte in one answer's Location, ETag, Last-Modified, Content-Type or reason
    phrase reached the results as a lone surrogate, and building the results frame failed the
    whole cycle for every host, cycle after cycle (exploratory run)."""
    from freshness_pipeline.stages.fetch import raw_results

    host, other = server
    paths = ["/latin1-location", "/latin1-heads", "/latin1-reason"]
    settings = FetchSettings(throttle=ThrottlePolicy(autothrottle=False))
    results = fetch_all_sync(
        [FetchRequest(url=host + p) for p in paths] + [FetchRequest(url=other + "/fine")],
        settings,
        allow=allowed_networks({"FRESHNESS_ALLOW_NETWORKS": "127.0.0.0/8"}),
    )
    moved, heads, refused, fine = results
    # a URL gets its bytes back percent-encoded, as a browser sends them
    assert (moved.outcome, moved.location) == ("redirect", host + "/caf%E9")
    assert heads.outcome == "new"
    assert (heads.etag, heads.last_modified) == ('"caf\u00e9"', "Mon, 01 D\u00e9c 2025")
    assert heads.content_type == "text/html; name=caf\u00e9"
    assert heads.canonical == host + "/caf%E9"  # not /caf: the byte dropped named another page
    assert (refused.outcome, refused.error) == ("error", "HTTP 403 Acc\u00e8s interdit")
    assert fine.outcome == "new"
    frame = raw_results(results)  # where the cycle failed
    assert frame.height == 4 and frame["etag"][1] == '"caf\u00e9"'


def test_a_stray_surrogate_left_in_a_result_is_cleaned_not_fatal() -> None:
    from freshness_pipeline.stages.fetch import raw_results
    from freshness_pipeline.web.client import FetchResult

    odd = FetchResult("http://a.test/", "a.test", None, "error", error="boom: caf\udce9")
    frame = raw_results([odd, FetchResult("http://a.test/b", "a.test", 200, "new")])
    assert frame["error"].to_list() == ["boom: caf\u00e9", None]


def test_many_header_lines_are_read_and_an_unreadable_head_does_not_open_the_breaker(server):
    """A healthy host whose pages carry hundreds of Set-Cookie lines used to fail every one
    (aiohttp's 128-line limit) and trip its breaker after three, deferring the rest."""
    host, _ = server
    paths = ["/cookies"] + [f"/headers-{i}" for i in range(5)] + ["/fine-1", "/fine-2"]
    settings = FetchSettings(host_concurrency=1, throttle=ThrottlePolicy(autothrottle=False))
    results = fetch_all_sync(
        [FetchRequest(url=host + p) for p in paths],
        settings,
        allow=allowed_networks({"FRESHNESS_ALLOW_NETWORKS": "127.0.0.0/8"}),
    )
    outcomes = [r.outcome for r in results]
    assert outcomes == ["new"] + ["error"] * 5 + ["new", "new"], outcomes
    assert all("unreadable response: Too many headers" in (r.error or "") for r in results[1:6])


def test_pages_that_failed_before_go_after_their_hosts_healthy_pages(server):
    """Three pages that had reset or trickled went first in the next cycle (a page never
    answered is new), opened the breaker, and six healthy pages of their host were deferred
    (found by an exploratory run). The plan's pages that failed last time go last now."""
    import polars as pl

    from freshness_pipeline.config import PipelineConfig
    from freshness_pipeline.stages.fetch import fetch_requests
    from freshness_pipeline.warehouse import tables

    host, _ = server
    bad = ["/reset", "/trickle", "/garbage"]
    good = [f"/fine-{i}" for i in range(6)]
    plan = tables.conform(
        "revisit_plan",
        pl.DataFrame(
            {
                "url": [host + p for p in bad + good],
                "host": host.split("//")[1],
                "selected": True,
                "rank": list(range(1, 10)),
                "consecutive_errors": [1, 2, 1] + [0] * 6,
            }
        ),
    )
    requests = fetch_requests(plan, PipelineConfig())
    assert [r.url for r in requests] == [host + p for p in good + bad]
    settings = impatient(1, read_timeout=0.5, total_timeout=2.0)
    results = fetch_all_sync(
        requests, settings, allow=allowed_networks({"FRESHNESS_ALLOW_NETWORKS": "127.0.0.0/8"})
    )
    assert [r.outcome for r in results] == ["new"] * 6 + ["error"] * 3


def test_a_body_the_network_cut_is_archived_as_cut_and_the_fetch_still_fails(server, tmp_path):
    """A request sent must have its records (the archive's contract), also when its answer
    dies after the head: what arrived is kept with WARC-Truncated saying why, as Heritrix
    does. Before, nothing was archived and fetch_log pointed nowhere."""
    from datetime import UTC, datetime

    from freshness_pipeline.warehouse.archive import ArchiveWriter, read_record
    from freshness_pipeline_tests.pywb_server import warcio_check

    host, _ = server
    settings = impatient(2, read_timeout=1.0, total_timeout=4.0)
    now = datetime(2026, 3, 1, tzinfo=UTC)
    with ArchiveWriter(tmp_path, now) as writer:
        reset, trickle = fetch_all_sync(
            [FetchRequest(url=host + "/reset"), FetchRequest(url=host + "/trickle")],
            settings,
            allow=allowed_networks({"FRESHNESS_ALLOW_NETWORKS": "127.0.0.0/8"}),
            archive=writer,
        )
    assert (reset.outcome, trickle.outcome) == ("error", "error")
    assert "total timeout" in (trickle.error or ""), trickle.error  # it drips a byte at a time
    for result, reason, least in ((reset, "disconnect", 1000), (trickle, "time", 1)):
        assert result.warc_filename is not None, result
        assert result.warc_offset is not None
        record = read_record(tmp_path, result.warc_filename, result.warc_offset)
        assert record.record_type == "response"
        assert record.header("WARC-Truncated") == reason
        assert least <= len(record.payload) < 100_000
        assert record.payload == b"x" * len(record.payload)
        assert result.bytes == len(record.payload)
        # an original to compare later bodies with, or to revisit, it is not
        assert result.archived is None
    for path in tmp_path.glob("*.warc.gz"):
        warcio_check(path)


def test_a_request_sent_without_an_answer_has_its_request_record_and_one_never_sent_none(
    server, tmp_path
):
    """Every request that left has its record, also when nothing readable came back (a
    silent server, a head the client refuses): the request record alone, which the fetch's
    row points at; a connection refused sent nothing and archives nothing. Before, such
    requests had a fetch_log row and no record at all (found by an outside audit)."""
    import socket
    from datetime import UTC, datetime

    from freshness_pipeline.warehouse.archive import ArchiveWriter, read_record
    from freshness_pipeline.warehouse.archive.index import index_warc
    from freshness_pipeline_tests.pywb_server import warcio_check

    host, _ = server
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/refused"
    settings = impatient(4, read_timeout=1.0, total_timeout=4.0)
    now = datetime(2026, 3, 1, tzinfo=UTC)
    urls = [host + "/silent", host + "/garbage", host + "/huge-headers", closed]
    with ArchiveWriter(tmp_path, now) as writer:
        results = fetch_all_sync(
            [FetchRequest(url=u, etag='"v7"') for u in urls],
            settings,
            allow=allowed_networks({"FRESHNESS_ALLOW_NETWORKS": "127.0.0.0/8"}),
            archive=writer,
        )
    assert [r.outcome for r in results] == ["error"] * 4, results
    *answered_not, refused = results
    for url, result in zip(urls, answered_not, strict=False):
        assert result.warc_filename is not None, result
        assert result.warc_offset is not None
        record = read_record(tmp_path, result.warc_filename, result.warc_offset)
        assert record.record_type == "request", (url, record.record_type)
        assert record.target_uri == url
        assert record.header("WARC-Concurrent-To") is None
        assert result.warc_length == record.length
        sent = dict(record.http_headers or [])
        assert sent.get("If-None-Match") == '"v7"', sent
        assert sent.get("User-Agent", "").startswith("freshness-pipeline/"), sent
        assert result.payload_digest is None and result.archived is None
    assert refused.warc_filename is None, refused
    files = list(tmp_path.glob("*.warc.gz"))
    for path in files:
        warcio_check(path)
    # nothing to replay: the index holds no line for them
    indexed = [e for path in files for e in index_warc(tmp_path, path.name)]
    assert not [e for e in indexed if e.fields.get("url") in urls], indexed


def test_a_304_refers_to_the_pages_copy_not_to_an_error_archived_since(server, tmp_path):
    """The URL's original moved to every response archived, so after 200, 500, 304 the
    revisit named the error page: a replay of that time showed "Internal error"."""
    from datetime import UTC, datetime, timedelta

    from freshness_pipeline.warehouse.archive import ArchivedOriginal, ArchiveWriter, read_record

    host, _ = server
    url = host + "/copy"
    settings = FetchSettings(throttle=ThrottlePolicy(autothrottle=False))
    allow = allowed_networks({"FRESHNESS_ALLOW_NETWORKS": "127.0.0.0/8"})
    request = FetchRequest(url=url)
    start = datetime(2026, 3, 1, tzinfo=UTC)
    results = []
    for i in range(3):
        with ArchiveWriter(tmp_path, start + timedelta(hours=6 * i), writer=f"p{i}") as writer:
            (result,) = fetch_all_sync([request], settings, allow=allow, archive=writer)
        results.append(result)
        request = FetchRequest(
            url=url,
            etag=result.etag or request.etag,
            prev_fingerprint=result.fingerprint or request.prev_fingerprint,
            archived=ArchivedOriginal.from_json(result.archived) if result.archived else None,
            archived_json=result.archived,
        )
    copy, failed, revalidated = results
    assert [r.outcome for r in results] == ["new", "error", "not_modified"]
    assert failed.warc_filename is not None  # the error page is archived ...
    assert failed.archived == copy.archived  # ... but the copy stays the URL's original
    assert revalidated.warc_filename is not None
    assert revalidated.warc_offset is not None
    # the 304 keeps the plan's text of the original, which is what to_json writes of it
    assert revalidated.archived == copy.archived
    assert copy.archived is not None
    assert ArchivedOriginal.from_json(copy.archived).to_json() == copy.archived
    revisit = read_record(tmp_path, revalidated.warc_filename, revalidated.warc_offset)
    assert revisit.record_type == "revisit"
    assert copy.warc_filename is not None and copy.warc_offset is not None
    original = read_record(tmp_path, copy.warc_filename, copy.warc_offset)
    assert revisit.header("WARC-Refers-To") == original.record_id
    assert revisit.header("WARC-Refers-To-Date") == original.header("WARC-Date")


@pytest.mark.parametrize("how", ["close", "reset"])
def test_a_kept_alive_connection_the_server_drops_on_reuse_costs_no_fetch(how: str) -> None:
    """Servers close idle keep-alive connections on their own clock (nginx after 75 s, many
    after 5), and one closing as our next request arrives on it loses that request: the
    fetcher sends it again on a new connection (RFC 9112 9.3.1) instead of counting the host
    as failing, and the lost request has its own row, as every request sent has (aiohttp's
    own retry sent it again unrecorded: a contract audit)."""
    connections: list[int] = []
    received: list[bytes] = []

    async def one_answer_then_drop(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        connections.append(1)
        try:
            request = await reader.readuntil(b"\r\n\r\n")
            received.append(request.split(b" ")[1])
            body = b"<html><body><article>page " + request.split(b" ")[1] + b"</article></body>"
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s"
                % (len(body), body)
            )
            await writer.drain()
            lost = await reader.readuntil(b"\r\n\r\n")  # the next request: not answered
            received.append(lost.split(b" ")[1])
            if how == "reset":
                writer.transport.abort()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    results = fetch_from(
        one_answer_then_drop,
        lambda host: [FetchRequest(url=f"{host}/p{i}") for i in range(5)],
        FetchSettings(host_concurrency=1, throttle=ThrottlePolicy(autothrottle=False)),
    )
    assert [(r.outcome, r.error) for r in results] == [("new", None)] * 5
    assert len(connections) == 5  # each page on a connection of its own, after a refusal
    lost = [hop for r in results for hop in r.hops or ()]
    assert [(h.outcome, h.http_status) for h in lost] == [("error", None)] * 4
    assert all("kept-alive connection: sent again" in (h.error or "") for h in lost)
    # every request the server read is one of the fetches' rows, and none is sent twice
    assert len(received) == len(results) + len(lost) == 9
    pages = [b"/p%d" % i for i in range(5)]
    assert sorted(received) == sorted(pages + pages[1:])  # each page lost once, then served


def test_a_server_that_drops_every_request_gets_each_once_at_its_crawl_delay() -> None:
    """A request lost with its connection is sent again at most once, and only when it went
    out on a kept-alive connection, through the host's Crawl-delay like any other request:
    aiohttp's own retry sent it again within a millisecond (a contract audit)."""
    arrivals: list[tuple[bytes, float]] = []

    async def answer_once_then_drop_all(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            while True:
                request = await reader.readuntil(b"\r\n\r\n")
                path = request.split(b" ")[1]
                arrivals.append((path, time.monotonic()))
                if path != b"/first":
                    writer.transport.abort()
                    return
                body = b"<html><body><article>first</article></body></html>"
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    results = fetch_from(
        answer_once_then_drop_all,
        lambda host: [
            FetchRequest(url=f"{host}/{p}", crawl_delay=0.3) for p in ("first", "a", "b")
        ],
        impatient(1, read_timeout=5, total_timeout=10),
    )
    by_url = {r.url.rsplit("/", 1)[1]: r for r in results}
    assert by_url["first"].outcome == "new"
    # /a went out on first's kept-alive connection: lost, recorded, sent again and lost on
    # the new one; /b went out on a new connection: lost once, no second try
    assert [p for p, _ in arrivals] == [b"/first", b"/a", b"/a", b"/b"]
    assert len(by_url["a"].hops or ()) == 1 and not by_url["b"].hops
    assert by_url["a"].outcome == by_url["b"].outcome == "error"
    gaps = [b - a for (_, a), (_, b) in zip(arrivals, arrivals[1:], strict=False)]
    assert min(gaps) >= 0.3, gaps
