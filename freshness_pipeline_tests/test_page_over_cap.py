"""A page past the body cap (10 MB by default) is read to the cap, through the CLI over real
HTTP: it keeps being versioned from its first part, its cut body is archived as cut
(WARC-Truncated: length) and becomes the copy a later 304 refers to. As an error it kept the
copy from before it grew, for good."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
from aiohttp import web

from freshness_pipeline.warehouse.archive import read_record
from freshness_pipeline_tests.support import seed_and_cycle, serve_on_loopback

START = datetime(2026, 3, 1, tzinfo=UTC)
MB = 1 << 20


def _page(lead: str, size: int) -> bytes:
    head = f"<html><title>Log</title><main><h1>{lead}</h1>".encode()
    line = b"<p>" + b"entry " * 20 + b"</p>\n"
    return head + line * ((size - len(head)) // len(line)) + b"</main></html>"


def test_a_page_that_grows_past_the_cap_is_versioned_from_its_first_part(tmp_path: Path) -> None:
    state = {"phase": 0}
    pages = {0: _page("First edition", 8 * MB), 1: _page("Second edition", 11 * MB)}

    async def log(request: web.Request) -> web.Response:
        body = pages[min(state["phase"], 1)]
        etag = f'"v{min(state["phase"], 1)}"'
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers={"ETag": etag})
        return web.Response(body=body, content_type="text/html", headers={"ETag": etag})

    home = tmp_path / "home"
    with serve_on_loopback(log) as base:
        # whole; grown past the cap and edited; unchanged (a 304)
        seed_and_cycle(
            home, f"url\n{base}/log\n", START, 3, budget=10, before=lambda k: state.update(phase=k)
        )
    with duckdb.connect(str(home / "freshness.duckdb"), read_only=True) as con:
        fetches = con.sql(
            "SELECT outcome, http_status, bytes, error, warc_filename, warc_offset"
            " FROM fetch_log ORDER BY fetched_at"
        ).fetchall()
        versions = con.sql(
            "SELECT outcome, title, text, warc_filename, warc_offset FROM page_versions"
            " ORDER BY observed_at"
        ).fetchall()
    assert [(f[0], f[1]) for f in fetches] == [
        ("new", 200),
        ("changed", 200),
        ("not_modified", 304),
    ]
    assert fetches[0][3] is None and fetches[1][3] == f"body over {10 * MB} bytes: read to there"
    assert fetches[1][2] == 10 * MB
    assert [v[0] for v in versions] == ["new", "changed"]
    assert versions[1][2].startswith("Second edition")
    archive = home / "archive"
    cut = read_record(archive, versions[1][3], versions[1][4])
    assert cut.record_type == "response" and cut.header("WARC-Truncated") == "length"
    assert len(cut.payload) == 10 * MB
    revisit = read_record(archive, fetches[2][4], fetches[2][5])
    assert revisit.record_type == "revisit"
    assert revisit.header("WARC-Refers-To") == cut.record_id
