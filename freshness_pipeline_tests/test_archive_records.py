"""warehouse/archive/records.py: the WARC-Date text the writer stamps and reads back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from freshness_pipeline.warehouse.archive.encoding import (
    _rewritten_headers,
    stored_response_headers,
)
from freshness_pipeline.warehouse.archive.records import (
    ArchiveFormatError,
    parse_warc_date,
    warc_date,
)


def test_warc_dates_are_utc_with_fractions_only_when_there_are_any() -> None:
    whole = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    assert warc_date(whole) == "2026-03-02T12:00:00Z"
    cet = whole.astimezone(timezone(timedelta(hours=1)))
    assert warc_date(cet.replace(microsecond=250)) == "2026-03-02T12:00:00.000250Z"
    with pytest.raises(ValueError, match="timezone-aware"):
        warc_date(whole.replace(tzinfo=None))


def test_a_warc_date_reads_back_as_the_same_instant() -> None:
    moment = datetime(2026, 3, 2, 12, 0, 7, 123456, tzinfo=UTC)
    assert parse_warc_date(warc_date(moment)) == moment
    assert parse_warc_date("2026-03-02T13:00:00+01:00") == datetime(2026, 3, 2, 12, tzinfo=UTC)
    with pytest.raises(ArchiveFormatError):
        parse_warc_date("yesterday")


_NAMES = st.sampled_from(
    [
        "Content-Length",
        "content-length",
        "Transfer-Encoding",
        "TRANSFER-ENCODING",
        "Content-Encoding",
        "X-Transfer-Encoding",
        "X-Content-Length",
        "Content-Type",
        "ETag",
        "Server",
    ]
)
_VALUES = st.sampled_from(["5", " 5 ", "6", "chunked", "gzip", "text/html", '"1"', ""])


@settings(max_examples=400, deadline=None)
@given(
    headers=st.lists(st.tuples(_NAMES, _VALUES), max_size=6),
    body_length=st.none() | st.sampled_from([0, 5, 6]),
    body_decoded=st.booleans(),
)
def test_stored_headers_shortcut_gives_what_the_header_by_header_rewrite_gives(
    headers: list[tuple[str, str]], body_length: int | None, body_decoded: bool
) -> None:
    """stored_response_headers answers most responses with one search of the names; whatever
    the headers, its answer is the one the header-by-header rewrite gives."""
    pairs = tuple(headers)
    assert stored_response_headers(
        pairs, body_length=body_length, body_decoded=body_decoded
    ) == _rewritten_headers(pairs, body_length=body_length, body_decoded=body_decoded)
