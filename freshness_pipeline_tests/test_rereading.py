"""stages.rereading on a real archive file: an archived body read again under another
extraction gives what the fetcher computes for the same body; what cannot be read again says
why; a page read again that came back unchanged becomes a re-extraction, a changed one stays
a change."""

from __future__ import annotations

from datetime import UTC, datetime

from freshness_pipeline.config import Extraction
from freshness_pipeline.science.fingerprint import class_record
from freshness_pipeline.stages.rereading import (
    NOT_A_BODY,
    NOT_ARCHIVED,
    NOT_IN_ARCHIVE,
    as_reextractions,
    reread,
)
from freshness_pipeline.warehouse.archive import ArchiveReader, ArchiveWriter, HttpExchange
from freshness_pipeline.web.client import FetchResult

T = datetime(2026, 3, 2, 12, tzinfo=UTC)
PAGE = (
    b"<html><head><title>Lamp</title></head><body><h1>Lamp</h1><p class=price>$12</p></body></html>"
)
PRICED = Extraction(fields={"price": ".price"})


def archived(tmp_path, status: int = 200) -> str:
    with ArchiveWriter(tmp_path, T) as writer:
        record = writer.write_exchange(
            HttpExchange(
                "http://shop.test/lamp",
                status,
                "OK",
                (("User-Agent", "t"),),
                (("Content-Type", "text/html"), ("Content-Length", str(len(PAGE)))),
                PAGE,
            )
        )
    assert record.original is not None
    return record.original.to_json()


def test_an_archived_body_reads_as_the_fetcher_reads_it(tmp_path) -> None:
    got, why = reread(ArchiveReader(tmp_path), archived(tmp_path), PRICED)
    assert got is not None and why == ""
    fetched = class_record(PRICED, PAGE, "text/html")
    assert got.record.fingerprint == fetched.fingerprint
    assert got.record.fields is not None and got.record.fields["price"] == "$12"
    assert got.content_type == "text/html"


def test_what_cannot_be_read_again_says_why(tmp_path) -> None:
    reader = ArchiveReader(tmp_path)
    assert reread(reader, None, PRICED) == (None, NOT_ARCHIVED)
    assert reread(reader, "not json", PRICED) == (None, NOT_ARCHIVED)
    error_page = archived(tmp_path / "errors", status=500)
    assert reread(ArchiveReader(tmp_path / "errors"), error_page, PRICED) == (None, NOT_A_BODY)
    lost = archived(tmp_path / "lost")
    for warc in (tmp_path / "lost").glob("*.warc.gz"):
        warc.unlink()
    assert reread(ArchiveReader(tmp_path / "lost"), lost, PRICED) == (None, NOT_IN_ARCHIVE)


def test_unchanged_becomes_a_reextraction_and_a_change_stays(tmp_path) -> None:
    got, _ = reread(ArchiveReader(tmp_path), archived(tmp_path), PRICED)
    assert got is not None
    same = FetchResult("http://shop.test/lamp", "shop.test", 200, "unchanged")
    moved = FetchResult("http://shop.test/desk", "shop.test", 200, "changed", fingerprint="f")
    other = FetchResult("http://shop.test/chair", "shop.test", 200, "unchanged")
    as_reextractions(
        [same, moved, other],
        {"http://shop.test/lamp": got.record, "http://shop.test/desk": got.record},
    )
    assert (same.outcome, same.fingerprint) == ("new", got.record.fingerprint)
    assert same.title == "Lamp" and same.fields is not None and '"price": "$12"' in same.fields
    assert (moved.outcome, moved.fingerprint) == ("changed", "f")
    assert other.outcome == "unchanged"  # not read again: left as it was


def test_a_page_read_again_keeps_its_validators_and_one_that_cannot_be_loses_them(
    tmp_path,
) -> None:
    """The plan keeps the validators of a page whose fingerprint another extractor made when
    its body is archived: its 304 is then the archived body's reading (after an upgrade every
    page went whole once, 2.4x the bytes: an exploratory run). One whose body cannot be read
    again must bring a body: a 304 would leave it without a fingerprint of this extraction."""
    import polars as pl

    from freshness_pipeline.config import PipelineConfig
    from freshness_pipeline.stages.rereading import with_reread_fingerprints

    home = tmp_path / "home"
    kept = archived(home / "archive")
    lost = archived(tmp_path / "elsewhere")  # names a file this home's archive does not hold
    plan = pl.DataFrame(
        {
            "url": ["http://shop.test/lamp", "http://shop.test/desk", "http://shop.test/new"],
            "url_class": [None, None, None],
            "status": ["active", "active", "new"],
            "fingerprint": [None, None, None],
            "version_observed_at": [T, T, None],
            "archived": [kept, lost, None],
            "etag": ['"a"', '"b"', None],
            "last_modified": ["Mon, 02 Mar 2026 00:00:00 GMT"] * 3,
        }
    )
    out, records = with_reread_fingerprints(plan, home, PipelineConfig())
    assert list(records) == ["http://shop.test/lamp"]
    lamp, desk, new = out.iter_rows(named=True)
    assert lamp["fingerprint"] == records["http://shop.test/lamp"].fingerprint
    assert (lamp["etag"], lamp["last_modified"]) == ('"a"', "Mon, 02 Mar 2026 00:00:00 GMT")
    assert (desk["fingerprint"], desk["etag"], desk["last_modified"]) == (None, None, None)
    assert new["last_modified"] == "Mon, 02 Mar 2026 00:00:00 GMT"  # not one read again
