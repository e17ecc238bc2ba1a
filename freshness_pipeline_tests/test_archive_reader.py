"""warehouse/archive/reader.py: a response and a revisit read back from their locations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from freshness_pipeline.warehouse.archive import ArchiveWriter, HttpExchange
from freshness_pipeline.warehouse.archive.reader import iter_records, read_response

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
URL = "http://example.test/page"
BODY = b"<html><body><p>the page as it was</p></body></html>"


def test_a_revisit_reads_back_with_the_body_of_its_original(tmp_path: Path) -> None:
    with ArchiveWriter(tmp_path, NOW) as writer:
        first = writer.write_exchange(
            HttpExchange(URL, 200, "OK", [("Host", "example.test")], [("ETag", '"1"')], BODY)
        )
    with ArchiveWriter(tmp_path, NOW + timedelta(hours=1)) as writer:
        again = writer.write_exchange(
            HttpExchange(URL, 304, "Not Modified", [("Host", "example.test")], [("ETag", '"1"')]),
            previous=first.original,
        )
    response = read_response(tmp_path, first.warc_filename, first.warc_offset, first.warc_length)
    assert (response.url, response.status, response.body) == (URL, 200, BODY)
    revisit = read_response(tmp_path, again.warc_filename, again.warc_offset)
    assert revisit.record_type == "revisit"
    assert (revisit.status, revisit.body, revisit.record_status) == (200, BODY, 304)
    assert revisit.header("ETag") == '"1"'
    stored = list(iter_records(tmp_path / again.warc_filename))
    assert stored[0].record_type == "warcinfo"
    (revisit_record,) = [r for r in stored if r.record_type == "revisit"]
    assert (revisit_record.offset, revisit_record.http_status) == (again.warc_offset, 304)
    assert revisit_record.header("WARC-Target-URI") == URL
