"""A decompression bomb costs one error outcome and bounded memory, measured as the peak RSS of
a real fetching process (not Python's allocator view)."""

from __future__ import annotations

import subprocess
import sys
import zlib

import pytest
from aiohttp import web

from freshness_pipeline_tests.support import LoopThread

FETCH = """
import sys
from freshness_pipeline.web.client import FetchRequest, FetchSettings, fetch_all_sync
from freshness_pipeline.web.netguard import allowed_networks

def peak_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

before = peak_kb()
(result,) = fetch_all_sync([FetchRequest(url=sys.argv[1])], FetchSettings(),
                           allow=allowed_networks({"FRESHNESS_ALLOW_NETWORKS": "127.0.0.0/8"}))
print(result.outcome, peak_kb() - before, (result.error or "-").replace(" ", "_"))
"""


def gzip_bomb(decompressed: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"\0" * (1 << 20)
    parts = [packer.compress(chunk) for _ in range(decompressed >> 20)]
    return b"".join([*parts, packer.flush()])


@pytest.fixture(scope="module")
def bomb_server():
    body = gzip_bomb(1 << 30)  # 1 GiB of zeros in about 1 MB

    async def page(request: web.Request) -> web.Response:
        if request.path == "/bomb":
            return web.Response(
                body=body, headers={"Content-Encoding": "gzip", "Content-Type": "text/html"}
            )
        return web.Response(
            text="<html><body><article>small page</article></body></html>", content_type="text/html"
        )

    async def start() -> tuple[web.AppRunner, int]:
        app = web.Application()
        app.router.add_get("/{tail:.*}", page)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return runner, site._server.sockets[0].getsockname()[1]

    loop = LoopThread()
    runner, port = loop.run(start())
    yield f"http://127.0.0.1:{port}"
    loop.run(runner.cleanup())
    loop.close()


def fetch_in_child(url: str) -> tuple[str, int, str]:
    done = subprocess.run(
        [sys.executable, "-c", FETCH, url], capture_output=True, text=True, timeout=120, check=True
    )
    outcome, grew_kb, error = done.stdout.split()
    return outcome, int(grew_kb), error


def test_a_gzip_bomb_is_an_error_with_bounded_peak_rss(bomb_server):
    small_outcome, small_kb, _ = fetch_in_child(f"{bomb_server}/small")
    assert small_outcome == "new"
    outcome, grew_kb, error = fetch_in_child(f"{bomb_server}/bomb")
    assert outcome == "error" and "exceeds" in error, error
    # The default cap is 50 MB decompressed; a client that inflated the bomb would grow by 1 GiB.
    print(f"peak RSS growth: small page {small_kb} KB, 1 GiB bomb {grew_kb} KB")
    assert grew_kb - small_kb < 120 * 1024, (grew_kb, small_kb)
