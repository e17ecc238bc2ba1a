"""A URL whose server ignores If-None-Match but honours If-Modified-Since, on a host whose
other pages honour ETags: driven through the CLI over real HTTP, its revisits go out with
If-Modified-Since and come back 304 (found by an exploratory run: 8 full bodies of 8)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from aiohttp import web

from freshness_pipeline_tests.support import (
    LoopThread,
    run_freshness,
    seed_and_cycle,
    serve_on_loopback,
)

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


def test_a_url_whose_304s_name_another_etag_stops_sending_its_etag(tmp_path: Path) -> None:
    """A server that puts a new ETag on every answer and answers any If-None-Match with 304:
    the fetch refuses such a 304 (it validates nothing of our copy) and the next fetch goes
    without validators, whose body brings a new ETag, refused in turn: the URL alternated
    error and body for good, a change seen a cycle late (found by an exploratory run). Once
    refused, its ETag stays home; its date revalidates it where it has one."""
    seen: list[tuple[str, str | None, str | None, int]] = []
    answers = {"n": 0}

    async def page(request: web.Request) -> web.Response:
        path = request.path
        inm = request.headers.get("If-None-Match")
        ims = request.headers.get("If-Modified-Since")
        answers["n"] += 1
        headers = {"ETag": f'"{answers["n"]}-x"'}  # a new ETag on every answer
        if path == "/dated":
            headers["Last-Modified"] = LAST_MODIFIED
        status = 304 if inm is not None or ims == LAST_MODIFIED else 200
        seen.append((path, inm, ims, status))
        if status == 304:
            return web.Response(status=304, headers=headers)
        body = f"<html><title>{path}</title><main><p>Page {path} says the same.</p></main></html>"
        return web.Response(text=body, content_type="text/html", headers=headers)

    with serve_on_loopback(page) as base:
        seed_and_cycle(
            tmp_path / "home", f"url\n{base}/dated\n{base}/undated\n", START, 6, budget=2
        )
    for path in ("/dated", "/undated"):
        mine = [(inm, ims, status) for p, inm, ims, status in seen if p == path]
        assert len(mine) >= 5, seen
        refusals = [i for i, (inm, _, status) in enumerate(mine) if inm and status == 304]
        assert refusals == [1], (path, mine)  # the second fetch's, and no other
        later = mine[2:]
        assert all(inm is None for inm, _, _ in later), (path, mine)
        if path == "/dated":  # revalidated by its date from the third fetch on
            assert all(ims == LAST_MODIFIED and status == 304 for _, ims, status in later[1:])
