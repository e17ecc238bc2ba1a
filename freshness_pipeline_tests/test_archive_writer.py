"""warehouse/archive/writer.py: a complete WARC file, and what a killed writer leaves."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from freshness_pipeline.warehouse.archive import HttpExchange, list_warcs
from freshness_pipeline.warehouse.archive.writer import ArchiveWriter, recover_archive

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
BODY = b"<html><body><p>the page</p></body></html>"


def exchange(url: str) -> HttpExchange:
    return HttpExchange(
        url,
        200,
        "OK",
        [("Host", "example.test")],
        [("Content-Type", "text/html"), ("Content-Length", str(len(BODY)))],
        BODY,
    )


def test_close_completes_one_file_holding_every_record_written(tmp_path: Path) -> None:
    with ArchiveWriter(tmp_path, NOW) as writer:
        first = writer.write_exchange(exchange("http://example.test/a"))
        second = writer.write_exchange(exchange("http://example.test/b"))
        (done,) = writer.close()
    assert list_warcs(tmp_path) == [done.warc_filename]
    assert done.size == (tmp_path / done.warc_filename).stat().st_size
    assert [r.warc_offset for r in done.records] == [first.warc_offset, second.warc_offset]
    assert first.warc_offset < second.warc_offset
    # a complete archive: nothing for recovery to do
    assert recover_archive(tmp_path) == []


def test_recovery_removes_the_temporary_file_a_killed_writer_left(tmp_path: Path) -> None:
    writer = ArchiveWriter(tmp_path, NOW)
    writer.write_exchange(exchange("http://example.test/a"))
    (live,) = [p for p in tmp_path.iterdir() if p.name.endswith(".open")]
    # what a writer killed mid-file leaves: a temporary file nobody holds a lock on
    dead = tmp_path / live.name.replace(".warc.gz", "-dead.warc.gz")
    dead.write_bytes(live.read_bytes())
    (done,) = writer.close()
    assert recover_archive(tmp_path) == [f"removed abandoned {dead.name}"]
    assert not dead.exists()
    assert list_warcs(tmp_path) == [done.warc_filename]
