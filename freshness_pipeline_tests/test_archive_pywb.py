"""pywb replays what the archive writer wrote, as of every fetch time.

A real aiohttp server on loopback serves a page whose content changes between cycles, with an
ETag it honours; a real aiohttp client (``auto_decompress=False``, as the fetch stage runs it)
fetches it once per cycle, sometimes conditionally, and each cycle's exchanges go through an
ArchiveWriter of their own. pywb's ``wayback`` (in its own venv, see pywb_server.py) then
replays the page at each fetch time from the archive folder and its CDXJ indexes, and must
serve the bytes the server served then: the 304 and identical-payload times included.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from freshness_pipeline.warehouse.archive import (
    PROFILE_IDENTICAL_PAYLOAD,
    PROFILE_SERVER_NOT_MODIFIED,
    ArchivedOriginal,
    ArchivedRecord,
    ArchiveIndex,
    ArchiveReader,
    ArchiveWriter,
    HttpExchange,
    commit_prune,
    list_warcs,
    prepare_prune,
)
from freshness_pipeline_tests.pywb_server import (
    PywbUnavailable,
    ensure_pywb,
    fetch,
    warcio_check,
    wayback,
    write_collection_config,
)

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
UA = "freshness-pipeline/0.1 (+archive test)"


def page(version: int) -> bytes:
    words = " ".join(f"word{(version * 7 + i) % 97}" for i in range(400))
    return f"<!doctype html><html><head><title>v{version}</title></head><body><p>{words}</p></body></html>\n".encode()


class Site:
    """The loopback site: /page changes when told to, /gz is served gzip-encoded, robots.txt."""

    def __init__(self) -> None:
        self.version = 1
        self.served: list[tuple[str, int, bytes]] = []  # (path, status, body sent)

    def etag(self) -> str:
        return '"' + hashlib.sha1(page(self.version)).hexdigest()[:16] + '"'

    async def handle_page(self, request: web.Request) -> web.Response:
        if request.headers.get("If-None-Match") == self.etag():
            self.served.append(("/page", 304, b""))
            return web.Response(status=304, headers={"ETag": self.etag()})
        body = page(self.version)
        self.served.append(("/page", 200, body))
        return web.Response(
            body=body, content_type="text/html", charset="utf-8", headers={"ETag": self.etag()}
        )

    async def handle_gz(self, request: web.Request) -> web.Response:
        body = gzip.compress(page(100 + self.version), mtime=0)
        self.served.append(("/gz", 200, body))
        return web.Response(
            body=body,
            headers={"Content-Type": "text/html; charset=utf-8", "Content-Encoding": "gzip"},
        )

    async def handle_robots(self, request: web.Request) -> web.Response:
        body = b"User-agent: *\nDisallow: /private\n"
        self.served.append(("/robots.txt", 200, body))
        return web.Response(body=body, content_type="text/plain")


async def get(
    session: aiohttp.ClientSession, url: str, headers: dict[str, str], when: datetime
) -> HttpExchange:
    """One fetch, turned into an exchange the way the fetch stage will."""
    async with session.get(
        url, headers={"User-Agent": UA, **headers}, allow_redirects=False
    ) as response:
        body = await response.read()
        return HttpExchange(
            url=str(response.url),
            status=response.status,
            reason=response.reason or "",
            request_headers=list(response.request_info.headers.items()),
            response_headers=response.raw_headers,
            body=body,
            http_version=f"{version.major}.{version.minor}"
            if (version := response.version)
            else "1.1",
            fetched_at=when,
        )


async def crawl(
    archive: Path, site: Site
) -> tuple[str, list[tuple[datetime, bytes, ArchivedRecord]]]:
    """Five cycles of the page (200, 304, 200-identical, 200-changed, 304), a gzip page, robots.txt.

    Returns the page URL and, per cycle, the fetch time, the bytes the page had then and the
    record the writer made."""
    app = web.Application()
    app.router.add_get("/page", site.handle_page)
    app.router.add_get("/gz", site.handle_gz)
    app.router.add_get("/robots.txt", site.handle_robots)
    runner = web.AppRunner(app)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    port = tcp._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    base = f"http://127.0.0.1:{port}"
    timeline: list[tuple[datetime, bytes, ArchivedRecord]] = []
    previous: dict[str, ArchivedOriginal | None] = {}
    etag: str | None = None
    # (use the ETag?, content version during the cycle)
    plan = [(False, 1), (True, 1), (False, 1), (True, 2), (True, 2)]
    try:
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            for cycle, (conditional, version) in enumerate(plan):
                now = T0 + timedelta(hours=6 * cycle)
                site.version = version
                with ArchiveWriter(archive, now, writer="p0") as writer:
                    robots = await get(session, base + "/robots.txt", {}, now)
                    writer.write_exchange(robots, kind="robots", previous=previous.get("robots"))
                    headers = {"If-None-Match": etag} if conditional and etag else {}
                    exchange = await get(
                        session,
                        base + "/page",
                        headers,
                        now + timedelta(seconds=1, microseconds=250_000),
                    )
                    record = writer.write_exchange(exchange, previous=previous.get("page"))
                    previous["page"] = record.original
                    if exchange.status == 200:
                        etag = dict(exchange.response_pairs)["ETag"]
                    timeline.append(
                        (now + timedelta(seconds=1, microseconds=250_000), page(version), record)
                    )
                    gz = await get(session, base + "/gz", {}, now + timedelta(seconds=2))
                    previous["gz"] = writer.write_exchange(gz, previous=previous.get("gz")).original
    finally:
        await runner.cleanup()
    return base + "/page", timeline


def stamp(when: datetime) -> str:
    return when.strftime("%Y%m%d%H%M%S")


@pytest.fixture(scope="module")
def pywb_bin() -> Path:
    try:
        return ensure_pywb()
    except PywbUnavailable as exc:
        pytest.skip(f"pywb is not available here: {exc}")


def test_pywb_replays_every_fetch_time(tmp_path: Path, pywb_bin: Path) -> None:
    archive = tmp_path / "home" / "archive"
    site = Site()
    url, timeline = asyncio.run(crawl(archive, site))

    # What the crawl was: the record types the writer chose, and the server's answers.
    kinds = [(r.record_type, r.profile) for _, _, r in timeline]
    assert kinds == [
        ("response", None),
        ("revisit", PROFILE_SERVER_NOT_MODIFIED),
        ("revisit", PROFILE_IDENTICAL_PAYLOAD),
        ("response", None),
        ("revisit", PROFILE_SERVER_NOT_MODIFIED),
    ]
    assert [s for p, s, _ in site.served if p == "/page"] == [200, 304, 200, 200, 304]
    for warc in list_warcs(archive):
        warcio_check(archive / warc)

    root = tmp_path / "pywb"
    root.mkdir()
    write_collection_config(root, {"crawl": archive})
    with wayback(pywb_bin, root) as base:
        for when, expected, record in timeline:
            status, headers, body = fetch(f"{base}/crawl/{stamp(when)}id_/{url}")
            assert status == 200, (when, record.profile, status, body[:300])
            assert body == expected, (when, record.profile)
        # The gzip page, stored as received (gzip-encoded): pywb decodes it when it replays.
        gz_url = url.replace("/page", "/gz")
        status, headers, body = fetch(
            f"{base}/crawl/{stamp(T0 + timedelta(seconds=2))}id_/{gz_url}"
        )
        assert status == 200
        if headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        assert body == page(101)
        # The CDX API lists one capture per fetch of the page.
        status, _, cdx = fetch(f"{base}/crawl/cdx?url={url}&output=json")
        captures = [json.loads(line) for line in cdx.decode().splitlines() if line.strip()]
        assert [c["timestamp"] for c in captures] == [stamp(w) for w, _, _ in timeline]
        # robots.txt is in the archive too, told apart by its kind.
        status, _, cdx = fetch(
            f"{base}/crawl/cdx?url={url.replace('/page', '/robots.txt')}&output=json"
        )
        robots = [json.loads(line) for line in cdx.decode().splitlines() if line.strip()]
        assert len(robots) == 5 and all(c.get("kind") == "robots" for c in robots)

    # Retention drops the first cycle's file; the originals that later revisits need are
    # carried into a kept file, and pywb still replays every later time from them.
    plan = prepare_prune(archive, expire_before=T0 + timedelta(hours=6))
    assert len(plan.expired) == 1 and plan.retained_file is not None
    commit_prune(plan)
    for warc in list_warcs(archive):
        warcio_check(archive / warc)
    with wayback(pywb_bin, root) as base:
        for when, expected, record in timeline[1:]:
            status, _, body = fetch(f"{base}/crawl/{stamp(when)}id_/{url}")
            assert (status, body) == (200, expected), (when, record.profile, status)

    # The reader agrees with pywb, without any server.
    reader = ArchiveReader(archive)
    for _, expected, record in timeline[1:]:
        response = reader.read_response(
            record.warc_filename, record.warc_offset, record.warc_length
        )
        assert response.status == 200 and response.body == expected


def test_index_lines_match_pywbs_own_indexer(tmp_path: Path, pywb_bin: Path) -> None:
    """``wb-manager add`` indexes the same files with pywb's own indexer: every line it writes
    has a line of ours at the same key, time and record (ours resolves 304 revisits to their
    original, keeping the revisit's own place in revisit_*)."""
    archive = tmp_path / "archive"
    asyncio.run(crawl(archive, Site()))
    root = tmp_path / "pywb"
    root.mkdir()
    manager = str(pywb_bin / "wb-manager")
    subprocess.run([manager, "init", "std"], cwd=root, check=True, capture_output=True)
    warcs = [str(archive / n) for n in list_warcs(archive)]
    subprocess.run([manager, "add", "std", *warcs], cwd=root, check=True, capture_output=True)
    theirs = (root / "collections" / "std" / "indexes" / "index.cdxj").read_text().splitlines()
    ours = {}
    index = ArchiveIndex(archive)
    for name in index.index_files():
        for entry in index.entries(name):
            own = (
                entry.fields.get("revisit_filename", entry.filename),
                entry.fields.get("revisit_offset", entry.fields["offset"]),
                entry.fields.get("revisit_length", entry.fields["length"]),
            )
            ours[(entry.urlkey, entry.timestamp, *own)] = entry
    assert len(theirs) == len(ours) == 15
    for line in theirs:
        key, ts, data = line.split(" ", 2)
        fields = json.loads(data)
        match = ours.get((key, ts, fields["filename"], fields["offset"], fields["length"]))
        assert match is not None, line
        entry = match
        assert entry.fields["digest"].removeprefix("sha1:") == fields["digest"]
        if not entry.is_resolved_revisit:
            assert entry.fields["mime"] == fields["mime"]
