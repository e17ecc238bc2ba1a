"""What the fetch stage's body path costs per page in instructions, piece by piece.

    .venv/bin/python benchmarks/body_path_cost.py                 # all three, under callgrind
    .venv/bin/python benchmarks/body_path_cost.py --pages 300 --what fingerprint

The fetch stage's body path (a 200 with a ~5 KB HTML page) spends its CPU in three places the
project owns: the page's fingerprint and version (``class_record``), the archive write of the
exchange (``archive_answer``: the HttpExchange, both records built and compressed, the index
line, and the result's ``ArchivedOriginal.to_json`` that the fetch stage keeps), and on the
next cycle the same write for a 304 revisit. Wall time on a shared machine moves with the
neighbours, so each piece is counted in instructions by callgrind: the script runs itself
twice under valgrind, once doing only the set-up and a warm-up and once doing ``--pages``
more operations besides, and the difference divided by ``--pages`` is the cost of one. The
archive runs include closing the writer (its index is written then), so work deferred to a
file's completion is counted too.

The pages are ``fetch_rate.page_html``'s, the same the fetch-rate benchmark serves, and the
headers those nginx and the project's session send. Not a unit test.
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

WHAT = ("fingerprint", "archive-new", "archive-304")
WARM = 20
POOL = 1020  # pages made by every run, measured or not


def _pages(n: int) -> list[bytes]:
    from fetch_rate import page_html  # benchmarks/, beside this script

    rng = random.Random(6)
    return [page_html(rng, i % 20, i, rng.randint(4600, 5400)).encode() for i in range(n)]


def _response(url: str, body: bytes, status: int) -> Any:
    """What archive_answer reads of an aiohttp response, as nginx answers the session."""
    from aiohttp import HttpVersion11
    from multidict import CIMultiDict, CIMultiDictProxy

    from freshness_pipeline.web.client.session import ACCEPT

    host = url.split("/")[2]
    request = CIMultiDict(
        [
            ("Host", host),
            ("User-Agent", "freshness-pipeline/0.1 (+https://example.invalid/bot)"),
            ("Accept-Encoding", "gzip, deflate, br"),
            ("Accept", ACCEPT),
        ]
    )
    raw: list[tuple[bytes, bytes]] = [
        (b"Server", b"nginx/1.24.0"),
        (b"Date", b"Mon, 02 Mar 2026 12:00:00 GMT"),
    ]
    if status == 200:
        raw += [
            (b"Content-Type", b"text/html"),
            (b"Content-Length", str(len(body)).encode()),
        ]
    else:
        request.add("If-None-Match", '"695bc100-1388"')
    raw += [
        (b"Last-Modified", b"Thu, 01 Jan 2026 00:00:00 GMT"),
        (b"Connection", b"keep-alive"),
        (b"ETag", b'"695bc100-1388"'),
    ]
    if status == 200:
        raw.append((b"Accept-Ranges", b"bytes"))
    headers = CIMultiDictProxy(CIMultiDict((k.decode(), v.decode()) for k, v in raw))
    return SimpleNamespace(
        status=status,
        reason="OK" if status == 200 else "Not Modified",
        version=HttpVersion11,
        request_info=SimpleNamespace(headers=CIMultiDictProxy(request)),
        raw_headers=tuple(raw),
        headers=headers,
    )


def child(what: str, pages: int) -> None:
    """One measured run: the set-up (the same whatever ``pages`` is, so that it cancels out)
    and a warm-up, then ``pages`` operations."""
    from freshness_pipeline.science.fingerprint import class_record
    from freshness_pipeline.warehouse.archive import ArchiveWriter
    from freshness_pipeline.web.archiving import archive_answer

    if WARM + pages > POOL:
        raise SystemExit(f"--pages is at most {POOL - WARM}")
    total = WARM + pages
    bodies = _pages(POOL)
    urls = [f"http://127.0.0.{11 + i % 20}:8080/h{i % 20:02d}/p{i:05d}.html" for i in range(POOL)]
    if what == "fingerprint":
        extraction = SimpleNamespace(selectors=(), fields=None, json_ld=False)
        for body in bodies[:total]:
            class_record(extraction, body, "text/html", None)
        return
    now = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    later = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)
    answers = [_response(url, body, 200) for url, body in zip(urls, bodies, strict=True)]
    not_modified = [_response(url, b"", 304) for url in urls]
    home = Path(tempfile.mkdtemp(prefix="body-path-cost"))
    try:
        if what == "archive-new":
            with ArchiveWriter(home, now) as writer:
                for url, body, resp in zip(urls[:total], bodies, answers, strict=False):
                    record = archive_answer(writer, url, resp, body, fetched_at=now)
                    assert record is not None and record.original is not None
                    record.original.to_json()
            return
        # archive-304: the originals come from a first cycle, the same in both runs
        with ArchiveWriter(home, now, writer="first") as writer:
            originals = []
            for url, body, resp in zip(urls, bodies, answers, strict=True):
                record = archive_answer(writer, url, resp, body, fetched_at=now)
                assert record is not None and record.original is not None
                originals.append(record.original)
        with ArchiveWriter(home, later) as writer:
            for original, resp in zip(originals[:total], not_modified, strict=False):
                url = original.target_uri
                record = archive_answer(writer, url, resp, b"", fetched_at=later, previous=original)
                assert record is not None and record.original is not None
                record.original.to_json()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _instructions(what: str, pages: int) -> int:
    out = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--child",
            what,
            str(pages),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    match = re.search(r"Collected : (\d+)", out.stderr)
    if match is None:
        raise SystemExit(f"no instruction count from callgrind:\n{out.stderr[-2000:]}")
    return int(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--what", choices=WHAT, nargs="*", default=list(WHAT))
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is needed (apt-get install valgrind)")
    for what in args.what:
        base = _instructions(what, 0)
        full = _instructions(what, args.pages)
        print(f"{what:12s} {(full - base) / args.pages / 1e3:10,.0f} k instructions per page")


if __name__ == "__main__":
    main()
