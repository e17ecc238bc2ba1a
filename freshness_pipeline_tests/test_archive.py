"""The archive package on real files: records, locations, revisits, reading back, indexes,
abandoned files and pruning; every WARC a test writes passes ``warcio check`` and ``warcio index``."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import hashlib
import os
import random
import re
import threading
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from freshness_pipeline.warehouse.archive import (
    FETCH_KIND_FIELD,
    ORIG_HEADER_PREFIX,
    PROFILE_IDENTICAL_PAYLOAD,
    PROFILE_SERVER_NOT_MODIFIED,
    ArchiveClosedError,
    ArchivedOriginal,
    ArchivedRecord,
    ArchiveIndex,
    ArchiveReader,
    ArchiveWriter,
    CompletedWarc,
    HttpExchange,
    OriginalNotFound,
    TruncatedReason,
    commit_prune,
    ensure_indexes,
    index_name_for,
    iter_records,
    list_warcs,
    prepare_prune,
    read_record,
    remove_abandoned,
)
from freshness_pipeline.warehouse.archive.index import index_warc, lines_for_key
from freshness_pipeline_tests.pywb_server import warcio_check

T1 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
WORDS = (
    "page",
    "change",
    "rate",
    "revisit",
    "budget",
    "host",
    "server",
    "cache",
    "river",
    "garden",
)
HOUR = timedelta(hours=1)
REQ = [("Host", "example.test"), ("User-Agent", "freshness-pipeline/0.1"), ("Accept", "*/*")]


def html(n: int, size: int = 5000) -> bytes:
    """A page of about ``size`` bytes of varied text (it compresses like prose, about 3:1)."""
    rng = random.Random(n)
    words: list[str] = []
    length = 0
    while length < size:
        words.append(f"{rng.choice(WORDS)}{rng.randint(0, 99)}")
        length += len(words[-1]) + 1
    return f"<html><body><p>{n}</p><p>{' '.join(words)}</p></body></html>".encode()


def ok(
    url: str,
    body: bytes,
    *,
    headers: list[tuple[str, str]] | None = None,
    body_decoded: bool = False,
    truncated: TruncatedReason | None = None,
    fetched_at: datetime | None = None,
    ip_address: str | None = None,
) -> HttpExchange:
    """A 200 as the fetcher would hand it over."""
    if headers is None:
        headers = [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(body)))]
    return HttpExchange(
        url,
        200,
        "OK",
        REQ,
        headers,
        body,
        body_decoded=body_decoded,
        truncated=truncated,
        fetched_at=fetched_at,
        ip_address=ip_address,
    )


def not_modified(url: str) -> HttpExchange:
    return HttpExchange(
        url, 304, "Not Modified", [*REQ, ("If-None-Match", '"1"')], [("ETag", '"1"')]
    )


def check_all(archive: Path) -> dict[str, list[dict[str, str]]]:
    """warcio check + index on every WARC; no temporary file left; every WARC has its index."""
    names = os.listdir(archive)
    assert not [n for n in names if n.endswith(".open")], names
    warcs = list_warcs(archive)
    for warc in warcs:
        assert index_name_for(warc) in names, warc
    return {warc: warcio_check(archive / warc) for warc in warcs}


def original_of(record: ArchivedRecord) -> ArchivedOriginal:
    assert record.original is not None
    return record.original


def sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def test_a_response_is_where_the_writer_says(tmp_path: Path) -> None:
    body = html(1)
    with ArchiveWriter(tmp_path, T1) as writer:
        record = writer.write_exchange(
            ok("http://example.test/a?x=1", body, ip_address="127.0.0.1")
        )
        assert not writer.is_durable(record)
        assert (
            record.warc_filename.endswith(".warc.gz")
            and (tmp_path / (record.warc_filename + ".open")).exists()
        )
    assert writer.is_durable(record) and not (tmp_path / (record.warc_filename + ".open")).exists()
    assert record.payload_digest == sha1_b32(body)
    assert re.fullmatch(r"sha1:[A-Z2-7]{32}", record.payload_digest)
    # The reported span is exactly one gzip member holding that record.
    with open(tmp_path / record.warc_filename, "rb") as fh:
        fh.seek(record.warc_offset)
        member = fh.read(record.warc_length)
    decompressor = zlib.decompressobj(zlib.MAX_WBITS | 16)
    raw = decompressor.decompress(member)
    assert decompressor.eof and not decompressor.unused_data
    assert raw.startswith(b"WARC/1.1\r\nWARC-Type: response\r\n")
    assert f"WARC-Record-ID: {record.record_id}".encode() in raw and raw.endswith(
        body + b"\r\n\r\n"
    )
    lines = check_all(tmp_path)[record.warc_filename]
    assert [
        (line["warc-type"], int(line["offset"]), int(line["length"])) for line in lines[1:]
    ] == [
        ("response", record.warc_offset, record.warc_length),
        ("request", record.request_offset, record.request_length),
    ]
    request = read_record(
        tmp_path, record.warc_filename, record.request_offset, record.request_length
    )
    assert request.header("WARC-Concurrent-To") == record.record_id
    assert request.payload == b"" and request.header("WARC-IP-Address") == "127.0.0.1"
    info = read_record(tmp_path, record.warc_filename, 0)
    text = info.payload.decode()
    assert info.record_type == "warcinfo" and "cycle: 2026-03-02T12:00:00Z" in text
    assert "software: freshness-pipeline/" in text and "format: WARC File Format 1.1" in text


def test_revisits_instead_of_bodies(tmp_path: Path) -> None:
    url = "http://example.test/p"
    body = html(2)
    with ArchiveWriter(tmp_path, T1) as writer:
        first = writer.write_exchange(ok(url, body))
    with ArchiveWriter(tmp_path, T1 + HOUR) as writer:
        revalidated = writer.write_exchange(not_modified(url), previous=first.original)
        same = writer.write_exchange(
            ok(url, body, fetched_at=T1 + HOUR + timedelta(seconds=30)), previous=first.original
        )
        cut = writer.write_exchange(ok(url, body, truncated="length"), previous=first.original)
        unknown = writer.write_exchange(not_modified("http://example.test/never-archived"))
        changed = writer.write_exchange(
            ok(url, html(3), fetched_at=T1 + 2 * HOUR), previous=first.original
        )
    assert first.record_type == "response" and first.original is not None
    assert first.original.location == first.location
    for revisit, profile in (
        (revalidated, PROFILE_SERVER_NOT_MODIFIED),
        (same, PROFILE_IDENTICAL_PAYLOAD),
    ):
        assert (revisit.record_type, revisit.profile) == ("revisit", profile)
        assert revisit.original == first.original and revisit.payload_digest == first.payload_digest
        stored = read_record(
            tmp_path, revisit.warc_filename, revisit.warc_offset, revisit.warc_length
        )
        assert stored.payload == b""  # headers, not a body
        assert stored.header("WARC-Profile") == profile
        assert stored.header("WARC-Refers-To") == first.record_id
        assert stored.header("WARC-Refers-To-Target-URI") == url
        assert stored.header("WARC-Refers-To-Date") == "2026-03-02T12:00:00Z"
        assert stored.header("WARC-Payload-Digest") == first.payload_digest
        assert revisit.warc_length < first.warc_length / 2
    assert (
        read_record(tmp_path, revalidated.warc_filename, revalidated.warc_offset).http_status == 304
    )
    assert same.warc_date == T1 + HOUR + timedelta(seconds=30)
    # A cut body is never a revisit, and says it was cut.
    assert cut.record_type == "response" and cut.truncated
    assert (
        read_record(tmp_path, cut.warc_filename, cut.warc_offset).header("WARC-Truncated")
        == "length"
    )
    # A 304 to validators from before archiving: a revisit naming its own URI, no digest.
    assert (
        unknown.record_type == "revisit"
        and unknown.payload_digest is None
        and unknown.original is None
    )
    stored = read_record(tmp_path, unknown.warc_filename, unknown.warc_offset)
    assert stored.header("WARC-Refers-To-Target-URI") == "http://example.test/never-archived"
    assert changed.record_type == "response" and changed.original is not None
    assert changed.original.record_id == changed.record_id
    check_all(tmp_path)


def test_the_index_made_while_writing_is_the_index_read_back(tmp_path: Path) -> None:
    """The writer builds each file's CDXJ lines as it writes; they must be exactly what
    reading the complete file back gives, 304 revisits resolved to their originals included
    (an original described by its row, and one from before rows described it)."""
    url = "http://example.test/p"
    # the lines' JSON escapes what a URL may hold (a quote, a backslash, non-ASCII)
    odd = 'http://example.test/caf\u00e9/"q"\\?x=%41'
    untyped = "http://example.test/untyped"
    with ArchiveWriter(tmp_path, T1) as writer:
        first = writer.write_exchange(ok(url, html(2)))
        other = writer.write_exchange(ok("http://example.test/q?a=1&b=2", html(4)))
        odd_first = writer.write_exchange(ok(odd, html(6)))
        robots = writer.write_exchange(ok("http://example.test/robots.txt", b"x"), kind="robots")
        bare = writer.write_exchange(ok(untyped, html(7), headers=[]))
        # an original named again in the same file: its line is among the file's own
        writer.write_exchange(not_modified(untyped), previous=original_of(bare))
    described = original_of(first)
    undescribed = dataclasses.replace(original_of(other), mime=None, status=None, urlkey=None)
    with ArchiveWriter(tmp_path, T1 + HOUR) as writer:
        writer.write_exchange(not_modified(url), previous=described)
        writer.write_exchange(not_modified("http://example.test/q?a=1&b=2"), previous=undescribed)
        writer.write_exchange(ok(url, html(2)), previous=described)
        writer.write_exchange(ok(url, html(5)), previous=described)
        writer.write_exchange(not_modified("http://example.test/never-archived"))
        writer.write_exchange(not_modified(odd), previous=original_of(odd_first))
        writer.write_exchange(not_modified(untyped), previous=original_of(bare))
        writer.write_exchange(
            not_modified("http://example.test/robots.txt"),
            previous=original_of(robots),
            kind="robots",
        )
        writer.write_exchange(ok(odd, html(6)), previous=original_of(odd_first))
        second = writer.close()
    for warc in list_warcs(tmp_path):
        written = (tmp_path / index_name_for(warc)).read_bytes()
        read_back = b"".join(sorted(e.line() for e in index_warc(tmp_path, warc)))
        assert written == read_back, warc
    # the 304s' lines point at their originals, as pywb needs to replay them
    first_file = first.warc_filename
    lines = (tmp_path / index_name_for(second[0].warc_filename)).read_text().splitlines()
    resolved = [line for line in lines if "revisit_filename" in line]
    assert len(resolved) == 5, lines
    resolved = [
        line
        for line in resolved
        if '"url": "http://example.test/q' in line or ('"url": "http://example.test/p"' in line)
    ]
    assert len(resolved) == 2, lines
    assert all(f'"filename": "{first_file}"' in line for line in resolved), resolved
    check_all(tmp_path)


def test_what_the_writer_returns_passes_the_dataclasses_own_checks(tmp_path: Path) -> None:
    """The writer makes its records and originals without their ``__init__`` (records.unchecked):
    each must equal the one the constructor makes, checks included, from the same fields."""
    url = "http://example.test/p"
    with ArchiveWriter(tmp_path, T1) as writer:
        made = [
            writer.write_exchange(ok(url, html(2))),
            writer.write_exchange(ok(url, html(3), truncated="length")),
            writer.write_exchange(ok("http://example.test/r", b"", headers=[]), kind="robots"),
        ]
        made.append(writer.write_exchange(not_modified(url), previous=made[0].original))
        made.append(writer.write_exchange(ok(url, html(2)), previous=made[0].original))
        made.append(writer.write_exchange(not_modified("http://example.test/new")))
    for record in made:
        values = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
        assert ArchivedRecord(**values) == record
        assert repr(ArchivedRecord(**values)) == repr(record)
        assert hash(ArchivedRecord(**values)) == hash(record)
        original = record.original
        if original is not None:
            fields = {f.name: getattr(original, f.name) for f in dataclasses.fields(original)}
            assert ArchivedOriginal(**fields) == original
            assert ArchivedOriginal.from_json(original.to_json()) == original
    check_all(tmp_path)


def test_stored_headers_describe_the_stored_body(tmp_path: Path) -> None:
    body = html(4, 20_000)
    encoded = gzip.compress(body, mtime=0)
    received = [
        ("Content-Type", "text/html"),
        ("Content-Encoding", "gzip"),
        ("Content-Length", str(len(encoded))),
        ("Set-Cookie", "a=1"),
        ("Set-Cookie", "b=2"),
    ]
    chunked = [("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")]
    image = random.Random(1).randbytes(5000)
    image_headers = [("Content-Type", "image/png"), ("Content-Length", "5000")]
    with ArchiveWriter(tmp_path, T1) as writer:
        decoded = writer.write_exchange(
            ok("http://example.test/d", body, headers=received, body_decoded=True)
        )
        raw = writer.write_exchange(ok("http://example.test/r", encoded, headers=received))
        dechunked = writer.write_exchange(ok("http://example.test/c", body, headers=chunked))
        capped = writer.write_exchange(
            ok("http://example.test/t", image[:1000], headers=image_headers, truncated="length")
        )
    reader = ArchiveReader(tmp_path)
    got = reader.read_response(decoded.warc_filename, decoded.warc_offset)
    assert got.body == body and got.header("Content-Encoding") is None
    assert got.header(ORIG_HEADER_PREFIX + "Content-Encoding") == "gzip"
    assert got.header("Content-Length") == str(len(body))
    assert got.header(ORIG_HEADER_PREFIX + "Content-Length") == str(len(encoded))
    assert [v for k, v in got.headers if k == "Set-Cookie"] == [
        "a=1",
        "b=2",
    ]  # duplicates kept, in order
    got = reader.read_response(raw.warc_filename, raw.warc_offset)
    assert got.body == encoded and got.header("Content-Encoding") == "gzip"
    assert got.header("Content-Length") == str(len(encoded)) and got.decoded_body() == body
    got = reader.read_response(dechunked.warc_filename, dechunked.warc_offset)
    assert (
        got.header("Transfer-Encoding") is None
        and got.header(ORIG_HEADER_PREFIX + "Transfer-Encoding") == "chunked"
    )
    assert got.header("Content-Length") == str(len(body))
    got = reader.read_response(capped.warc_filename, capped.warc_offset)
    assert got.truncated and got.body == image[:1000] and got.header("Content-Length") == "1000"
    assert got.header(ORIG_HEADER_PREFIX + "Content-Length") == "5000"
    check_all(tmp_path)


def test_headers_are_stored_as_the_bytes_received(tmp_path: Path) -> None:
    raw_headers = [
        (b"Content-Type", b"text/plain"),
        (b"Content-Disposition", b"inline; filename=caf\xe9.txt"),
    ]
    with ArchiveWriter(tmp_path, T1) as writer:
        record = writer.write_exchange(
            HttpExchange("http://example.test/caf%C3%A9", 200, "OK", REQ, raw_headers, b"x")
        )
    with open(tmp_path / record.warc_filename, "rb") as fh:
        fh.seek(record.warc_offset)
        raw = zlib.decompress(fh.read(record.warc_length), zlib.MAX_WBITS | 16)
    assert b"\r\nContent-Disposition: inline; filename=caf\xe9.txt\r\n" in raw
    check_all(tmp_path)


def test_discovery_fetches_are_archived_and_counted_apart(tmp_path: Path) -> None:
    with ArchiveWriter(tmp_path, T1) as writer:
        writer.write_exchange(
            ok("http://example.test/robots.txt", b"User-agent: *\n"), kind="robots"
        )
        writer.write_exchange(ok("http://example.test/sitemap.xml", b"<urlset/>"), kind="sitemap")
        writer.write_exchange(ok("http://example.test/feed", b"<rss/>"), kind="feed")
        writer.write_exchange(ok("http://example.test/", html(5)))
    kinds: dict[str, int] = {}
    for warc in list_warcs(tmp_path):
        for record in iter_records(tmp_path / warc):
            if record.record_type == "response":
                kind = record.header(FETCH_KIND_FIELD) or "?"
                kinds[kind] = kinds.get(kind, 0) + 1
    assert kinds == {"robots": 1, "sitemap": 1, "feed": 1, "page": 1}
    index = ArchiveIndex(tmp_path)
    lines = [e for name in index.index_files() for e in index.entries(name)]
    assert sorted(e.fields.get("kind", "page") for e in lines) == [
        "feed",
        "page",
        "robots",
        "sitemap",
    ]
    check_all(tmp_path)


def test_bad_input_is_refused_and_loses_nothing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        ArchiveWriter(tmp_path, datetime(2026, 3, 2, 12))
    with ArchiveWriter(tmp_path, T1) as writer:
        good = writer.write_exchange(ok("http://example.test/1", html(1)))
        with pytest.raises(ValueError, match="a 304 response has no body"):
            HttpExchange("http://example.test/2", 304, "Not Modified", REQ, [], b"x")
        with pytest.raises(ValueError, match="contains CR, LF or NUL"):
            ok("http://example.test/3", b"x", headers=[("X-Bad", "a\r\nInjected: 1")])
        with pytest.raises(ValueError, match="not a valid header name"):
            ok("http://example.test/3", b"x", headers=[("Bad Name", "v")])
        with pytest.raises(ValueError, match="absolute URL"):
            ok("/relative", b"x")
        with pytest.raises(ValueError, match="timezone-aware"):
            ok("http://example.test/4", b"x", fetched_at=datetime(2026, 3, 2))
        with pytest.raises(ValueError, match="kind must be one of"):
            writer.write_exchange(ok("http://example.test/5", b"x"), kind="image")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="payload_digest"):
            ArchivedOriginal("http://example.test/1", T1, "<urn:uuid:1>", "md5:abc")
        with pytest.raises(ValueError, match="previous must be"):
            writer.write_exchange(ok("http://example.test/6", b"x"), previous="nope")  # type: ignore[arg-type]
        after = writer.write_exchange(ok("http://example.test/7", html(7)))
    (done,) = writer.completed
    assert [r.record_id for r in done.records] == [good.record_id, after.record_id]
    assert [line["warc-type"] for line in check_all(tmp_path)[done.warc_filename]] == [
        "warcinfo",
        "response",
        "request",
        "response",
        "request",
    ]
    with pytest.raises(ArchiveClosedError):
        writer.write_exchange(ok("http://example.test/8", b"x"))


def test_abort_renames_nothing(tmp_path: Path) -> None:
    with ArchiveWriter(tmp_path, T1) as writer:
        kept = writer.write_exchange(ok("http://example.test/kept", html(1)))
    with (
        pytest.raises(RuntimeError, match="cycle failed"),
        ArchiveWriter(tmp_path, T1 + HOUR) as writer,
    ):
        lost = writer.write_exchange(ok("http://example.test/lost", html(2)))
        raise RuntimeError("cycle failed")
    assert not writer.is_durable(lost) and writer.completed == ()
    assert list_warcs(tmp_path) == [kept.warc_filename]
    check_all(tmp_path)
    assert sorted(os.listdir(tmp_path)) == sorted(
        [kept.warc_filename, index_name_for(kept.warc_filename)]
    )
    with pytest.raises(ArchiveClosedError, match="aborted"):
        writer.write_exchange(ok("http://example.test/x", b"x"))


def test_rotation_completes_files_as_it_goes(tmp_path: Path) -> None:
    completed: list[CompletedWarc] = []
    with ArchiveWriter(
        tmp_path, T1, writer="p1", max_file_bytes=20_000, on_complete=completed.append
    ) as writer:
        records = [
            writer.write_exchange(ok(f"http://example.test/{i}", html(i, 12000))) for i in range(30)
        ]
        assert len(completed) >= 3
        for done in completed:  # durable as soon as announced
            assert (tmp_path / done.warc_filename).exists() and done.index_filename
            assert all(writer.is_durable(r) for r in done.records)
        assert not writer.is_durable(records[-1])
    assert [c.warc_filename for c in completed] == [c.warc_filename for c in writer.completed]
    assert sum(len(c.records) for c in completed) == 30
    by_file = check_all(tmp_path)
    assert len(by_file) == len(completed)
    for done in completed:
        lines = by_file[done.warc_filename]
        assert done.size == (tmp_path / done.warc_filename).stat().st_size <= 20_000
        warcinfo_id = lines[0]["warc-record-id"]
        for record in done.records:
            stored = read_record(
                tmp_path, record.warc_filename, record.warc_offset, record.warc_length
            )
            assert stored.header("WARC-Warcinfo-ID") == warcinfo_id


def test_an_unanswered_request_rotates_like_an_exchange_and_names_its_own_files_warcinfo(
    tmp_path: Path,
) -> None:
    """A request that got no answer is a record of its own: past the size limit it opens the
    next file, and it names that file's warcinfo."""
    headers = [("Host", "example.test"), ("User-Agent", "freshness-pipeline/0")]
    with ArchiveWriter(tmp_path, T1, writer="p1", max_file_bytes=2_000) as writer:
        writer.write_exchange(ok("http://example.test/big", html(0, 30_000)))
        alone = writer.write_unanswered_request("http://example.test/silent", headers)
        with pytest.raises(ValueError, match="url"):
            writer.write_unanswered_request("not a url", headers)
    assert len(writer.completed) == 2
    assert alone.record_type == "request" and alone.warc_offset > 0
    assert alone.warc_filename == writer.completed[1].warc_filename
    by_file = check_all(tmp_path)
    warcinfo_id = by_file[alone.warc_filename][0]["warc-record-id"]
    stored = read_record(tmp_path, alone.warc_filename, alone.warc_offset, alone.warc_length)
    assert stored.record_type == "request" and stored.target_uri == "http://example.test/silent"
    assert stored.header("WARC-Warcinfo-ID") == warcinfo_id
    assert dict(stored.http_headers)["User-Agent"] == "freshness-pipeline/0"


def test_reader_follows_revisits_and_says_when_the_original_is_gone(tmp_path: Path) -> None:
    url = "http://example.test/page"
    with ArchiveWriter(tmp_path, T1) as writer:
        first = writer.write_exchange(
            ok(url, html(1), headers=[("Content-Type", "text/html"), ("ETag", '"1"')])
        )
    with ArchiveWriter(tmp_path, T1 + HOUR) as writer:
        revalidated = writer.write_exchange(not_modified(url), previous=first.original)
        same = writer.write_exchange(
            ok(
                url,
                html(1),
                headers=[("Content-Type", "text/html"), ("ETag", '"2"')],
                fetched_at=T1 + 2 * HOUR,
            ),
            previous=first.original,
        )
    reader = ArchiveReader(tmp_path)
    got = reader.read_response(revalidated.warc_filename, revalidated.warc_offset)
    assert (got.status, got.body, got.header("ETag")) == (200, html(1), '"1"')
    assert got.record_status == 304 and got.original == first.location
    assert got.fetched_at == T1 + HOUR and got.profile == PROFILE_SERVER_NOT_MODIFIED
    got = reader.read_response(same.warc_filename, same.warc_offset, same.warc_length)
    assert (got.status, got.body, got.header("ETag")) == (
        200,
        html(1),
        '"2"',
    )  # the revisit's own headers
    # iter_records walks a file with the same offsets the writer reported.
    spans = [
        (r.record_type, r.offset, r.length) for r in iter_records(tmp_path / same.warc_filename)
    ]
    assert ("revisit", same.warc_offset, same.warc_length) in spans
    check_all(tmp_path)
    # Without the original, reading says so instead of returning nothing.
    os.unlink(tmp_path / index_name_for(first.warc_filename))
    os.unlink(tmp_path / first.warc_filename)
    with pytest.raises(OriginalNotFound, match=re.escape(first.record_id)):
        ArchiveReader(tmp_path).read_response(same.warc_filename, same.warc_offset)
    with pytest.raises(ValueError, match="outside"):
        read_record(tmp_path, "../etc/passwd", 0)


def test_threads_can_share_a_writer(tmp_path: Path) -> None:
    with ArchiveWriter(tmp_path, T1) as writer:

        def work(worker: int) -> None:
            for i in range(100):
                writer.write_exchange(
                    ok(f"http://example.test/{worker}/{i}", html(worker * 1000 + i, 500))
                )

        threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    (done,) = writer.completed
    assert len(done.records) == 400
    spans = sorted((r.warc_offset, r.warc_length) for r in done.records)
    stored = {
        (r.offset, r.length)
        for r in iter_records(tmp_path / done.warc_filename)
        if r.record_type == "response"
    }
    assert set(spans) == stored
    check_all(tmp_path)


def test_indexes_are_rebuilt_and_abandoned_files_removed(tmp_path: Path) -> None:
    url = "http://example.test/i"
    with ArchiveWriter(tmp_path, T1) as writer:
        first = writer.write_exchange(ok(url, html(1)))
    with ArchiveWriter(tmp_path, T1 + HOUR) as writer:
        writer.write_exchange(not_modified(url), previous=first.original)
        # A live writer's temporary file is locked: a cleaner leaves it alone.
        assert remove_abandoned(tmp_path) == []
        assert any(n.endswith(".open") for n in os.listdir(tmp_path))
    (second,) = writer.completed
    wanted = {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path) if n.endswith(".cdxj")}
    for name in wanted:
        os.unlink(tmp_path / name)
    (tmp_path / "freshness-20260101000000-00001-p9-dead.warc.gz.open").write_bytes(b"half a record")
    assert sorted(ensure_indexes(tmp_path)) == sorted(wanted)
    assert {n: (tmp_path / n).read_bytes() for n in wanted} == wanted  # the 304 resolved again, too
    assert b'"revisit_filename"' in (tmp_path / second.index_filename).read_bytes()  # type: ignore[operator]
    assert remove_abandoned(tmp_path) == ["freshness-20260101000000-00001-p9-dead.warc.gz.open"]
    check_all(tmp_path)


def test_prune_keeps_what_kept_revisits_need(tmp_path: Path) -> None:
    a, b, c = ("http://example.test/a", "http://example.test/b", "http://example.test/c")
    with ArchiveWriter(tmp_path, T1) as writer:  # cycle 1: three originals
        a1 = writer.write_exchange(ok(a, html(1)))
        b1 = writer.write_exchange(ok(b, html(2)))
        c1 = writer.write_exchange(ok(c, html(3)))
    with ArchiveWriter(
        tmp_path, T1 + HOUR
    ) as writer:  # cycle 2: a unchanged, b identical, c changed
        a2 = writer.write_exchange(not_modified(a), previous=a1.original)
        b2 = writer.write_exchange(ok(b, html(2)), previous=b1.original)
        c2 = writer.write_exchange(ok(c, html(30)), previous=c1.original)
    old_file = a1.warc_filename
    plan = prepare_prune(tmp_path, expire_before=T1 + HOUR)
    assert plan.expired == (old_file,) and plan.retained_file is not None
    assert (tmp_path / old_file).exists()  # step 1 deletes nothing
    moved_a = plan.relocate(original_of(a1))
    moved_b = plan.relocate(original_of(b1))
    assert moved_a is not None and moved_a.warc_filename == plan.retained_file
    assert moved_b is not None and moved_b.warc_filename == plan.retained_file
    assert moved_a.record_id == a1.record_id and moved_a.date == a1.warc_date
    assert plan.relocate(original_of(c1)) is None  # c's old body: nothing kept refers to it
    assert plan.relocate(original_of(c2)) == c2.original
    again = prepare_prune(tmp_path, expire_before=T1 + HOUR)  # a crash before commit: run again
    assert again.retained_file is None and again.relocate(original_of(a1)) == moved_a
    assert commit_prune(plan) == (old_file,)
    assert not (tmp_path / old_file).exists() and not (tmp_path / index_name_for(old_file)).exists()
    reader = ArchiveReader(tmp_path)
    for revisit, body in ((a2, html(1)), (b2, html(2)), (c2, html(30))):
        got = reader.read_response(revisit.warc_filename, revisit.warc_offset)
        assert got.body == body
    # The kept index now points the 304 at the carried copy.
    index = ArchiveIndex(tmp_path)
    entries = [e for name in index.index_files() for e in index.entries(name)]
    assert all(e.filename != old_file for e in entries)
    resolved = [e for e in entries if e.is_resolved_revisit]
    assert [(e.filename, e.offset) for e in resolved] == [
        (moved_a.warc_filename, moved_a.warc_offset)
    ]
    check_all(tmp_path)
    # A later cut-off passes the retained file and cycle 2 alike: nothing kept refers into them.
    later = prepare_prune(tmp_path, expire_before=T1 + 3 * HOUR)
    assert (
        set(later.expired) == {plan.retained_file, a2.warc_filename} and later.retained_file is None
    )
    commit_prune(later)
    assert os.listdir(tmp_path) == []


def test_prune_leaves_foreign_files_alone(tmp_path: Path) -> None:
    foreign = tmp_path / "someone-else.warc.gz"
    foreign.write_bytes(
        gzip.compress(b"WARC/1.1\r\nWARC-Type: resource\r\nContent-Length: 0\r\n\r\n\r\n\r\n")
    )
    with ArchiveWriter(tmp_path, T1) as writer:
        writer.write_exchange(ok("http://example.test/x", b"x"))
    plan = prepare_prune(tmp_path, expire_before=T1 + HOUR)
    assert [name for name, _ in plan.skipped] == ["someone-else.warc.gz"]
    commit_prune(plan)
    assert foreign.exists() and len(list_warcs(tmp_path)) == 1


@settings(max_examples=300, deadline=None)
@given(
    keys=st.lists(st.text(alphabet="ab,)/", min_size=1, max_size=4), max_size=30),
    probe=st.text(alphabet="ab,)/", min_size=1, max_size=4),
)
def test_index_binary_search_finds_exactly_the_lines_of_a_key(keys: list[str], probe: str) -> None:
    lines = sorted(f"{key} 2026030212000{i % 10} {{}}".encode() for i, key in enumerate(keys))
    data = b"\n".join(lines) + (b"\n" if lines else b"")
    expected = [line for line in lines if line.split(b" ", 1)[0] == probe.encode()]
    assert list(lines_for_key(data, probe.encode())) == expected
    assert list(lines_for_key(data.rstrip(b"\n"), probe.encode())) == expected  # no final newline
