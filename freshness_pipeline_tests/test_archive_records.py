"""warehouse/archive/records.py: the WARC-Date text the writer stamps and reads back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

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
