"""web/client/session.py, web/client/body.py and web/archiving.py against a real aiohttp server
on loopback: the cycle's session, the capped body read, the answer archived as it arrives."""

from __future__ import annotations

import asyncio
import gzip
import ipaddress
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yarl
from aiohttp import web

from freshness_pipeline.warehouse.archive import ArchiveWriter, read_response
from freshness_pipeline.web.archiving import archive_answer
from freshness_pipeline.web.client import FetchSettings
from freshness_pipeline.web.client.body import BodyTooLarge, read_limited
from freshness_pipeline.web.client.session import URL_HOST_CACHE, open_session

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"),)
TEXT = b"<html><body><p>" + b"words " * 2000 + b"</p></body></html>"
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


async def page(request: web.Request) -> web.Response:
    seen.append(request.headers.get("User-Agent", ""))
    return web.Response(
        body=gzip.compress(TEXT),
        headers={"Content-Type": "text/html", "Content-Encoding": "gzip"},
    )


seen: list[str] = []


@asynccontextmanager
async def serve() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/page", page)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/page"
    finally:
        await runner.cleanup()


def test_the_session_sends_our_agent_and_leaves_the_body_compressed() -> None:
    settings = FetchSettings()

    async def scenario() -> tuple[int, bytes]:
        async with (
            serve() as url,
            open_session(settings, allow=LOOPBACK) as session,
            session.get(url) as resp,
        ):
            return resp.status, await resp.read()

    status, raw = asyncio.run(scenario())
    assert status == 200
    assert gzip.decompress(raw) == TEXT  # no automatic decompression
    assert seen[-1] == settings.user_agent
    # a cycle's thousands of hosts stay parsed: yarl's default 512 would miss on each request
    assert yarl.cache_info()["encode_host"].maxsize >= URL_HOST_CACHE >= 10_000


def test_the_body_is_decoded_by_us_and_its_cap_holds() -> None:
    async def scenario(cap: int) -> object:
        async with (
            serve() as url,
            open_session(FetchSettings(), allow=LOOPBACK) as session,
            session.get(url) as resp,
        ):
            return await read_limited(resp, max_bytes=1 << 20, max_decompressed_bytes=cap)

    read = asyncio.run(scenario(1 << 20))
    assert read.body == TEXT and read.raw_bytes < len(TEXT)
    with pytest.raises(BodyTooLarge):
        asyncio.run(scenario(1000))


def test_an_answer_is_archived_as_the_client_read_it(tmp_path: Path) -> None:
    async def scenario() -> object:
        async with (
            serve() as url,
            open_session(FetchSettings(), allow=LOOPBACK) as session,
            session.get(url) as resp,
        ):
            body = (
                await read_limited(resp, max_bytes=1 << 20, max_decompressed_bytes=1 << 20)
            ).body
            with ArchiveWriter(tmp_path, NOW) as writer:
                assert archive_answer(None, url, resp, body) is None
                return archive_answer(writer, url, resp, body)

    record = asyncio.run(scenario())
    stored = read_response(tmp_path, record.warc_filename, record.warc_offset)
    assert stored.status == 200 and stored.decoded_body() == TEXT
