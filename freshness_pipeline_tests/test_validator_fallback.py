"""Two hosts whose validators lie in two ways, driven through the CLI over real HTTP: one URL
that ignores If-None-Match but honours If-Modified-Since on a host whose other pages honour
ETags, and a host whose 304s name another ETag every time. (One crawl, seed + six cycles, for
both tests: each host is its own server with its own request log, and each test reads its
host's.)"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from aiohttp import web

from freshness_pipeline_tests.support import seed_and_cycle, serve_on_loopback

LAST_MODIFIED = "Mon, 01 Dec 2025 00:00:00 GMT"
START = datetime(2026, 1, 5, tzinfo=UTC)

#: What a server saw: (path, If-None-Match, If-Modified-Since, the status it answered).
Seen = list[tuple[str, str | None, str | None, int]]


@dataclass(frozen=True)
class Crawl:
    ims_only: Seen  # the host whose /imsonly ignores its ETag (and whose /a, /b honour theirs)
    new_etags: Seen  # the host that puts a new ETag on every answer


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> Crawl:
    """Seed /a, /b, /imsonly of one host and /dated, /undated of the other, then six cycles
    6 hours apart with a budget of every URL (5): each URL is fetched every cycle."""
    ims_only: Seen = []
    new_etags: Seen = []
    answers = {"n": 0}

    async def ignores_its_etag(request: web.Request) -> web.Response:
        path = request.path
        inm = request.headers.get("If-None-Match")
        ims = request.headers.get("If-Modified-Since")
        etag = f'"{path.strip("/")}-1"'
        if path == "/imsonly":
            status = 304 if ims == LAST_MODIFIED else 200  # If-None-Match is ignored
        else:
            status = 304 if inm == etag else 200
        ims_only.append((path, inm, ims, status))
        headers = {"ETag": etag, "Last-Modified": LAST_MODIFIED}
        if status == 304:
            return web.Response(status=304, headers=headers)
        body = f"<html><title>{path}</title><main><p>Page {path} says the same.</p></main></html>"
        return web.Response(text=body, content_type="text/html", headers=headers)

    async def renames_its_etag(request: web.Request) -> web.Response:
        path = request.path
        inm = request.headers.get("If-None-Match")
        ims = request.headers.get("If-Modified-Since")
        answers["n"] += 1
        headers = {"ETag": f'"{answers["n"]}-x"'}  # a new ETag on every answer
        if path == "/dated":
            headers["Last-Modified"] = LAST_MODIFIED
        status = 304 if inm is not None or ims == LAST_MODIFIED else 200
        new_etags.append((path, inm, ims, status))
        if status == 304:
            return web.Response(status=304, headers=headers)
        body = f"<html><title>{path}</title><main><p>Page {path} says the same.</p></main></html>"
        return web.Response(text=body, content_type="text/html", headers=headers)

    root = tmp_path_factory.mktemp("fallback")
    with serve_on_loopback(ignores_its_etag) as one, serve_on_loopback(renames_its_etag) as other:
        urls = [f"{one}/{p}" for p in ("a", "b", "imsonly")]
        urls += [f"{other}/{p}" for p in ("dated", "undated")]
        seed_and_cycle(root / "home", "url\n" + "".join(u + "\n" for u in urls), START, 6, budget=5)
    return Crawl(ims_only=ims_only, new_etags=new_etags)


def test_a_url_that_ignores_its_etag_is_revalidated_by_its_date(crawl: Crawl) -> None:
    """Its revisits go out with If-Modified-Since and come back 304 (found by an exploratory
    run: 8 full bodies of 8)."""
    seen = crawl.ims_only
    ims_only = [(inm, ims, status) for path, inm, ims, status in seen if path == "/imsonly"]
    assert len(ims_only) >= 4, seen
    # its ETag was tried once and ignored; from then on its date revalidates it
    first_dated = next(i for i, (_, ims, _) in enumerate(ims_only) if ims is not None)
    assert first_dated <= 2, ims_only
    assert all(inm is None and status == 304 for inm, _, status in ims_only[first_dated:])
    # the host's other pages keep their ETags
    others = [(inm, status) for path, inm, _, status in seen if path != "/imsonly"]
    assert any(inm is not None and status == 304 for inm, status in others), others


def test_a_url_whose_304s_name_another_etag_stops_sending_its_etag(crawl: Crawl) -> None:
    """A server that puts a new ETag on every answer and answers any If-None-Match with 304:
    the fetch refuses such a 304 (it validates nothing of our copy) and the next fetch goes
    without validators, whose body brings a new ETag, refused in turn: the URL alternated
    error and body for good, a change seen a cycle late (found by an exploratory run). Once
    refused, its ETag stays home; its date revalidates it where it has one."""
    seen = crawl.new_etags
    for path in ("/dated", "/undated"):
        mine = [(inm, ims, status) for p, inm, ims, status in seen if p == path]
        assert len(mine) >= 5, seen
        refusals = [i for i, (inm, _, status) in enumerate(mine) if inm and status == 304]
        assert refusals == [1], (path, mine)  # the second fetch's, and no other
        later = mine[2:]
        assert all(inm is None for inm, _, _ in later), (path, mine)
        if path == "/dated":  # revalidated by its date from the third fetch on
            assert all(ims == LAST_MODIFIED and status == 304 for _, ims, status in later[1:])
