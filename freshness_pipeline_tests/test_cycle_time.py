"""defs/cycle_time.py: the one parser of a cycle's time from text."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from freshness_pipeline.defs.cycle_time import parse_now


def test_iso_times_become_aware_utc_and_bad_ones_name_the_option() -> None:
    noon = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    assert parse_now("2026-03-02T12:00:00Z") == noon
    assert parse_now(" 2026-03-02T12:00:00 ") == noon  # naive: UTC
    assert parse_now("2026-03-02T14:00:00+02:00") == noon
    with pytest.raises(ValueError, match="--since 'noon' is not an ISO 8601 time"):
        parse_now("noon", "--since")
