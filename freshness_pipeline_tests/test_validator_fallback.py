"""A URL whose server ignores If-None-Match but honours If-Modified-Since, on a host whose
other pages honour ETags: driven through the CLI over real HTTP, its revisits go out with
If-Modified-Since and come back 304 (found by an exploratory run: 8 full bodies of 8)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from aiohttp import web

from freshness_pipeline_tests.support import LoopThread, run_freshness

LAST_MODIFIED = "Mon, 01 Dec 2025 00:00:00 GMT"
START = datetime(2026, 1, 5, tzinfo=UTC)


def test_a_url_that_ignores_its_etag_is_revalidated_by_its_date(tmp_path: Path) -> None:
    seen: list[tuple[str, str | None, str | None, int]] = []

    async def page(request: web.Request) -> web.Response:
        path = request.path
        inm = request.headers.get("If-None-Match")
        ims = request.headers.get("If-Modified-Since")
        etag = f'"{path.strip("/")}-1"'
        if path == "/imsonly":
            status = 304 if ims == LAST_MODIFIED else 200  # If-None-Match is ignored
        else:
            status = 304 if inm == etag else 200
        seen.append((path, inm, ims, status))
        headers = {"ETag": etag, "Last-Modified": LAST_MODIFIED}
        if status == 304:
            return web.Response(status=304, headers=headers)
        body = f"<html><title>{path}</title><main><p>Page {path} says the same.</p></main></html>"
        return web.Response(text=body, content_type="text/html", headers=headers)

    loop = LoopThread()
    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    runner = web.AppRunner(app)
    try:
        loop.run(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run(site.start())
        base = f"http://127.0.0.1:{runner.addresses[0][1]}"
        seeds = tmp_path / "seeds.csv"
        seeds.write_text("url\n" + "".join(f"{base}/{p}\n" for p in ("a", "b", "imsonly")))
        home = tmp_path / "home"
        done = run_freshness("seed", str(seeds), home=home)
        assert done.returncode == 0, done.stderr
        for k in range(4):
            now = (START + timedelta(hours=6 * k)).strftime("%Y-%m-%dT%H:%M:%SZ")
            done = run_freshness("cycle", "--now", now, "--budget", "3", home=home)
            assert done.returncode == 0, done.stderr
    finally:
        loop.run(runner.cleanup())
        loop.close()
    ims_only = [(inm, ims, status) for path, inm, ims, status in seen if path == "/imsonly"]
    assert len(ims_only) >= 4, seen
    # its ETag was tried once and ignored; from then on its date revalidates it
    first_dated = next(i for i, (_, ims, _) in enumerate(ims_only) if ims is not None)
    assert first_dated <= 2, ims_only
    assert all(inm is None and status == 304 for inm, _, status in ims_only[first_dated:])
    # the host's other pages keep their ETags
    others = [(inm, status) for path, inm, _, status in seen if path != "/imsonly"]
    assert any(inm is not None and status == 304 for inm, status in others), others
