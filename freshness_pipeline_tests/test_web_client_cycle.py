"""web/client/cycle.py: the client's entry points against real loopback servers. A refused
scheme is answered without a request and in its place, a request's host comes from its URL when
it names none, the throttles passed in are the ones that learn (and carry a breaker across
calls), a cycle with no time left sends nothing, every answer lands in the archive where the
result says, and ``run_sync`` runs a coroutine from either side of an event loop."""

from __future__ import annotations

import asyncio
import socket
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from freshness_pipeline.warehouse.archive import ArchiveReader, ArchiveWriter
from freshness_pipeline.web.client.cycle import fetch_all, run_sync
from freshness_pipeline.web.client.fetches import TIME_LIMIT_REASON, FetchRequest, host_key
from freshness_pipeline.web.client.settings import FetchSettings
from freshness_pipeline.web.throttle import ThrottlePolicy, Throttles
from freshness_pipeline_tests.test_client import LOOPBACK, fp, serve, text

NOW = datetime(2026, 3, 2, 12, tzinfo=UTC)


def closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now: connection refused
    return int(port)


def test_refused_schemes_are_answered_in_place_without_a_request() -> None:
    async def scenario() -> None:
        async with serve({"/a": text("a"), "/b": text("b")}) as srv:
            requests = [
                FetchRequest(url="ftp://127.0.0.1/file", host="127.0.0.1"),
                FetchRequest(url=srv.url("/a")),  # no host: taken from the URL
                FetchRequest(url="javascript:alert(1)"),
                FetchRequest(url=srv.url("/b"), host=srv.host),
            ]
            results = await fetch_all(requests, FetchSettings(), allow=LOOPBACK, fingerprint=fp)
            assert sorted(srv.paths()) == ["/a", "/b"]
        assert [r.url for r in results] == [r.url for r in requests]
        ftp, a, js, b = results
        for refused in (ftp, js):
            assert (refused.outcome, refused.sent, refused.http_status) == ("error", False, None)
            assert "only http and https URLs are fetched" in (refused.error or "")
        assert ftp.host == "127.0.0.1"
        assert a.outcome == b.outcome == "new"
        assert a.host == host_key(srv.url("/a")) == srv.host == b.host

    asyncio.run(scenario())


def test_the_throttles_passed_in_learn_and_carry_an_open_breaker_to_the_next_call() -> None:
    port = closed_port()
    dead = f"127.0.0.1:{port}"
    settings = FetchSettings(host_concurrency=1, throttle=ThrottlePolicy(failure_limit=1))

    async def scenario() -> None:
        async with serve({"/a": text("a"), "/b": text("b")}) as srv:
            throttles = Throttles(settings.throttle)
            requests = [
                FetchRequest(url=f"http://{dead}/x", host=dead),
                FetchRequest(url=srv.url("/a"), host=srv.host),
                FetchRequest(url=srv.url("/b"), host=srv.host),
            ]
            first = await fetch_all(
                requests, settings, allow=LOOPBACK, fingerprint=fp, throttles=throttles
            )
            assert [(r.outcome, r.sent) for r in first] == [
                ("error", True),
                ("new", True),
                ("new", True),
            ]
            assert throttles[srv.host].n_ok == 2 and not throttles[srv.host].tripped
            assert throttles[dead].tripped  # one failure is this host's limit

            # the same throttles: the dead host's breaker is still open (600 s cool-down)
            again = await fetch_all(
                requests[:1], settings, allow=LOOPBACK, fingerprint=fp, throttles=throttles
            )
            assert [(r.outcome, r.sent) for r in again] == [("deferred", False)]
            assert "circuit breaker" in (again[0].error or "")
            # fresh throttles (the default): the host is tried again
            fresh = await fetch_all(requests[:1], settings, allow=LOOPBACK, fingerprint=fp)
            assert [(r.outcome, r.sent) for r in fresh] == [("error", True)]

    asyncio.run(scenario())


def test_a_cycle_with_no_time_left_sends_nothing() -> None:
    async def scenario() -> None:
        async with serve({"/a": text("a")}) as srv:
            results = await fetch_all(
                [FetchRequest(url=srv.url(f"/a?i={i}"), host=srv.host) for i in range(3)],
                FetchSettings(cycle_time_limit_s=0.0),
                allow=LOOPBACK,
                fingerprint=fp,
            )
            assert srv.paths() == []
        assert [(r.outcome, r.sent, r.error) for r in results] == [
            ("deferred", False, TIME_LIMIT_REASON)
        ] * 3

    asyncio.run(scenario())


def test_every_answer_is_archived_where_its_result_says(tmp_path: Path) -> None:
    async def scenario() -> list:
        async with serve({"/a": text("<p>alpha</p>"), "/b": text("<p>beta</p>")}) as srv:
            with ArchiveWriter(tmp_path, NOW) as archive:
                results = await fetch_all(
                    [
                        FetchRequest(url=srv.url("/a"), host=srv.host),
                        FetchRequest(url=srv.url("/b"), host=srv.host),
                    ],
                    FetchSettings(),
                    allow=LOOPBACK,
                    fingerprint=fp,
                    archive=archive,
                )
        return results

    results = asyncio.run(scenario())
    reader = ArchiveReader(tmp_path)
    for result, body in zip(results, [b"<p>alpha</p>", b"<p>beta</p>"], strict=True):
        assert result.outcome == "new" and result.warc_filename is not None
        assert result.warc_offset is not None and result.payload_digest
        stored = reader.read_response(result.warc_filename, result.warc_offset, result.warc_length)
        assert (stored.url, stored.status, stored.body) == (result.url, 200, body)


def test_run_sync_runs_on_this_thread_without_a_loop_and_on_a_helper_inside_one() -> None:
    async def where() -> int:
        return threading.get_ident()

    assert run_sync(where()) == threading.get_ident()

    async def inside() -> int:
        return run_sync(where())

    assert asyncio.run(inside()) != threading.get_ident()


@pytest.mark.parametrize("inside_a_loop", [False, True])
def test_run_sync_raises_what_the_coroutine_raised(inside_a_loop: bool) -> None:
    async def fails() -> None:
        raise LookupError("the coroutine's own error")

    async def inside() -> None:
        run_sync(fails())

    with pytest.raises(LookupError, match="the coroutine's own error"):
        asyncio.run(inside()) if inside_a_loop else run_sync(fails())
